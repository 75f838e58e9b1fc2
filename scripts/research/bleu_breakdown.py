#!/usr/bin/env python
"""Where each benchmark arm's BLEU comes from: n-gram precisions, BLEU by reference length and by how often the pair
occurs in training, recall of frequent words.

    python scripts/research/bleu_breakdown.py --data data-bin/tatoeba.de-en --bench runs/bench-tatoeba \
        --out docs/results/benchmark-tatoeba

Reads the hypotheses every finished run of a ``benchmark.py`` output folder wrote for ``--split``
(``BENCH/runs/ARM-seedN/bleu_SPLIT.json`` names them) and scores them against the raw references of the prepared
``--data`` folder with sacreBLEU (its default BLEU, as the benchmark reports): the 1- to 4-gram precisions and the
brevity penalty; BLEU on the sentences of each reference length (13a tokens, split at ``--length-edges``, by default
the references' terciles); BLEU on the pairs that never, once or more often occur in ``--data``'s training split
(the same pieces on both sides: what removing exact duplicates thins); and the share of the references' tokens in
each band of training-side frequency (the most frequent ``--frequency-edges`` target tokens of the training split,
and the rest) that the hypothesis reproduces (clipped counts, as BLEU's unigrams). Each arm's figures are the mean
over its seeds. Writes ``bleu_breakdown_SPLIT.json`` (every run's figures) and ``.md`` to ``--out``.
"""

import argparse
import collections
import functools
import json
import logging
import os
import sys

import numpy as np

from fairseq_autoassist.benchmark.arms import in_table_order
from fairseq_autoassist.benchmark.report import bucket_labels
from fairseq_autoassist.benchmark.runs import finished_run_dirs
from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.corpus.raw_corpus import PreparationError, exit_code
from fairseq_autoassist.recipes import require_prepared, split_named, write_report

logger = logging.getLogger("bleu_breakdown")

FREQUENCY_EDGES = (100, 1000)
OCCURRENCE_LABELS = ("never", "once", "more often")


@functools.lru_cache(maxsize=1)
def tokenizer_13a():
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()


def tokenize(line):
    return tokenizer_13a()(line).split()


def bleu_metric():
    import sacrebleu

    return sacrebleu.metrics.BLEU()


def corpus_bleu(hypotheses, references):
    return bleu_metric().corpus_score(hypotheses, [references])


def length_edges_of(references):
    """The terciles of the references' lengths in tokens: the upper ends of the short and the middle bucket."""
    lengths = [len(tokenize(reference)) for reference in references]
    return tuple(int(edge) for edge in np.quantile(lengths, [1 / 3, 2 / 3], method="lower"))


def frequency_labels(edges):
    labels, low = [], 0
    for edge in edges:
        labels.append(f"top {edge}" if low == 0 else f"{low + 1}-{edge}")
        low = edge
    return labels + [f"beyond {low}"]


def frequency_bands(token_counts, edges):
    """token -> band index: 0 for the ``edges[0]`` most frequent tokens, 1 up to ``edges[1]``, ...; tokens beyond
    the last edge (and tokens never seen in training) are band ``len(edges)``."""
    ranked = [token for token, _ in sorted(token_counts.items(), key=lambda item: (-item[1], item[0]))]
    return {token: int(np.searchsorted(edges, rank, side="right")) for rank, token in enumerate(ranked)}


def occurrence_bands(occurrences):
    """Each pair's index in OCCURRENCE_LABELS, from how often it occurs in the training split."""
    return np.minimum(np.asarray(occurrences, dtype=np.int64), len(OCCURRENCE_LABELS) - 1)


def bleu_by_group(hypotheses, references, group, labels):
    """Corpus BLEU of the sentences of each group (``group[i]``: sentence i's index in ``labels``); None where empty."""
    figures = {}
    for index, label in enumerate(labels):
        members = np.flatnonzero(group == index)
        figures[label] = (round(corpus_bleu([hypotheses[i] for i in members], [references[i] for i in members]).score,
                                2) if len(members) else None)
    return figures


