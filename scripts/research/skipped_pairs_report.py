#!/usr/bin/env python
"""Which training pairs a loss-band rule (``learnable``, ``predicted-learnable``) skips at the end of a run.

    python scripts/research/skipped_pairs_report.py --data data-bin/tatoeba.de-en \
        --checkpoints runs/bench-tatoeba/runs/learnable@0.7-seed*/checkpoint_last.pt \
        --out docs/results/benchmark-tatoeba/skipped-pairs

Rebuilds the rule's loss table (``fairseq_autoassist.selection.loss_table.LossBand``) from each checkpoint with the
run's own quantiles and labels every training pair as the rule would label it now: skipped as learned (relative
loss below the lower bound), skipped as unlearnable (above the upper bound), kept, or not yet seen. Tabulates the
skipped share by target length (sentencepiece pieces, split at ``--length-edges``), by the ratio of source to target
length, and by whether another training pair has the same target sentence (another translation of it), so that
what a rule trades for can be told from what it is meant to find. Writes ``skipped_pairs.json`` and ``.md``.
"""

import argparse
import logging
import os
import sys

import numpy as np

from fairseq_autoassist.benchmark.report import bucket_labels
from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.raw_corpus import PreparationError, exit_code
from fairseq_autoassist.recipes import data_languages, require_prepared, write_report
from fairseq_autoassist.selection.loss_table import LossBand

logger = logging.getLogger("skipped_pairs_report")

LENGTH_EDGES = (6, 8, 12, 20)
RATIO_EDGES = (0.7, 1.4)
BAND_POLICIES = ("learnable", "predicted-learnable")


def skipped_shares(labels, skipped_side, groups):
    """For each group (name -> (bucket labels, bucket index per pair)): per bucket the pairs and the share of them
    skipped (``skipped_side``: 0 learned, 1 unlearnable, nan kept or not seen) on each side."""
    tables = {}
    for name, (bucket_names, bucket) in groups.items():
        rows = {}
        for index, bucket_name in enumerate(bucket_names):
            members = bucket == index
            count = int(members.sum())
            rows[bucket_name] = {
                "pairs": count,
                "skipped": round(float(np.mean(labels[members] == 0)), 3) if count else None,
                "skipped_as_learned": round(float(np.mean(skipped_side[members] == 0)), 3) if count else None,
                "skipped_as_unlearnable": round(float(np.mean(skipped_side[members] == 1)), 3) if count else None,
            }
        tables[name] = rows
    return tables


def has_sibling(sentence_hashes):
    """Whether another pair has the same target sentence (``CorpusSide.sentence_hashes`` of the target side)."""
    _, inverse, counts = np.unique(sentence_hashes, return_inverse=True, return_counts=True)
    return counts[inverse] > 1


def rule_labels(checkpoint_path, num_pairs):
    """(policy, label per pair: 1 kept, 0 skipped, nan not seen; side of the skip: 0 learned, 1 unlearnable)."""
    import torch

    state = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
    task = state["cfg"]["task"]
    policy = task.get("autoassist_policy")
    if policy not in BAND_POLICIES:
        raise PreparationError(f"{checkpoint_path} trained with --autoassist-policy {policy}; this report reads the "
                               f"loss band of {' or '.join(BAND_POLICIES)}")
    table = LossBand(num_pairs, task["autoassist_learned_quantile"], task["autoassist_unlearnable_quantile"])
    try:
        table.load_state_dict(state["extra_state"]["AutoAssistTranslationTask"]["loss_table"])
    except ValueError as error:
        raise PreparationError(f"{checkpoint_path}: {error}; pass the --data it trained on") from error
    ids = np.arange(num_pairs)
    labels = table.labels(ids)
    relative = table.losses.astype(np.float64)
    side = np.where(labels == 0, (relative >= table.bounds[1]).astype(np.float64), np.nan)
    return policy, labels, side


