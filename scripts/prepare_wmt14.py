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

Steps, with progress in the log: read each corpus (strict UTF-8, equal line counts per side); drop pairs
with an empty side and exact duplicate pairs (the first stays); train one joint sentencepiece model
(``--vocab-size``, default 32,000 pieces) on a random sample of ``--spm-sample`` training sentences; encode
every split; drop training pairs with a side outside 1-250 pieces or a length ratio above 1.5 (the
filter of fairseq's script, ``clean-corpus-n.perl -ratio 1.5 ... 1 250``); binarize with
``fairseq-preprocess --joined-dictionary --workers``. Beside the data: ``spm.model``,
``raw/{valid,test}.{src,tgt}`` (the untokenized references, for ``scripts/evaluate_bleu.py``) and
``prepare.json`` (pairs per corpus, what each filter removed, the settings).
"""

import argparse
import fnmatch
import logging
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request

from fairseq_autoassist.preparation import write_manifest
from fairseq_autoassist.raw_corpus import PreparationError, check_side_by_side, exit_code, read_lines

logger = logging.getLogger("prepare_wmt14")

MAX_PIECES = 250
MAX_RATIO = 1.5
PROGRESS_EVERY = 500_000
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


def clean_pairs(corpora):
    """Training pairs of every corpus without empty sides and exact duplicates; counts per corpus and filter."""
    seen, source, target = set(), [], []
    counts = {"corpora": {}, "removed": {"empty": 0, "duplicate": 0}}
    for name, (src_lines, tgt_lines) in corpora.items():
        counts["corpora"][name] = len(src_lines)
        for src_line, tgt_line in zip(src_lines, tgt_lines):
            src_line, tgt_line = src_line.strip(), tgt_line.strip()
            if not src_line or not tgt_line:
                counts["removed"]["empty"] += 1
                continue
            key = hash((src_line, tgt_line))
            if key in seen:
                counts["removed"]["duplicate"] += 1
                continue
            seen.add(key)
            source.append(src_line)
            target.append(tgt_line)
        logger.info("read %s: %d pairs (%d kept so far)", name, len(src_lines), len(source))
    return source, target, counts


def train_sentencepiece(source, target, prefix, vocab_size, sample, seed):
    import sentencepiece as spm

    rng = random.Random(seed)
    total = len(source) + len(target)
    chosen = sorted(rng.sample(range(total), min(sample, total)))
    sentences = (source[i] if i < len(source) else target[i - len(source)] for i in chosen)
    logger.info("training sentencepiece (%d pieces) on %d of %d sentences", vocab_size, len(chosen), total)
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=sentences, model_prefix=prefix, vocab_size=vocab_size,
                                       character_coverage=1.0, model_type="unigram", num_threads=os.cpu_count(),
                                       input_sentence_size=len(chosen), minloglevel=1)
    except RuntimeError as error:
        raise PreparationError(f"sentencepiece could not train {vocab_size} pieces ({str(error).splitlines()[-1]}); "
                               "lower --vocab-size") from None
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def encode(model, lines, threads):
    """Sentencepiece pieces of ``lines``, in chunks with progress reports."""
    for start in range(0, len(lines), PROGRESS_EVERY):
        yield from model.encode(lines[start:start + PROGRESS_EVERY], out_type=str, num_threads=threads)
        if len(lines) > PROGRESS_EVERY:
            logger.info("encoded %d of %d sentences", min(start + PROGRESS_EVERY, len(lines)), len(lines))


def keep_by_length(source_pieces, target_pieces):
    """Whether a pair has both sides within 1-250 pieces and a length ratio of at most 1.5, and if not,
    which test removed it ("length" is tested first)."""
    if not (1 <= len(source_pieces) <= MAX_PIECES and 1 <= len(target_pieces) <= MAX_PIECES):
        return "length"
    if max(len(source_pieces), len(target_pieces)) > MAX_RATIO * min(len(source_pieces), len(target_pieces)):
        return "ratio"
    return None


def write_training_pieces(model, source, target, prefix, src, tgt, threads):
    """Encodes the training pairs and writes those the length tests keep to ``prefix.{src,tgt}``, one
    chunk of pairs in memory at a time; returns the pairs kept and the number each test removed."""
    kept, removed = 0, {"length": 0, "ratio": 0}
    with open(f"{prefix}.{src}", "w", encoding="utf-8") as out_src, \
            open(f"{prefix}.{tgt}", "w", encoding="utf-8") as out_tgt:
        for source_pieces, target_pieces in zip(encode(model, source, threads), encode(model, target, threads)):
            reason = keep_by_length(source_pieces, target_pieces)
            if reason:
                removed[reason] += 1
                continue
            out_src.write(" ".join(source_pieces) + "\n")
            out_tgt.write(" ".join(target_pieces) + "\n")
            kept += 1
    return kept, removed


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write((" ".join(line) if isinstance(line, list) else line) + "\n")


def prepare(raw_dir, dest, src="en", tgt="de", vocab_size=32000, spm_sample=1_000_000, workers=1,
            news_commentary=9, allow_download=False, seed=1):
    if src == tgt:
        raise PreparationError(f"--src and --tgt are both {src}; choose two languages")
    if not os.path.isdir(raw_dir):
        if not allow_download:
            raise PreparationError(f"--raw-dir {raw_dir} does not exist; point it at the WMT14 files or pass --download")
        os.makedirs(raw_dir)
    os.makedirs(dest, exist_ok=True)
    work = tempfile.mkdtemp(prefix="wmt14-", dir=dest)
    try:
        folder = RawFolder(raw_dir, work)
        training = {**TRAIN_CORPORA, f"news-commentary-v{news_commentary}": NEWS_COMMENTARY[news_commentary]}
        train_paths = locate(folder, training, src, tgt, allow_download)
        held_out_paths = locate(folder, HELD_OUT, src, tgt, allow_download)
        source, target, counts = clean_pairs({name: read_side_by_side(paths) for name, paths in train_paths.items()})
        if not source:
            raise PreparationError(f"no training pair is left after removing empty lines and duplicates; check the "
                                   f"files in --raw-dir {raw_dir}")
        held_out = {split: read_side_by_side(paths) for split, paths in held_out_paths.items()}

        model = train_sentencepiece(source, target, os.path.join(dest, "spm"), vocab_size, spm_sample, seed)
        threads = max(1, workers)
        kept, removed = write_training_pieces(model, source, target, os.path.join(work, "train"), src, tgt, threads)
        counts["removed"].update(removed)
        if not kept:
            raise PreparationError(f"every training pair has a side longer than {MAX_PIECES} pieces or a length ratio "
                                   f"above {MAX_RATIO}; check the files in --raw-dir {raw_dir}")
        os.makedirs(os.path.join(dest, "raw"), exist_ok=True)
        for split, sides in held_out.items():
            for lang, lines in zip((src, tgt), sides):
                write_lines(os.path.join(work, f"{split}.{lang}"), encode(model, lines, threads))
                write_lines(os.path.join(dest, "raw", f"{split}.{lang}"), lines)
        for stale in os.listdir(dest):
            if stale.startswith("dict.") or stale.endswith((".bin", ".idx")):
                os.unlink(os.path.join(dest, stale))
        command = [sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", src, "--target-lang", tgt,
                   "--trainpref", os.path.join(work, "train"), "--validpref", os.path.join(work, "valid"),
                   "--testpref", os.path.join(work, "test"), "--destdir", dest, "--joined-dictionary",
                   "--workers", str(max(1, workers))]
        logger.info("binarizing: %s", " ".join(command))
        subprocess.run(command, check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    info = {
        "source": src, "target": tgt, "news_commentary": news_commentary,
        "corpora": counts["corpora"], "removed": counts["removed"],
        "pairs": {"train": kept, "valid": len(held_out["valid"][0]), "test": len(held_out["test"][0])},
        "sentencepiece_pieces": model.get_piece_size(), "sentencepiece_sample": min(spm_sample, 2 * len(source)),
        "filters": {"pieces": [1, MAX_PIECES], "max_ratio": MAX_RATIO, "exact_duplicates": "removed"},
        "raw_dir": os.path.abspath(raw_dir),
    }
    write_manifest(dest, info)
    logger.info("prepared %s: %s; removed %s", dest, info["pairs"], info["removed"])
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
    parser.add_argument("--seed", type=int, default=1, help="seed of the sentencepiece sample")
    args = parser.parse_args(argv)
    dest = args.dest or os.path.join("data-bin", f"wmt14.{args.src}-{args.tgt}")
    return exit_code(lambda: prepare(args.raw_dir, dest, args.src, args.tgt, args.vocab_size, args.spm_sample,
                                     args.workers, args.news_commentary, args.download, args.seed), logger)


if __name__ == "__main__":
    sys.exit(main())
