#!/usr/bin/env python
"""How well static cleaning and the pair features separate real web-mined noise, judged by people.

    python scripts/research/paracrawl_report.py --paracrawl ../shared/data/paracrawl-human-eval \
        --corpus ../shared/data/multi30k --out docs/results/paracrawl

Mixes the 5,000 ParaCrawl English-German pairs (each judged V valid, A misaligned, MT machine translation,
E translation error, F free translation, L wrong language, T tokenization) into a German-English training corpus
(Multi30K's training pairs), encodes the mixture with one joint sentencepiece model, and reports for each label:
the ROC AUC with which each pair feature (``fairseq_autoassist.assistant.bilingual``: higher should mean a better
pair) ranks V above A+L and above every other label, beside the AUC of the bicleaner score ParaCrawl's own
pipeline gave each pair. Features are computed as at training start, from the whole mixture. Then what the features
can tell when labels are given, which the Assistant's loss-based label is not: a gradient-boosted classifier over
them (and both sides' lengths) trained on N judged pairs drawn at random, its AUC on the other judged pairs, for
each N of ``--classifier-sizes`` (five draws each). With ``--synthetic-negatives``, bicleaner's label-free recipe
over the same columns: a classifier trained to tell the mixture's pairs from corrupted copies of them (the noise
kinds of ``make_noisy_corpus.py`` but duplicates), scored on the judged pairs it did not train on. Writes
``report.md``, ``report.json`` and ``scores.npz`` (each judged pair's label and scores) to ``--out``.

With ``--mixed-corpus DIR`` it also writes the mixture as a raw corpus for training (the corpus' other splits
copied; ``noise.tsv`` lists every ParaCrawl pair with the kind ``paracrawl-LABEL``, V included, so that the
benchmark's and the replay's kept shares come out per label):

    python scripts/research/paracrawl_report.py --paracrawl ../shared/data/paracrawl-human-eval \
        --corpus ../shared/data/multi30k --out docs/results/paracrawl --mixed-corpus data/multi30k-paracrawl
    python scripts/prepare_multi30k.py --raw-dir data/multi30k-paracrawl --dest data-bin/multi30k-paracrawl.de-en
"""

import argparse
import gzip
import logging
import os
import sys
import tempfile

import numpy as np

from fairseq_autoassist.assistant import bilingual
from fairseq_autoassist.corpus.cleaning import LanguageIdentifier, check_declared_languages
from fairseq_autoassist.corpus.preparation import train_sentencepiece
from fairseq_autoassist.corpus.raw_corpus import KINDS, PreparationError, corrupt, exit_code, read_parallel, write_noisy_copy
from fairseq_autoassist.recipes import write_report

logger = logging.getLogger("paracrawl_report")

LABELS = ("V", "A", "MT", "E", "F", "L", "T")
# Column of the bicleaner score and of the judgement, by the number of columns of a release's rows (FORMAT.md).
LAYOUTS = {9: (6, 7), 8: (4, 5)}
# fairseq's dictionaries put their four special symbols (<s>, <pad>, </s>, <unk>) before the pieces.
SPECIAL_SYMBOLS = 4
END_OF_SENTENCE = 2
CLASSIFIER_SIZES = (250, 500, 1000, 2000, 2500)
CLASSIFIER_DRAWS = 5
# The synthetic negatives: half the mixture's pairs corrupted, by every kind but exact duplicates (which are real
# pairs, so no negatives).
SYNTHETIC_SHARE = 0.5
SYNTHETIC_KINDS = {kind: share for kind, share in KINDS.items() if kind != "duplicate"}
SYNTHETIC_FOLDS = 2
FEATURE_SIGN = {"length_ratio": None, "copied_share": -1, "source_language": 1, "target_language": 1,
                "lexical_translation": 1, "duplicates": -1}