def breakdown(hypotheses, references, band_of, length_edges, frequency_edges, occurrences):
    """The figures of one run (see the module's docstring); ``occurrences``: how often each pair occurs in the
    training split."""
    if len(hypotheses) != len(references):
        raise PreparationError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    metric = bleu_metric()
    whole = metric.corpus_score(hypotheses, [references])
    reference_tokens = [tokenize(reference) for reference in references]
    bucket = np.searchsorted(length_edges, [len(tokens) for tokens in reference_tokens], side="left")
    by_length = bleu_by_group(hypotheses, references, bucket, bucket_labels(length_edges))
    by_occurrence = bleu_by_group(hypotheses, references, occurrence_bands(occurrences), OCCURRENCE_LABELS)
    matched = np.zeros(len(frequency_edges) + 1)
    total = np.zeros(len(frequency_edges) + 1)
    for hypothesis, tokens in zip(hypotheses, reference_tokens):
        produced = collections.Counter(tokenize(hypothesis))
        for token, count in collections.Counter(tokens).items():
            band = band_of.get(token, len(frequency_edges))
            total[band] += count
            matched[band] += min(count, produced[token])
    recall = {label: (round(float(matched[i] / total[i]), 3) if total[i] else None)
              for i, label in enumerate(frequency_labels(frequency_edges))}
    return {"bleu": round(whole.score, 2), "bleu_signature": str(metric.get_signature()),
            "precisions": [round(p, 1) for p in whole.precisions], "brevity_penalty": round(whole.bp, 3),
            "length_ratio": round(whole.sys_len / max(whole.ref_len, 1), 3),
            "bleu_by_reference_length": by_length, "bleu_by_training_occurrences": by_occurrence,
            "recall_by_training_frequency": recall}


def training_token_counts(data, source, target):
    """13a-token counts of the training split's target side, decoded from the binarized pieces."""
    import sentencepiece as spm
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(os.path.join(data, f"dict.{target}.txt"))
    dataset = data_utils.load_indexed_dataset(os.path.join(data, f"train.{source}-{target}.{target}"), dictionary)
    if dataset is None:
        raise PreparationError(f"{data} has no binarized training split train.{source}-{target}.{target}; "
                               "prepare it with scripts/prepare_*.py")
    pieces = spm.SentencePieceProcessor(model_file=os.path.join(data, "spm.model"))
    counts = collections.Counter()
    for i in range(len(dataset)):
        counts.update(tokenize(pieces.decode(dictionary.string(dataset[i]).split())))
    return counts


