#!/usr/bin/env python
"""Isolated time per update of each benchmark arm, on its own batches: the benchmark's one timing rule.

    python scripts/benchmark_overhead.py --data data-bin/multi30k.de-en --preset multi30k-long \\
        --output docs/results/timing-multi30k-long.json

Each arm is built in this process exactly as the benchmark trains it (``fairseq_autoassist.benchmark.arms``:
the preset's recipe and the arm's settings) and trains on the batches of its own iterator: the stock task's, or
the plugin's under the arm's packing and policy, whose selection (scoring, drawing, batching a chunk), loss
feedback and background Assistant all run as in training, in the epochs after its warm-up (those that select;
the warm-up epochs train on every pair as ``keep-all`` does). Blocks of ``--block-updates`` updates, fetching each
batch included, are interleaved (arm 1, arm 2, ..., arm 1, ...) so that machine noise hits all alike; run it
with nothing else on the machine. It runs under the training runs' allocator settings
(``recipes.TRAINING_MALLOC_ENV``).

The rule: every arm of the preset is timed together (``--arms`` defaults to all of them; the stock task's
budget-matched variants update as ``baseline`` does), in ``--sessions`` sessions (at least three), each building
every arm afresh with its own seed (``--seed`` plus the session's index, so that each session times other batches)
and interleaving them in another order. A session gives each arm's median block time over the stock task's; the
figure is the median session's, with the range over the sessions, and a saving in seconds holds only where it
exceeds that range. The machines here move by about 5% between timings, which one session cannot show, and an
update's time depends on its batch's lengths, which one set of batches cannot show. Writes every block time, each
session's and the overall medians, the ratios to ``baseline`` (``ratio_to_baseline``: median, low, high), the
target tokens and padded positions per update of the timed batches (the mean over the sessions) and the last
session's CPU seconds spent selecting and in the Assistant's thread. ``scripts/benchmark.py
--seconds-per-update`` turns updates into seconds with it.
"""

import argparse
import json
import logging
import os
import shlex
import statistics
import sys
import tempfile
import time

from fairseq_autoassist.benchmark.arms import PRESETS, arm_argument, timed_arms, training_args
from fairseq_autoassist.benchmark.figures import MIN_TIMING_SESSIONS
from fairseq_autoassist.corpus.raw_corpus import exit_code
from fairseq_autoassist.recipes import (TRAINING_MALLOC_ENV, build_trainer, reexec_under_training_malloc,
                                        require_prepared, write_atomically)

logger = logging.getLogger("benchmark_overhead")


class TimedArm:
    """One arm's trainer and its endless stream of its own batches."""

    def __init__(self, arm, data, preset, seed, save_dir, gpu=False):
        self.arm = arm
        self.gpu = gpu
        argv = training_args(arm, data, save_dir, preset, seed, cpu=not gpu) + (["--fp16"] if gpu else [])
        if "--autoassist-loss-log" in argv:  # a diagnostic of the benchmark's runs, not a cost of the arm
            position = argv.index("--autoassist-loss-log")
            del argv[position : position + 2]
        self.task, self.trainer, self.iterator = build_trainer(argv)
        # Time the epochs after the warm-up, where the arm's selection runs: most of every run but the shortest.
        # The plugin keeps one iterator for the whole run: start it there as resuming at that epoch would.
        self.iterator.epoch = getattr(self.task.cfg, "autoassist_warmup_epochs", 0) + 1
        stream = getattr(getattr(self.task, "runtime", None), "stream", None)
        if stream is not None:  # its pass too: the released batches of a first pass are sorted, later ones mixed
            stream.pass_index = self.iterator.epoch
        self.batches = self.iterator.next_epoch_itr(shuffle=True)
        self.timed_from_epoch = self.iterator.epoch
        self.target_tokens, self.padded_positions, self.updates = 0, 0, 0

    def next_sample(self):
        if not self.batches.has_next():
            self.iterator = self.trainer.get_train_iterator(self.iterator.next_epoch_idx, load_dataset=False)
            self.batches = self.iterator.next_epoch_itr(shuffle=True)
        return next(self.batches)

    def block(self, updates):
        """Seconds per update over ``updates`` updates, fetching each batch included (on a GPU, until its work is
        done)."""
        self._wait_for_the_device()
        started = time.perf_counter()
        for _ in range(updates):
            sample = self.next_sample()
            self.trainer.train_step([sample])
            self.target_tokens += int(sample["ntokens"])
            self.padded_positions += sample["net_input"]["src_tokens"].numel() + sample["target"].numel()
            self.updates += 1
        self._wait_for_the_device()
        return (time.perf_counter() - started) / updates

    def _wait_for_the_device(self):
        if self.gpu:
            import torch

            torch.cuda.synchronize()

    def cpu_seconds(self):
        runtime = getattr(self.task, "runtime", None)
        if runtime is None:
            return {}
        figures = {"cpu_select_seconds": runtime.selection_cpu_seconds}
        if runtime.worker is not None:
            runtime.worker.drain()
            stats = runtime.worker.stats()
            figures.update(assistant_updates=stats["updates"], waits_for_the_assistant=stats["waits"],
                           seconds_waited_for_the_assistant=stats["wait_seconds"],
                           cpu_assistant_seconds=stats["cpu_seconds"])
            runtime.worker.close()
        return figures


