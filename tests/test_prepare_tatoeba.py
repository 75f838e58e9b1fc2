"""scripts/prepare_tatoeba.py, a preset of autoassist-prepare: the split by English sentence and one line for each
bad input."""

import json
import os
import zipfile

import numpy as np
import pytest

from fairseq_autoassist.corpus.prepare_corpus import group_keys, read_table, split_off
from fairseq_autoassist.corpus.raw_corpus import PreparationError
from scripts import prepare_tatoeba as prepare

from .conftest import run_script


def write_zip(path, text, member="deu.txt"):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


def corpus(num_sentences, translations=3):
    """English sentence i with ``1 + i % translations`` German translations, in a Tatoeba-like file."""
    return "".join(f"Sentence {i}.\tSatz {i} Nummer {k}.\tCC-BY 2.0 (France)\n"
                   for i in range(num_sentences) for k in range(1 + i % translations))


def test_every_pair_of_one_english_sentence_lands_in_one_split(tmp_path):
    english, german = read_table(write_zip(tmp_path / "deu-eng.zip", corpus(300)), (1, 2))
    keys = group_keys("source", english, german, list(range(len(english))))
    splits = {name: ([english[i] for i in ids], [german[i] for i in ids])
              for name, ids in split_off(keys, valid_groups=40, test_groups=30, seed=1).items()}
    sentences = {name: set(sides[0]) for name, sides in splits.items()}
    assert len(sentences["valid"]) == 40 and len(sentences["test"]) == 30 and len(sentences["train"]) == 230
    assert not (sentences["train"] & sentences["valid"] or sentences["train"] & sentences["test"]
                or sentences["valid"] & sentences["test"])
    # Every translation of a held-out sentence is held out with it, and no pair is lost.
    assert sum(len(sides[0]) for sides in splits.values()) == len(english)
    for en, de in zip(*splits["valid"]):
        assert de.startswith(en.replace("Sentence", "Satz").rstrip("."))
    again = split_off(keys, 40, 30, seed=1)
    assert all(np.array_equal(again[name], ids) for name, ids in split_off(keys, 40, 30, seed=1).items())
    assert not np.array_equal(split_off(keys, 40, 30, seed=2)["valid"], again["valid"])


@pytest.mark.parametrize("content, message", [
    (b"Hi.\tHallo!\nRun!\n", "deu.txt: line 2 has 1 tab-separated columns; --columns 2,1 needs 2"),
    (b"Hi.\tHallo!\nGr\xfc\xdf Gott.\tx\n", "deu.txt: line 2 is not valid UTF-8"),
    (b"\n\n", "holds no sentence pairs"),
])
def test_bad_input_is_refused_naming_file_and_line(tmp_path, content, message):
    with pytest.raises(PreparationError, match=message):
        prepare.prepare(write_zip(tmp_path / "deu-eng.zip", content), str(tmp_path / "out"))


def test_a_missing_file_or_member_names_the_download_and_the_flag(tmp_path):
    with pytest.raises(PreparationError, match="does not exist; download .*deu-eng.zip and pass it with --input"):
        prepare.prepare(str(tmp_path / "nowhere.zip"), str(tmp_path / "out"))
    with pytest.raises(PreparationError, match="has no deu.txt .*or another language's with autoassist-prepare"):
        prepare.prepare(write_zip(tmp_path / "fra-eng.zip", "Hi.\tSalut.\n", member="fra.txt"), str(tmp_path / "out"))


def test_main_reports_an_error_as_one_message_and_an_exit_code(tmp_path, caplog):
    assert prepare.main(["--input", str(tmp_path / "none.zip"), "--dest", str(tmp_path / "out")]) == 2
    assert "does not exist" in caplog.records[-1].getMessage()


@pytest.mark.slow
def test_prepares_a_data_bin_with_the_counts_and_the_other_domains_test(tmp_path, raw_corpus):
    text = corpus(200) + "\tleer\n"
    dest = tmp_path / "tatoeba.de-en"
    info = prepare.prepare(write_zip(tmp_path / "deu-eng.zip", text), str(dest), vocab_size=100, valid_sentences=20,
                           test_sentences=20, multi30k_dir=raw_corpus)
    with open(dest / "prepare.json") as f:
        assert json.load(f) == info
    assert info["empty_training_pairs_dropped"] == 1
    assert info["groups"] == {"train": 160, "valid": 20, "test": 20}
    assert info["pairs"]["train"] + info["pairs"]["valid"] + info["pairs"]["test"] == 399
    assert info["test_sets"] == {"test": "tatoeba", "test1": "multi30k_test_2016_flickr"}
    for name in ("train.de-en.de.bin", "test1.de-en.en.idx", "raw/test.en", "raw/test1.de", "spm.model"):
        assert os.path.exists(dest / name), name


@pytest.mark.slow
def test_the_tatoeba_preset_trains_and_scores_every_prepared_test_set(tmp_path, raw_corpus):
    """The preset's recipe at 1% of its budget on a small Tatoeba-like corpus: the plugin's iterator and a rule
    that learns from the first batch, each scored on the Tatoeba test and on the other domain's (the stock arm's
    path is the smoke preset's). An untrained model's empty translations validate at BLEU 0."""
    data = tmp_path / "tatoeba.de-en"
    prepare.prepare(write_zip(tmp_path / "deu-eng.zip", corpus(800)), str(data), vocab_size=100, valid_sentences=20,
                    test_sentences=20, multi30k_dir=raw_corpus)
    out = tmp_path / "bench"
    run_script("-m", "fairseq_autoassist.benchmark.command", "--preset", "tatoeba", "--data", str(data), "--out", str(out), "--seeds", "1",
               "--arms", "keep-all@0.01", "near-duplicates-no-warmup@0.01", "--validate-interval-updates", "45",
               timeout=1200)
    with open(out / "results.json") as f:
        runs = {run["arm"]: run for run in json.load(f)["runs"]}
    assert set(runs) == {"keep-all@0.01", "near-duplicates-no-warmup@0.01"}
    for run in runs.values():
        assert run["validations"][-1]["updates"] == 45
        assert set(run["other_test_bleu"]) == {"multi30k_test_2016_flickr"}
    assert "aa_own_share" in (out / "runs" / "near-duplicates-no-warmup@0.01-seed1" / "train.log").read_text()
