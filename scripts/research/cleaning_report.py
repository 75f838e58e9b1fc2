#!/usr/bin/env python3
"""What ``autoassist-prepare --clean`` (fairseq_autoassist/corpus/cleaning.py) removes, measured without training:

* on noisy copies of ``make_noisy_corpus.py`` (their ``noise.tsv`` says which pairs are corrupted, and how): the
  share of corrupted pairs kept, by kind, and of clean ones; each score's AUC of clean against each kind; on the
  first copy (the development copy) the alignment threshold's sweep, from which its default was chosen;
* on clean corpora: the share of the pairs that are not exact duplicates each filter removes, with a sample;
* on ParaCrawl's pairs judged by people mixed into a base corpus: each score's AUC of valid (V) against misaligned
  and wrong-language pairs (A+L) and against every other judgement, beside bicleaner's (from the judged files);
* on pairs of another domain mixed into a corpus (``--mixed-in``: long, loosely worded professional translations in an
  everyday corpus): the share of them removed, and by which filter;
* the seconds of each filter per million pairs, and those of a whole corpus's first ``--timing-pairs`` pairs.

    python scripts/research/cleaning_report.py --out docs/results/cleaning/filters \
        --noisy data/multi30k-noisy30 --noisy data/multi30k-noisy30-seed2 --noisy data/multi30k-noisy30-mixB \
        --clean-corpus multi30k=../shared/data/multi30k \
        --clean-corpus tatoeba=../shared/data/tatoeba-deu-eng/deu-eng.zip \
        --clean-corpus tatoeba-accentless-speakers=../shared/data/tatoeba-deu-eng/deu-eng.zip \
        --paracrawl ../shared/data/paracrawl-human-eval --paracrawl-base ../shared/data/tatoeba-deu-eng/deu-eng.zip \
        --mixed-in news-in-tatoeba=../shared/data/tatoeba-deu-eng/deu-eng.zip+\
../shared/data/wmt21-newstest-deen/newstest2021.de-en

Writes ``results.json``, ``summary.json`` (the worse copy and the worst clean corpus) and ``results.md``. Each
corpus is measured once and kept in ``results.json``: a rerun measures only what is missing there.
"""

import argparse
import collections
import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
import unicodedata

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from fairseq_autoassist.corpus.cleaning import FILTERS, CleaningOptions, pair_badness  # noqa: E402
from fairseq_autoassist.corpus.prepare_corpus import (SENTENCEPIECE_SAMPLE, clean_pairs, default_coverage,  # noqa: E402
                                                      read_input)
from fairseq_autoassist.corpus.raw_corpus import read_parallel  # noqa: E402
from fairseq_autoassist.data.noise_list import read_noise  # noqa: E402
from scripts.research.paracrawl_report import auc, read_judged_pairs  # noqa: E402

logger = logging.getLogger("cleaning_report")

# Scored but removing nothing: the language model filter is off by default, yet its AUC is part of the report.
SCORE_ONLY = 1e9
SCORES = ("length_ratio", "similarity", "language", "alignment", "lm")
KINDS = ("misaligned", "truncated", "duplicate", "untranslated", "wrong_language")
ALIGNMENT_SWEEP = (0.05, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3)
SAMPLE = 8
SPEAKERS = ("Anna", "Herr Müller", "Tom", "Dr. Weiß", "Mary")


def read_corpus(path, src, tgt):
    """The training pairs of ``path``: a folder (``train.SRC[.gz]``), or a Tatoeba zip (English first)."""
    columns = (2, 1) if path.endswith(".zip") else None
    return read_input([path], src, tgt, columns)["train"]


def accentless_with_speakers(source, target, share=0.3, seed=1):
    """A clean corpus written as many real ones are: without diacritics on either side (``ä`` -> ``a``), and
    ``share`` of the pairs opened on both sides by the same speaker's name, ``Anna: ...``."""
    rng = np.random.default_rng(seed)

    def plain(text):
        return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))

    labelled = rng.random(len(source)) < share
    names = rng.choice(len(SPEAKERS), len(source))
    out = ([], [])
    for src, tgt, label, name in zip(source, target, labelled, names):
        prefix = f"{SPEAKERS[name]}: " if label else ""
        out[0].append(plain(prefix + src))
        out[1].append(plain(prefix + tgt))
    return out


