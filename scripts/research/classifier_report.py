#!/usr/bin/env python
"""The label-free pair classifier (``--clean-classifier``) on real web-mined noise judged by people, and what it
removes of clean corpora (issue 76).

    python scripts/research/classifier_report.py --paracrawl ../shared/data/paracrawl-human-eval \
        --tatoeba ../shared/data/tatoeba-deu-eng/deu-eng.zip --multi30k ../shared/data/multi30k \
        --out docs/results/cleaning/classifier

* ParaCrawl de-en's 5,000 judged pairs scored by a classifier trained only on Tatoeba de-en (no judged pair, no
  label), and once by one trained on the judged pairs' own mixture (Multi30K's training pairs and the judged pairs,
  unlabelled): ROC AUC of valid pairs (V) against misaligned and wrong-language ones (A+L) and against all other
  labels, each label's kept share at the classifier's own threshold (chosen on held-out Tatoeba pairs) for each
  ``--keep-shares``, and the valid share kept where at most a quarter of the misaligned pairs is, beside bicleaner's
  score from the same files;
* what it removes of clean corpora, trained on each corpus itself (the default of ``--clean-classifier``):
  Multi30K's and Tatoeba's training pairs; with ``--professional PREFIX`` (``PREFIX.de``, ``PREFIX.en``: long
  professional translations, such as WMT21's news test set) what the classifier trained on Tatoeba removes of them;
* seconds per million pairs: training (dictionary, negatives, model) and scoring, on the two cores.

With ``--cleaning-report DIR`` (a ``cleaning_report.py --set classifier=true`` output folder: the whole ``--clean`` with
the classifier on noisy copies and clean corpora) the worst of its noisy copies and clean corpora fill
``noisy_corrupted_kept``, ``noisy_clean_kept`` and ``clean_corpus_removed``. With ``--refresh-cleaning-report``
only those three fields of an existing summary.json are replaced (nothing is trained).

Writes ``summary.json``, ``report.md`` and ``scores.npz`` (each judged pair's scores and label, so that every AUC can be
recomputed without rerunning the aligner) to ``--out``.
"""

import argparse
import json
import logging
import os
import sys
import time
import zipfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paracrawl_report import LABELS, auc, read_judged_pairs  # noqa: E402

from fairseq_autoassist.corpus.classifier import PairClassifier  # noqa: E402
from fairseq_autoassist.corpus.cleaning import CleaningOptions  # noqa: E402
from fairseq_autoassist.corpus.raw_corpus import read_parallel  # noqa: E402

logger = logging.getLogger("classifier_report")

KEEP_SHARES = (0.9, 0.95, 0.97, 0.99)
MISALIGNED_KEPT_AT_MOST = 0.25
DEFAULT_KEEP = CleaningOptions.classifier_keep


def read_tatoeba(path):
    """Tatoeba's (German, English) sides from manythings.org's ``deu-eng.zip`` (``English<TAB>German`` lines)."""
    lines = zipfile.ZipFile(path).read("deu.txt").decode("utf-8").splitlines()
    rows = [line.split("\t") for line in lines if line.count("\t") >= 1]
    return [row[1] for row in rows], [row[0] for row in rows]


def judged_figures(scores, labels, threshold):
    valid = labels == "V"
    versus_al = np.isin(labels, ["V", "A", "L"])
    misaligned_scores = scores[labels == "A"]
    at_most = np.quantile(misaligned_scores, 1 - MISALIGNED_KEPT_AT_MOST)
    return {"auc_v_vs_al": auc(scores[versus_al], valid[versus_al]), "auc_v_vs_all": auc(scores, valid),
            "kept": {label: float((scores[labels == label] >= threshold).mean()) for label in LABELS
                     if (labels == label).any()}
            if threshold is not None else None,
            "valid_kept_where_misaligned_kept_at_most_0.25": float((scores[valid] >= at_most).mean())}


def train_timed(source, target, keep_share, seed=0):
    started = time.perf_counter()
    model = PairClassifier.train(source, target, keep_share=keep_share, seed=seed)
    return model, time.perf_counter() - started