def time_session(data, preset, arms, seed, block_updates, blocks, session, gpu=False):
    """One session: every arm built afresh with seed ``seed + session`` (its own batches), a warm-up block each,
    then ``blocks`` timed blocks interleaved, the arms in an order rotated by ``session`` so that none is always
    first after a warm-up."""
    order = arms[session % len(arms):] + arms[:session % len(arms)]
    seed += session
    with tempfile.TemporaryDirectory() as save_dir:
        timed = {arm: TimedArm(arm, data, preset, seed, save_dir, gpu) for arm in order}
        for arm in timed.values():  # not timed
            arm.block(block_updates)
        times = {name: [] for name in timed}
        for block in range(1, blocks + 1):
            for name, arm in timed.items():
                times[name].append(arm.block(block_updates))
                logger.info("session %d block %d %-24s %.3f s/update", session + 1, block, name, times[name][-1])
        cpu = {name: arm.cpu_seconds() for name, arm in timed.items()}
    medians = {name: statistics.median(times[name]) for name in arms}
    return {"order": order, "seed": seed, "seconds_per_update": {name: times[name] for name in arms},
            "median_seconds_per_update": medians,
            "ratio_to_baseline": {name: medians[name] / medians["baseline"] for name in arms},
            "target_tokens_per_update": {name: timed[name].target_tokens / timed[name].updates for name in arms},
            "padded_positions_per_update": {name: timed[name].padded_positions / timed[name].updates for name in arms},
            "timed_from_epoch": {name: timed[name].timed_from_epoch for name in arms}, "cpu": cpu}


def measure(data, preset_name, arms, seed, block_updates, blocks, sessions, gpu=False):
    preset = PRESETS[preset_name]
    runs = [time_session(data, preset, arms, seed, block_updates, blocks, session, gpu) for session in range(sessions)]
    ratios = {arm: [run["ratio_to_baseline"][arm] for run in runs] for arm in arms}
    last = runs[-1]
    return {
        "data": data, "preset": preset_name, "seeds": [run["seed"] for run in runs], "block_updates": block_updates,
        "blocks": blocks, "sessions": runs,
        "median_seconds_per_update": {arm: statistics.median(s for run in runs for s in run["seconds_per_update"][arm])
                                      for arm in arms},
        "ratio_to_baseline": {arm: {"median": statistics.median(ratios[arm]), "low": min(ratios[arm]),
                                    "high": max(ratios[arm])} for arm in arms},
        "target_tokens_per_update": {arm: statistics.mean(run["target_tokens_per_update"][arm] for run in runs)
                                     for arm in arms},
        "padded_positions_per_update": {arm: statistics.mean(run["padded_positions_per_update"][arm] for run in runs)
                                        for arm in arms},
        "timed_from_epoch": last["timed_from_epoch"], "cpu": last["cpu"],
    }