def run_cleaning(source, target, src, tgt, options, vocab_size=8000, score_lm=True):
    """``clean`` as ``autoassist-prepare`` runs it (``clean_pairs``), with ``score_lm`` the language model filter
    scored too: ``(kept mask, removed, PairScores, seconds per filter)``."""
    scored = dataclasses.replace(options, lm_above=options.lm_above or (SCORE_ONLY if score_lm else 0))
    with tempfile.TemporaryDirectory() as workdir:
        kept, removed, scores, seconds = clean_pairs(source, target, src, tgt, scored, workdir, vocab_size,
                                                     default_coverage(src, tgt), SENTENCEPIECE_SAMPLE)
    mask = np.zeros(len(source), dtype=bool)
    mask[kept] = True
    return mask, removed, scores, seconds


def per_million(seconds, pairs):
    return {name: round(value * 1e6 / pairs, 1) for name, value in seconds.items()}


def lost_clean(labels, removed):
    """Clean pairs lost: removed by any filter but the duplicate one (an original whose listed copy stays is not
    lost: the same pair is still there)."""
    return sum(int(np.sum(labels[at] == "clean")) for name, at in removed.items() if name != "duplicate")


def noisy_copy(path, src, tgt, options):
    source, target = read_corpus(path, src, tgt)
    noise = read_noise(os.path.join(path, "noise.tsv"))
    labels = np.array([noise.get(i, "clean") for i in range(len(source))])
    kept, removed, scores, seconds = run_cleaning(source, target, src, tgt, options)
    clean = labels == "clean"
    kinds = corruption_kinds(labels)
    corrupted_kept = corrupted_kept_by_kind(labels, kept, options.duplicates)
    result = {
        "pairs": len(source), "corrupted": int(np.sum(~clean)), "clean": int(np.sum(clean)),
        "corrupted_kept": sum(corrupted_kept.values()) / max(int(np.sum(~clean)), 1),
        "clean_kept": 1 - lost_clean(labels, removed) / max(int(np.sum(clean)), 1),
        "corrupted_kept_by_kind": corrupted_kept,
        "removed": {name: dict(collections.Counter(labels[at].tolist())) for name, at in removed.items() if at},
        "auc_clean_above_kind": {name: {kind: score_auc(getattr(scores, name), clean, labels == kind)
                                        for kind in kinds} for name in SCORES},
        "seconds_per_million": per_million(seconds, len(source)),
    }
    result["alignment_sweep"] = alignment_sweep(scores.alignment, labels, removed)
    return result


def corruption_kinds(labels):
    """Every kind of corruption ``noise.tsv`` names, whatever its name: this generator's ``KINDS`` first, then any
    other (a copy made elsewhere), so that no corrupted pair counts as removed for want of a known name."""
    present = set(labels.tolist()) - {"clean"}
    return [kind for kind in KINDS if kind in present] + sorted(present - set(KINDS))


def corrupted_kept_by_kind(labels, kept, duplicates_removed):
    """Per kind of corruption, whatever its name, the pairs the cleaner kept (``kept``: a mask). A listed duplicate
    that the duplicate filter let stay kept its twin out, so it is no longer a duplicate."""
    by_kind = {kind: int(np.sum(kept & (labels == kind))) for kind in corruption_kinds(labels)}
    if "duplicate" in by_kind and duplicates_removed:
        by_kind["duplicate"] = 0
    return by_kind


def score_auc(values, good, bad):
    """AUC of the ``good`` pairs scoring below the ``bad`` ones, over the pairs the filter scored (None where one
    group has none)."""
    seen = ~np.isnan(values) & (good | bad)
    if not np.any(seen & good) or not np.any(seen & bad):
        return None
    return round(auc(-values[seen], good[seen]), 4)


def alignment_sweep(alignment, labels, removed):
    """Per alignment threshold: corrupted and clean pairs kept, the other filters as they ran."""
    seen = ~np.isnan(alignment)
    other_lost = lost_clean(labels, {k: v for k, v in removed.items() if k != "alignment"})
    rows = []
    for threshold in ALIGNMENT_SWEEP:
        keeps = seen & (alignment < threshold)
        corrupted = int(np.sum(keeps & (labels != "clean") & (labels != "duplicate")))
        clean_lost = other_lost + int(np.sum(seen & ~keeps & (labels == "clean")))
        rows.append({"alignment_like_random": threshold, "corrupted_kept": corrupted / int(np.sum(labels != "clean")),
                     "clean_kept": 1 - clean_lost / int(np.sum(labels == "clean"))})
    return rows


