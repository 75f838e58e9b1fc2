#!/usr/bin/env python
"""Prepare Tatoeba English-German (manythings.org's ``deu-eng.zip``) for fairseq.

    python scripts/prepare_tatoeba.py --input ../shared/data/tatoeba-deu-eng/deu-eng.zip \
        --multi30k-test ../shared/data/multi30k --newstest ../shared/data/wmt21-newstest-deen

Reads the zip as shipped (``deu.txt``: ``English<TAB>German`` per line; a third column, the attribution of
newer releases, is ignored) or the extracted text file, drops pairs with an empty side, and splits **by
English sentence**: every pair of one English sentence lands in one split (many have several German
translations, which would otherwise leak test sentences into training). ``--valid-sentences`` and
``--test-sentences`` distinct English sentences, drawn with ``--seed``, form the validation and test splits.
One joint sentencepiece model and ``fairseq-preprocess --joined-dictionary`` write ``--dest`` (default
``data-bin/tatoeba.SRC-TGT``; the folder serves both directions). Test sets of other domains for a second
opinion, when given: Multi30K's ``test_2016_flickr`` (split ``test1``) and WMT's newstest2021 German-English
(``test2``); ``prepare.json`` records the counts and the split names (``scripts/evaluate_bleu.py --split``
takes either).
"""

import argparse
import collections
import logging
import os
import sys
import zipfile

import numpy as np

from fairseq_autoassist.preparation import write_data_bin, write_manifest
from fairseq_autoassist.raw_corpus import PreparationError, exit_code, nonempty_pairs, read_parallel
from fairseq_autoassist.recipes import ROOT

logger = logging.getLogger("prepare_tatoeba")

SOURCE_URL = "https://www.manythings.org/anki/deu-eng.zip"
MEMBER = "deu.txt"
LANGS = ("en", "de")  # the file's column order


def read_tatoeba(path):
    """``(english lines, german lines)`` of the zip or text file ``path``, refusing bad input in one line."""
    if not os.path.isfile(path):
        raise PreparationError(f"{path} does not exist; download {SOURCE_URL} and pass it with --input")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            if MEMBER not in archive.namelist():
                raise PreparationError(f"{path} has no {MEMBER} (members: {', '.join(archive.namelist())}); "
                                       f"pass the deu-eng.zip of {SOURCE_URL}")
            data, where = archive.read(MEMBER), f"{path}:{MEMBER}"
    else:
        with open(path, "rb") as f:
            data, where = f.read(), path
    english, german = [], []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():  # a blank line: an empty pair, dropped (and counted) with the others
            english.append("")
            german.append("")
            continue
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as error:
            raise PreparationError(f"{where}: line {number} is not valid UTF-8 ({error.reason} at byte "
                                   f"{error.start}); fix or re-encode the file") from None
        columns = line.split("\t")
        if len(columns) not in (2, 3):
            raise PreparationError(f"{where}: line {number} has {len(columns)} tab-separated columns; expected "
                                   "English<TAB>German (and optionally an attribution column)")
        english.append(columns[0].strip())
        german.append(columns[1].strip())
    if not any(english):
        raise PreparationError(f"{where} holds no sentence pairs")
    return english, german


def split_by_sentence(english, german, valid_sentences, test_sentences, seed):
    """``{split: (english lines, german lines)}`` for train, valid and test, with every pair of one English
    sentence in one split: ``valid_sentences`` and ``test_sentences`` distinct English sentences drawn at
    random (``seed``) for the held-out splits, every other one for training. Pairs keep the file's order."""
    sentences = list(dict.fromkeys(english))
    if valid_sentences + test_sentences >= len(sentences):
        raise PreparationError(f"--valid-sentences {valid_sentences} and --test-sentences {test_sentences} leave "
                               f"no training data of {len(sentences)} distinct English sentences; lower them")
    order = np.random.default_rng(seed).permutation(len(sentences))
    split_of = {sentences[i]: "valid" for i in order[:valid_sentences]}
    split_of.update((sentences[i], "test") for i in order[valid_sentences:valid_sentences + test_sentences])
    splits = {name: ([], []) for name in ("train", "valid", "test")}
    for en, de in zip(english, german):
        sides = splits[split_of.get(en, "train")]
        sides[0].append(en)
        sides[1].append(de)
    return splits


def extra_tests(multi30k_dir, newstest_dir):
    """``{fairseq split: (name, (german lines, english lines))}`` of the other domains' test sets given."""
    tests = {}
    if multi30k_dir:
        tests["test1"] = ("multi30k_test_2016_flickr", read_parallel(multi30k_dir, "test_2016_flickr", "de", "en"))
    if newstest_dir:
        tests["test2"] = ("newstest2021", read_parallel(newstest_dir, "newstest2021.de-en", "de", "en"))
    return tests


def prepare(input_path, dest, src="de", tgt="en", vocab_size=8000, valid_sentences=2000, test_sentences=2000,
            seed=1, multi30k_dir=None, newstest_dir=None, workers=1):
    if {src, tgt} != set(LANGS):
        raise PreparationError(f"--src {src} --tgt {tgt}: Tatoeba deu-eng holds English and German; use de and en")
    english, german = read_tatoeba(input_path)
    kept = nonempty_pairs((english, german))
    dropped = len(english) - len(kept)
    if dropped:
        logger.warning("dropped %d pairs with an empty side (or blank lines) of %s", dropped, input_path)
    english, german = [english[i] for i in kept], [german[i] for i in kept]
    splits = split_by_sentence(english, german, valid_sentences, test_sentences, seed)
    tests = extra_tests(multi30k_dir, newstest_dir)
    by_lang = {split: dict(zip(LANGS, sides)) for split, sides in splits.items()}
    by_lang.update((split, dict(zip(("de", "en"), sides))) for split, (_, sides) in tests.items())
    ordered = {split: (sides[src], sides[tgt]) for split, sides in by_lang.items()}
    pieces = write_data_bin(dest, ordered, src, tgt, vocab_size, workers)
    translations = collections.Counter(splits["train"][0])
    info = {
        "source": src,
        "target": tgt,
        "vocab_size": vocab_size,
        "sentencepiece_pieces": pieces,
        "pairs": {split: len(sides[0]) for split, sides in ordered.items()},
        "english_sentences": {split: len(set(splits[split][0])) for split in splits},
        "train_pairs_per_english_sentence": {"mean": round(len(splits["train"][0]) / len(translations), 3),
                                             "max": max(translations.values())},
        "train_duplicate_pairs": len(splits["train"][0]) - len(set(zip(*splits["train"]))),
        "empty_pairs_dropped": dropped,
        "test_sets": {"test": "tatoeba", **{split: name for split, (name, _) in tests.items()}},
        "input": os.path.abspath(input_path),
        "seed": seed,
    }
    write_manifest(dest, info)
    logger.info("prepared %s: %s", dest, info["pairs"])
    return info


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
