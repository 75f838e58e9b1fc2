"""scripts/prepare_wmt14.py, a preset of autoassist-prepare, on small synthetic files in WMT's distributed formats:
plain parallel text, .tgz archives and the SGM test files."""

import io
import json
import os
import random
import tarfile

import numpy as np
import pytest

from scripts import prepare_wmt14 as prepare

from .conftest import run_script

WORDS = [f"wort{i}" for i in range(40)]


def sentence(rng, low=3, high=12):
    return [rng.choice(WORDS) for _ in range(rng.randint(low, high))]


def pairs(rng, count):
    """German-like source, English-like target: the words renamed and reversed."""
    out = []
    for _ in range(count):
        words = sentence(rng)
        out.append((" ".join(words), " ".join(w.replace("wort", "word") for w in reversed(words))))
    return out


def add_to_tgz(archive, members):
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def lines(texts):
    return "".join(text + "\n" for text in texts)


def sgm(segments, set_type, lang):
    body = "".join(f'<seg id="{i}"> {text}  </seg>\n' for i, text in enumerate(segments, start=1))
    return (f'<{set_type} setid="newstest2014" srclang="any" trglang="{lang}">\n<doc sysid="ref" docid="1" '
            f'genre="news" origlang="de">\n<p>\n{body}</p>\n</doc>\n</{set_type}>\n')


@pytest.fixture
def wmt_folder(tmp_path):
    """Europarl and News Commentary in their archives, Common Crawl as plain files, newstest2013 as plain
    files in dev/, newstest2014 as SGM in test-full.tgz. Planted: an empty side (europarl), a duplicate of
    a europarl pair and a 300-word pair (commoncrawl), a pair of length ratio 4 (news commentary)."""
    rng = random.Random(0)
    raw = tmp_path / "raw"
    (raw / "dev").mkdir(parents=True)
    europarl = pairs(rng, 40)
    europarl[5] = ("", "an empty source")
    commoncrawl = pairs(rng, 30)
    commoncrawl[3] = europarl[7]
    long_words = [rng.choice(WORDS) for _ in range(300)]
    commoncrawl[9] = (" ".join(long_words), " ".join(w.replace("wort", "word") for w in long_words))
    news = pairs(rng, 20)
    news[2] = ("wort1 wort2 wort3", " ".join(["word4"] * 12))
    add_to_tgz(raw / "training-parallel-europarl-v7.tgz", {
        f"training/europarl-v7.de-en.{lang}": lines(p[side] for p in europarl) for side, lang in ((0, "de"), (1, "en"))})
    add_to_tgz(raw / "training-parallel-nc-v9.tgz", {
        f"training/news-commentary-v9.de-en.{lang}": lines(p[side] for p in news) for side, lang in ((0, "de"), (1, "en"))})
    for side, lang in ((0, "de"), (1, "en")):
        (raw / f"commoncrawl.de-en.{lang}").write_text(lines(p[side] for p in commoncrawl), encoding="utf-8")
    dev, test = pairs(rng, 12), pairs(rng, 15)
    for side, lang in ((0, "de"), (1, "en")):
        (raw / "dev" / f"newstest2013.{lang}").write_text(lines(p[side] for p in dev), encoding="utf-8")
    add_to_tgz(raw / "test-full.tgz", {
        "test-full/newstest2014-deen-src.de.sgm": sgm([p[0] for p in test], "srcset", "de"),
        "test-full/newstest2014-deen-ref.en.sgm": sgm([p[1] for p in test], "refset", "en"),
        "test-full/newstest2014-deen-src.en.sgm": sgm([p[1] for p in test], "srcset", "en"),
        "test-full/newstest2014-deen-ref.de.sgm": sgm([p[0] for p in test], "refset", "de"),
    })
    return raw, {"dev": dev, "test": test}


def test_sgm_segments_are_read_with_sacrebleus_reader(tmp_path):
    path = tmp_path / "newstest2014-deen-ref.en.sgm"
    path.write_text(sgm(["A  dog runs .", "Two cats"], "refset", "en"), encoding="utf-8")
    assert prepare.read_sgm(str(path)) == ["A dog runs .", "Two cats"]


def test_the_pair_is_named_by_the_other_language_and_english():
    assert prepare.corpus_pair("en", "de") == prepare.corpus_pair("de", "en") == "de-en"


