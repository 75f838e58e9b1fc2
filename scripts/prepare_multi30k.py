#!/usr/bin/env python
"""Prepare Multi30K (task 1) for fairseq: ``autoassist-prepare`` on its folder, downloading what is missing.

    python scripts/prepare_multi30k.py --raw-dir ../shared/data/multi30k
    python scripts/prepare_multi30k.py --src en --tgt de --vocab-size 10000

Reads ``{train,val,test_2016_flickr}.{src,tgt}[.gz]`` from ``--raw-dir`` (downloading them from the public Multi30K
repository when the folder lacks them) and any later test set present (``test_2017_flickr``, ...: fairseq's splits
``test1``, ``test2``, ... in the order of their names; never downloaded), and prepares them as
``autoassist-prepare --input RAW_DIR`` does (``fairseq_autoassist/corpus/prepare_corpus.py``: one joint sentencepiece model,
``fairseq-preprocess --joined-dictionary``, ``spm.model`` and ``raw/`` beside the data, the ``noise.tsv`` of a noisy
copy with its clean-only oracle) into ``--dest`` (default ``data-bin/multi30k.SRC-TGT``).
"""

import argparse
import logging
import os
import shutil
import sys
import urllib.error
import urllib.request

from fairseq_autoassist.corpus.cleaning import add_arguments as add_cleaning_arguments
from fairseq_autoassist.corpus.cleaning import options_from
from fairseq_autoassist.corpus.prepare_corpus import prepare as prepare_corpus
from fairseq_autoassist.corpus.raw_corpus import PreparationError, exit_code, find_raw_file
from fairseq_autoassist.recipes import ROOT

logger = logging.getLogger("prepare_multi30k")

UPSTREAM = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
# The files every Multi30K preparation needs (train, validation, the 2016 test set), downloaded when missing.
REQUIRED_STEMS = ("train", "val", "test_2016_flickr")


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


def check_required(raw_dir, langs):
    for stem in REQUIRED_STEMS:
        for lang in langs:
            if not find_raw_file(raw_dir, stem, lang):
                raise PreparationError(f"{os.path.join(raw_dir, stem + '.' + lang)}[.gz] is missing; check --raw-dir "
                                       "(without --no-download the missing files are downloaded)")


def prepare(raw_dir, dest, src, tgt, vocab_size, workers=1, download=True, cleaning=None):
    if download:
        download_missing(raw_dir, REQUIRED_STEMS, (src, tgt))
    check_required(raw_dir, (src, tgt))
    return prepare_corpus([raw_dir], dest, src, tgt, cleaning=cleaning, vocab_size=vocab_size, workers=workers,
                          name="multi30k")


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
