"""autoassist-prepare (fairseq_autoassist/corpus/prepare_corpus.py): every input form on tiny files, splits by group that
no group straddles, a made-up language pair with a side without spaces, and one-line errors."""

import gzip
import json
import os
import random
import zipfile

import numpy as np
import pytest

from fairseq_autoassist.corpus import prepare_corpus
from fairseq_autoassist.corpus.raw_corpus import PreparationError

from .conftest import run_script

# A made-up pair: "xx", written in CJK characters without spaces (as Chinese is), and "yy", words with spaces.
SYLLABLES = "山水花鸟风月云雨星海天地人心光影"
WORDS = [f"w{i}" for i in range(len(SYLLABLES))]


def made_up_pairs(count, seed=0):
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        picks = [rng.randrange(len(SYLLABLES)) for _ in range(rng.randint(2, 8))]
        pairs.append(("".join(SYLLABLES[i] for i in picks), " ".join(WORDS[i] for i in reversed(picks))))
    return pairs


def write_sides(folder, stem, pairs, gz=False, langs=("xx", "yy")):
    os.makedirs(folder, exist_ok=True)
    for lang, side in zip(langs, (0, 1)):
        text = "".join(pair[side] + "\n" for pair in pairs).encode("utf-8")
        path = os.path.join(folder, f"{stem}.{lang}" + (".gz" if gz else ""))
        with (gzip.open if gz else open)(path, "wb") as f:
            f.write(text)


def test_a_split_by_chunks_keeps_every_chunk_in_one_split(tmp_path):
    table = tmp_path / "chunks.tsv"
    table.write_text("chunk\tfirst_line\tlines\n0\t0\t4\n1\t4\t3\n2\t7\t5\n3\t12\t2\n4\t14\t6\n")
    keys = prepare_corpus.read_chunks(str(table), 20)
    assert keys.tolist() == [0] * 4 + [1] * 3 + [2] * 5 + [3] * 2 + [4] * 6
    indices = prepare_corpus.split_off(keys, valid_groups=1, test_groups=2, seed=3)
    assert sorted(np.concatenate(list(indices.values())).tolist()) == list(range(20))
    chunks_of = {name: set(keys[ids].tolist()) for name, ids in indices.items()}
    assert len(chunks_of["valid"]) == 1 and len(chunks_of["test"]) == 2 and len(chunks_of["train"]) == 2
    assert not (chunks_of["train"] & chunks_of["valid"] or chunks_of["train"] & chunks_of["test"]
                or chunks_of["valid"] & chunks_of["test"])
    assert all(np.all(np.diff(ids) > 0) for ids in indices.values())  # each split keeps the corpus' order
    with pytest.raises(PreparationError, match="leave no training data of 5 groups"):
        prepare_corpus.split_off(keys, valid_groups=3, test_groups=2, seed=3)


def test_bad_chunk_tables_and_tables_stop_with_the_file_and_line(tmp_path):
    table = tmp_path / "chunks.tsv"
    table.write_text("chunk\tfirst_line\tlines\n0\t0\t4\n1\t4\tmany\n")
    with pytest.raises(PreparationError, match="chunks.tsv: line 3 is not chunk<TAB>first_line<TAB>lines"):
        prepare_corpus.read_chunks(str(table), 10)
    table.write_text("chunk\tfirst_line\tlines\n0\t0\t4\n1\t4\t9\n")
    with pytest.raises(PreparationError, match="line 3 covers lines 4-12, beyond the 10 training lines"):
        prepare_corpus.read_chunks(str(table), 10)
    table.write_text("chunk\tfirst_line\tlines\n0\t0\t4\n")
    with pytest.raises(PreparationError, match="leaves line 5 of the training pairs in no chunk"):
        prepare_corpus.read_chunks(str(table), 10)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("a\tb\tc\nd\te\n")
    with pytest.raises(PreparationError, match=r"pairs.tsv: line 2 has 2 tab-separated columns; --columns 3,1 needs 3"):
        prepare_corpus.read_table(str(tsv), (3, 1))
    with pytest.raises(PreparationError, match="name its source and target columns with --columns"):
        prepare_corpus.read_input([str(tsv)], "fr", "en", None)
    write_sides(tmp_path / "only-train", "train", made_up_pairs(30))
    with pytest.raises(PreparationError, match="has no validation and test split of its own; split them off"):
        prepare_corpus.prepare([str(tmp_path / "only-train")], str(tmp_path / "out"), "xx", "yy")