@pytest.mark.slow
def test_prepares_every_corpus_with_wmt_cleaning_and_a_manifest(tmp_path, wmt_folder):
    raw, held_out = wmt_folder
    dest = tmp_path / "data-bin"
    info = prepare.prepare(str(raw), str(dest), src="en", tgt="de", vocab_size=48, spm_sample=1000)
    assert info["corpora"] == {"europarl-v7": 40, "commoncrawl": 30, "news-commentary-v9": 20}
    assert info["empty_training_pairs_dropped"] == 1
    removed = {rule: report["removed"] for rule, report in info["cleaning"]["filters"].items() if report["removed"]}
    assert removed == {"duplicate": 1, "length": 1, "length_ratio": 1}
    assert info["pairs"] == {"train": 86, "valid": 12, "test": 15}
    assert info["test_sets"] == {"test": "test_newstest2014"} and info["input"] == [str(raw)]
    assert json.loads((dest / "prepare.json").read_text()) == info
    # en -> de: the test source is the English -src file, the reference the German -ref file, untokenized.
    assert (dest / "raw" / "test.de").read_text(encoding="utf-8").splitlines() == [p[0] for p in held_out["test"]]
    assert (dest / "raw" / "test.en").read_text(encoding="utf-8").splitlines() == [p[1] for p in held_out["test"]]
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(dest / "dict.en.txt"))
    assert (dest / "dict.de.txt").read_text() == (dest / "dict.en.txt").read_text()
    for split, size in info["pairs"].items():
        for lang in ("en", "de"):
            dataset = data_utils.load_indexed_dataset(str(dest / f"{split}.en-de.{lang}"), dictionary)
            assert len(dataset) == size
    # Kept in a variable: the sizes are a view of the dataset's memory map, which closes with it.
    train = [data_utils.load_indexed_dataset(str(dest / f"train.en-de.{lang}"), dictionary) for lang in ("en", "de")]
    sizes = [np.array(dataset.sizes) for dataset in train]
    # Sizes count the end-of-sentence token.
    assert max(sizes[0].max(), sizes[1].max()) <= prepare.MAX_PIECES + 1
    ratio = np.maximum(sizes[0] - 1, sizes[1] - 1) / np.minimum(sizes[0] - 1, sizes[1] - 1)
    assert ratio.max() <= prepare.MAX_RATIO

    # The WMT recipe at test size trains on it with AutoAssist, and the result is scored both ways.
    save_dir = tmp_path / "wmt-tiny"
    run_script("scripts/train_wmt14.py", "--data", str(dest), "--save-dir", str(save_dir), "--size", "wmt-tiny",
               "--max-update", "6", "--", "--autoassist-sync")
    printed = run_script("-m", "fairseq_autoassist.evaluate", "--checkpoint", str(save_dir / "checkpoint_last.pt"),
                         "--data", str(dest), "--beam", "2", "--lenpen", "0.6", "--device", "cpu",
                         "--compound-split-bleu").stdout
    assert "BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a" in printed
    assert "tokenized compound-split BLEU = " in printed


def test_a_missing_corpus_names_the_file_the_archive_and_the_flag(tmp_path, wmt_folder):
    raw, _ = wmt_folder
    os.unlink(raw / "training-parallel-nc-v9.tgz")
    with pytest.raises(prepare.PreparationError, match=r"news-commentary-v9\.de-en\.en, news-commentary-v9\.de-en\.de "
                       r"not found in --raw-dir .*training-parallel-nc-v9\.tgz.*--download"):
        prepare.prepare(str(raw), str(tmp_path / "out"))


def test_different_line_counts_and_bad_bytes_are_refused_naming_the_file(tmp_path, wmt_folder):
    raw, _ = wmt_folder
    english = raw / "commoncrawl.de-en.en"
    english.write_text(english.read_text() + "one line too many\n")
    with pytest.raises(prepare.PreparationError, match=r"commoncrawl\.de-en\.en has 31 lines but .* has 30"):
        prepare.prepare(str(raw), str(tmp_path / "out"))
    english.write_bytes(english.read_bytes()[:-18] + b"caf\xe9\n")
    with pytest.raises(prepare.PreparationError, match=r"commoncrawl\.de-en\.en: line 31 is not valid UTF-8"):
        prepare.prepare(str(raw), str(tmp_path / "out"))


def test_an_empty_result_after_cleaning_is_refused(tmp_path, wmt_folder):
    raw, _ = wmt_folder
    for name in ("europarl-v7", "commoncrawl", "news-commentary-v9"):  # plain files are found before archives
        (raw / f"{name}.de-en.de").write_text("\n\n")
        (raw / f"{name}.de-en.en").write_text("a\nb\n")
    with pytest.raises(prepare.PreparationError, match="no training pair is left after removing empty lines"):
        prepare.prepare(str(raw), str(tmp_path / "out"))
