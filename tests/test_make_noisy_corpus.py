"""scripts/research/make_noisy_corpus.py: seeded web-mined noise on a share of the training pairs, other splits
untouched."""

import json

import pytest

from fairseq_autoassist.corpus.raw_corpus import KINDS, PreparationError, corrupt, kind_counts, read_noise, read_parallel
from fairseq_autoassist.recipes import write_synthetic_multi30k
from scripts.research import make_noisy_corpus as noisy


def test_each_kind_of_noise_is_what_its_name_says(tmp_path):
    raw = write_synthetic_multi30k(str(tmp_path / "raw"))
    manifest = noisy.make_noisy_corpus(raw, str(tmp_path / "noisy"), "de", "en", share=0.3, seed=3)
    source, target = read_parallel(raw, "train", "de", "en")
    noisy_source, noisy_target = read_parallel(str(tmp_path / "noisy"), "train", "de", "en")
    assert (tmp_path / "noisy" / "noise.tsv").read_text().startswith("line\tkind\n")
    noise = read_noise(str(tmp_path / "noisy" / "noise.tsv"))
    assert len(noise) == manifest["corrupted"] == round(0.3 * len(source))
    assert manifest["counts"] == kind_counts(len(noise), KINDS)
    originals = set(zip(source, target))
    for line in range(len(source)):
        pair = (noisy_source[line], noisy_target[line])
        kind = noise.get(line)
        if kind is None:
            assert pair == (source[line], target[line])
        elif kind == "untranslated":
            assert pair == (source[line], source[line])
        elif kind == "truncated":
            words = noisy_target[line].split()
            assert 1 <= len(words) <= max(1, len(target[line].split()) // 2)
            assert target[line].startswith(noisy_target[line]) and noisy_source[line] == source[line]
        elif kind == "misaligned":
            assert noisy_source[line] == source[line] and noisy_target[line] in target
        elif kind == "wrong_language":
            assert noisy_source[line] == source[line] and noisy_target[line] in source
        else:
            assert kind == "duplicate" and pair in originals
    # Validation and test are copied byte for byte.
    for name in ("val.de", "val.en", "test_2016_flickr.de", "test_2016_flickr.en"):
        assert (tmp_path / "noisy" / name).read_bytes() == (tmp_path / "raw" / name).read_bytes()
    assert json.loads((tmp_path / "noisy" / "noise.json").read_text())["seed"] == 3


def test_the_kinds_outside_the_default_mix_shuffle_the_target_or_take_the_next_lines():
    source = [f"satz {i} ist hier" for i in range(200)]
    target = [f"sentence number {i} is right here" for i in range(200)]
    noisy_source, noisy_target, noise = corrupt(source, target, 0.3, seed=1,
                                                proportions={"shuffled": 0.5, "neighbour": 0.5})
    assert sorted(set(noise.values())) == ["neighbour", "shuffled"]
    for line, kind in noise.items():
        assert noisy_source[line] == source[line]
        if kind == "shuffled":
            assert noisy_target[line] != target[line]
            assert sorted(noisy_target[line].split()) == sorted(target[line].split())
        else:
            assert noisy_target[line] == target[(line + 1) % 200]
    assert noisy.parse_kinds("shuffled=0.5,misaligned=0.5") == {"shuffled": 0.5, "misaligned": 0.5}


def test_the_noise_is_seeded():
    source = [f"satz {i} ist hier" for i in range(200)]
    target = [f"sentence {i} is here" for i in range(200)]
    first, again = corrupt(source, target, 0.3, seed=1), corrupt(source, target, 0.3, seed=1)
    assert first == again
    assert corrupt(source, target, 0.3, seed=2)[2] != first[2]


def test_counts_follow_the_proportions_and_bad_input_is_refused():
    assert kind_counts(10, {"misaligned": 0.5, "untranslated": 0.5}) == {"misaligned": 5, "untranslated": 5}
    assert sum(kind_counts(8701, KINDS).values()) == 8701
    with pytest.raises(PreparationError, match="leaves no clean pair"):
        corrupt(["a"] * 4, ["b"] * 4, 0.99, seed=1)
    assert noisy.main(["--raw-dir", "/nonexistent", "--out", "/tmp/unused-noisy"]) == 2


@pytest.mark.slow
def test_a_prepared_noisy_copy_carries_its_clean_only_oracle(tmp_path, raw_corpus):
    from fairseq_autoassist.benchmark.arms import arm_data
    from scripts import prepare_multi30k

    noisy.make_noisy_corpus(raw_corpus, str(tmp_path / "noisy"), "de", "en", share=0.25, seed=3)
    info = prepare_multi30k.prepare(str(tmp_path / "noisy"), str(tmp_path / "bin"), "de", "en", vocab_size=120,
                                    download=False)
    corrupted = read_noise(str(tmp_path / "bin" / "noise.tsv"))
    assert len(corrupted) == 100 and info["clean_only"] == {"folder": "clean-only", "train_pairs": 300}
    clean = arm_data("oracle-clean", str(tmp_path / "bin"))
    with open(tmp_path / "bin" / "clean-only" / "prepare.json") as f:
        assert json.load(f)["pairs"] == {**info["pairs"], "train": 300}
    assert clean == str(tmp_path / "bin" / "clean-only") and arm_data("baseline", "x") == "x"
    with pytest.raises(FileNotFoundError, match="the oracle-clean arm needs a noisy copy"):
        arm_data("oracle-clean", str(tmp_path / "noisy"))


@pytest.mark.slow
def test_cleaning_a_noisy_copy_reports_each_rule_by_kind_and_remaps_the_noise_list(tmp_path, raw_corpus):
    from fairseq_autoassist.corpus.cleaning import CleaningOptions
    from scripts import prepare_multi30k

    noisy.make_noisy_corpus(raw_corpus, str(tmp_path / "noisy"), "de", "en", share=0.25, seed=3)
    raw_noise = read_noise(str(tmp_path / "noisy" / "noise.tsv"))
    # Off: the language filter (made-up words) and near duplicates (letters only, the synthetic sentences "wort12
    # wort3" are equal; it would leave 2-12 pairs, sometimes none of them clean).
    info = prepare_multi30k.prepare(str(tmp_path / "noisy"), str(tmp_path / "bin"), "de", "en", vocab_size=120,
                                    download=False, cleaning=CleaningOptions(language=False, near_duplicates=False))
    rules = info["cleaning"]["filters"]
    untranslated = sum(kind == "untranslated" for kind in raw_noise.values())
    assert sum(rule["by_kind"].get("untranslated", 0) for rule in rules.values()) == untranslated
    assert rules["copy"]["by_kind"].get("untranslated", 0) > 0
    removed = sum(rule["removed"] for rule in rules.values())
    assert info["pairs"]["train"] == 400 - removed and rules["language"]["removed"] == 0
    left = read_noise(str(tmp_path / "bin" / "noise.tsv"))
    assert "untranslated" not in left.values() and "duplicate" not in left.values()
    assert max(left) < info["pairs"]["train"]
