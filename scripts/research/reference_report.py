#!/usr/bin/env python
"""How well the reference models' scores tell corrupted or badly judged pairs from good ones, and the dual
cross-entropy threshold chosen on a development copy.

    python scripts/research/reference_report.py --data data-bin/multi30k-noisy30.de-en --choose-threshold \\
        --out docs/results/reference-models/development-copy
    python scripts/research/reference_report.py --data data-bin/multi30k-noisy30-seed2.de-en \\
        --above 4.2 --out docs/results/reference-models/fresh-copy
    python scripts/research/reference_report.py --data data-bin/multi30k-paracrawl.de-en --judged \\
        --out docs/results/reference-models/paracrawl

Reads ``DATA/scores/two-halves.npy`` (``autoassist-reference --recipe two-halves``: each pair's per-token loss
under the model of the half that did not train on it), ``two-halves-reverse.npy`` (the same from the target side to
the source side, ``--reverse``) where present, and ``DATA/noise.tsv``. Each score is read as "higher: a worse
pair": the forward reference loss, the backward one, the dual conditional cross-entropy of the two (the rule of
``autoassist-filter``), and the *reducible loss* of RHO-LOSS's two-halves form: the pair's loss under the model of
its own half, which trained on it, minus the reference loss (scored here for the listed pairs only, into
``two-halves-own.npy``). A reducible loss above the others' means "still to learn", so its AUC reads the other way
round: below 0.5, the rule would skip that kind more often than clean pairs.

* Noisy copies (kinds of ``make_noisy_corpus.py``): per kind, the ROC AUC with which each score ranks the kind's
  pairs above the clean ones. ``--choose-threshold``: the dual cross-entropy threshold that maximizes Youden's J
  (the share of corrupted pairs removed minus the share of clean pairs removed), on a development copy only;
  ``--above T``: the kept share by kind under a threshold chosen elsewhere.
* ``--judged`` (the ParaCrawl mixture of ``paracrawl_report.py --mixed-corpus``, kinds ``paracrawl-LABEL``): the AUC
  of V against A+L and against every other label, a good pair being one with a low score, beside bicleaner's.

Writes ``report.md`` and ``report.json`` to ``--out``.
"""

import argparse
import collections
import logging
import os
import sys

import numpy as np

from fairseq_autoassist.corpus.cleaning import dual_cross_entropy
from fairseq_autoassist.corpus.raw_corpus import NOISE_LIST, SCORES_FOLDER, PreparationError, exit_code, read_noise
from fairseq_autoassist.recipes import require_prepared, write_report
from fairseq_autoassist.reference.models import REFERENCE_FOLDER, halves_by_source, languages, model_folder, scores_name
from fairseq_autoassist.reference.scores import read_scores, score_split

logger = logging.getLogger("reference_report")

CLEAN = "clean"
JUDGED_PREFIX = "paracrawl-"
# Bicleaner's AUC on the same judged pairs (docs/results/paracrawl/report.md), the label-free bar to clear.
BICLEANER_AUC = {"V vs A+L": 0.758, "V vs all others": 0.590}