def clean_corpus(source, target, src, tgt, options):
    kept, removed, _, seconds = run_cleaning(source, target, src, tgt, options)
    unique = len(source) - len(removed["duplicate"])
    rng = np.random.default_rng(0)
    samples = {name: [(source[i], target[i]) for i in sorted(rng.choice(at, min(SAMPLE, len(at)), replace=False))]
               for name, at in removed.items() if at and name != "duplicate"}
    return {"pairs": len(source), "exact_duplicates": len(removed["duplicate"]),
            "removed_share": {name: len(at) / unique for name, at in removed.items() if at and name != "duplicate"},
            "removed_share_total": (int(np.sum(~kept)) - len(removed["duplicate"])) / unique,
            "samples": samples, "seconds_per_million": per_million(seconds, len(source))}


def mixed_in(base, added, src, tgt, options):
    """``added`` (a ``PREFIX``: PREFIX.SRC, PREFIX.TGT, plain or gzipped) mixed into ``base`` (a folder or Tatoeba
    zip), cleaned together: the share of the added pairs removed and by which filter, beside the base's own share (both
    of the pairs that are not exact duplicates)."""
    base_source, base_target = read_corpus(base, src, tgt)
    added_source, added_target = read_parallel(os.path.dirname(added) or ".", os.path.basename(added), src, tgt)
    source, target = list(base_source) + added_source, list(base_target) + added_target
    kept, removed, _, seconds = run_cleaning(source, target, src, tgt, options, score_lm=False)
    is_added = np.arange(len(source)) >= len(base_source)
    unique = np.ones(len(source), dtype=bool)
    unique[removed["duplicate"]] = False
    return {"base_pairs": len(base_source), "added_pairs": len(added_source),
            "added_removed_share": float(np.mean(~kept[is_added & unique])),
            "added_removed_by": {name: int(np.sum(is_added[at])) for name, at in removed.items()
                                 if name != "duplicate" and np.any(is_added[at])},
            "base_removed_share": float(np.mean(~kept[~is_added & unique])),
            "seconds_per_million": per_million(seconds, len(source))}


def paracrawl(folder, base, src, tgt, options):
    """The judged pairs' figures and, per judged pair, its label and every score behind them (``columns``, lower
    is better; written to ``paracrawl-scores.npz`` so that each AUC can be recomputed without the aligner)."""
    rows = read_judged_pairs(folder)
    base_source, base_target = read_corpus(base, src, tgt) if base else ([], [])
    source = list(base_source) + [german for _, german, _, _ in rows]
    target = list(base_target) + [english for english, _, _, _ in rows]
    kept, removed, scores, seconds = run_cleaning(source, target, src, tgt, options)
    judged = slice(len(base_source), None)
    labels = np.array([label for _, _, label, _ in rows])
    valid, bad = labels == "V", np.isin(labels, ["A", "L"])
    badness = pair_badness(scores, options)[judged]
    columns = {"bicleaner": -np.array([score for _, _, _, score in rows]), "badness (the filters together)": badness}
    columns.update({name: np.nan_to_num(getattr(scores, name)[judged], nan=0.0) for name in SCORES})
    table = {name: {"v_vs_al": round(auc(-values[valid | bad], valid[valid | bad]), 4),
                    "v_vs_all": round(auc(-values, valid), 4)} for name, values in columns.items()}
    return {"pairs": len(rows), "base_pairs": len(base_source), "auc": table,
            "kept_by_label": {label: round(float(np.mean(kept[judged][labels == label])), 4)
                              for label in sorted(set(labels))},
            "seconds_per_million": per_million(seconds, len(source))}, {"labels": labels, **columns}


def timing(path, src, tgt, pairs, options):
    source, target = read_corpus(path, src, tgt)
    source, target = source[:pairs], target[:pairs]
    started = time.perf_counter()
    kept, _, _, seconds = run_cleaning(source, target, src, tgt, options, score_lm=False)
    return {"pairs": len(source), "seconds": round(time.perf_counter() - started, 1),
            "filter_seconds": {k: round(v, 1) for k, v in seconds.items()}, "kept": int(np.sum(kept))}


