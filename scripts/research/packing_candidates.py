#!/usr/bin/env python
"""Packing candidates without training (issue 63): can a sort keep the plugin's mixing without its padding cost?

    python scripts/research/packing_candidates.py --data data-bin/multi30k-noisy30.de-en --out OUT

For every candidate sort key, the first pass's batches as the plugin's stream cuts them (the pass permuted, chunks of
``--refresh-updates`` full batches, a carried remainder, fairseq's ``batch_by_size`` under the preset's token budget,
``--required-batch-size-multiple 8``: ``data.iterator.token_budget_batcher``), and the stock task's batches (the
whole corpus by source and then target length, in one chunk); per candidate the padded positions per target token over
the stock task's (what the model computes per token learned), target tokens per batch and, where the folder has a
``noise.tsv``, each kind's share of the updates that are mostly that kind (``packing_report.py``'s figures). Only the
pairs' lengths are read; nothing is trained. Writes OUT/packing_candidates.json and .md.
"""

import argparse
import logging
import os
import shlex
import sys

import numpy as np
from fairseq.data import data_utils
from fairseq.data.indexed_dataset import MMapIndexedDataset
from packing_report import batch_figures, noise_groups

from fairseq_autoassist.benchmark.arms import PRESETS
from fairseq_autoassist.data.batch_stream import ShrinkingBatchStream
from fairseq_autoassist.data.iterator import pairs_per_chunk, token_budget_batcher
from fairseq_autoassist.data.packing import packing_key, update_weight_shares
from fairseq_autoassist.recipes import data_languages, write_report

logger = logging.getLogger("packing_candidates")


class PairLengths:
    """What ``token_budget_batcher`` reads of a fairseq dataset: the two sides' lengths and ``batch_by_size``."""

    def __init__(self, source_sizes, target_sizes):
        self.src_sizes, self.tgt_sizes = source_sizes, target_sizes

    def __len__(self):
        return len(self.src_sizes)

    def batch_by_size(self, indices, max_tokens, max_sentences, required_batch_size_multiple):
        return data_utils.batch_by_size(
            indices, num_tokens_fn=None, num_tokens_vec=np.maximum(self.src_sizes, self.tgt_sizes)[indices],
            max_tokens=max_tokens, max_sentences=max_sentences, required_batch_size_multiple=required_batch_size_multiple)


def composite(*keys):
    """One int64 sort key ordering by ``keys[0]``, then ``keys[1]``, ... (each a non-negative int array)."""
    out = np.zeros(len(keys[0]), dtype=np.int64)
    for key in keys:
        out = out * (int(key.max()) + 1) + key
    return out


def candidate_keys(source, target, fairseq_rank, seed):
    """Name -> sort key per dataset index: the three packings of ``data.packing`` and the candidates."""
    random_rank = np.random.default_rng([seed, 63]).permutation(len(source)).astype(np.int64)
    padded, shorter = np.maximum(source, target), np.minimum(source, target)
    keys = {packing: packing_key(packing, source, target, fairseq_rank, seed)
            for packing in ("source-target", "padded-length", "padded-length-shuffled")}
    # Which side is the longer one matters: pairs of one padded length P with the source and with the target
    # longest pad both sides to P.
    longer_side = (target > source).astype(np.int64)
    for width in (2, 4, 8):
        keys[f"padded length, longer side, shorter in bins of {width}, random ties"] = composite(
            padded, longer_side, shorter // width, random_rank)
    for width in (2, 4):
        keys[f"source length, target in bins of {width}, random ties"] = composite(source, target // width, random_rank)
    keys["source length, random ties"] = composite(source, random_rank)
    keys["sum of the lengths, random ties"] = composite(source + target, random_rank)
    return keys


def first_pass(candidates, lengths, key, chunk_pairs, seed, max_tokens):
    make_batches = token_budget_batcher(lengths, max_tokens, None, 8, key)
    stream = ShrinkingBatchStream(candidates, lengths.tgt_sizes, chunk_pairs, seed, make_batches,
                                  lambda indices, epoch, pass_index, chunk: (indices, None))
    return [batch for batch, _ in stream.iterate_epoch(1)]


def report(data, preset, seed, refresh_updates):
    languages = data_languages(data)
    source_lang, target_lang = languages["source"], languages["target"]
    sides = [MMapIndexedDataset(os.path.join(data, f"train.{source_lang}-{target_lang}.{lang}"))
             for lang in (source_lang, target_lang)]
    source, target = (np.array(side.sizes, dtype=np.int64) for side in sides)
    lengths = PairLengths(source, target)
    # fairseq's order: by source and then target length, ties in a seeded random order (LanguagePairDataset).
    with data_utils.numpy_seed(seed + 1):
        ordered = np.random.permutation(len(source))
    ordered = ordered[np.argsort(target[ordered], kind="mergesort")]
    ordered = ordered[np.argsort(source[ordered], kind="mergesort")]
    fairseq_rank = np.empty(len(source), dtype=np.int64)
    fairseq_rank[ordered] = np.arange(len(ordered))
    max_tokens = preset["max_tokens"]
    stock = token_budget_batcher(lengths, max_tokens, None, 8, fairseq_rank)(ordered)
    chunk_pairs = pairs_per_chunk(refresh_updates, len(ordered), len(stock))
    groups = noise_groups(data, len(source))
    results = {}
    for name, key in {"stock task (whole corpus)": None, **candidate_keys(source, target, fairseq_rank, seed)}.items():
        batches = stock if key is None else first_pass(ordered, lengths, key, chunk_pairs, seed, max_tokens)
        figures = batch_figures(batches, source, target)
        figures["positions_per_target_token"] = figures["padded_positions_per_batch"] / figures["target_tokens_per_batch"]
        figures["groups"] = update_weight_shares(batches, target, groups) if groups else {}
        results[name] = figures
        logger.info("%-58s %.3f positions per target token", name, figures["positions_per_target_token"])
    stock_positions = results["stock task (whole corpus)"]["positions_per_target_token"]
    for figures in results.values():
        figures["positions_ratio_to_stock"] = figures["positions_per_target_token"] / stock_positions
    return results


def markdown(results, command):
    kinds = list(next(iter(results.values()))["groups"])
    lines = [f"Command: `{command}`", "",
             "| packing | positions per target token (over stock) | target tokens per batch | batches | "
             + "".join(f"updates mostly {kind} | " for kind in kinds), "|---|---|---|---|" + "---|" * len(kinds)]
    for name, figures in results.items():
        lines.append(f"| {name} | {figures['positions_per_target_token']:.3f} ({figures['positions_ratio_to_stock']:.3f})"
                     f" | {figures['target_tokens_per_batch']:.0f} | {figures['batches']} | "
                     + "".join(f"{figures['groups'][kind]['mostly_group_batches']:.3f} | " for kind in kinds))
    return "\n".join(lines) + "\n"


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="prepared data-bin folder")
    parser.add_argument("--out", required=True, help="folder for packing_candidates.json and .md")
    parser.add_argument("--preset", default="multi30k-long", choices=sorted(PRESETS),
                        help="the benchmark preset whose token budget cuts the batches")
    parser.add_argument("--refresh-updates", type=int, default=50, help="full batches per chunk (0: the whole pass)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    results = report(args.data, PRESETS[args.preset], args.seed, args.refresh_updates)
    command = "python scripts/research/packing_candidates.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    table = markdown(results, command)
    write_report(args.out, "packing_candidates", {"command": command, "results": results}, table)
    logger.info("wrote %s\n%s", args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