def occurrences_in(training_keys, keys):
    """How often each row of ``keys`` occurs among the rows of ``training_keys`` (``pair_keys`` of two splits)."""
    _, inverse = np.unique(np.concatenate([training_keys, keys]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    in_training = np.bincount(inverse[:len(training_keys)], minlength=inverse.max() + 1)
    return in_training[inverse[len(training_keys):]]


def pair_keys(pairs):
    """Each pair of a ``PairFeatures`` as its source's and its target's sentence hash (one row per pair, as
    ``skipped_pairs_report.repeated`` keys the very same pair)."""
    return np.stack([pairs.source.sentence_hashes(), pairs.target.sentence_hashes()], axis=1)


def training_occurrences(data, source, target, split):
    """How often each pair of ``split`` occurs in the training split, as the same pieces on both sides."""
    from fairseq_autoassist.data.iterator import load_pair_features

    try:
        held_out = load_pair_features(data, source, target, split)
    except AutoAssistConfigError as error:
        raise PreparationError(f"{error} (--split {split} must name a binarized split of --data)") from error
    return occurrences_in(pair_keys(load_pair_features(data, source, target)), pair_keys(held_out))


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().rstrip("\n").split("\n")


def finished_hypotheses(bench, split, arms):
    """(arm, seed, hypotheses file) of every finished run of BENCH that scored ``split``."""
    if not os.path.isdir(os.path.join(bench, "runs")):
        raise PreparationError(f"--bench {bench} has no runs/ folder; pass the --out folder of scripts/benchmark.py")
    found = []
    for seed, arm, run_dir in finished_run_dirs(bench):
        result_path = os.path.join(run_dir, f"bleu_{split}.json")
        if os.path.isfile(result_path) and (not arms or arm in arms):
            with open(result_path) as f:
                found.append((arm, seed, os.path.join(run_dir, os.path.basename(json.load(f)["hypotheses"]))))
    if not found:
        raise PreparationError(f"no finished run under {bench}/runs has bleu_{split}.json"
                               + (f" among --arms {' '.join(arms)}" if arms else ""))
    return found


def mean_figures(runs):
    """The mean over seeds of every figure of one arm's runs (None where a bucket was empty)."""
    def mean(values):
        values = [v for v in values if v is not None]
        return round(float(np.mean(values)), 3) if values else None

    first = runs[0]
    return {"seeds": len(runs), "bleu": mean([r["bleu"] for r in runs]),
            "precisions": [mean([r["precisions"][n] for r in runs]) for n in range(len(first["precisions"]))],
            "brevity_penalty": mean([r["brevity_penalty"] for r in runs]),
            "length_ratio": mean([r["length_ratio"] for r in runs]),
            **{key: {label: mean([r[key][label] for r in runs]) for label in first[key]}
               for key in ("bleu_by_reference_length", "bleu_by_training_occurrences",
                           "recall_by_training_frequency")}}


def markdown(split, per_arm, length_edges, frequency_edges, occurrence_shares):
    def fmt(value, digits):
        return "-" if value is None else f"{value:.{digits}f}"

    lengths, bands = bucket_labels(length_edges), frequency_labels(frequency_edges)
    lines = [f"# Where the BLEU comes from: split `{split}` (mean over each arm's seeds)", "",
             "| arm | seeds | BLEU | 1- / 2- / 3- / 4-gram precision | brevity penalty (length ratio) | BLEU by "
             f"reference length in tokens: {' / '.join(lengths)} | BLEU on the pairs occurring in training "
             f"{' / '.join(OCCURRENCE_LABELS)} | recall of reference tokens by training frequency rank: "
             f"{' / '.join(bands)} |", "|---|---|---|---|---|---|---|---|"]
    for arm, figures in per_arm.items():
        lines.append(
            f"| `{arm}` | {figures['seeds']} | {fmt(figures['bleu'], 2)} | "
            f"{' / '.join(fmt(p, 1) for p in figures['precisions'])} | {fmt(figures['brevity_penalty'], 3)} "
            f"({fmt(figures['length_ratio'], 3)}) | "
            f"{' / '.join(fmt(figures['bleu_by_reference_length'][label], 2) for label in lengths)} | "
            f"{' / '.join(fmt(figures['bleu_by_training_occurrences'][label], 2) for label in OCCURRENCE_LABELS)} | "
            f"{' / '.join(fmt(figures['recall_by_training_frequency'][label], 3) for label in bands)} |")
    shares = ", ".join(f"{label} {share:.3f}" for label, share in occurrence_shares.items())
    return "\n".join(lines) + f"\n\nShare of the split's pairs occurring in the training split: {shares}.\n"


def report(data, bench, out, split="test", arms=(), length_edges=None, frequency_edges=FREQUENCY_EDGES):
    try:
        info = require_prepared(data)
    except AutoAssistConfigError as error:
        raise PreparationError(str(error)) from error
    split = split_named(info, split)
    reference_path = os.path.join(data, "raw", f"{split}.{info['target']}")
    if not os.path.isfile(reference_path):
        raise PreparationError(f"{reference_path} is missing; --split must name a split of {data}/raw")
    references = read_lines(reference_path)
    runs = finished_hypotheses(bench, split, arms)
    length_edges = tuple(length_edges or length_edges_of(references))
    band_of = frequency_bands(training_token_counts(data, info["source"], info["target"]), frequency_edges)
    occurrences = training_occurrences(data, info["source"], info["target"], split)
    if len(occurrences) != len(references):
        raise PreparationError(f"{data}: the binarized split {split} has {len(occurrences)} pairs, {reference_path} "
                               f"{len(references)}; prepare the folder again")
    occurrence_shares = {label: round(float(np.mean(occurrence_bands(occurrences) == index)), 3)
                         for index, label in enumerate(OCCURRENCE_LABELS)}
    per_run, by_arm = [], {}
    for arm, seed, hypotheses_path in runs:
        figures = breakdown(read_lines(hypotheses_path), references, band_of, length_edges, frequency_edges,
                            occurrences)
        per_run.append({"arm": arm, "seed": seed, "hypotheses": hypotheses_path, **figures})
        by_arm.setdefault(arm, []).append(figures)
    per_arm = {arm: mean_figures(by_arm[arm]) for arm in in_table_order(by_arm)}
    record = {"data": os.path.abspath(data), "languages": {"source": info["source"], "target": info["target"]},
              "split": split, "references": reference_path,
              "length_edges": list(length_edges), "frequency_edges": list(frequency_edges),
              "pairs_by_training_occurrences": occurrence_shares,
              "runs": per_run, "arms": per_arm}
    table = markdown(split, per_arm, length_edges, frequency_edges, occurrence_shares)
    path = write_report(out, f"bleu_breakdown_{split}", record, table)
    logger.info("wrote %s", path)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the prepared data-bin folder the runs trained on")
    parser.add_argument("--bench", required=True, help="the --out folder of scripts/benchmark.py")
    parser.add_argument("--out", required=True, help="folder for bleu_breakdown_SPLIT.json and .md")
    parser.add_argument("--split", default="test", help="a split the runs were scored on (default: test)")
    parser.add_argument("--arms", nargs="+", default=(), help="only these arms (default: every finished arm)")
    parser.add_argument("--length-edges", type=int, nargs="+", default=None,
                        help="upper ends of the reference-length buckets, in 13a tokens (default: the terciles)")
    parser.add_argument("--frequency-edges", type=int, nargs="+", default=list(FREQUENCY_EDGES),
                        help="frequency ranks that end each band of training-side tokens (default: 100 1000)")
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    args = parse_args(argv)
    return exit_code(lambda: report(args.data, args.bench, args.out, args.split, args.arms, args.length_edges,
                                    tuple(args.frequency_edges)), logger)


if __name__ == "__main__":
    sys.exit(main())