def read_judged_pairs(folder):
    """``[(english, german, label, bicleaner score)]`` of every judged file in ``folder``."""
    rows = []
    names = sorted(name for name in os.listdir(folder) if name.endswith(".tsv.gz"))
    if not names:
        raise PreparationError(f"{folder} has no *.tsv.gz files; pass the paracrawl-human-eval folder with --paracrawl")
    for name in names:
        with gzip.open(os.path.join(folder, name), "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                columns = line.rstrip("\n").split("\t")
                layout = LAYOUTS.get(len(columns))
                if layout is None:
                    raise PreparationError(f"{name}: line {number} has {len(columns)} columns; see FORMAT.md")
                score, label = columns[layout[0]], columns[layout[1]].strip()
                if label not in LABELS:
                    raise PreparationError(f"{name}: line {number} has the judgement {label!r}, not one of "
                                           f"{', '.join(LABELS)}")
                rows.append((columns[2].strip(), columns[3].strip(), label, float(score)))
    return rows


def pair_features(encode, vocab_size, source, target):
    """The ``PairFeatures`` of the pairs ``source``/``target`` (lists of text) as fairseq would binarize them:
    ``encode(texts) -> [piece ids]`` of a piece model of ``vocab_size`` pieces, ids placed after fairseq's special
    symbols, ``</s>`` last."""
    from fairseq_autoassist.assistant import CorpusSide, PairFeatures

    def side(lines):
        rows = [np.r_[np.asarray(ids, dtype=np.int64) + SPECIAL_SYMBOLS, END_OF_SENTENCE] for ids in encode(lines)]
        return CorpusSide(np.concatenate(rows), np.r_[0, np.cumsum([len(row) for row in rows])])

    return PairFeatures(side(source), side(target), vocab_size=vocab_size + SPECIAL_SYMBOLS)


def auc(scores, positive):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(positive, scores))


