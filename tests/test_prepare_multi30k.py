"""scripts/prepare_multi30k.py, a preset of autoassist-prepare: bad raw input stops with a message that names the
file (the reading is fairseq_autoassist/corpus/raw_corpus.py's), and a noisy copy's list follows its pairs."""

import gzip
import logging

import pytest

from fairseq_autoassist.corpus import raw_corpus
from fairseq_autoassist.recipes import write_synthetic_multi30k
from scripts import prepare_multi30k as prepare


def write(path, data):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(data)


def test_reads_plain_and_gzipped_sides(tmp_path):
    write(str(tmp_path / "train.de.gz"), "Ein Hund .\nZwei Katzen .\n".encode())
    write(str(tmp_path / "train.en"), b"A dog .\r\nTwo cats .\n")
    src, tgt = raw_corpus.read_parallel(str(tmp_path), "train", "de", "en")
    assert src == ["Ein Hund .", "Zwei Katzen ."] and tgt == ["A dog .", "Two cats ."]


def test_missing_side_names_the_file_and_flag(tmp_path):
    write(str(tmp_path / "train.de"), b"x\n")
    with pytest.raises(raw_corpus.PreparationError, match=r"train\.en\[\.gz\] is missing; check --raw-dir"):
        raw_corpus.read_parallel(str(tmp_path), "train", "de", "en")


def test_different_line_counts_are_refused(tmp_path):
    write(str(tmp_path / "val.de"), b"a\nb\nc\n")
    write(str(tmp_path / "val.en"), b"a\nb\n")
    with pytest.raises(raw_corpus.PreparationError, match="has 3 lines but .*val.en has 2"):
        raw_corpus.read_parallel(str(tmp_path), "val", "de", "en")


def test_empty_file_is_refused(tmp_path):
    write(str(tmp_path / "val.de"), b"")
    write(str(tmp_path / "val.en"), b"")
    with pytest.raises(raw_corpus.PreparationError, match="val.de is empty"):
        raw_corpus.read_parallel(str(tmp_path), "val", "de", "en")


def test_undecodable_bytes_name_the_line(tmp_path):
    write(str(tmp_path / "val.de"), b"gut\n\xff\xfe kaputt\n")
    write(str(tmp_path / "val.en"), b"good\nbroken\n")
    with pytest.raises(raw_corpus.PreparationError, match="val.de: line 2 is not valid UTF-8"):
        raw_corpus.read_parallel(str(tmp_path), "val", "de", "en")


def test_unreachable_download_says_where_to_put_the_files(tmp_path):
    with pytest.raises(raw_corpus.PreparationError, match="point --raw-dir at a folder that has them"):
        prepare.download_missing(str(tmp_path), ["train"], ["de"], base_url="http://127.0.0.1:9")


def test_main_reports_errors_as_one_message_and_an_exit_code(tmp_path, caplog):
    with caplog.at_level(logging.ERROR, logger="prepare_multi30k"):
        assert prepare.main(["--raw-dir", str(tmp_path), "--dest", str(tmp_path / "out"), "--no-download"]) == 2
    [record] = caplog.records
    assert "train.de[.gz] is missing; check --raw-dir" in record.getMessage()
    assert record.exc_info is None


@pytest.mark.slow
def test_empty_training_pairs_are_dropped_with_a_count_and_the_noise_list_follows(tmp_path, caplog):
    raw = write_synthetic_multi30k(str(tmp_path / "raw"))
    source, target = raw_corpus.read_parallel(raw, "train", "de", "en")
    source[1], target[2] = "", " "
    for lang, lines in (("de", source), ("en", target)):
        (tmp_path / "raw" / f"train.{lang}").write_text("".join(line + "\n" for line in lines))
    raw_corpus.write_noise(str(tmp_path / "raw" / raw_corpus.NOISE_LIST), {0: "misaligned", 5: "untranslated",
                                                                            2: "truncated"})
    with caplog.at_level(logging.WARNING, logger="autoassist-prepare"):
        info = prepare.prepare(raw, str(tmp_path / "bin"), "de", "en", vocab_size=120, download=False)
    assert info["empty_training_pairs_dropped"] == 2 and info["pairs"]["train"] == len(source) - 2
    assert "dropped 2 training pairs with an empty side (the first at line 2)" in caplog.text
    # Line 5 of the raw corpus is the fourth training pair left; line 2 (emptied) is gone from the list.
    assert raw_corpus.read_noise(str(tmp_path / "bin" / raw_corpus.NOISE_LIST)) == {0: "misaligned",
                                                                                     3: "untranslated"}
    assert info["clean_only"]["train_pairs"] == len(source) - 4
