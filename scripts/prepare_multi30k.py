#!/usr/bin/env python
"""Prepare Multi30K (task 1) for fairseq: sentencepiece, then binarization into data-bin/.

    python scripts/prepare_multi30k.py --raw-dir ../shared/data/multi30k
    python scripts/prepare_multi30k.py --src en --tgt de --vocab-size 10000

Reads ``{train,val,test_2016_flickr}.{src,tgt}[.gz]`` from ``--raw-dir`` (downloading them from
the public Multi30K repository when the folder lacks them), and ``test_2017_flickr``, ``test_2018_flickr``
and ``test_2017_mscoco`` when present (fairseq's splits ``test1``, ``test2``, ...; never downloaded), trains
one joint sentencepiece model, encodes every split, and binarizes with ``fairseq-preprocess --joined-dictionary`` into
``--dest`` (default ``data-bin/multi30k.SRC-TGT``). Beside the binarized data it keeps
``spm.model`` and ``raw/{valid,test}.{src,tgt}`` so that evaluation needs nothing else, and the
``noise.tsv`` of a noisy copy (``scripts/make_noisy_corpus.py``) when the raw folder has one, with the same
corpus prepared without the listed pairs in ``DEST/clean-only/`` (the benchmark's clean-only oracle).
"""

import argparse
import collections
import dataclasses
import logging
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request

from fairseq_autoassist.cleaning import add_arguments as add_cleaning_arguments
from fairseq_autoassist.cleaning import clean, options_from
from fairseq_autoassist.preparation import train_sentencepiece, write_data_bin, write_manifest
from fairseq_autoassist.raw_corpus import (
    CLEAN_ONLY,
    NOISE_LIST,
    PreparationError,
    exit_code,
    find_raw_file,
    nonempty_pairs,
    read_noise,
    read_parallel,
    write_noise,
)
from fairseq_autoassist.recipes import ROOT

logger = logging.getLogger("prepare_multi30k")

UPSTREAM = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
# Multi30K file stem -> fairseq split name.
SPLITS = {"train": "train", "val": "valid", "test_2016_flickr": "test"}
# Multi30K's later test sets, prepared as fairseq's extra test splits test1, test2, ... (in this order,
# numbered among those present) when both sides are in --raw-dir; prepare.json's test_sets
# maps the split names to these, and scripts/evaluate_bleu.py --split takes either.
EXTRA_TESTS = ["test_2017_flickr", "test_2018_flickr", "test_2017_mscoco"]


def download_missing(raw_dir, stems, langs, base_url=UPSTREAM):
    os.makedirs(raw_dir, exist_ok=True)
    for stem in stems:
        for lang in langs:
            if find_raw_file(raw_dir, stem, lang):
                continue
            url = f"{base_url}/{stem}.{lang}.gz"
            target = os.path.join(raw_dir, f"{stem}.{lang}.gz")
            logger.info("downloading %s", url)
            try:
                with urllib.request.urlopen(url, timeout=30) as response, open(target + ".part", "wb") as out:
                    shutil.copyfileobj(response, out)
            except (urllib.error.URLError, OSError) as error:
                raise PreparationError(
                    f"{os.path.join(raw_dir, stem + '.' + lang)}[.gz] is missing and downloading {url} "
                    f"failed ({error}); put the raw Multi30K files there or point --raw-dir at a "
                    "folder that has them"
                ) from None
            os.replace(target + ".part", target)


def drop_empty_training_pairs(corpora, raw_dir):
    """Drops the training pairs with an empty side from ``corpora`` (fairseq would train on a lone
    end-of-sentence token), warns about empty lines of the held-out splits (kept: a test set stays the published
    one), and returns the raw line numbers of the kept training pairs."""
    kept_training_lines = None
    for stem, sides in corpora.items():
        kept = nonempty_pairs(sides)
        if stem == "train":
            kept_training_lines = kept
        if len(kept) == len(sides[0]):
            continue
        if stem == "train":
            logger.warning("dropped %d training pairs with an empty side (the first at line %d of %s.*)",
                           len(sides[0]) - len(kept), min(set(range(len(sides[0]))) - set(kept)) + 1,
                           os.path.join(raw_dir, stem))
            corpora[stem] = tuple([side[i] for i in kept] for side in sides)
        else:
            logger.warning("%s.* has %d pairs with an empty side; kept, so that the split stays the published one",
                           os.path.join(raw_dir, stem), len(sides[0]) - len(kept))
    return kept_training_lines


def clean_training_pairs(corpora, kept_training_lines, src, tgt, vocab_size, options, work_dir):
    """Applies the cleaning rules to the training pairs of ``corpora`` (in place); returns the raw line numbers
    of the pairs kept and ``{rule: [raw line numbers removed]}``. Lengths are counted in the pieces of a
    sentencepiece model trained on the uncleaned pairs, as the data's own model will be on the cleaned ones."""
    source, target = corpora["train"]
    model = train_sentencepiece(source + target, os.path.join(work_dir, "spm-uncleaned"), vocab_size)
    kept, removed = clean(source, target, src, tgt, options, pieces=lambda text: len(model.encode(text)),
                          encode=model.encode, vocab_size=model.get_piece_size())
    corpora["train"] = ([source[i] for i in kept], [target[i] for i in kept])
    for rule, lines in removed.items():
        logger.info("cleaning: %s removed %d training pairs", rule, len(lines))
    return ([kept_training_lines[i] for i in kept],
            {rule: [kept_training_lines[i] for i in lines] for rule, lines in removed.items()})


def without_lone_duplicates(noise, training):
    """``noise`` without the listed duplicates that are the only copy left of their pair: the duplicate rule
    keeps the first of equal pairs, which may be the listed copy rather than its original."""
    counts = collections.Counter(zip(*training))
    pairs = list(zip(*training))
    return {line: kind for line, kind in noise.items() if kind != "duplicate" or counts[pairs[line]] > 1}