def test_a_table_a_zip_and_two_files_read_alike(tmp_path):
    pairs = made_up_pairs(12)
    rows = "".join(f"{target}\t{source}\tCC-BY 2.0 (France) Attribution\n" for source, target in pairs)
    (tmp_path / "yyy.txt").write_text(rows, encoding="utf-8")
    with zipfile.ZipFile(tmp_path / "xxx-yyy.zip", "w") as archive:
        archive.writestr("yyy.txt", rows)
        archive.writestr("_about.txt", "the attribution")
    write_sides(tmp_path / "files", "corpus", pairs, gz=True)
    expected = {"train": ([p[0] for p in pairs], [p[1] for p in pairs])}
    for paths, columns in (([tmp_path / "yyy.txt"], (2, 1)), ([tmp_path / "xxx-yyy.zip"], (2, 1)),
                           ([tmp_path / "files" / "corpus.xx.gz", tmp_path / "files" / "corpus.yy.gz"], None)):
        assert prepare_corpus.read_input([str(path) for path in paths], "xx", "yy", columns) == expected
    assert prepare_corpus.default_coverage("zh", "en") == 0.9995 and prepare_corpus.default_coverage("fr", "en") == 1


@pytest.mark.slow
def test_a_made_up_pair_without_spaces_is_prepared_trained_and_evaluated_end_to_end(tmp_path):
    pairs = made_up_pairs(600)
    table = "chunk\tfirst_line\tlines\n" + "".join(f"{chunk}\t{chunk * 30}\t30\n" for chunk in range(20))
    write_sides(tmp_path / "raw", "train", pairs, gz=True)
    write_sides(tmp_path / "raw", "test", made_up_pairs(20, seed=9))  # the corpus' own test set: a second opinion
    (tmp_path / "chunks.tsv").write_text(table)
    dest = tmp_path / "data-bin" / "made-up.xx-yy"
    printed = run_script("-m", "fairseq_autoassist.corpus.prepare_corpus", "--input", str(tmp_path / "raw"), "--src", "xx",
                         "--tgt", "yy", "--split-by", f"chunks:{tmp_path / 'chunks.tsv'}", "--valid-groups", "2",
                         "--test-groups", "2", "--vocab-size", "60", "--character-coverage", "0.9995", "--workers", "1",
                         "--dest", str(dest)).stdout
    with open(dest / "prepare.json") as f:
        info = json.load(f)
    assert info["pairs"] == {"train": 480, "valid": 60, "test": 60, "test1": 20}
    assert info["groups"] == {"train": 16, "valid": 2, "test": 2}
    assert info["test_sets"] == {"test": "raw", "test1": "test"}
    assert info["character_coverage"] == 0.9995
    assert list(info["stage_seconds"]) == ["reading", "splitting", "training sentencepiece", "encoding", "binarizing"]
    assert "encoded train.xx: 480 lines" in printed and "binarizing: " in printed
    # No chunk in two splits: the held-out lines are whole chunks of the training file.
    with open(dest / "raw" / "valid.xx", encoding="utf-8") as f:
        valid = f.read().split("\n")[:-1]
    starts = [i for i in range(0, 600, 30) if [p[0] for p in pairs[i:i + 30]] == valid[:30]]
    assert len(starts) == 1 and [p[0] for p in pairs[starts[0]:starts[0] + 30]] == valid[:30]
    # Trained with the plugin and scored with sacreBLEU on the split-off test set and the corpus' own.
    from fairseq_autoassist.recipes import recipe

    run_script("-m", "fairseq_cli.train", *recipe(str(dest), str(tmp_path / "run"), "learnable", arch="tiny",
                                                  max_epoch=2, max_tokens=400, cpu=True, eval_bleu=False),
               "--source-lang", "xx", "--target-lang", "yy")
    for split in ("test", "test1"):
        scored = run_script("-m", "fairseq_autoassist.evaluate", "--checkpoint", str(tmp_path / "run" / "checkpoint_last.pt"),
                            "--data", str(dest), "--split", split, "--beam", "1", "--device", "cpu",
                            "--output", str(tmp_path / f"bleu_{split}.json")).stdout
        assert "BLEU = " in scored
    with open(tmp_path / "bleu_test.json") as f:
        assert json.load(f)["bleu_signature"].startswith("nrefs:1|case:mixed")