def timing_table(result):
    """The Markdown table of a timing: per arm the median seconds per update, the ratio to the stock task in the
    median session with the range over the sessions, each session's ratio and the target tokens per update over the
    stock task's."""
    sessions = result["sessions"]
    lines = [f"Command: `{result['command']}` on {result['device']}", "",
             f"{len(sessions)} sessions of {result['blocks']} interleaved blocks of {result['block_updates']} updates "
             "per arm, each session with its own seed and batches (seeds and orders: "
             + "; ".join(f"{session['seed']}: " + ", ".join(session["order"]) for session in sessions) + ").", "",
             "| arm | seconds per update (median block) | over the stock task: median session [range] | "
             + " | ".join(f"session {i + 1}" for i in range(len(sessions)))
             + " | target tokens per update over the stock task's (every session's timed batches) |",
             "|---|---|---|" + "---|" * len(sessions) + "---|"]
    tokens = result["target_tokens_per_update"]
    for arm, ratio in result["ratio_to_baseline"].items():
        lines.append(f"| {arm} | {result['median_seconds_per_update'][arm]:.3f} | {ratio['median']:.3f} "
                     f"[{ratio['low']:.3f}-{ratio['high']:.3f}] | "
                     + " | ".join(f"{session['ratio_to_baseline'][arm]:.3f}" for session in sessions)
                     + f" | {tokens[arm] / tokens['baseline']:.3f} |")
    return "\n".join(lines) + "\n"


def _device_name(gpu):
    if gpu:
        import torch

        return torch.cuda.get_device_name()
    return f"CPU ({os.cpu_count()} cores)"


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="prepared data-bin folder")
    parser.add_argument("--preset", default="multi30k-long", choices=sorted(PRESETS),
                        help="the benchmark preset whose recipe every arm uses")
    parser.add_argument("--arms", nargs="+", type=arm_argument,
                        help="the benchmark arms to time (default: every arm of the preset; 'baseline', the stock "
                        "task, is always timed)")
    parser.add_argument("--block-updates", type=int, default=20, help="updates per timed block")
    parser.add_argument("--blocks", type=int, default=4, help="timed blocks per arm and session")
    parser.add_argument("--sessions", type=int, default=MIN_TIMING_SESSIONS,
                        help="timing sessions, each building every arm afresh (at least "
                        f"{MIN_TIMING_SESSIONS} for the range that scripts/benchmark.py --seconds-per-update requires)")
    parser.add_argument("--seed", type=int, default=1,
                        help="the first session's seed; session i (from 0) builds its arms with seed + i")
    parser.add_argument("--gpu", action="store_true", help="train on the GPU in fp16 (default: the CPU)")
    parser.add_argument("--output", required=True,
                        help="JSON with every block time and the medians (and beside it, .md: the table)")
    args = parser.parse_args(argv)
    if args.sessions < 1:
        parser.error(f"--sessions {args.sessions}: at least 1 (and {MIN_TIMING_SESSIONS} for a range)")
    if exit_code(lambda: require_prepared(args.data), logger):  # before minutes of building arms
        return 2
    arms = timed_arms(args.arms or PRESETS[args.preset]["arms"])
    result = measure(args.data, args.preset, arms, args.seed, args.block_updates, args.blocks, args.sessions, args.gpu)
    result["device"] = _device_name(args.gpu)
    result["command"] = "python scripts/benchmark_overhead.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    result["allocator"] = {key: os.environ.get(key) for key in TRAINING_MALLOC_ENV}
    write_atomically(args.output, json.dumps(result, indent=2))
    write_atomically(os.path.splitext(args.output)[0] + ".md", timing_table(result))
    for arm in arms:
        ratio = result["ratio_to_baseline"][arm]
        logger.info("%-24s %.3f s/update, ratio to baseline %.3f (%.3f-%.3f over %d sessions), %.0f target tokens "
                    "per update %s", arm, result["median_seconds_per_update"][arm], ratio["median"], ratio["low"],
                    ratio["high"], args.sessions, result["target_tokens_per_update"][arm], result["cpu"][arm])
    return 0


if __name__ == "__main__":
    reexec_under_training_malloc()
    sys.exit(main())
