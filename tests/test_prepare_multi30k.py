"""scripts/prepare_multi30k.py refuses bad raw input with a message that names the file."""

import gzip
import logging

import pytest

from scripts import prepare_multi30k as prepare


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


def test_main_reports_errors_as_one_message_and_an_exit_code(tmp_path, caplog):
    with caplog.at_level(logging.ERROR, logger="prepare_multi30k"):
        assert prepare.main(["--raw-dir", str(tmp_path), "--dest", str(tmp_path / "out"), "--no-download"]) == 2
    [record] = caplog.records
    assert "train.de[.gz] is missing; check --raw-dir" in record.getMessage()
    assert record.exc_info is None


def test_empty_training_pairs_are_dropped_with_a_count_and_the_noise_list_follows(tmp_path, caplog):
    corpora = {"train": (["a", "", "c", "d"], ["A", "B", " ", "D"]), "val": (["x", ""], ["X", "Y"])}
    with caplog.at_level(logging.WARNING, logger="prepare_multi30k"):
        kept = prepare.drop_empty_training_pairs(corpora, str(tmp_path))
    assert kept == [0, 3] and corpora["train"] == (["a", "d"], ["A", "D"])
    assert corpora["val"] == (["x", ""], ["X", "Y"])  # a held-out split stays the published one
    messages = [record.getMessage() for record in caplog.records]
    assert "dropped 2 training pairs with an empty side (the first at line 2 of" in messages[0]
    assert "has 1 pairs with an empty side; kept" in messages[1]