def report(paracrawl_dir, tatoeba_zip, multi30k_dir, keep_shares=KEEP_SHARES, default_keep=DEFAULT_KEEP,
           timing_pairs=1_000_000, professional=None):
    judged = read_judged_pairs(paracrawl_dir)
    judged_german, judged_english = [row[1] for row in judged], [row[0] for row in judged]
    labels = np.array([row[2] for row in judged])
    bicleaner = np.array([row[3] for row in judged])
    tatoeba_german, tatoeba_english = read_tatoeba(tatoeba_zip)
    multi30k_german, multi30k_english = read_parallel(multi30k_dir, "train", "de", "en")

    model, train_seconds = train_timed(tatoeba_german, tatoeba_english, default_keep)
    started = time.perf_counter()
    tatoeba_scores = model.scores(judged_german, judged_english)
    judged_seconds = time.perf_counter() - started
    thresholds = {share: float(np.quantile(model.held_out_scores, 1 - share)) for share in keep_shares}
    result = {
        "judged_pairs": {label: int((labels == label).sum()) for label in LABELS},
        "bicleaner": judged_figures(bicleaner, labels, None),
        "trained_on_tatoeba": {"pairs": len(tatoeba_german), "held_out": model.held_out,
                               "by_keep_share": {str(share): {"threshold": thresholds[share],
                                                              **judged_figures(tatoeba_scores, labels,
                                                                               thresholds[share])}
                                                 for share in keep_shares}},
    }
    if professional:
        german, english = read_parallel(os.path.dirname(professional) or ".", os.path.basename(professional),
                                        "de", "en")
        professional_scores = model.scores(german, english)
        result["professional_removed_by_tatoeba_classifier"] = {
            "pairs": len(german), "by_keep_share": {str(share): float((professional_scores < thresholds[share]).mean())
                                                    for share in keep_shares}}
    mixture_model, _ = train_timed(multi30k_german + judged_german, multi30k_english + judged_english, default_keep)
    mixture_scores = mixture_model.scores(judged_german, judged_english)
    result["trained_on_the_mixture"] = {"pairs": len(multi30k_german) + len(judged_german),
                                        **judged_figures(mixture_scores, labels, mixture_model.threshold)}

    removed, removed_by_keep_share = {}, {}
    for name, (german, english) in {"multi30k": (multi30k_german, multi30k_english),
                                    "tatoeba": (tatoeba_german, tatoeba_english)}.items():
        own, _ = train_timed(german, english, default_keep)
        own_scores = own.scores(german, english)
        removed[name] = float((own_scores < own.threshold).mean())
        removed_by_keep_share[name] = {
            str(share): float((own_scores < np.quantile(own.held_out_scores, 1 - share)).mean())
            for share in keep_shares}
    result["clean_corpus_removed"] = removed
    result["clean_corpus_removed_by_keep_share"] = removed_by_keep_share

    # Seconds per million: Tatoeba repeated to ``timing_pairs`` pairs, scored; training as timed above (up to
    # 200,000 pairs).
    repeats = -(-timing_pairs // len(tatoeba_german))
    started = time.perf_counter()
    model.scores((tatoeba_german * repeats)[:timing_pairs], (tatoeba_english * repeats)[:timing_pairs])
    scoring_seconds = (time.perf_counter() - started) * 1_000_000 / timing_pairs
    result["seconds"] = {"train": train_seconds, "score_million_tatoeba_pairs": scoring_seconds,
                         "score_judged_pairs": judged_seconds, "judged_pairs": len(judged)}
    headline = result["trained_on_tatoeba"]["by_keep_share"][str(default_keep)]
    result["summary"] = {
        "paracrawl_auc_v_vs_al": headline["auc_v_vs_al"], "paracrawl_auc_v_vs_all": headline["auc_v_vs_all"],
        "paracrawl_valid_kept": headline["kept"]["V"], "paracrawl_misaligned_kept": headline["kept"]["A"],
        "clean_corpus_removed": max(removed.values()), "noisy_corrupted_kept": None, "noisy_clean_kept": None,
        "seconds_per_million": train_seconds + scoring_seconds,
        # Web pairs are longer than Tatoeba's: scoring them costs this many times more a pair.
        "web_pair_cost_over_tatoeba": (judged_seconds / len(judged)) / (scoring_seconds / 1_000_000),
    }
    scores = {"tatoeba_classifier": tatoeba_scores, "mixture_classifier": mixture_scores, "bicleaner": bicleaner,
              "labels": labels}
    return result, scores


def whole_cleaning(folder):
    """The worst figures of a ``cleaning_report.py`` results.json: the most corrupted pairs kept and the fewest clean
    ones of any noisy copy, the most removed of any clean corpus."""
    with open(os.path.join(folder, "results.json")) as f:
        whole = json.load(f)
    noisy, clean = whole["noisy"].values(), whole["clean"].values()
    return {"noisy_corrupted_kept": max(c["corrupted_kept"] for c in noisy),
            "noisy_clean_kept": min(c["clean_kept"] for c in noisy),
            "clean_corpus_removed": max(c["removed_share_total"] for c in clean)}


def markdown(result):
    s = result["summary"]
    lines = [
        "| score (higher: a better pair) | AUC V vs A+L | AUC V vs all others | V kept where at most 25% of A is |",
        "|---|---|---|---|",
        f"| bicleaner (ParaCrawl's pipeline, from the files) | {result['bicleaner']['auc_v_vs_al']:.3f} | "
        f"{result['bicleaner']['auc_v_vs_all']:.3f} | "
        f"{result['bicleaner']['valid_kept_where_misaligned_kept_at_most_0.25']:.3f} |",
    ]
    headline = result["trained_on_tatoeba"]["by_keep_share"][str(DEFAULT_KEEP)]
    for name, figures in (("classifier trained on Tatoeba", headline),
                          ("classifier trained on the mixture (unlabelled)", result["trained_on_the_mixture"])):
        lines.append(f"| {name} | {figures['auc_v_vs_al']:.3f} | {figures['auc_v_vs_all']:.3f} | "
                     f"{figures['valid_kept_where_misaligned_kept_at_most_0.25']:.3f} |")
    lines += ["", "Kept at the Tatoeba classifier's own threshold (the score that keeps a share of held-out Tatoeba "
              "pairs):", "", "| keep share | " + " | ".join(LABELS) + " |", "|---|" + "---|" * len(LABELS)]
    for share, figures in result["trained_on_tatoeba"]["by_keep_share"].items():
        lines.append(f"| {share} | " + " | ".join(f"{figures['kept'].get(label, float('nan')):.3f}" for label in LABELS)
                     + " |")
    lines += ["", "Removed of clean corpora (trained on each itself), by keep share: " + "; ".join(
        f"{name} " + ", ".join(f"{share} {removed:.1%}" for share, removed in by_share.items())
        for name, by_share in result["clean_corpus_removed_by_keep_share"].items()), "",
        *([f"Removed of {result['professional_removed_by_tatoeba_classifier']['pairs']:,} long professional "
           "translations by the classifier trained on Tatoeba, by keep share: " + ", ".join(
               f"{share} {removed:.1%}" for share, removed in
               result["professional_removed_by_tatoeba_classifier"]["by_keep_share"].items()), ""]
          if "professional_removed_by_tatoeba_classifier" in result else []),
        f"Seconds: training {result['seconds']['train']:.0f}, scoring a million Tatoeba pairs "
        f"{result['seconds']['score_million_tatoeba_pairs']:.0f} (web pairs cost {s['web_pair_cost_over_tatoeba']:.1f} "
        "times as much a pair)."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paracrawl", help="the paracrawl-human-eval folder")
    parser.add_argument("--tatoeba", help="manythings.org's deu-eng.zip")
    parser.add_argument("--multi30k", help="Multi30K's raw folder (train.de[.gz], train.en[.gz])")
    parser.add_argument("--out", required=True, help="folder of summary.json, report.md and scores.npz")
    parser.add_argument("--professional", metavar="PREFIX",
                        help="long professional translations, PREFIX.de and PREFIX.en (WMT21's news test set)")
    parser.add_argument("--cleaning-report", metavar="DIR",
                        help="a cleaning_report.py --set classifier=true folder: the whole --clean's figures")
    parser.add_argument("--refresh-cleaning-report", action="store_true",
                        help="only replace the whole --clean's figures of --out's summary.json by --cleaning-report's "
                             "(after the rule filters changed; the classifier's own figures do not depend on them)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    if args.refresh_cleaning_report:
        if not args.cleaning_report:
            parser.error("--refresh-cleaning-report needs --cleaning-report DIR")
        path = os.path.join(args.out, "summary.json")
        with open(path) as f:
            summary = json.load(f)
        summary.update(whole_cleaning(args.cleaning_report))
        summary["cleaning_report_command"] = "python scripts/research/classifier_report.py " + " ".join(
            argv or sys.argv[1:])
        with open(path, "w") as f:
            json.dump(summary, f, indent=1)
        return
    missing = [f"--{name}" for name in ("paracrawl", "tatoeba", "multi30k") if getattr(args, name) is None]
    if missing:
        parser.error(f"the report needs {', '.join(missing)}")
    result, scores = report(args.paracrawl, args.tatoeba, args.multi30k, professional=args.professional)
    if args.cleaning_report:
        result["summary"].update(whole_cleaning(args.cleaning_report))
        result["classifier_alone_clean_corpus_removed"] = result.pop("clean_corpus_removed")
    result["command"] = "python scripts/research/classifier_report.py " + " ".join(argv or sys.argv[1:])
    text = markdown(result)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({**result.pop("summary"), **result}, f, indent=1)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    np.savez_compressed(os.path.join(args.out, "scores.npz"), **scores)
    logger.info("%s", text)


if __name__ == "__main__":
    main()
