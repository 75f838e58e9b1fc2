"""The ``slow`` marker, and fixtures for the end-to-end tests: a tiny synthetic parallel corpus,
prepared once per session."""

import os
import subprocess
import sys

import pytest

from fairseq_autoassist.recipes import write_synthetic_multi30k

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: runs the real fairseq binaries (minutes); the fast tier is pytest -m 'not slow'"
    )


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