def pair_classifier(seed):
    """The gradient-boosted classifier every table of this report trains over the pair features and lengths."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, random_state=seed)


def classifier_learning_curve(features, positive, sizes, draws=CLASSIFIER_DRAWS, seed=0):
    """``{N: [AUC of each draw]}``: a gradient-boosted classifier over the rows of ``features`` trained on N of them
    drawn at random, scored on the rest against ``positive``; a size that leaves under a quarter of the rows to score
    is skipped."""
    rng = np.random.default_rng(seed)
    curve = {}
    for size in (size for size in sizes if size <= 0.75 * len(positive)):
        aucs = []
        for _ in range(draws):
            train = np.zeros(len(positive), bool)
            train[rng.choice(len(positive), size, replace=False)] = True
            model = pair_classifier(seed).fit(features[train], positive[train])
            aucs.append(auc(model.predict_proba(features[~train])[:, 1], positive[~train]))
        curve[size] = aucs
    return curve


def synthetic_negative_scores(features, negative_of, held_out, folds=SYNTHETIC_FOLDS, seed=0):
    """Label-free scores (the probability of being a real pair) of the real rows ``held_out`` of ``features``.

    ``features`` holds the real pairs' rows first, then one row per synthetic negative, whose real pair of origin
    is ``negative_of``. ``held_out`` is split into ``folds`` at random; each fold is scored by a gradient-boosted
    classifier trained on every other real row (label 1) and the negatives made from them (label 0), so no pair is
    scored by a model that saw it or its corruption."""
    num_real = len(features) - len(negative_of)
    real = np.concatenate([np.ones(num_real), np.zeros(len(negative_of))])
    fold_of = np.random.default_rng(seed).integers(0, folds, len(held_out))
    scores = np.zeros(len(held_out))
    for fold in range(folds):
        scored = held_out[fold_of == fold]
        excluded = np.zeros(num_real, bool)
        excluded[scored] = True
        train = np.concatenate([~excluded, ~excluded[negative_of]])
        model = pair_classifier(seed).fit(features[train], real[train])
        scores[fold_of == fold] = model.predict_proba(features[scored])[:, 1]
    return scores


# The judged files' two text columns (FORMAT.md): English, then German.
JUDGED_SIDES = ("en", "de")


def report(paracrawl_dir, corpus_dir, vocab_size=8000, mixed_corpus=None, classifier_sizes=CLASSIFIER_SIZES,
           synthetic_negatives=False, src="de", tgt="en", scores_path=None):
    """The report on the judged pairs mixed into ``corpus_dir``'s training pairs ``train.SRC``/``train.TGT``; stops
    with one line where the languages are not the judged files' or a side's text contradicts its declared one.
    ``scores_path``, where given, receives each judged pair's label and every score behind the AUCs (a compressed
    ``.npz``; higher is better), so that each can be recomputed without the features."""
    if sorted((src, tgt)) != sorted(JUDGED_SIDES):
        raise PreparationError(f"the judged ParaCrawl pairs are English-German: --src and --tgt must be de and en "
                               f"(either way round), not {src} and {tgt}")
    judged = read_judged_pairs(paracrawl_dir)
    base_source, base_target = read_parallel(corpus_dir, "train", src, tgt)
    source = base_source + [row[JUDGED_SIDES.index(src)] for row in judged]
    target = base_target + [row[JUDGED_SIDES.index(tgt)] for row in judged]
    languages = check_declared_languages(source, target, src, tgt, LanguageIdentifier())
    mixed = np.arange(len(base_source), len(source))
    labels = np.array([row[2] for row in judged])
    if mixed_corpus:
        write_noisy_copy(corpus_dir, mixed_corpus, src, tgt, source, target,
                         {int(line): f"paracrawl-{label}" for line, label in zip(mixed, labels)})
        logger.info("wrote the mixture to %s (%d pairs, %d from ParaCrawl)", mixed_corpus, len(source), len(mixed))
    with tempfile.TemporaryDirectory() as work:
        model = train_sentencepiece(source + target, os.path.join(work, "spm"), vocab_size)
        features = pair_features(model.encode, model.get_piece_size(), source, target)
        if synthetic_negatives:
            corrupted_source, corrupted_target, noise = corrupt(source, target, SYNTHETIC_SHARE, seed=0,
                                                                proportions=SYNTHETIC_KINDS)
            negative_of = np.array(sorted(noise))
            # The negatives join the corpus, so its statistics (IDF, co-occurrences, duplicates) include them.
            with_negatives = pair_features(model.encode, model.get_piece_size(),
                                           source + [corrupted_source[line] for line in negative_of],
                                           target + [corrupted_target[line] for line in negative_of])
    columns = features.bilingual()[mixed].astype(np.float64)
    valid = labels == "V"
    comparisons = {"V vs A+L": np.isin(labels, ["V", "A", "L"]), "V vs all others": np.ones(len(labels), bool)}
    scores = {"bicleaner (ParaCrawl's pipeline)": np.array([row[3] for row in judged])}
    for index, name in enumerate(bilingual.NAMES):
        if FEATURE_SIGN[name]:
            scores[f"pair feature: {name}"] = FEATURE_SIGN[name] * columns[:, index]
    result = {
        "pairs": {label: int((labels == label).sum()) for label in LABELS},
        "auc": {name: {comparison: auc(values[subset], valid[subset]) for comparison, subset in comparisons.items()}
                for name, values in scores.items()},
        "classifier_learning_curve": {
            comparison: classifier_learning_curve(np.column_stack([columns, features.length_features(mixed)])[subset],
                                                  valid[subset], classifier_sizes)
            for comparison, subset in comparisons.items()},
        "corpus": os.path.abspath(corpus_dir),
        "corpus_pairs": len(base_source),
        "languages": {side: {"declared": declared, "detected": detected, "detected_share": share}
                      for side, (declared, detected, share) in languages.items()},
    }
    if synthetic_negatives:
        every_row = np.column_stack([with_negatives.bilingual().astype(np.float64),
                                     with_negatives.length_features(np.arange(len(source) + len(negative_of)))])
        label_free = synthetic_negative_scores(every_row, negative_of, mixed)
        result["synthetic_negative_classifier"] = {
            "auc": {comparison: auc(label_free[subset], valid[subset]) for comparison, subset in comparisons.items()},
            "mean_score": {label: float(label_free[labels == label].mean()) for label in LABELS},
            "negatives": {kind: sum(1 for k in noise.values() if k == kind) for kind in SYNTHETIC_KINDS}}
        scores["trained on synthetic negatives"] = label_free
    if scores_path:
        np.savez_compressed(scores_path, labels=labels, **scores)
    return result


def markdown(result):
    lines = ["Languages (declared; heliport's most common identification on a sample of the mixture): " + "; ".join(
        f"{side} {found['declared']} (read as {found['detected']} in {found['detected_share']:.0%})"
        for side, found in result["languages"].items()) + ".", "",
        "| label | pairs |", "|---|---|"]
    lines += [f"| {label} | {result['pairs'][label]:,} |" for label in LABELS]
    lines += ["", "What the cleaning filters keep of each label: scripts/research/cleaning_report.py."]
    lines += ["", "| score (higher: a better pair) | AUC V vs A+L | AUC V vs all others |", "|---|---|---|"]
    lines += [f"| {name} | {aucs['V vs A+L']:.3f} | {aucs['V vs all others']:.3f} |"
              for name, aucs in result["auc"].items()]
    label_free = result.get("synthetic_negative_classifier")
    if label_free:
        lines.append(f"| a classifier over the pair features and lengths trained on synthetic negatives (no label) | "
                     f"{label_free['auc']['V vs A+L']:.3f} | {label_free['auc']['V vs all others']:.3f} |")
        lines += ["", "Its mean score (the probability of a real pair) per label: "
                  + ", ".join(f"{label} {score:.3f}" for label, score in label_free["mean_score"].items()) + "."]
    curves = result["classifier_learning_curve"]
    lines += ["", "| a classifier over the pair features and lengths, trained on N judged pairs "
              "| AUC V vs A+L on the rest (mean, min-max of the draws) | AUC V vs all others |", "|---|---|---|"]
    for size in sorted({size for curve in curves.values() for size in curve}):
        cells = [f"{np.mean(curve[size]):.3f} ({min(curve[size]):.3f}-{max(curve[size]):.3f})"
                 if size in curve else "-" for curve in curves.values()]
        lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paracrawl", required=True, help="the folder of the judged ParaCrawl files (*.tsv.gz)")
    parser.add_argument("--corpus", required=True,
                        help="raw German-English training corpus (train.SRC and train.TGT, plain or gzipped)")
    parser.add_argument("--src", default="de", help="the corpus' source language, de or en (default de)")
    parser.add_argument("--tgt", default="en", help="the corpus' target language, en or de (default en)")
    parser.add_argument("--out", required=True, help="folder for report.md, report.json and scores.npz")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--classifier-sizes", type=int, nargs="*", default=list(CLASSIFIER_SIZES),
                        help="judged pairs to train the classifier on, one learning-curve point each (none: skip)")
    parser.add_argument("--synthetic-negatives", action="store_true",
                        help="also score the judged pairs with a classifier trained, without labels, to tell the "
                             "mixture's pairs from corrupted copies of them")
    parser.add_argument("--mixed-corpus", metavar="DIR",
                        help="also write the mixture as a raw corpus to train on, with noise.tsv of the labels")
    args = parser.parse_args(argv)

    def write():
        os.makedirs(args.out, exist_ok=True)
        result = report(args.paracrawl, args.corpus, args.vocab_size, args.mixed_corpus, args.classifier_sizes,
                        args.synthetic_negatives, args.src, args.tgt, os.path.join(args.out, "scores.npz"))
        logger.info("wrote %s", write_report(args.out, "report", result, markdown(result)))

    return exit_code(write, logger)


if __name__ == "__main__":
    sys.exit(main())