def summary(result):
    copies = list(result.get("noisy", {}).values())[1:]  # the development copy chose the thresholds
    return {
        "paracrawl_auc_v_vs_al": result.get("paracrawl", {}).get("auc", {}).get(
            "badness (the filters together)", {}).get("v_vs_al"),
        "paracrawl_auc_v_vs_all": result.get("paracrawl", {}).get("auc", {}).get(
            "badness (the filters together)", {}).get("v_vs_all"),
        "noisy_corrupted_kept": max((c["corrupted_kept"] for c in copies), default=None),
        "noisy_clean_kept": min((c["clean_kept"] for c in copies), default=None),
        "clean_corpus_removed": max((c["removed_share_total"] for c in result.get("clean", {}).values()),
                                    default=None),
        "stock_bleu_gain_over_clean": result.get("stock_bleu_gain_over_clean"),
    }


def markdown(result):
    lines = ["# What `--clean` removes (scripts/research/cleaning_report.py)", "",
             f"Options: `{result['options']}`", ""]
    if result.get("noisy"):
        seen = {kind for c in result["noisy"].values() for kind in c["corrupted_kept_by_kind"]}
        kinds = [kind for kind in KINDS if kind in seen] + sorted(seen - set(KINDS))
        lines += ["## Noisy copies (the first is the development copy)", "",
                  "| copy | corrupted kept | clean kept | " + " | ".join(f"{k} kept" for k in kinds) + " |",
                  "|---|---|---|" + "---|" * len(kinds)]
        for name, c in result["noisy"].items():
            lines.append(f"| {name} | {c['corrupted_kept']:.3f} | {c['clean_kept']:.3f} | " +
                         " | ".join(str(c["corrupted_kept_by_kind"].get(k, "-")) for k in kinds) + " |")
        lines += ["", "AUC of clean pairs scoring better than each kind (over the pairs the filter saw):", "",
                  "| copy | score | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
        for name, c in result["noisy"].items():
            for score, row in c["auc_clean_above_kind"].items():
                lines.append(f"| {name} | {score} | " + " | ".join("-" if row.get(k) is None else f"{row[k]:.3f}"
                                                                    for k in kinds) + " |")
        first = next(iter(result["noisy"].values()))
        lines += ["", "The alignment threshold on the development copy:", "",
                  "| alignment_like_random | corrupted kept | clean kept |", "|---|---|---|"]
        lines += [f"| {r['alignment_like_random']} | {r['corrupted_kept']:.3f} | {r['clean_kept']:.3f} |"
                  for r in first["alignment_sweep"]]
    if result.get("clean"):
        lines += ["", "## Clean corpora: share of the pairs that are not exact duplicates removed", "",
                  "| corpus | pairs | total | by filter |", "|---|---|---|---|"]
        for name, c in result["clean"].items():
            shares = ", ".join(f"{k} {v:.4f}" for k, v in c["removed_share"].items())
            lines.append(f"| {name} | {c['pairs']:,} | {c['removed_share_total']:.4f} | {shares} |")
        for name, c in result["clean"].items():
            for rule, pairs in c["samples"].items():
                lines += ["", f"Removed from {name} by `{rule}` (a sample):", ""]
                lines += [f"- {src} ||| {tgt}" for src, tgt in pairs]
    if result.get("mixed_in"):
        lines += ["", "## Pairs of another domain mixed into a corpus: share removed (of the pairs that are not exact "
                  "duplicates)", "", "| name | pairs added / base | added removed | by filter | base removed |",
                  "|---|---|---|---|---|"]
        for name, m in result["mixed_in"].items():
            by = ", ".join(f"{k} {v}" for k, v in m["added_removed_by"].items())
            lines.append(f"| {name} | {m['added_pairs']:,} / {m['base_pairs']:,} | {m['added_removed_share']:.4f} | "
                         f"{by} | {m['base_removed_share']:.4f} |")
    if result.get("paracrawl"):
        p = result["paracrawl"]
        lines += ["", f"## ParaCrawl's {p['pairs']:,} judged pairs mixed into {p['base_pairs']:,} base pairs", "",
                  "| score | AUC V vs A+L | AUC V vs all others |", "|---|---|---|"]
        lines += [f"| {name} | {row['v_vs_al']:.3f} | {row['v_vs_all']:.3f} |" for name, row in p["auc"].items()]
        lines += ["", "Kept by label: " + ", ".join(f"{k} {v:.2f}" for k, v in p["kept_by_label"].items())]
    timed = [name for name in FILTERS if name != "length"]
    lines += ["", "## Seconds per million pairs, by filter", "", "| corpus | " + " | ".join(timed) + " |",
              "|---|" + "---|" * len(timed)]
    for group in ("noisy", "clean"):
        for name, c in result.get(group, {}).items():
            s = c["seconds_per_million"]
            lines.append(f"| {name} | " + " | ".join(str(s.get(k, "-")) for k in timed) + " |")
    if result.get("timing"):
        t = result["timing"]
        lines += ["", f"A whole run on {t['pairs']:,} pairs of {t['corpus']} (default filters): {t['seconds']} s "
                      f"({t['filter_seconds']}), {t['kept']:,} kept."]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--src", default="de")
    parser.add_argument("--tgt", default="en")
    parser.add_argument("--noisy", action="append", default=[], help="a noisy copy's folder (first: development)")
    parser.add_argument("--clean-corpus", action="append", default=[], metavar="NAME=PATH",
                        help="a clean corpus (folder or Tatoeba zip); NAME ending in -accentless-speakers is "
                             "rewritten without diacritics and with speaker labels first")
    parser.add_argument("--mixed-in", action="append", default=[], metavar="NAME=BASE+PREFIX",
                        help="pairs of PREFIX.SRC/PREFIX.TGT (e.g. a news test set: long professional translations) "
                             "mixed into the corpus BASE (folder or Tatoeba zip): the share of them removed")
    parser.add_argument("--paracrawl", help="the paracrawl-human-eval folder")
    parser.add_argument("--paracrawl-base", help="the corpus the judged pairs are mixed into")
    parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                        help="a CleaningOptions field other than its default, e.g. max_length_ratio=3")
    parser.add_argument("--timing", metavar="PATH", help="time the default filters on this corpus's first pairs")
    parser.add_argument("--timing-langs", default="zh,en")
    parser.add_argument("--timing-pairs", type=int, default=1_000_000)
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    args = parse_args(argv)
    fields = {f.name: f.type for f in dataclasses.fields(CleaningOptions)}
    changed = {name: value.lower() in ("1", "true", "yes") if fields[name] is bool else fields[name](value)
               for name, value in (item.split("=", 1) for item in args.set)}
    options = CleaningOptions(**changed)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    result = json.load(open(path)) if os.path.isfile(path) else {}
    result["options"] = dataclasses.asdict(options)

    def save():
        with open(path, "w") as f:
            json.dump(result, f, indent=1, ensure_ascii=False)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary(result), f, indent=1)
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write(markdown(result))

    for folder in args.noisy:
        name = os.path.basename(os.path.normpath(folder))
        if name not in result.setdefault("noisy", {}):
            logger.info("noisy copy %s", name)
            result["noisy"][name] = noisy_copy(folder, args.src, args.tgt, options)
            save()
    for spec in args.clean_corpus:
        name, corpus = spec.split("=", 1)
        if name not in result.setdefault("clean", {}):
            logger.info("clean corpus %s", name)
            source, target = read_corpus(corpus, args.src, args.tgt)
            if name.endswith("-accentless-speakers"):
                source, target = accentless_with_speakers(source, target)
            result["clean"][name] = clean_corpus(source, target, args.src, args.tgt, options)
            save()
    for spec in args.mixed_in:
        name, corpora = spec.split("=", 1)
        base, added = corpora.split("+", 1)
        if name not in result.setdefault("mixed_in", {}):
            logger.info("%s mixed into %s", added, base)
            result["mixed_in"][name] = mixed_in(base, added, args.src, args.tgt, options)
            save()
    if args.paracrawl and "paracrawl" not in result:
        logger.info("ParaCrawl")
        result["paracrawl"], columns = paracrawl(args.paracrawl, args.paracrawl_base, args.src, args.tgt, options)
        np.savez_compressed(os.path.join(args.out, "paracrawl-scores.npz"), **columns)
        save()
    if args.timing and "timing" not in result:
        src, tgt = args.timing_langs.split(",")
        logger.info("timing on %s", args.timing)
        result["timing"] = {"corpus": os.path.basename(os.path.normpath(args.timing)),
                            **timing(args.timing, src, tgt, args.timing_pairs, options)}
        save()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
