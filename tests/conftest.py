"""Fixtures for the end-to-end tests: a tiny synthetic parallel corpus, prepared once per session."""

import gzip
import os
import random
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLIT_SIZES = {"train": 400, "val": 40, "test_2016_flickr": 40}


def write_synthetic_multi30k(raw_dir, seed=0):
    """Multi30K-shaped raw files: a word-for-word 'translation' with reordering, train gzipped."""
    rng = random.Random(seed)
    source_words = [f"wort{i}" for i in range(60)]
    target_words = {w: f"word{i}" for i, w in enumerate(source_words)}
    os.makedirs(raw_dir, exist_ok=True)
    for stem, size in SPLIT_SIZES.items():
        pairs = []
        for _ in range(size):
            sentence = [rng.choice(source_words) for _ in range(rng.randint(3, 12))]
            pairs.append((" ".join(sentence), " ".join(target_words[w] for w in reversed(sentence))))
        for lang, column in (("de", 0), ("en", 1)):
            text = "".join(pair[column] + "\n" for pair in pairs).encode("utf-8")
            if stem == "train":
                with gzip.open(os.path.join(raw_dir, f"{stem}.{lang}.gz"), "wb") as f:
                    f.write(text)
            else:
                with open(os.path.join(raw_dir, f"{stem}.{lang}"), "wb") as f:
                    f.write(text)
    return raw_dir


def run_script(*args, check=True, timeout=600):
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited with {result.returncode}:\n{result.stdout[-5000:]}")
    return result


@pytest.fixture(scope="session")
def raw_corpus(tmp_path_factory):
    return write_synthetic_multi30k(str(tmp_path_factory.mktemp("raw")))


@pytest.fixture(scope="session")
def prepared_data(raw_corpus, tmp_path_factory):
    dest = str(tmp_path_factory.mktemp("data-bin") / "synthetic.de-en")
    run_script("scripts/prepare_multi30k.py", "--raw-dir", raw_corpus, "--dest", dest,
               "--vocab-size", "120", "--workers", "1", "--no-download")
    return dest
