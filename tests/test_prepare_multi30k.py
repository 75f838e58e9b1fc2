"""scripts/prepare_multi30k.py refuses bad raw input with a message that names the file."""

import gzip
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("prepare_multi30k", os.path.join(ROOT, "scripts", "prepare_multi30k.py"))
prepare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prepare)


def write(path, data):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(data)


def test_reads_plain_and_gzipped_sides(tmp_path):
    write(str(tmp_path / "train.de.gz"), "Ein Hund .\nZwei Katzen .\n".encode())
    write(str(tmp_path / "train.en"), b"A dog .\r\nTwo cats .\n")
    src, tgt = prepare.read_parallel(str(tmp_path), "train", "de", "en")
    assert src == ["Ein Hund .", "Zwei Katzen ."] and tgt == ["A dog .", "Two cats ."]


def test_missing_side_names_the_file_and_flag(tmp_path):
    write(str(tmp_path / "train.de"), b"x\n")
    with pytest.raises(prepare.PreparationError, match=r"train\.en\[\.gz\] is missing; check --raw-dir"):
        prepare.read_parallel(str(tmp_path), "train", "de", "en")


def test_different_line_counts_are_refused(tmp_path):
    write(str(tmp_path / "val.de"), b"a\nb\nc\n")
    write(str(tmp_path / "val.en"), b"a\nb\n")
    with pytest.raises(prepare.PreparationError, match="has 3 lines but .*val.en has 2"):
        prepare.read_parallel(str(tmp_path), "val", "de", "en")


def test_empty_file_is_refused(tmp_path):
    write(str(tmp_path / "val.de"), b"")
    write(str(tmp_path / "val.en"), b"")
    with pytest.raises(prepare.PreparationError, match="val.de is empty"):
        prepare.read_parallel(str(tmp_path), "val", "de", "en")


def test_undecodable_bytes_name_the_line(tmp_path):
    write(str(tmp_path / "val.de"), b"gut\n\xff\xfe kaputt\n")
    write(str(tmp_path / "val.en"), b"good\nbroken\n")
    with pytest.raises(prepare.PreparationError, match="val.de: line 2 is not valid UTF-8"):
        prepare.read_parallel(str(tmp_path), "val", "de", "en")


def test_unreachable_download_says_where_to_put_the_files(tmp_path):
    with pytest.raises(prepare.PreparationError, match="point --raw-dir at a folder that has them"):
        prepare.download_missing(str(tmp_path), ["train"], ["de"], base_url="http://127.0.0.1:9")


def test_main_reports_errors_without_a_traceback(tmp_path, capsys):
    assert prepare.main(["--raw-dir", str(tmp_path), "--dest", str(tmp_path / "out"), "--no-download"]) == 2