def cleaning_report(removed, noise):
    """Per rule: the pairs removed and, with a noise list (``{raw line: kind}``), how many of each kind."""
    report = {}
    for rule, lines in removed.items():
        report[rule] = {"removed": len(lines)}
        if noise is not None:
            kinds = collections.Counter(noise.get(line, "clean") for line in lines)
            report[rule]["by_kind"] = dict(sorted(kinds.items()))
    return report


def prepare(raw_dir, dest, src, tgt, vocab_size, workers=1, download=True, cleaning=None):
    if download:
        download_missing(raw_dir, list(SPLITS), (src, tgt))
    splits = dict(SPLITS)
    present = [stem for stem in EXTRA_TESTS if all(find_raw_file(raw_dir, stem, lang) for lang in (src, tgt))]
    splits.update((stem, f"test{number}") for number, stem in enumerate(present, start=1))
    corpora = {stem: read_parallel(raw_dir, stem, src, tgt) for stem in splits}
    raw_training_pairs = len(corpora["train"][0])
    kept_training_lines = drop_empty_training_pairs(corpora, raw_dir)
    empty_dropped = raw_training_pairs - len(kept_training_lines)
    raw_noise = read_noise(os.path.join(raw_dir, NOISE_LIST)) if os.path.isfile(os.path.join(raw_dir, NOISE_LIST)) else None
    removed = None
    if cleaning is not None:
        os.makedirs(dest, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest) as work_dir:
            kept_training_lines, removed = clean_training_pairs(corpora, kept_training_lines, src, tgt, vocab_size,
                                                                cleaning, work_dir)
    info = write_prepared(dest, corpora, splits, src, tgt, vocab_size, workers, raw_dir)
    info["empty_training_pairs_dropped"] = empty_dropped
    if removed is not None:
        info["cleaning"] = {"options": dataclasses.asdict(cleaning), "rules": cleaning_report(removed, raw_noise)}
    # A noisy copy's list of corrupted pairs travels with the data (the benchmark passes it as
    # --autoassist-noise-ids); binarization keeps the line order, so its lines are dataset indices.
    noise_list = os.path.join(dest, NOISE_LIST)
    if raw_noise is not None:
        new_line = {line: number for number, line in enumerate(kept_training_lines)}
        noise = {new_line[line]: kind for line, kind in raw_noise.items() if line in new_line}
        if removed is not None:
            noise = without_lone_duplicates(noise, corpora["train"])
        write_noise(noise_list, noise)
        info["noise_ids"] = NOISE_LIST
        # The clean-only oracle: the same corpus without its corrupted pairs, prepared the same way.
        clean_lines = [i for i in range(len(kept_training_lines)) if i not in noise]
        clean_corpora = {**corpora, "train": tuple([side[i] for i in clean_lines] for side in corpora["train"])}
        clean_dest = os.path.join(dest, CLEAN_ONLY)
        write_manifest(clean_dest, write_prepared(clean_dest, clean_corpora, splits, src, tgt, vocab_size, workers,
                                                  raw_dir))
        info["clean_only"] = {"folder": CLEAN_ONLY, "train_pairs": len(clean_lines)}
    else:
        for stale in (noise_list, os.path.join(dest, CLEAN_ONLY)):
            if os.path.isdir(stale):
                shutil.rmtree(stale)
            elif os.path.isfile(stale):
                os.unlink(stale)
    write_manifest(dest, info)
    logger.info("prepared %s: %s", dest, info["pairs"])
    return info


def write_prepared(dest, corpora, splits, src, tgt, vocab_size, workers, raw_dir):
    """Binarizes ``corpora`` (by Multi30K file stem) into ``dest`` and returns what its prepare.json says."""
    pieces = write_data_bin(dest, {splits[stem]: sides for stem, sides in corpora.items()}, src, tgt, vocab_size,
                            workers)
    info = {
        "source": src,
        "target": tgt,
        "vocab_size": vocab_size,
        "sentencepiece_pieces": pieces,
        "pairs": {splits[stem]: len(sides[0]) for stem, sides in corpora.items()},
        "test_sets": {split: stem for stem, split in splits.items() if split.startswith("test")},
        "raw_dir": os.path.abspath(raw_dir),
    }
    return info


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw-dir", default=os.environ.get("MULTI30K_RAW_DIR", os.path.join(ROOT, "data", "multi30k")),
                        help="folder with the raw task-1 files (default: $MULTI30K_RAW_DIR or data/multi30k)")
    parser.add_argument("--dest", default=None, help="output folder (default: data-bin/multi30k.SRC-TGT)")
    parser.add_argument("--src", default="de", help="source language (default: de)")
    parser.add_argument("--tgt", default="en", help="target language (default: en)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="joint sentencepiece vocabulary (default: 8000)")
    parser.add_argument("--workers", type=int, default=2, help="fairseq-preprocess workers")
    parser.add_argument("--no-download", action="store_true", help="never download missing raw files")
    add_cleaning_arguments(parser)
    args = parser.parse_args(argv)
    if args.src == args.tgt:
        parser.error(f"--src and --tgt are both {args.src!r}")
    if args.dest is None:
        args.dest = os.path.join(ROOT, "data-bin", f"multi30k.{args.src}-{args.tgt}")
    return args


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    args = parse_args(argv)
    return exit_code(lambda: prepare(args.raw_dir, args.dest, args.src, args.tgt, args.vocab_size, args.workers,
                                     download=not args.no_download, cleaning=options_from(args)), logger)


if __name__ == "__main__":
    sys.exit(main())