@pytest.mark.slow
def test_a_folder_with_its_own_splits_and_the_cleaning_with_a_contradicted_language(tmp_path):
    write_sides(tmp_path / "raw", "train", made_up_pairs(200), gz=True)
    write_sides(tmp_path / "raw", "dev", made_up_pairs(20, seed=1))
    write_sides(tmp_path / "raw", "test_2016", made_up_pairs(20, seed=2))
    write_sides(tmp_path / "extra", "news", made_up_pairs(10, seed=3))
    dest = tmp_path / "made-up.xx-yy"
    info = prepare_corpus.prepare([str(tmp_path / "raw")], str(dest), "xx", "yy",
                                  test_sets=[f"news={tmp_path / 'extra' / 'news'}"], vocab_size=60)
    assert info["pairs"] == {"train": 200, "valid": 20, "test": 20, "test1": 10}
    assert info["test_sets"] == {"test": "test_2016", "test1": "news"}
    for split in ("train", "valid", "test", "test1"):
        assert (dest / f"{split}.xx-yy.xx.bin").is_file()
    # French under German file names, declared German: with --clean, one line naming the flag, before binarizing.
    french = [(sentence, f"w{i} w{i + 1}") for i, sentence in enumerate(
        ["Un homme fait du vélo dans la rue.", "Deux enfants jouent dans le jardin derrière la maison.",
         "Une femme lit un livre dans le parc.", "Le chien court sur la plage avec un ballon rouge."] * 10)]
    for stem in ("train", "valid", "test"):
        write_sides(tmp_path / "fr", stem, french, langs=("de", "yy"))
    refused = run_script("-m", "fairseq_autoassist.corpus.prepare_corpus", "--input", str(tmp_path / "fr"), "--src", "de",
                         "--tgt", "yy", "--clean", "--dest", str(tmp_path / "refused"), check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stdout
    assert "the source side is declared 'de' (--src de) but reads as 'fr'" in refused.stdout
    assert not (tmp_path / "refused" / "prepare.json").exists()
    missing = run_script("-m", "fairseq_autoassist.corpus.prepare_corpus", "--input", str(tmp_path / "fr"), "--src", "fr",
                         "--tgt", "yy", "--dest", str(tmp_path / "refused"), check=False)
    assert missing.returncode == 2 and "has no train.fr[.gz] and train.yy[.gz]; check --input and --src/--tgt" \
        in missing.stdout


def test_cleaning_trains_a_model_of_the_uncleaned_pairs_only_for_a_filter_that_counts_pieces(tmp_path, monkeypatch):
    from fairseq_autoassist.corpus.cleaning import CleaningOptions

    trained = []
    real_training = prepare_corpus.train_sentencepiece

    def train_sentencepiece(*args):
        trained.append(args[1])
        return real_training(*args)

    monkeypatch.setattr(prepare_corpus, "train_sentencepiece", train_sentencepiece)
    pairs = made_up_pairs(200)
    source, target = [s for s, _ in pairs] + [pairs[0][0]], [t for _, t in pairs] + [pairs[0][1]]
    duplicates_only = CleaningOptions(near_duplicates=False, max_length_ratio=0, max_similarity=0, language=False,
                                      alignment_like_random=0)
    kept, removed, _, _ = prepare_corpus.clean_pairs(source, target, "xx", "yy", duplicates_only, str(tmp_path), 60,
                                                     1.0, 1000)
    repeats = [i for i, pair in enumerate(zip(source, target)) if pair in list(zip(source, target))[:i]]
    assert 200 in repeats and removed["duplicate"] == repeats and len(kept) == 201 - len(repeats) and trained == []
    with_lengths = CleaningOptions(near_duplicates=False, max_similarity=0, language=False, alignment_like_random=0)
    prepare_corpus.clean_pairs(source, target, "xx", "yy", with_lengths, str(tmp_path), 60, 1.0, 1000)
    assert trained == [str(tmp_path / "spm-uncleaned")] and os.listdir(tmp_path) == []


def test_the_classifier_cleaning_saves_its_classifier_beside_the_data(tmp_path):
    from fairseq_autoassist.corpus.classifier import MODEL_FILE, PairClassifier
    from fairseq_autoassist.corpus.cleaning import CleaningOptions

    pairs = made_up_pairs(300)
    source, target = [s for s, _ in pairs], [t for _, t in pairs]
    options = CleaningOptions(near_duplicates=False, max_length_ratio=0, max_similarity=0, language=False,
                              alignment_like_random=0, classifier=True)
    kept, removed, scores, _ = prepare_corpus.clean_pairs(source, target, "xx", "yy", options, str(tmp_path), 60,
                                                          1.0, 1000)
    assert os.listdir(tmp_path) == [MODEL_FILE]
    saved = PairClassifier.load(str(tmp_path / MODEL_FILE))
    unique = [i for i in range(300) if i not in removed["duplicate"]]
    np.testing.assert_allclose(scores.classifier[unique], saved.scores([source[i] for i in unique],
                                                                       [target[i] for i in unique]), rtol=1e-6)
    assert sorted(kept + removed["classifier"] + removed["duplicate"]) == list(range(300))


def test_moses_tokenized_english_reads_as_raw_text():
    from fairseq_autoassist.corpus.detokenize import detokenized

    assert detokenized("no problems . it &apos;s all taken care of . ") == "No problems. It's all taken care of."
    assert detokenized("i didn &apos;t get it , ross . do n&apos;t go !") == "I didn't get it, ross. Don't go!"
    assert detokenized("&quot; three divorces ! &quot; he said : &quot; ok &quot; . . .") == \
        '"Three divorces!" he said: "ok"...'
    assert detokenized("it costs $ 5 ( or 10 % ) &amp; more ?") == "It costs $5 (or 10%) & more?"


@pytest.mark.slow
def test_a_moses_tokenized_test_set_is_detokenized_before_it_becomes_a_reference(tmp_path):
    pairs = [(source, target.replace("w1", "Ross")) for source, target in made_up_pairs(120)]
    write_sides(tmp_path / "raw", "train", pairs, langs=("xx", "en"))
    write_sides(tmp_path / "raw", "test", [("山水", "it &apos;s Ross ."), ("花鸟", "do n&apos;t , " + '&quot; go &quot; .')],
                langs=("xx", "en"))
    info = prepare_corpus.prepare([str(tmp_path / "raw")], str(tmp_path / "out"), "xx", "en", split_by="source",
                                  valid_groups=10, test_groups=10, vocab_size=60, moses_tokenized=["test"])
    assert info["test_sets"]["test1"] == "test" and info["detokenized_test_sets"] == ["test"]
    assert (tmp_path / "out" / "raw" / "test1.en").read_text().splitlines() == ["It's Ross.", 'Don\'t, "go".']
    assert (tmp_path / "out" / "raw" / "test1.xx").read_text().splitlines() == ["山水", "花鸟"]
    with pytest.raises(PreparationError, match="--moses-tokenized-test news: no such further test set"):
        prepare_corpus.prepare([str(tmp_path / "raw")], str(tmp_path / "out2"), "xx", "en", split_by="source",
                               valid_groups=10, test_groups=10, vocab_size=60, moses_tokenized=["news"])
