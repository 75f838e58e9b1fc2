#!/usr/bin/env python
"""Prepare WMT14 (English-German by default) for fairseq from the standard corpora.

    python scripts/prepare_wmt14.py --raw-dir data/wmt14 --dest data-bin/wmt14.en-de --workers 8
    python scripts/prepare_wmt14.py --raw-dir data/wmt14 --download ...   # fetch what is missing first

Training data: Europarl v7, Common Crawl and News Commentary (``--news-commentary 9``, the default: the
4.5M-pair set of the AutoAssist paper and of fairseq's ``prepare-wmt14en2de.sh --icml17``; ``12`` is that
script's default); validation newstest2013, test newstest2014 (the "full" SGM files). ``--raw-dir`` may hold
the files as distributed: the plain parallel files (``europarl-v7.de-en.de``, ``commoncrawl.de-en.en``,
``news-commentary-v9.de-en.de``, ``newstest2013.en``, ...) anywhere below it, the SGM test files
(``newstest2014-deen-src.en.sgm``, ``newstest2014-deen-ref.de.sgm``), or the ``.tgz`` archives that hold
them (``training-parallel-europarl-v7.tgz``, ``training-parallel-commoncrawl.tgz``,
``training-parallel-nc-v9.tgz``, ``dev.tgz``, ``test-full.tgz``). Only with ``--download`` are missing
archives fetched from statmt.org, when the host is reachable.

The files found are written as one line-aligned folder (the training corpora one after another, newstest2013 as
validation, newstest2014 as the test set ``test_newstest2014``), which ``autoassist-prepare`` prepares
(``fairseq_autoassist/corpus/prepare_corpus.py``, with progress and the time of each stage in the log and prepare.json):
pairs with an empty side dropped, then fairseq's WMT filters as cleaning rules (exact duplicate pairs, a side
outside 1-250 sentencepiece pieces, a length ratio above 1.5: ``clean-corpus-n.perl -ratio 1.5 ... 1 250`` on
subwords, measured with a model trained on the uncleaned pairs), one joint sentencepiece model (``--vocab-size``,
default 32,000 pieces) on a random sample of ``--spm-sample`` training sentences, ``fairseq-preprocess
--joined-dictionary --workers``. Beside the data: ``spm.model``, ``raw/`` (the untokenized held-out text, for
``autoassist-evaluate``) and ``prepare.json`` (pairs per corpus, what each filter removed, the settings).
"""

import argparse
import fnmatch
import logging
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request

from fairseq_autoassist.corpus.cleaning import CleaningOptions
from fairseq_autoassist.corpus.preparation import write_manifest
from fairseq_autoassist.corpus.prepare_corpus import prepare as prepare_corpus
from fairseq_autoassist.corpus.raw_corpus import (PreparationError, check_side_by_side, exit_code, nonempty_pairs, read_lines,
                                           read_parallel)

logger = logging.getLogger("prepare_wmt14")

MAX_PIECES = 250
MAX_RATIO = 1.5
# fairseq's WMT filters (prepare-wmt14en2de.sh): exact duplicates, 1-250 pieces a side, a length ratio of 1.5.
WMT_FILTERS = CleaningOptions(duplicates=True, near_duplicates=False, max_pieces=MAX_PIECES,
                              max_length_ratio=MAX_RATIO, max_similarity=0, language=False, alignment_like_random=0)
