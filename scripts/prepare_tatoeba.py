#!/usr/bin/env python
"""Prepare Tatoeba English-German (manythings.org's ``deu-eng.zip``) for fairseq: a preset of ``autoassist-prepare``.

    python scripts/prepare_tatoeba.py --input ../shared/data/tatoeba-deu-eng/deu-eng.zip \
        --multi30k-test ../shared/data/multi30k --newstest ../shared/data/wmt21-newstest-deen

The same as ``autoassist-prepare --input deu-eng.zip --src de --tgt en --columns 2,1 --split-by target
--valid-groups 2000 --test-groups 2000`` with the other domains' test sets (``fairseq_autoassist/corpus/prepare_corpus.py``):
it reads the zip as shipped (``deu.txt``: ``English<TAB>German`` per line; a third column, the attribution of newer
releases, is ignored) or the extracted text file, drops pairs with an empty side, and splits **by English
sentence**: every pair of one English sentence lands in one split (many have several German translations, which
would otherwise leak test sentences into training). ``--valid-sentences`` and ``--test-sentences`` distinct English
sentences, drawn with ``--seed``, form the validation and test splits. One joint sentencepiece model and
``fairseq-preprocess --joined-dictionary`` write ``--dest`` (default ``data-bin/tatoeba.SRC-TGT``; the folder
serves both directions). Test sets of other domains for a second opinion, when given: Multi30K's
``test_2016_flickr`` (split ``test1``) and WMT's newstest2021 German-English (``test2``); ``prepare.json`` records
the counts and the split names (``scripts/evaluate_bleu.py --split`` takes either). Tatoeba's downloads for other
languages go through ``autoassist-prepare`` directly (``--columns 2,1`` for the other language into English).
"""

import argparse
import logging
import os
import sys
import zipfile

from fairseq_autoassist.corpus.prepare_corpus import prepare as prepare_corpus
from fairseq_autoassist.corpus.raw_corpus import PreparationError, exit_code
from fairseq_autoassist.recipes import ROOT

logger = logging.getLogger("prepare_tatoeba")

SOURCE_URL = "https://www.manythings.org/anki/deu-eng.zip"
MEMBER = "deu.txt"
LANGS = ("en", "de")  # the file's column order


def prepare(input_path, dest, src="de", tgt="en", vocab_size=8000, valid_sentences=2000, test_sentences=2000,
            seed=1, multi30k_dir=None, newstest_dir=None, workers=1):
    if {src, tgt} != set(LANGS):
        raise PreparationError(f"--src {src} --tgt {tgt}: Tatoeba deu-eng holds English and German; use de and en")
    if not os.path.isfile(input_path):
        raise PreparationError(f"{input_path} does not exist; download {SOURCE_URL} and pass it with --input")
    members = zipfile.ZipFile(input_path).namelist() if zipfile.is_zipfile(input_path) else [MEMBER]
    if MEMBER not in members:
        raise PreparationError(f"{input_path} has no {MEMBER} (members: {', '.join(members)}); pass the deu-eng.zip "
                               f"of {SOURCE_URL}, or another language's with autoassist-prepare")
    test_sets = []
    if multi30k_dir:
        test_sets.append(f"multi30k_test_2016_flickr={os.path.join(multi30k_dir, 'test_2016_flickr')}")
    if newstest_dir:
        test_sets.append(f"newstest2021={os.path.join(newstest_dir, 'newstest2021.de-en')}")
    return prepare_corpus([input_path], dest, src, tgt, columns=(LANGS.index(src) + 1, LANGS.index(tgt) + 1),
                          split_by="source" if src == "en" else "target", valid_groups=valid_sentences,
                          test_groups=test_sentences, seed=seed, test_sets=test_sets, vocab_size=vocab_size,
                          workers=workers, name="tatoeba")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", default=os.environ.get("TATOEBA_ZIP", os.path.join(ROOT, "data", "deu-eng.zip")),
                        help=f"the deu-eng.zip of {SOURCE_URL}, or its deu.txt (default: $TATOEBA_ZIP or "
                             "data/deu-eng.zip)")
    parser.add_argument("--dest", default=None, help="output folder (default: data-bin/tatoeba.SRC-TGT)")
    parser.add_argument("--src", default="de", help="source language, de or en (default: de)")
    parser.add_argument("--tgt", default="en", help="target language, en or de (default: en)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="joint sentencepiece vocabulary (default: 8000)")
    parser.add_argument("--valid-sentences", type=int, default=2000,
                        help="distinct English sentences (with all their pairs) held out for validation (default: 2000)")
    parser.add_argument("--test-sentences", type=int, default=2000,
                        help="distinct English sentences (with all their pairs) held out for testing (default: 2000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the split (default: 1)")
    parser.add_argument("--multi30k-test", default=None, metavar="DIR",
                        help="Multi30K raw folder: its test_2016_flickr.{de,en}[.gz] becomes split test1")
    parser.add_argument("--newstest", default=None, metavar="DIR",
                        help="folder with newstest2021.de-en.{de,en}: becomes split test2")
    parser.add_argument("--workers", type=int, default=2, help="fairseq-preprocess workers")
    args = parser.parse_args(argv)
    if args.dest is None:
        args.dest = os.path.join(ROOT, "data-bin", f"tatoeba.{args.src}-{args.tgt}")
    return args


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    args = parse_args(argv)
    return exit_code(lambda: prepare(args.input, args.dest, args.src, args.tgt, args.vocab_size, args.valid_sentences,
                                     args.test_sentences, args.seed, args.multi30k_test, args.newstest, args.workers),
                     logger)


if __name__ == "__main__":
    sys.exit(main())
