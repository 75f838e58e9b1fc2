"""From parallel text in memory to a fairseq data-bin folder: one joint sentencepiece model, every split
encoded with it, ``fairseq-preprocess --joined-dictionary``, and what evaluation needs kept beside the data
(``spm.model``, ``raw/{split}.{lang}`` of every held-out split). Used by ``autoassist-prepare``
(``prepare_corpus.py``), which every preparation script runs.

A joined dictionary makes one folder serve both directions: fairseq finds ``train.de-en.*`` for
``--source-lang en --target-lang de`` too.
"""

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile

from .raw_corpus import PreparationError

logger = logging.getLogger(__name__)


def train_sentencepiece(texts, model_prefix, vocab_size, character_coverage=1.0, sample=None):
    """A unigram sentencepiece model of ``vocab_size`` pieces (a soft limit on small corpora) on ``texts`` (at most
    ``sample`` of them, drawn at random, where given), covering ``character_coverage`` of their characters."""
    import sentencepiece as spm

    if vocab_size < 16:
        raise PreparationError(f"--vocab-size {vocab_size} is too small; use at least 16")
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        for line in texts:
            f.write(line + "\n")
        corpus = f.name
    try:
        spm.SentencePieceTrainer.train(
            input=corpus, model_prefix=model_prefix, vocab_size=vocab_size, model_type="unigram",
            character_coverage=character_coverage, hard_vocab_limit=False, bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0,
            minloglevel=2, **sampled(sample, len(texts)),
        )
    finally:
        os.unlink(corpus)
    return spm.SentencePieceProcessor(model_file=model_prefix + ".model")


def sampled(sample, num_texts):
    """sentencepiece's options to learn from ``sample`` of ``num_texts`` sentences drawn at random (none when all
    of them fit, so a small corpus gives the model it always gave)."""
    return {"input_sentence_size": sample, "shuffle_input_sentence": True} if sample and num_texts > sample else {}


def write_data_bin(dest, splits, src, tgt, vocab_size, workers=1, character_coverage=1.0, sample=None,
                   stage=None):
    """Binarizes ``splits`` (``{fairseq split name: (source lines, target lines)}``, with ``train``,
    ``valid`` and one or more ``test*``) into ``dest`` with a sentencepiece model trained on the training
    pairs (``train_sentencepiece``'s ``character_coverage`` and ``sample``); returns the model's number of pieces.
    ``stage(name, action, *args)`` runs each of the three stages (a caller times and logs them)."""
    stage = stage or _unlogged
    os.makedirs(dest, exist_ok=True)
    work = tempfile.mkdtemp(prefix="spm-", dir=dest)
    try:
        train_src, train_tgt = splits["train"]
        model = stage("training sentencepiece", train_sentencepiece, train_src + train_tgt, os.path.join(dest, "spm"),
                      vocab_size, character_coverage, sample)
        stage("encoding", _encode_splits, model, splits, src, tgt, work, dest)
        for stale in os.listdir(dest):
            if stale.startswith("dict.") or stale.endswith((".bin", ".idx")):
                os.unlink(os.path.join(dest, stale))
        command = [
            sys.executable, "-m", "fairseq_cli.preprocess",
            "--source-lang", src, "--target-lang", tgt,
            "--trainpref", os.path.join(work, "train"),
            "--validpref", os.path.join(work, "valid"),
            "--testpref", ",".join(os.path.join(work, split) for split in splits if split.startswith("test")),
            "--destdir", dest, "--joined-dictionary", "--workers", str(workers),
        ]
        logger.info("binarizing: %s", " ".join(command))
        stage("binarizing", subprocess.run, command, check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return model.get_piece_size()


def _unlogged(name, action, *args, **kwargs):
    return action(*args, **kwargs)


def _encode_splits(model, splits, src, tgt, work, dest):
    """Every split's pieces into ``work`` for fairseq-preprocess, the held-out splits' raw text into ``dest/raw``."""
    os.makedirs(os.path.join(dest, "raw"), exist_ok=True)
    for split, sides in splits.items():
        for lang, lines in zip((src, tgt), sides):
            with open(os.path.join(work, f"{split}.{lang}"), "w", encoding="utf-8") as f:
                for pieces in model.encode(lines, out_type=str):
                    f.write(" ".join(pieces) + "\n")
            if split != "train":
                with open(os.path.join(dest, "raw", f"{split}.{lang}"), "w", encoding="utf-8") as f:
                    f.write("\n".join(lines) + "\n")
            logger.info("encoded %s.%s: %d lines", split, lang, len(lines))


def write_manifest(dest, info):
    """``dest/prepare.json``: what the preparation made (counts, settings). Written last, once: a folder that has it
    is finished (``recipes.require_prepared`` checks for it)."""
    with open(os.path.join(dest, "prepare.json"), "w") as f:
        json.dump(info, f, indent=2)
