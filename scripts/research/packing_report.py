#!/usr/bin/env python
"""What each packing puts into a batch, without training: the first pass's batches of the stock task and of the
plugin's iterator under each packing of the benchmark's ablation arms.

    python scripts/research/packing_report.py --data data-bin/multi30k-noisy30.de-en --out docs/results/packing/noisy
    python scripts/research/packing_report.py --data data-bin/multi30k.de-en --out docs/results/packing/clean

Every arm gets the benchmark's recipe (``--preset``, default ``multi30k-long``: model, ``--max-tokens``, seed)
and its own iterator, built in this process as fairseq-train builds it. Per arm: batches per pass, real target
tokens per batch, padded positions per batch (batch size times the longest source plus the longest target: what
the model computes on) and, for each kind of corrupted pair in the folder's ``noise.tsv`` (a corpus from
scripts/research/make_noisy_corpus.py), the share of each update's loss those pairs carry, against their share of the
target tokens (``fairseq_autoassist.data.packing.update_weight_shares``). Writes OUT/packing.json and
OUT/packing.md.
"""

import argparse
import logging
import os
import shlex
import sys

import numpy as np

from fairseq_autoassist.benchmark.arms import PACKING_ARMS, PRESETS, arm_argument, noise_list, training_args
from fairseq_autoassist.data.packing import update_weight_shares
from fairseq_autoassist.corpus.raw_corpus import read_noise
from fairseq_autoassist.recipes import build_trainer, write_report

logger = logging.getLogger("packing_report")

def first_pass_batches(task, iterator):
    """The batches of the first pass: the stock iterator's fixed list, or the plugin stream's first epoch."""
    if getattr(task, "runtime", None) is None:
        return [np.asarray(batch, dtype=np.int64) for batch in iterator.frozen_batches]
    stream = task.runtime.stream
    return [batch.copy() for batch, _ in stream.iterate_epoch(1)]


def batch_figures(batches, source_sizes, target_sizes):
    """Batches, real target tokens and padded positions per batch, and the real share of the padded positions."""
    real = np.array([target_sizes[batch].sum() for batch in batches], dtype=np.float64)
    padded = np.array([len(batch) * (source_sizes[batch].max() + target_sizes[batch].max()) for batch in batches],
                      dtype=np.float64)
    real_both = np.array([source_sizes[batch].sum() + target_sizes[batch].sum() for batch in batches])
    return {"batches": len(batches), "pairs": int(sum(len(batch) for batch in batches)),
            "target_tokens_per_batch": float(real.mean()), "padded_positions_per_batch": float(padded.mean()),
            "real_share_of_padded": float(real_both.sum() / padded.sum())}


def noise_groups(data, num_pairs):
    """Boolean masks per kind of corrupted pair listed in ``data``'s noise.tsv, plus "corrupted" (all) and "clean"."""
    path = noise_list(data)
    if not os.path.isfile(path):
        return {}
    kinds = read_noise(path)
    groups = {}
    for line, kind in kinds.items():
        groups.setdefault(kind, np.zeros(num_pairs, dtype=bool))[line] = True
    corrupted = np.zeros(num_pairs, dtype=bool)
    corrupted[list(kinds)] = True
    return {"corrupted": corrupted, **dict(sorted(groups.items())), "clean": ~corrupted}


def report(data, preset_name, seed, arms):
    preset = PRESETS[preset_name]
    results = {}
    for arm in arms:
        argv = training_args(arm, data, "/tmp/packing_report_unused", preset, seed, cpu=True)
        task, _, iterator = build_trainer(argv)
        dataset = task.dataset(task.cfg.train_subset)
        batches = first_pass_batches(task, iterator)
        figures = batch_figures(batches, dataset.src_sizes, dataset.tgt_sizes)
        figures["groups"] = update_weight_shares(batches, dataset.tgt_sizes, noise_groups(data, len(dataset)))
        results[arm] = figures
        logger.info("%s: %s", arm, {k: v for k, v in figures.items() if k != "groups"})
    return results


def markdown(results, command):
    lines = [f"Command: `{command}`", "",
             "First pass of each arm's batches (no training). Padded positions: batch size times the longest source "
             "plus the longest target, what the model computes on.", "",
             "| arm | batches | target tokens per batch | padded positions per batch | real share of padded |",
             "|---|---|---|---|---|"]
    for arm, figures in results.items():
        lines.append(f"| {arm} | {figures['batches']} | {figures['target_tokens_per_batch']:.1f} | "
                     f"{figures['padded_positions_per_batch']:.1f} | {figures['real_share_of_padded']:.3f} |")
    groups = list(next(iter(results.values()))["groups"])
    if groups:
        lines += ["", "Share of each update's loss carried by each kind of pair (mean over the pass's updates; the "
                  "trainer divides a batch's summed loss by its target tokens); in brackets the share of batches in "
                  "which that kind is over half of the pairs, and the share of that kind's pairs that sit in such "
                  "batches. The first row is the kind's share of all target tokens, what an even mixing would give.",
                  "",
                  "| arm | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
        first = next(iter(results.values()))["groups"]
        lines.append("| share of target tokens | " + " | ".join(f"{first[g]['token_share']:.3f}" for g in groups) + " |")
        for arm, figures in results.items():
            lines.append(f"| {arm} | " + " | ".join(
                "{update_weight_share:.3f} ({mostly_group_batches:.3f}, {pairs_in_mostly_group_batches:.2f})".format(
                    **figures["groups"][g])
                for g in groups) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="prepared data-bin folder")
    parser.add_argument("--out", required=True, help="folder for packing.json and packing.md")
    parser.add_argument("--preset", default="multi30k-long", choices=sorted(PRESETS),
                        help="the benchmark preset whose recipe builds the batches")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--arms", nargs="+", default=PACKING_ARMS, type=arm_argument)
    args = parser.parse_args(argv)
    results = report(args.data, args.preset, args.seed, args.arms)
    command = "python scripts/research/packing_report.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    table = markdown(results, command)
    write_report(args.out, "packing", {"command": command, "preset": args.preset, "seed": args.seed, "arms": results},
                 table)
    logger.info("wrote %s\n%s", args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