def training_pairs(data):
    """The training split's two sides (``fairseq_autoassist.assistant.PairFeatures``, which keeps the memory-mapped
    data open while their lengths are read)."""
    from fairseq_autoassist.data.iterator import load_pair_features

    try:
        info = require_prepared(data)
        return load_pair_features(data, info["source"], info["target"])
    except AutoAssistConfigError as error:
        raise PreparationError(str(error)) from error


def markdown(runs):
    lines = ["# Which pairs the rule skips at the end of each run", ""]
    for run in runs:
        lines += [f"## `{run['checkpoint']}` ({run['policy']})", "",
                  f"Skipped: {run['skipped']:.3f} of the training pairs ({run['skipped_as_learned']:.3f} as learned, "
                  f"{run['skipped_as_unlearnable']:.3f} as unlearnable); not yet seen: {run['not_seen']:.3f}. Mean "
                  f"target length of the skipped pairs {run['mean_target_length_skipped']:.2f} pieces, of the kept "
                  f"{run['mean_target_length_kept']:.2f}.", ""]
        for name, rows in run["by"].items():
            lines += [f"| {name} | pairs | skipped | as learned | as unlearnable |", "|---|---|---|---|---|"]
            lines += [f"| {bucket} | {row['pairs']} | {row['skipped']} | {row['skipped_as_learned']} | "
                      f"{row['skipped_as_unlearnable']} |" for bucket, row in rows.items()]
            lines.append("")
    return "\n".join(lines)


def report(data, checkpoints, out, length_edges=LENGTH_EDGES, ratio_edges=RATIO_EDGES):
    pairs = training_pairs(data)
    target_sizes = pairs.target.lengths
    ratio = pairs.source.lengths / target_sizes
    length_names = bucket_labels(length_edges, " pieces")
    ratio_names = bucket_labels(ratio_edges)
    groups = {"target length": (length_names, np.searchsorted(length_edges, target_sizes, side="left")),
              "source / target length": (ratio_names, np.searchsorted(ratio_edges, ratio, side="left")),
              "another translation of the target sentence": (["none", "at least one"],
                                                             has_sibling(pairs.target.sentence_hashes()).astype(np.int64))}
    runs = []
    for checkpoint in checkpoints:
        if not os.path.isfile(checkpoint):
            raise PreparationError(f"--checkpoints {checkpoint} does not exist")
        policy, labels, side = rule_labels(checkpoint, len(target_sizes))
        skipped, kept = labels == 0, labels == 1
        runs.append({"checkpoint": checkpoint, "policy": policy, "skipped": float(np.mean(skipped)),
                     "skipped_as_learned": float(np.mean(side == 0)),
                     "skipped_as_unlearnable": float(np.mean(side == 1)),
                     "not_seen": float(np.mean(np.isnan(labels))),
                     "mean_target_length_skipped": float(target_sizes[skipped].mean()) if skipped.any() else float("nan"),
                     "mean_target_length_kept": float(target_sizes[kept].mean()) if kept.any() else float("nan"),
                     "by": skipped_shares(labels, side, groups)})
    record = {"data": os.path.abspath(data), "languages": data_languages(data), "length_edges": list(length_edges),
              "ratio_edges": list(ratio_edges), "runs": runs}
    logger.info("wrote %s", write_report(out, "skipped_pairs", record, markdown(runs)))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the prepared data-bin folder the runs trained on")
    parser.add_argument("--checkpoints", nargs="+", required=True, help="checkpoints of learnable runs")
    parser.add_argument("--out", required=True, help="folder for skipped_pairs.json and .md")
    parser.add_argument("--length-edges", type=int, nargs="+", default=list(LENGTH_EDGES),
                        help="upper ends of the target-length buckets, in pieces (default: 6 8 12 20)")
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    args = parse_args(argv)
    return exit_code(lambda: report(args.data, args.checkpoints, args.out, tuple(args.length_edges)), logger)


if __name__ == "__main__":
    sys.exit(main())