def auc(scores, positive):
    """ROC AUC of ``scores`` ranking the ``positive`` rows first (ties count half)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(positive, scores))


def own_half_scores(data, listed, seed=1):
    """Each pair of ``listed`` scored by the two-halves model that trained on it (the RHO-LOSS "training model");
    NaN elsewhere. The scores resume in ``DATA/scores/two-halves-own.npy``."""
    half = halves_by_source(data, seed)
    output = os.path.join(data, SCORES_FOLDER, "two-halves-own.npy")
    for side in (0, 1):
        half_folder = os.path.join(data, REFERENCE_FOLDER, "two-halves", f"half{side}")
        checkpoint = os.path.join(model_folder(half_folder, *languages(data)), "checkpoint_last.pt")
        if not os.path.isfile(checkpoint):
            raise PreparationError(f"{checkpoint} is missing: run autoassist-reference --data {data} "
                                   "--recipe two-halves first")
        score_split(checkpoint, data, output=output, only=listed[half[listed] == side])
    return np.asarray(read_scores(output, len(half)), dtype=np.float64)


def read_reference_scores(data, listed):
    """``{name: per-pair score, higher: worse}`` of every score the folder has."""
    pairs = require_prepared(data)["pairs"]["train"]
    paths = {name: os.path.join(data, SCORES_FOLDER, scores_name("two-halves", reverse) + ".npy")
             for name, reverse in (("forward reference loss", False), ("backward reference loss", True))}
    if not os.path.isfile(paths["forward reference loss"]):
        raise PreparationError(f"{paths['forward reference loss']} is missing: run autoassist-reference --data {data} "
                               "--recipe two-halves --max-update N first")
    scores = {name: np.asarray(read_scores(path, pairs), dtype=np.float64) for name, path in paths.items()
              if os.path.isfile(path)}
    if "backward reference loss" in scores:
        scores["dual cross-entropy"] = dual_cross_entropy(scores["forward reference loss"],
                                                          scores["backward reference loss"])
    own = own_half_scores(data, listed)
    scores["reducible loss (own half minus reference)"] = own - scores["forward reference loss"]
    return scores


def youden_threshold(score, corrupted):
    """The threshold ``t`` (remove the pairs whose score is above it) that maximizes the share of corrupted pairs
    removed minus the share of clean pairs removed, with that J."""
    order = np.argsort(-score, kind="stable")
    removed_corrupted = np.cumsum(corrupted[order]) / corrupted.sum()
    removed_clean = np.cumsum(~corrupted[order]) / (~corrupted).sum()
    best = int(np.argmax(removed_corrupted - removed_clean))
    # Remove the pairs up to ``best``: the threshold halfway to the next score.
    following = score[order[best + 1]] if best + 1 < len(order) else score[order[best]] - 1.0
    return float((score[order[best]] + following) / 2), float(removed_corrupted[best] - removed_clean[best])


def kept_share_by_kind(kinds, keep):
    return {kind: round(float(keep[kinds == kind].mean()), 4) for kind in sorted(set(kinds))}


def noisy_report(data, choose_threshold=False, above=None):
    pairs = require_prepared(data)["pairs"]["train"]
    noise = read_noise(os.path.join(data, NOISE_LIST))
    kinds = np.array([noise.get(line, CLEAN) for line in range(pairs)])
    corrupted = kinds != CLEAN
    scores = read_reference_scores(data, np.flatnonzero(np.ones(pairs, dtype=bool)))
    result = {"data": os.path.abspath(data), "pairs": dict(sorted(collections.Counter(kinds).items())), "auc": {}}
    for name, score in scores.items():
        known = np.isfinite(score)
        result["auc"][name] = {}
        for kind in sorted(set(kinds[corrupted])):
            rows = known & ((kinds == kind) | ~corrupted)
            result["auc"][name][kind] = auc(score[rows], kinds[rows] == kind)
        result["auc"][name]["every kind"] = auc(score[known], corrupted[known])
    dual = scores.get("dual cross-entropy")
    if (choose_threshold or above is not None) and dual is None:
        raise PreparationError(f"{data}/{SCORES_FOLDER} has no two-halves-reverse.npy for the dual cross-entropy: "
                               f"run autoassist-reference --data {data} --recipe two-halves --reverse first")
    if choose_threshold:
        above, result["youden_j"] = youden_threshold(np.nan_to_num(dual, nan=-np.inf), corrupted)
    if above is not None:
        keep = ~(dual > above)
        result.update(above=above, removed_share=round(float(1 - keep.mean()), 4),
                      kept_share_by_kind=kept_share_by_kind(kinds, keep))
    return result


def judged_report(data):
    pairs = require_prepared(data)["pairs"]["train"]
    noise = read_noise(os.path.join(data, NOISE_LIST))
    judged = np.array(sorted(line for line, kind in noise.items() if kind.startswith(JUDGED_PREFIX)))
    if not len(judged):
        raise PreparationError(f"{data}/{NOISE_LIST} lists no {JUDGED_PREFIX}LABEL pairs: prepare the mixture of "
                               "scripts/research/paracrawl_report.py --mixed-corpus")
    labels = np.array([noise[line][len(JUDGED_PREFIX):] for line in judged])
    valid = labels == "V"
    comparisons = {"V vs A+L": np.isin(labels, ["V", "A", "L"]), "V vs all others": np.ones(len(labels), dtype=bool)}
    scores = read_reference_scores(data, judged)
    result = {"data": os.path.abspath(data), "training_pairs": pairs,
              "judged": dict(sorted(collections.Counter(labels).items())), "bicleaner": BICLEANER_AUC, "auc": {}}
    for name, score in scores.items():
        # A good pair has a low score: the AUC of minus the score ranking V first.
        good = -score[judged]
        result["auc"][name] = {comparison: auc(good[subset], valid[subset])
                               for comparison, subset in comparisons.items()}
    return result


def markdown(result):
    lines = [f"Data: `{result['data']}`.", ""]
    if "judged" in result:
        lines += ["Judged pairs: " + ", ".join(f"{label} {count:,}" for label, count in result["judged"].items())
                  + f" among {result['training_pairs']:,} training pairs.", "",
                  "| score (low: a good pair) | AUC V vs A+L | AUC V vs all others |", "|---|---|---|"]
        lines += [f"| {name} | {aucs['V vs A+L']:.3f} | {aucs['V vs all others']:.3f} |"
                  for name, aucs in result["auc"].items()]
        lines.append(f"| bicleaner (ParaCrawl's own score) | {result['bicleaner']['V vs A+L']:.3f} | "
                     f"{result['bicleaner']['V vs all others']:.3f} |")
        return "\n".join(lines) + "\n"
    kinds = list(next(iter(result["auc"].values())))
    lines += ["Pairs: " + ", ".join(f"{kind} {count:,}" for kind, count in result["pairs"].items()) + ".", "",
              "ROC AUC of each score (high: a worse pair) ranking a kind's pairs above the clean ones:", "",
              "| score | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(f"{aucs[kind]:.3f}" for kind in kinds) + " |"
              for name, aucs in result["auc"].items()]
    lines += ["", "A high reducible loss means \"still to learn\" (RHO-LOSS trains on it): below 0.5 there, the rule "
              "would skip the kind's pairs more often than the clean ones."]
    if "above" in result:
        chosen = (f"chosen here by Youden's J ({result['youden_j']:.3f})" if "youden_j" in result
                  else "chosen on the development copy")
        lines += ["", f"Dual cross-entropy above {result['above']:.4f} ({chosen}) removes "
                  f"{result['removed_share']:.1%} of the pairs; kept share by kind: "
                  + ", ".join(f"{kind} {share:.2f}" for kind, share in result["kept_share_by_kind"].items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a prepared folder with noise.tsv and two-halves scores")
    parser.add_argument("--out", required=True, help="folder for report.md and report.json")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--choose-threshold", action="store_true",
                      help="choose the dual cross-entropy threshold by Youden's J (a development copy only)")
    mode.add_argument("--above", type=float, help="the kept share by kind under this dual cross-entropy threshold")
    mode.add_argument("--judged", action="store_true", help="the ParaCrawl mixture: AUC of V against the other labels")
    args = parser.parse_args(argv)

    def write():
        result = judged_report(args.data) if args.judged else noisy_report(args.data, args.choose_threshold, args.above)
        logger.info("wrote %s", write_report(args.out, "report", result, markdown(result)))

    return exit_code(write, logger)


if __name__ == "__main__":
    sys.exit(main())
