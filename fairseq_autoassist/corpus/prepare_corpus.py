"""``autoassist-prepare``: any parallel corpus, any language pair, to a fairseq data-bin folder (no fairseq import
but the binarizing subprocess).

    autoassist-prepare --input ../shared/data/tatoeba-deu-eng/deu-eng.zip --src de --tgt en --columns 2,1 \\
        --split-by target --valid-groups 2000 --test-groups 2000
    autoassist-prepare --input ../shared/data/tvsub-zh-en --src zh --tgt en \\
        --split-by chunks:../shared/data/tvsub-zh-en/chunks.tsv --valid-groups 5 --test-groups 5
    autoassist-prepare --input corpus.fr.gz corpus.en.gz --src fr --tgt en --split-by source

The input, ``--input``, is one of:

* a folder of line-aligned files ``STEM.SRC`` / ``STEM.TGT`` (plain or gzipped): ``train``, and where present the
  validation split (``valid``, ``val`` or ``dev``) and test sets (``test``, ``test_*``), as Multi30K ships them;
* a tab-separated text file, plain or gzipped, or a zip holding one (the Tatoeba downloads of manythings.org for
  any language: ``English<TAB>Other<TAB>attribution``); ``--columns S,T`` names the source and target columns;
* two line-aligned files, the source side and the target side.

Validation and test come from the folder where it has them, or are split off the training pairs with
``--split-by`` a grouping key, so that no group straddles two splits: ``source`` or ``target`` (every pair of one
sentence in one split: several translations of a sentence would otherwise leak test sentences into training) or
``chunks:FILE``, a table of consecutive line ranges (``chunk<TAB>first_line<TAB>lines`` with a header, such as
TVsub's episodes); ``--valid-groups`` and ``--test-groups`` groups drawn with ``--seed``. Where the folder has its
own validation or test split and ``--split-by`` is given, they become further test sets. ``--test-set NAME=PREFIX``
adds others (``PREFIX.SRC``/``PREFIX.TGT``). The training pairs lose any with an empty side (counted), and with
``--clean`` what the static cleaning rules remove (``cleaning.py``, each reported). One joint sentencepiece model
(``--character-coverage``: 0.9995 by default where a side is Chinese, Japanese, Korean or Thai, whose characters
are many, else 1.0), ``fairseq-preprocess --joined-dictionary``, ``spm.model`` and the raw held-out text beside the
data, and ``prepare.json``: the counts, the settings, what each stage took. A folder's ``noise.tsv`` (the corrupted
pairs of a noisy copy) follows its pairs into the data folder, with the same corpus without them in ``clean-only/``.
Bad input stops with one line naming the file and line or the flag.
"""

import argparse
import collections
import dataclasses
import functools
import logging
import os
import shutil
import sys
import tempfile
import time
import zipfile

import numpy as np

from .classifier import MODEL_FILE
from .cleaning import add_arguments as add_cleaning_arguments, clean, needs_pieces, options_from as cleaning_options
from ..commands import command_parser
from .detokenize import detokenized
from .preparation import train_sentencepiece, write_data_bin, write_manifest
from .raw_corpus import (CLEAN_ONLY, NOISE_LIST, PreparationError, check_side_by_side, decode_lines, exit_code,
                         find_raw_file, nonempty_pairs, read_lines, read_noise, write_noise)

logger = logging.getLogger("autoassist-prepare")

VALIDATION_STEMS = ("valid", "val", "dev")
# Languages whose scripts have many characters: a piece model covering every one of them would spend its pieces on
# rare characters.
MANY_CHARACTERS = {"zh", "ja", "ko", "th"}
SPLIT_KEYS = ("source", "target")
# Sentences sentencepiece trains on, at most (``--spm-sample``).
SENTENCEPIECE_SAMPLE = 2_000_000


