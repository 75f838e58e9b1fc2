#!/usr/bin/env python
"""Isolated time per update of each benchmark arm, on its own batches.

    python scripts/benchmark_overhead.py --data data-bin/multi30k.de-en --preset multi30k-long \\
        --arms baseline keep-all keep-all-fixed assistant learnable --output docs/results/overhead-multi30k-small.json

Each arm is built in this process exactly as the benchmark trains it (``fairseq_autoassist.benchmark.arms``:
the preset's recipe and the arm's settings) and trains on the batches of its own iterator: the stock task's, or
the plugin's under the arm's packing and policy, whose selection (scoring, drawing, batching a chunk), loss
feedback and background Assistant all run as in training, in the epochs after its warm-up (those that select;
the warm-up epochs train on every pair as ``keep-all`` does). Blocks of ``--block-updates`` updates, fetching each
batch included, are interleaved (arm 1, arm 2, ..., arm 1, ...) so that machine noise hits all alike; run it
with nothing else on the machine. It runs under the training runs' allocator settings
(``recipes.TRAINING_MALLOC_ENV``). Writes the median seconds per update of each arm, its ratio to ``baseline``,
the target tokens and padded positions per update of the timed batches and the CPU seconds spent selecting and
in the Assistant's thread. ``scripts/benchmark.py --seconds-per-update`` turns updates into seconds with it.
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

from fairseq_autoassist.benchmark.arms import PRESETS, arm_argument, training_args
from fairseq_autoassist.recipes import (TRAINING_MALLOC_ENV, build_trainer, reexec_under_training_malloc,
                                        write_atomically)

logger = logging.getLogger("benchmark_overhead")


class TimedArm:
    """One arm's trainer and its endless stream of its own batches."""

    def __init__(self, arm, data, preset, seed, save_dir):
        self.arm = arm
        argv = training_args(arm, data, save_dir, preset, seed, cpu=True)
        if "--autoassist-loss-log" in argv:  # a diagnostic of the benchmark's runs, not a cost of the arm
            position = argv.index("--autoassist-loss-log")
            del argv[position : position + 2]
        self.task, self.trainer, self.iterator = build_trainer(argv)
        # Time the epochs after the warm-up, where the arm's selection runs: most of every run but the shortest.
        # The plugin keeps one iterator for the whole run: start it there as resuming at that epoch would.
        self.iterator.epoch = getattr(self.task.cfg, "autoassist_warmup_epochs", 0) + 1
        self.batches = self.iterator.next_epoch_itr(shuffle=True)
        self.timed_from_epoch = self.iterator.epoch
        self.target_tokens, self.padded_positions, self.updates = 0, 0, 0

    def next_sample(self):
        if not self.batches.has_next():
            self.iterator = self.trainer.get_train_iterator(self.iterator.next_epoch_idx, load_dataset=False)
            self.batches = self.iterator.next_epoch_itr(shuffle=True)
        return next(self.batches)

    def block(self, updates):
        """Seconds per update over ``updates`` updates, fetching each batch included."""
        started = time.perf_counter()
        for _ in range(updates):
            sample = self.next_sample()
            self.trainer.train_step([sample])
            self.target_tokens += int(sample["ntokens"])
            self.padded_positions += sample["net_input"]["src_tokens"].numel() + sample["target"].numel()
            self.updates += 1
        return (time.perf_counter() - started) / updates

    def cpu_seconds(self):
        runtime = getattr(self.task, "runtime", None)
        if runtime is None:
            return {}
        figures = {"cpu_select_seconds": runtime.selection_cpu_seconds}
        if runtime.worker is not None:
            runtime.worker.drain()
            stats = runtime.worker.stats()
            figures.update(assistant_updates=stats["updates"], dropped_feedback=stats["dropped"],
                           cpu_assistant_seconds=stats["cpu_seconds"])
            runtime.worker.close()
        return figures


def measure(data, preset_name, arms, seed, block_updates, blocks):
    preset = PRESETS[preset_name]
    with tempfile.TemporaryDirectory() as save_dir:
        timed = {arm: TimedArm(arm, data, preset, seed, save_dir) for arm in arms}
        for arm in timed.values():  # a warm-up block each, not timed
            arm.block(block_updates)
        times = {name: [] for name in timed}
        for block in range(1, blocks + 1):
            for name, arm in timed.items():
                times[name].append(arm.block(block_updates))
                logger.info("block %d %-24s %.3f s/update", block, name, times[name][-1])
        cpu = {name: arm.cpu_seconds() for name, arm in timed.items()}
    medians = {name: statistics.median(block_times) for name, block_times in times.items()}
    return {
        "data": data, "preset": preset_name, "seed": seed, "block_updates": block_updates, "blocks": blocks,
        "seconds_per_update": times, "median_seconds_per_update": medians,
        "ratio_to_baseline": {name: medians[name] / medians["baseline"] for name in medians},
        "target_tokens_per_update": {name: arm.target_tokens / arm.updates for name, arm in timed.items()},
        "padded_positions_per_update": {name: arm.padded_positions / arm.updates for name, arm in timed.items()},
        "timed_from_epoch": {name: arm.timed_from_epoch for name, arm in timed.items()},
        "cpu": cpu,
    }


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="prepared data-bin folder")
    parser.add_argument("--preset", default="multi30k-long", choices=sorted(PRESETS),
                        help="the benchmark preset whose recipe every arm uses")
    parser.add_argument("--arms", nargs="+", type=arm_argument, default=["baseline", "keep-all"],
                        help="the benchmark arms to time ('baseline', the stock task, is always timed)")
    parser.add_argument("--block-updates", type=int, default=20, help="updates per timed block")
    parser.add_argument("--blocks", type=int, default=4, help="timed blocks per arm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", required=True, help="JSON with every block time and the medians")
    args = parser.parse_args(argv)
    arms = ["baseline"] + [arm for arm in args.arms if arm != "baseline"]
    result = measure(args.data, args.preset, arms, args.seed, args.block_updates, args.blocks)
    result["command"] = "python scripts/benchmark_overhead.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    result["allocator"] = {key: os.environ.get(key) for key in TRAINING_MALLOC_ENV}
    write_atomically(args.output, json.dumps(result, indent=2))
    for arm in arms:
        logger.info("%-24s %.3f s/update, ratio to baseline %.3f, %.0f target tokens per update %s", arm,
                    result["median_seconds_per_update"][arm], result["ratio_to_baseline"][arm],
                    result["target_tokens_per_update"][arm], result["cpu"][arm])
    return 0


if __name__ == "__main__":
    reexec_under_training_malloc()
    sys.exit(main())