STATMT = "http://statmt.org"
# corpus -> (file name pattern of one side, archive holding it, its download address); the pattern's
# {pair} is e.g. "de-en", {compact} "deen", {lang} the side's language, {role} "src" or "ref".
TRAIN_CORPORA = {
    "europarl-v7": ("europarl-v7.{pair}.{lang}", "training-parallel-europarl-v7.tgz",
                    f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz"),
    "commoncrawl": ("commoncrawl.{pair}.{lang}", "training-parallel-commoncrawl.tgz",
                    f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz"),
}
NEWS_COMMENTARY = {
    9: ("news-commentary-v9.{pair}.{lang}", "training-parallel-nc-v9.tgz",
        f"{STATMT}/wmt14/training-parallel-nc-v9.tgz"),
    12: ("news-commentary-v12.{pair}.{lang}", "training-parallel-nc-v12.tgz",
         "http://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz"),
}
HELD_OUT = {
    "valid": ("newstest2013.{lang}", "dev.tgz", f"{STATMT}/wmt14/dev.tgz"),
    "test": ("newstest2014-{compact}-{role}.{lang}.sgm", "test-full.tgz", f"{STATMT}/wmt14/test-full.tgz"),
}


def corpus_pair(src, tgt):
    """WMT names a pair's files by the other language and English (``de-en``), whichever direction is trained."""
    other = [lang for lang in (src, tgt) if lang != "en"]
    return f"{other[0]}-en" if other else f"{src}-{tgt}"


class RawFolder:
    """Finds the distributed files below ``raw_dir``, plain or inside its ``.tgz`` archives (extracted
    into ``work`` on first use)."""

    def __init__(self, raw_dir, work):
        self.raw_dir = raw_dir
        self.work = work
        self._members = {}
        self.rescan()

    def rescan(self):
        self.files = {}
        for folder, _, names in os.walk(self.raw_dir):
            for name in names:
                self.files.setdefault(name, os.path.join(folder, name))
        self.archives = sorted(path for name, path in self.files.items() if name.endswith((".tgz", ".tar.gz")))

    def _archive_members(self, archive):
        if archive not in self._members:
            logger.info("listing %s", archive)
            try:
                with tarfile.open(archive) as tar:
                    self._members[archive] = [member.name for member in tar.getmembers() if member.isfile()]
            except (tarfile.TarError, OSError, EOFError) as error:
                raise PreparationError(f"{archive} is not a readable .tgz archive ({error}); download it again "
                                       "or remove it") from None
        return self._members[archive]

    def find(self, pattern):
        """The path of the file whose name matches ``pattern``, from the folder or an archive; None if absent."""
        for name, path in sorted(self.files.items()):
            if fnmatch.fnmatch(name, pattern):
                return path
        for archive in self.archives:
            for member in self._archive_members(archive):
                if fnmatch.fnmatch(os.path.basename(member), pattern):
                    target = os.path.join(self.work, os.path.basename(member))
                    if not os.path.isfile(target):
                        logger.info("extracting %s from %s", member, archive)
                        with tarfile.open(archive) as tar, open(target, "wb") as out:
                            shutil.copyfileobj(tar.extractfile(member), out)
                    return target
        return None


def download(raw_dir, archive, url):
    path = os.path.join(raw_dir, archive)
    logger.info("downloading %s", url)
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(path + ".part", "wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as error:
        raise PreparationError(f"downloading {url} failed ({error}); put {archive} (or the files it holds) into "
                               f"--raw-dir {raw_dir} yourself") from None
    os.replace(path + ".part", path)


def read_sgm(path):
    """The segments of a WMT 'fake SGML' file, with sacreBLEU's own reader of that format."""
    from sacrebleu.dataset.fake_sgml import FakeSGMLDataset

    read_lines(path)  # the same one-line error for bytes that are not UTF-8
    with tempfile.NamedTemporaryFile("r", suffix=".txt", encoding="utf-8") as plain:
        # sacreBLEU's converter needs no dataset state; a bare instance avoids its download machinery.
        FakeSGMLDataset.__new__(FakeSGMLDataset)._convert_format(path, plain.name)
        return read_lines(plain.name)


def read_side_by_side(paths):
    return check_side_by_side(paths, [read_sgm(path) if path.endswith(".sgm") else read_lines(path) for path in paths])


def locate(folder, names, src, tgt, allow_download):
    """``{name: [source path, target path]}`` for each of ``names`` (name -> (pattern, archive, url)),
    downloading a missing archive when allowed."""
    pair = corpus_pair(src, tgt)
    found = {}
    for name, (pattern, archive, url) in names.items():
        patterns = [pattern.format(pair=pair, compact=pair.replace("-", ""), lang=lang, role=role)
                    for lang, role in ((src, "src"), (tgt, "ref"))]
        paths = [folder.find(p) for p in patterns]
        if not all(paths) and allow_download and not folder.find(archive):
            download(folder.raw_dir, archive, url)
            folder.rescan()
            paths = [folder.find(p) for p in patterns]
        missing = [p for p, path in zip(patterns, paths) if path is None]
        if missing:
            raise PreparationError(f"{', '.join(missing)} not found in --raw-dir {folder.raw_dir} (as a file or inside "
                                   f"{archive}); put {archive} there or pass --download")
        found[name] = paths
    return found


def write_folder(train_paths, held_out_paths, folder, src, tgt):
    """Writes the training corpora one after another and the held-out sets as line-aligned files in ``folder``
    (``train``, ``valid``, ``test_newstest2014``); returns the pairs of each training corpus."""
    os.makedirs(folder, exist_ok=True)
    counts = {}
    for stem, corpora in (("train", train_paths), ("valid", {"valid": held_out_paths["valid"]}),
                          ("test_newstest2014", {"test": held_out_paths["test"]})):
        outputs = [open(os.path.join(folder, f"{stem}.{lang}"), "w", encoding="utf-8") for lang in (src, tgt)]
        try:
            for name, paths in corpora.items():
                sides = read_side_by_side(paths)
                for out, lines in zip(outputs, sides):
                    out.writelines(line.strip() + "\n" for line in lines)
                counts[name] = len(sides[0])
                logger.info("read %s: %d pairs", name, len(sides[0]))
        finally:
            for out in outputs:
                out.close()
    return {name: counts[name] for name in train_paths}


def prepare(raw_dir, dest, src="en", tgt="de", vocab_size=32000, spm_sample=1_000_000, workers=1,
            news_commentary=9, allow_download=False):
    if src == tgt:
        raise PreparationError(f"--src and --tgt are both {src}; choose two languages")
    if not os.path.isdir(raw_dir):
        if not allow_download:
            raise PreparationError(f"--raw-dir {raw_dir} does not exist; point it at the WMT14 files or pass --download")
        os.makedirs(raw_dir)
    os.makedirs(dest, exist_ok=True)
    work = tempfile.mkdtemp(prefix="wmt14-", dir=dest)
    try:
        folder = RawFolder(raw_dir, os.path.join(work, "extracted"))
        os.makedirs(folder.work)
        training = {**TRAIN_CORPORA, f"news-commentary-v{news_commentary}": NEWS_COMMENTARY[news_commentary]}
        train_paths = locate(folder, training, src, tgt, allow_download)
        held_out_paths = locate(folder, HELD_OUT, src, tgt, allow_download)
        corpus = os.path.join(work, "corpus")
        corpora = write_folder(train_paths, held_out_paths, corpus, src, tgt)
        if not nonempty_pairs(read_parallel(corpus, "train", src, tgt)):
            raise PreparationError(f"no training pair is left after removing empty lines; check the files in "
                                   f"--raw-dir {raw_dir}")
        info = prepare_corpus([corpus], dest, src, tgt, cleaning=WMT_FILTERS, vocab_size=vocab_size,
                              spm_sample=spm_sample, workers=workers, name="wmt14")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    info.update(input=[os.path.abspath(raw_dir)], news_commentary=news_commentary, corpora=corpora)
    write_manifest(dest, info)
    return info


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw-dir", required=True, help="folder with the WMT14 files or archives as distributed")
    parser.add_argument("--dest", help="output folder (default data-bin/wmt14.SRC-TGT)")
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--vocab-size", type=int, default=32000, help="joint sentencepiece pieces (default 32,000)")
    parser.add_argument("--spm-sample", type=int, default=1_000_000,
                        help="training sentences (both sides) sentencepiece learns from, drawn at random")
    parser.add_argument("--news-commentary", type=int, choices=sorted(NEWS_COMMENTARY), default=9,
                        help="News Commentary version: 9 (4.5M pairs in all, the paper's) or 12")
    parser.add_argument("--workers", type=int, default=1, help="encoding threads and fairseq-preprocess workers")
    parser.add_argument("--download", action="store_true", help="fetch missing archives from statmt.org")
    args = parser.parse_args(argv)
    dest = args.dest or os.path.join("data-bin", f"wmt14.{args.src}-{args.tgt}")
    return exit_code(lambda: prepare(args.raw_dir, dest, args.src, args.tgt, args.vocab_size, args.spm_sample,
                                     args.workers, args.news_commentary, args.download), logger)


if __name__ == "__main__":
    sys.exit(main())