class Stages:
    """The seconds each stage of a preparation took, logged as it ends (for ``prepare.json``)."""

    def __init__(self):
        self.seconds = {}

    def run(self, name, action, *args, **kwargs):
        logger.info("%s ...", name)
        started = time.perf_counter()
        result = action(*args, **kwargs)
        self.seconds[name] = round(time.perf_counter() - started, 1)
        logger.info("%s: %.1f s", name, self.seconds[name])
        return result


def read_table(path, columns):
    """The two columns ``columns`` (1-based) of the tab-separated ``path`` (plain, gzipped, or the one ``.txt``/
    ``.tsv`` member of a zip), refusing a line without them in one line naming the file and line."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = [name for name in archive.namelist() if name.endswith((".txt", ".tsv"))
                       and not os.path.basename(name).startswith("_")]
            if len(members) != 1:
                raise PreparationError(f"{path} holds {len(members)} .txt/.tsv members ({', '.join(members)}); "
                                       "extract the one to read and pass it with --input")
            where = f"{path}:{members[0]}"
            lines = decode_lines(archive.read(members[0]), where)
    else:
        where = path
        lines = read_lines(path)
    source, target = [], []
    needed = max(columns)
    for number, line in enumerate(lines, start=1):
        fields = line.split("\t")
        if len(fields) < needed:
            if not line.strip():  # a blank line: an empty pair, dropped and counted with the others
                source.append("")
                target.append("")
                continue
            raise PreparationError(f"{where}: line {number} has {len(fields)} tab-separated columns; --columns "
                                   f"{columns[0]},{columns[1]} needs {needed}")
        source.append(fields[columns[0] - 1].strip())
        target.append(fields[columns[1] - 1].strip())
    return source, target


def read_sides(paths):
    """``(source lines, target lines)`` of two line-aligned files, refused unless they have as many lines."""
    return tuple(check_side_by_side(paths, [read_lines(path) for path in paths]))


def read_input(paths, src, tgt, columns):
    """``{stem: (source lines, target lines)}`` of the input (``train`` always; from a folder also its validation
    split as ``valid`` and its test sets by stem)."""
    if len(paths) == 2:
        return {"train": read_sides(paths)}
    [path] = paths
    if os.path.isdir(path):
        named = {name.split(".")[0] for name in os.listdir(path)}
        stems = sorted(stem for stem in named if find_raw_file(path, stem, src) and find_raw_file(path, stem, tgt))
        if "train" not in stems:
            raise PreparationError(f"{path} has no train.{src}[.gz] and train.{tgt}[.gz]; check --input and "
                                   "--src/--tgt")
        corpus = {}
        for stem in stems:
            name = "valid" if stem in VALIDATION_STEMS else stem
            if name in ("train", "valid") or stem.startswith("test"):
                corpus.setdefault(name, read_sides([find_raw_file(path, stem, lang) for lang in (src, tgt)]))
        return corpus
    if not os.path.isfile(path):
        raise PreparationError(f"{path} does not exist; --input takes a folder, a tab-separated file or zip, or two "
                               "line-aligned files")
    if columns is None:
        raise PreparationError(f"{path} is a table: name its source and target columns with --columns S,T "
                               "(Tatoeba's files: English first, so --columns 2,1 for another language into English)")
    return {"train": read_table(path, columns)}


def read_chunks(path, num_lines):
    """The group of every line from a ``chunk<TAB>first_line<TAB>lines`` table covering lines ``0 .. num_lines-1``."""
    group = np.full(num_lines, -1, dtype=np.int64)
    for number, line in enumerate(read_lines(path)[1:], start=2):
        try:
            chunk, first, count = (int(field) for field in line.split("\t"))
        except ValueError:
            raise PreparationError(f"{path}: line {number} is not chunk<TAB>first_line<TAB>lines") from None
        if first < 0 or first + count > num_lines:
            raise PreparationError(f"{path}: line {number} covers lines {first}-{first + count - 1}, beyond the "
                                   f"{num_lines} training lines; pass the chunk table of this corpus")
        group[first:first + count] = chunk
    if (group < 0).any():
        raise PreparationError(f"{path} leaves line {int(np.flatnonzero(group < 0)[0]) + 1} of the training pairs in "
                               "no chunk; the table must cover every line")
    return group


def group_keys(split_by, source, target, kept):
    """Per kept training line (``kept``: their line numbers), its group under ``--split-by``, groups numbered in the
    order of their first line (so that a seed draws the same groups whatever the sentences' alphabetical order)."""
    if split_by.startswith("chunks:"):
        return read_chunks(split_by.partition(":")[2], len(source))[kept]
    lines = source if split_by == "source" else target
    _, first, inverse = np.unique([lines[i] for i in kept], return_index=True, return_inverse=True)
    number = np.empty(len(first), dtype=np.int64)
    number[np.argsort(first)] = np.arange(len(first))
    return number[inverse]


def split_off(keys, valid_groups, test_groups, seed):
    """``{split: indices}`` of train, valid and test, whole groups of ``keys`` each: ``valid_groups`` and
    ``test_groups`` groups drawn at random (``seed``) for the held-out splits, every other for training; the lines
    keep their order."""
    groups = np.unique(keys)
    if valid_groups + test_groups >= len(groups):
        raise PreparationError(f"--valid-groups {valid_groups} and --test-groups {test_groups} leave no training data "
                               f"of {len(groups)} groups; lower them")
    order = np.random.default_rng(seed).permutation(groups)
    split_of = np.zeros(int(keys.max()) + 1, dtype=np.int8)
    split_of[order[:valid_groups]] = 1
    split_of[order[valid_groups:valid_groups + test_groups]] = 2
    where = split_of[keys]
    return {name: np.flatnonzero(where == code) for code, name in enumerate(("train", "valid", "test"))}


def taken(sides, indices):
    return tuple([side[i] for i in indices] for side in sides)


def default_coverage(src, tgt):
    return 0.9995 if {src, tgt} & MANY_CHARACTERS else 1.0


def prepare(paths, dest, src, tgt, columns=None, split_by=None, valid_groups=2000, test_groups=2000, seed=1,
            test_sets=(), cleaning=None, vocab_size=8000, character_coverage=None, spm_sample=SENTENCEPIECE_SAMPLE,
            workers=1, name=None, moses_tokenized=()):
    """Prepares ``dest`` (see the module's description); returns what its ``prepare.json`` says. ``name``: the
    corpus' name, which names a test set split off its training pairs (default: the input's file name);
    ``moses_tokenized``: further test sets whose English side is detokenized first."""
    name = name or corpus_name(paths)
    stages = Stages()
    corpus = stages.run("reading", read_input, paths, src, tgt, columns)
    source, target = corpus.pop("train")
    noise = read_noise_list(paths)
    kept = nonempty_pairs((source, target))
    if not kept:
        raise PreparationError(f"{paths[0]} holds no sentence pairs")
    empty = len(source) - len(kept)
    if empty:
        logger.warning("dropped %d training pairs with an empty side (the first at line %d)", empty,
                       min(set(range(len(source))) - set(kept)) + 1)
    info = {"source": src, "target": tgt, "input": [os.path.abspath(path) for path in paths],
            "read_pairs": len(source), "empty_training_pairs_dropped": empty}
    # The input's line number of every training pair, through each step that drops or reorders them.
    lines = np.asarray(kept, dtype=np.int64)
    keys = group_keys(split_by, source, target, kept) if split_by else None
    source, target = taken((source, target), kept)
    held_out = {}
    if split_by:
        indices = stages.run("splitting", split_off, keys, valid_groups, test_groups, seed)
        held_out = {name: taken((source, target), indices[name]) for name in ("valid", "test")}
        info.update(split_by=split_by, seed=seed)
        info["groups"] = {name: int(len(np.unique(keys[indices[name]]))) for name in indices}
        source, target = taken((source, target), indices["train"])
        lines = lines[indices["train"]]
        further = corpus  # the folder's own splits, a second opinion beside the split-off test set
    else:
        if "valid" not in corpus or not any(stem.startswith("test") for stem in corpus):
            raise PreparationError(f"{paths[0]} has no validation and test split of its own; split them off the "
                                   "training pairs with --split-by source, target or chunks:FILE")
        held_out = {"valid": corpus.pop("valid")}
        first_test = min(stem for stem in corpus if stem.startswith("test"))
        held_out["test"] = corpus.pop(first_test)
        info["test_sets"] = {"test": first_test}
        further = corpus
    for text in test_sets:
        test_name, _, prefix = text.partition("=")
        further[test_name] = read_sides([_prefixed(prefix, lang) for lang in (src, tgt)])
    for test_name in moses_tokenized:
        further[test_name] = detokenized_english(further, test_name, src, tgt)
    if moses_tokenized:
        info["detokenized_test_sets"] = sorted(moses_tokenized)
    test_names = {"test": info.get("test_sets", {}).get("test", name)}
    splits = {"train": (source, target), **held_out}
    for number, (test_name, sides) in enumerate(sorted(further.items()), start=1):
        splits[f"test{number}"] = sides
        test_names[f"test{number}"] = test_name
    info["test_sets"] = test_names
    coverage = default_coverage(src, tgt) if character_coverage is None else character_coverage
    if cleaning is not None:
        kept_pairs, removed, _, filter_seconds = stages.run("cleaning", clean_pairs, source, target, src, tgt,
                                                            cleaning, dest, vocab_size, coverage, spm_sample)
        if not kept_pairs:
            counts = ", ".join(f"{name}: {len(at)}" for name, at in removed.items() if at)
            raise PreparationError(f"the cleaning filters removed every one of the {len(source)} training pairs of "
                                   f"{paths[0]} ({counts}); check the input or loosen the --clean-* thresholds")
        splits["train"] = taken((source, target), kept_pairs)
        info["cleaning"] = {"options": dataclasses.asdict(cleaning), "kept": len(kept_pairs), "of": len(source),
                            "filter_seconds": {name: round(value, 1) for name, value in filter_seconds.items()},
                            "filters": cleaning_report({name: lines[at] for name, at in removed.items()}, noise)}
        lines = lines[kept_pairs]
    write = functools.partial(write_data_bin, src=src, tgt=tgt, vocab_size=vocab_size, workers=workers,
                              character_coverage=coverage, sample=spm_sample)
    pieces = write(dest, splits, stage=stages.run)
    info.update(vocab_size=vocab_size, sentencepiece_pieces=pieces, character_coverage=coverage,
                pairs={name: len(sides[0]) for name, sides in splits.items()})
    remove_noise_list(dest)
    if noise is not None:
        info.update(carry_noise_list(dest, noise, lines, splits, cleaning is not None, write, info))
    info["stage_seconds"] = stages.seconds
    write_manifest(dest, info)
    logger.info("prepared %s: %s pairs in %.0f s", dest, info["pairs"], sum(stages.seconds.values()))
    return info


def detokenized_english(further, test_name, src, tgt):
    """The test set ``test_name`` of ``further`` with its English side(s) Moses-detokenized (``detokenize.py``)."""
    if test_name not in further:
        raise PreparationError(f"--moses-tokenized-test {test_name}: no such further test set (this input's: "
                               f"{', '.join(sorted(further)) or 'none'})")
    if "en" not in (src, tgt):
        raise PreparationError(f"--moses-tokenized-test {test_name}: the detokenizer reads English, and neither "
                               f"--src {src} nor --tgt {tgt} is en")
    return tuple([detokenized(line) for line in side] if lang == "en" else side
                 for lang, side in zip((src, tgt), further[test_name]))


def read_noise_list(paths):
    """``{input line: kind}`` of the corrupted training pairs a folder lists in ``noise.tsv`` (a noisy copy of
    ``scripts/research/make_noisy_corpus.py``), or None."""
    path = os.path.join(paths[0], NOISE_LIST)
    return read_noise(path) if len(paths) == 1 and os.path.isfile(path) else None


def cleaning_report(removed, noise):
    """Per rule: the pairs removed and, with a noise list (``{input line: kind}``), how many of each kind."""
    report = {}
    for rule, lines in removed.items():
        report[rule] = {"removed": len(lines)}
        if noise is not None:
            kinds = collections.Counter(noise.get(int(line), "clean") for line in lines)
            report[rule]["by_kind"] = dict(sorted(kinds.items()))
    return report


def carry_noise_list(dest, noise, lines, splits, cleaned, write, info):
    """Writes ``dest``'s ``noise.tsv`` (the listed pairs still in training, by dataset index: binarizing keeps the
    order; ``lines``: each training pair's input line) and the clean-only oracle, the same corpus without them,
    prepared the same way in ``dest/clean-only`` (``info``: what its ``prepare.json`` shares with ``dest``'s);
    returns what ``dest``'s ``prepare.json`` says of them."""
    index_of = {int(line): index for index, line in enumerate(lines)}
    kept_noise = {index_of[line]: kind for line, kind in noise.items() if line in index_of}
    if cleaned:
        kept_noise = without_lone_duplicates(kept_noise, splits["train"])
    write_noise(os.path.join(dest, NOISE_LIST), kept_noise)
    clean_lines = [i for i in range(len(lines)) if i not in kept_noise]
    clean_splits = {**splits, "train": taken(splits["train"], clean_lines)}
    clean_dest = os.path.join(dest, CLEAN_ONLY)
    pieces = write(clean_dest, clean_splits)
    write_manifest(clean_dest, {**info, "clean_only_of": os.path.abspath(dest), "sentencepiece_pieces": pieces,
                                "pairs": {name: len(sides[0]) for name, sides in clean_splits.items()}})
    return {"noise_ids": NOISE_LIST, "clean_only": {"folder": CLEAN_ONLY, "train_pairs": len(clean_lines)}}


def without_lone_duplicates(noise, training):
    """``noise`` without the listed duplicates that are the only copy left of their pair: the duplicate rule
    keeps the first of equal pairs, which may be the listed copy rather than its original."""
    pairs = list(zip(*training))
    counts = collections.Counter(pairs)
    return {line: kind for line, kind in noise.items() if kind != "duplicate" or counts[pairs[line]] > 1}


def remove_noise_list(dest):
    """Removes a noise list and clean-only oracle an earlier preparation left in ``dest``."""
    path = os.path.join(dest, NOISE_LIST)
    if os.path.isfile(path):
        os.unlink(path)
    if os.path.isdir(os.path.join(dest, CLEAN_ONLY)):
        shutil.rmtree(os.path.join(dest, CLEAN_ONLY))


def clean_pairs(source, target, src, tgt, options, dest, vocab_size, coverage, sample):
    """``cleaning.clean`` of the training pairs: ``(kept, removed, PairScores, seconds per filter)``, with lengths
    counted and pairs aligned in the pieces of a sentencepiece model trained on them uncleaned (a side without spaces
    has no words to count), as the data's own model will be on the cleaned; trained only where a filter needs them."""
    os.makedirs(dest, exist_ok=True)
    model = (train_sentencepiece(source + target, os.path.join(dest, "spm-uncleaned"), vocab_size, coverage, sample)
             if needs_pieces(options) else None)
    segment = None if model is None else (lambda text: model.encode(text, out_type=str))
    seconds = {}
    try:
        with tempfile.TemporaryDirectory(dir=dest) as workdir:
            kept, removed, scores = clean(source, target, src, tgt, options, workdir=workdir, seconds=seconds,
                                          segment=segment, classifier_path=os.path.join(dest, MODEL_FILE))
    finally:
        for suffix in (".model", ".vocab") if model is not None else ():
            os.unlink(os.path.join(dest, "spm-uncleaned" + suffix))
    return kept, removed, scores, seconds


def corpus_name(paths):
    """The name of a corpus read from ``paths``: its folder's or first file's name up to the first dot."""
    return os.path.basename(os.path.normpath(paths[0])).split(".")[0]


def _prefixed(prefix, lang):
    path = find_raw_file(os.path.dirname(prefix) or ".", os.path.basename(prefix), lang)
    if path is None:
        raise PreparationError(f"{prefix}.{lang}[.gz] is missing; --test-set NAME=PREFIX needs PREFIX.SRC and "
                               "PREFIX.TGT")
    return path


def split_by_argument(text):
    if text in SPLIT_KEYS or (text.startswith("chunks:") and text.partition(":")[2]):
        return text
    raise argparse.ArgumentTypeError(f"'{text}': use source, target or chunks:FILE")


def columns_argument(text):
    try:
        columns = tuple(int(field) for field in text.split(","))
    except ValueError:
        columns = ()
    if len(columns) != 2 or min(columns) < 1 or columns[0] == columns[1]:
        raise argparse.ArgumentTypeError(f"'{text}': two different 1-based column numbers, source first (e.g. 2,1)")
    return columns


def main(argv=None):
    parser = command_parser("autoassist-prepare", __doc__)
    parser.add_argument("--input", nargs="+", required=True, metavar="PATH",
                        help="a folder of STEM.SRC/STEM.TGT files, a tab-separated file or zip, or two line-aligned "
                             "files (source, target)")
    parser.add_argument("--src", required=True, help="source language code (e.g. de, fr, zh)")
    parser.add_argument("--tgt", required=True, help="target language code (e.g. en)")
    parser.add_argument("--dest", help="output folder (default: data-bin/NAME.SRC-TGT, NAME from the input)")
    parser.add_argument("--columns", type=columns_argument, help="a table's source and target columns, 1-based")
    parser.add_argument("--split-by", type=split_by_argument,
                        help="split validation and test off the training pairs by source sentence, target sentence "
                             "or the line ranges of a chunk table (chunks:FILE)")
    parser.add_argument("--valid-groups", type=int, default=2000, help="groups held out for validation (default 2000)")
    parser.add_argument("--test-groups", type=int, default=2000, help="groups held out for testing (default 2000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the split (default 1)")
    parser.add_argument("--test-set", action="append", default=[], metavar="NAME=PREFIX",
                        help="a further test set from PREFIX.SRC and PREFIX.TGT (plain or gzipped); repeatable")
    parser.add_argument("--moses-tokenized-test", action="append", default=[], metavar="NAME",
                        help="a further test set (a folder's own or --test-set's) whose English side is Moses-tokenized "
                             "and escaped: detokenized first, so that sacreBLEU scores against raw text; repeatable")
    parser.add_argument("--vocab-size", type=int, default=8000, help="joint sentencepiece pieces (default 8000)")
    parser.add_argument("--character-coverage", type=float,
                        help="sentencepiece's character coverage (default 0.9995 with a zh, ja, ko or th side, else 1)")
    parser.add_argument("--spm-sample", type=int, default=SENTENCEPIECE_SAMPLE,
                        help="training sentences sentencepiece learns from, drawn at random (default 2,000,000)")
    parser.add_argument("--workers", type=int, default=2, help="fairseq-preprocess workers (default 2)")
    add_cleaning_arguments(parser)
    args = parser.parse_args(argv)
    if len(args.input) > 2:
        parser.error("--input takes one path, or two line-aligned files")
    dest = args.dest or os.path.join("data-bin", f"{corpus_name(args.input)}.{args.src}-{args.tgt}")

    def run():
        prepare(args.input, dest, args.src, args.tgt, args.columns, args.split_by, args.valid_groups,
                args.test_groups, args.seed, args.test_set, cleaning_options(args), args.vocab_size,
                args.character_coverage, args.spm_sample, args.workers, moses_tokenized=args.moses_tokenized_test)

    return exit_code(run, logger)


if __name__ == "__main__":
    sys.exit(main())
