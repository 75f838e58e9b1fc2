#!/usr/bin/env python
"""Where an arm's extra time per update comes from: its batches, or its training step.

    python scripts/research/overhead_sources.py --data data-bin/tvsub.zh-en --preset tvsub-one-pass --arm keep-all

Builds the stock task and ``--arm`` as the benchmark trains them (``fairseq_autoassist.benchmark.arms``), takes
``--blocks`` x ``--block-updates`` batches from each one's own iterator, and times the four pairings, blocks
interleaved: the stock step on the stock batches (the reference), the stock step on the arm's batches (what the
arm's packing and selection do to the batches' shapes), the arm's step on the stock batches (what its training
step costs: per-sentence losses, their hand-off, the Assistant's thread) and the arm on its own batches (the
benchmark's figure). The stock batches get the plugin's host-side ids and lengths, which the arm's step reads.
Prints each pairing's median block over the reference's, and the positions each batch set holds. Run it with
nothing else on the machine, under the training runs' allocator settings (it re-executes itself under them).

With ``--refresh-updates N ...`` it also prints, without training, what the plugin's packing makes of chunks of N
updates' worth of pairs (``--autoassist-refresh-updates``): source and target positions per token and target
tokens per batch, over the batches of ``--packing-pairs`` pairs of a random pass, against the stock task's batches.
A chunk holds only a sample of each length, so the fewer pairs it has, the more lengths share a batch.
"""

import argparse
import logging
import statistics
import sys
import tempfile
import time

import numpy as np

from fairseq_autoassist.benchmark.arms import PRESETS, arm_argument, arm_spec, training_args
from fairseq_autoassist.corpus.raw_corpus import exit_code
from fairseq_autoassist.recipes import build_trainer, reexec_under_training_malloc, require_prepared

logger = logging.getLogger("overhead_sources")


def batch_shapes(batches):
    """Mean per batch of the source and target positions (padding included), target tokens and pairs."""
    return {"source positions": np.mean([batch["net_input"]["src_tokens"].numel() for batch in batches]),
            "target positions": np.mean([batch["target"].numel() for batch in batches]),
            "target tokens": np.mean([batch["ntokens"] for batch in batches]),
            "pairs": np.mean([batch["target"].size(0) for batch in batches])}


def batch_padding(batches, source_sizes, target_sizes):
    """Source and target positions per real token, and target tokens per batch, of index ``batches``."""
    pairs = [np.asarray(batch) for batch in batches if len(batch)]
    source = sum(source_sizes[batch].sum() for batch in pairs)
    target = sum(target_sizes[batch].sum() for batch in pairs)
    return {"source positions per token": sum(len(batch) * source_sizes[batch].max() for batch in pairs) / source,
            "target positions per token": sum(len(batch) * target_sizes[batch].max() for batch in pairs) / target,
            "target tokens per batch": target / len(pairs)}


def packing_by_refresh(task, preset, refresh_updates, sample_pairs, seed):
    """``batch_padding`` of the stock task's batches, and of the plugin's for each refresh interval."""
    from fairseq_autoassist.data.iterator import packing_order, pairs_per_chunk, token_budget_batcher, training_order

    dataset = task.datasets[task.cfg.train_subset]
    candidates = training_order(task, dataset, seed, 1, task.max_positions(), False)
    stock = dataset.batch_by_size(candidates, max_tokens=preset["max_tokens"])
    sizes = dataset.src_sizes.astype(np.int64), dataset.tgt_sizes.astype(np.int64)
    figures = {"stock": batch_padding(stock, *sizes)}
    make_batches = token_budget_batcher(dataset, preset["max_tokens"], None, 1,
                                        packing_order(dataset, candidates, task.cfg.autoassist_packing, seed))
    visited = np.random.default_rng(seed).permutation(candidates)[:sample_pairs]
    for updates in refresh_updates:
        chunk = pairs_per_chunk(updates, len(candidates), len(stock))
        batches = [batch for start in range(0, len(visited), chunk)
                   for batch in make_batches(visited[start:start + chunk])]
        figures[f"refresh every {updates} updates"] = batch_padding(batches, *sizes)
    return figures


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="prepared data-bin folder")
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS), help="the preset whose recipe both use")
    parser.add_argument("--arm", required=True, type=arm_argument, help="the plugin arm to take apart")
    parser.add_argument("--block-updates", type=int, default=15, help="updates per timed block")
    parser.add_argument("--blocks", type=int, default=4, help="timed blocks per pairing")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--refresh-updates", type=int, nargs="*", default=[],
                        help="also tabulate the plugin's packing at these refresh intervals (no training)")
    parser.add_argument("--packing-pairs", type=int, default=200_000,
                        help="pairs of a random pass the packing figures batch")
    args = parser.parse_args(argv)
    if arm_spec(args.arm)["policy"] is None:
        parser.error(f"--arm {args.arm} is the stock task; name an arm of the plugin (e.g. keep-all)")
    if exit_code(lambda: require_prepared(args.data), logger):  # before minutes of building arms
        return 2

    from fairseq_autoassist.data.iterator import add_host_side

    count = args.blocks * args.block_updates
    steps, batches = {}, {}
    with tempfile.TemporaryDirectory() as save_dir:
        for arm in ("baseline", args.arm):
            task, trainer, iterator = build_trainer(
                training_args(arm, args.data, save_dir, PRESETS[args.preset], args.seed, cpu=True))
            if arm != "baseline":  # the epochs after the warm-up, where the arm selects (as the benchmark times it)
                iterator.epoch = getattr(task.cfg, "autoassist_warmup_epochs", 0) + 1
            epoch = iterator.next_epoch_itr(shuffle=True)
            steps[arm], batches[arm] = trainer, [next(epoch) for _ in range(count)]
        for batch in batches["baseline"]:
            add_host_side(batch, task.tgt_dict.pad())
        if args.refresh_updates:  # the arm's task: its packing
            for name, figures in packing_by_refresh(task, PRESETS[args.preset], args.refresh_updates,
                                                    args.packing_pairs, args.seed).items():
                logger.info("%-32s %s", name, ", ".join(f"{key} {value:.3f}" for key, value in figures.items()))
        pairings = [(step, data) for step in steps for data in batches]
        for step, data in pairings:  # not timed: the first updates of each trainer warm its allocator
            for batch in batches[data][: args.block_updates // 3]:
                steps[step].train_step([batch])
        times = {pairing: [] for pairing in pairings}
        for block in range(args.blocks):
            for step, data in pairings:
                started = time.perf_counter()
                for batch in batches[data][block * args.block_updates: (block + 1) * args.block_updates]:
                    steps[step].train_step([batch])
                times[(step, data)].append((time.perf_counter() - started) / args.block_updates)
    reference = statistics.median(times[("baseline", "baseline")])
    for (step, data), blocks in times.items():
        logger.info("step of %-10s on the batches of %-10s %.3f s per update, %.3f of the reference (blocks: %s)",
                    step, data, statistics.median(blocks), statistics.median(blocks) / reference,
                    " ".join(f"{seconds:.3f}" for seconds in blocks))
    for arm, timed in batches.items():
        logger.info("batches of %-10s %s", arm,
                    ", ".join(f"{name} {value:.1f}" for name, value in batch_shapes(timed).items()))
    return 0


if __name__ == "__main__":
    reexec_under_training_malloc()
    sys.exit(main())
