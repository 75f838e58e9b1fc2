"""Static cleaning (fairseq_autoassist/corpus/cleaning.py): each rule removes what it names and keeps clean pairs."""

import argparse
import builtins

import numpy as np
import pytest

from fairseq_autoassist.corpus import cleaning
from fairseq_autoassist.corpus.cleaning import CleaningOptions, clean
from fairseq_autoassist.corpus.raw_corpus import PreparationError

CLEAN = ("Ein Hund rennt über die Wiese.", "A dog runs across the meadow.")


def words(text):
    return len(text.split())


@pytest.mark.parametrize("pair, rule", [
    (CLEAN, "duplicate"),
    (("ein HUND rennt über die Wiese!!", "A dog runs across the meadow 2."), "near_duplicate"),
    (("Zwei Kinder spielen im Garten hinter dem alten Haus.", "Two children."), "length_ratio"),
    (("Ein Mann fährt Fahrrad.", "Ein Mann fährt Fahrrad."), "copy"),
    (("Eine Frau liest ein Buch im Park.", "Eine Katze schläft auf dem warmen Sofa."), "language"),
    (("Eine Frau liest ein Buch im Park.", "Una mujer lee un libro en el parque."), "language"),
])
def test_each_rule_removes_its_kind_and_keeps_the_clean_pair(pair, rule):
    kept, removed = clean([CLEAN[0], pair[0]], [CLEAN[1], pair[1]], "de", "en", CleaningOptions(), pieces=words)
    assert kept == [0] and removed[rule] == [1]
    assert sum(len(lines) for lines in removed.values()) == 1


def test_a_rule_switched_off_keeps_what_it_would_remove():
    options = CleaningOptions(max_copy_overlap=0.0, language=False)
    kept, removed = clean(["Ein Mann fährt Fahrrad."], ["Ein Mann fährt Fahrrad."], "de", "en", options, pieces=words)
    assert kept == [0] and not any(removed.values())


def test_flags_switch_rules_off_and_bad_thresholds_are_refused():
    parser = argparse.ArgumentParser()
    cleaning.add_arguments(parser)
    assert cleaning.options_from(parser.parse_args([])) is None
    options = cleaning.options_from(parser.parse_args(["--clean", "--no-clean-language", "--clean-max-length-ratio", "2"]))
    assert options == CleaningOptions(language=False, max_length_ratio=2.0)
    with pytest.raises(PreparationError, match=r"--clean-max-copy-overlap=1.5 is outside \[0, 1\]"):
        cleaning.options_from(parser.parse_args(["--clean", "--clean-max-copy-overlap", "1.5"]))


def test_a_missing_language_identifier_names_the_install_and_the_flag(monkeypatch):
    real_import = builtins.__import__

    def without_pycld2(name, *args, **kwargs):
        if name == "pycld2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_pycld2)
    with pytest.raises(PreparationError, match="needs pycld2 .*--no-clean-language"):
        clean(["a"], ["b"], "de", "en", CleaningOptions(), pieces=words)


def test_the_paracrawl_reader_takes_both_layouts_and_refuses_an_unknown_judgement(tmp_path):
    import gzip

    from scripts.research.paracrawl_report import read_judged_pairs

    with gzip.open(tmp_path / "v3.tsv.gz", "wt") as f:
        f.write("u1\tu2\tGood morning.\tGuten Morgen.\t0.9\t1.2\t0.81\tV\t\n")
    with gzip.open(tmp_path / "v7.tsv.gz", "wt") as f:
        f.write("u1\tu2\tMenu\tImpressum\t0.52\tA\t\t12\n")
    assert read_judged_pairs(str(tmp_path)) == [("Good morning.", "Guten Morgen.", "V", 0.81),
                                                 ("Menu", "Impressum", "A", 0.52)]
    with gzip.open(tmp_path / "v8.tsv.gz", "wt") as f:
        f.write("u1\tu2\tYes\tJa\t0.5\tX\t\t3\n")
    with pytest.raises(PreparationError, match="v8.tsv.gz: line 1 has the judgement 'X'"):
        read_judged_pairs(str(tmp_path))


def test_the_paracrawl_mixture_is_written_with_every_judged_pair_listed_by_its_label(raw_corpus, tmp_path):
    import gzip

    from fairseq_autoassist.corpus.raw_corpus import read_noise, read_parallel
    from scripts.research.paracrawl_report import report

    with gzip.open(tmp_path / "v3.tsv.gz", "wt") as f:
        f.write("u1\tu2\tGood morning.\tGuten Morgen.\t0.9\t1.2\t0.81\tV\t\n"
                "u1\tu2\tMenu\tImpressum\t0.9\t1.2\t0.52\tA\t\n")
    result = report(str(tmp_path), raw_corpus, vocab_size=100, mixed_corpus=str(tmp_path / "mixed"),
                    classifier_sizes=())
    german, english = read_parallel(str(tmp_path / "mixed"), "train", "de", "en")
    base = len(read_parallel(raw_corpus, "train", "de", "en")[0])
    assert result["corpus_pairs"] == base and len(german) == base + 2
    assert (german[base:], english[base:]) == (["Guten Morgen.", "Impressum"], ["Good morning.", "Menu"])
    assert read_noise(str(tmp_path / "mixed" / "noise.tsv")) == {base: "paracrawl-V", base + 1: "paracrawl-A"}
    assert read_parallel(str(tmp_path / "mixed"), "val", "de", "en") == read_parallel(raw_corpus, "val", "de", "en")
    assert {side: found["declared"] for side, found in result["languages"].items()} == {"source": "de", "target": "en"}


def test_the_paracrawl_report_takes_the_language_pair_and_refuses_a_corpus_that_contradicts_it(tmp_path):
    import gzip

    from scripts.research.paracrawl_report import report

    with gzip.open(tmp_path / "v3.tsv.gz", "wt") as f:
        f.write("u1\tu2\tGood morning.\tGuten Morgen.\t0.9\t1.2\t0.81\tV\t\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.de").write_text("\n".join(FRENCH * 3) + "\n", encoding="utf-8")  # French under German names
    (corpus / "train.en").write_text("\n".join(ENGLISH * 3) + "\n", encoding="utf-8")
    with pytest.raises(PreparationError, match="the source side is declared 'de' .--src de. but reads as 'fr'"):
        report(str(tmp_path), str(corpus), vocab_size=100, classifier_sizes=())
    with pytest.raises(PreparationError, match="English-German: --src and --tgt must be de and en"):
        report(str(tmp_path), str(corpus), vocab_size=100, classifier_sizes=(), src="fr", tgt="en")


def test_the_classifier_learning_curve_finds_a_signal_in_the_features_and_none_in_noise():
    from scripts.research.paracrawl_report import classifier_learning_curve

    rng = np.random.default_rng(0)
    positive = rng.random(800) < 0.6
    informative = np.column_stack([positive + rng.normal(0, 0.3, 800), rng.normal(size=800)])
    curve = classifier_learning_curve(informative, positive, sizes=(100, 600, 700), draws=2)
    assert list(curve) == [100, 600] and all(len(aucs) == 2 for aucs in curve.values())  # 700 leaves too few
    assert min(curve[600]) > 0.95
    noise = classifier_learning_curve(rng.normal(size=(800, 2)), positive, sizes=(600,), draws=2)
    assert all(abs(value - 0.5) < 0.1 for value in noise[600])


def test_the_label_free_classifier_scores_pairs_like_its_synthetic_negatives_low_and_sees_nothing_without_them():
    from scripts.research.paracrawl_report import synthetic_negative_scores

    rng = np.random.default_rng(0)
    held_out = np.arange(600, 1000)
    bad = np.zeros(1000, bool)
    bad[800:] = True  # half of the held-out rows look like the corruptions
    real = np.column_stack([np.where(bad, 3.0, 0.0) + rng.normal(size=1000), rng.normal(size=1000)])
    negatives = np.column_stack([3.0 + rng.normal(size=1000), rng.normal(size=1000)])
    scores = synthetic_negative_scores(np.vstack([real, negatives]), np.arange(1000), held_out)
    assert scores.shape == (400,) and roc_auc(scores, ~bad[held_out]) > 0.9
    unlike = np.column_stack([rng.normal(size=1000), rng.normal(size=1000)])  # no column tells the bad rows apart
    scores = synthetic_negative_scores(np.vstack([real * [0, 1], unlike]), np.arange(1000), held_out)
    assert abs(roc_auc(scores, ~bad[held_out]) - 0.5) < 0.1


def roc_auc(scores, positive):
    from sklearn.metrics import roc_auc_score

    return roc_auc_score(positive, scores)


def test_the_lexical_rule_removes_unrelated_sides_that_every_other_rule_keeps():
    rng = np.random.default_rng(0)
    german = [" ".join(f"wort{w}" for w in rng.integers(0, 150, size=rng.integers(4, 9))) for _ in range(600)]
    english = [sentence.replace("wort", "word") for sentence in german]
    for i in range(30):  # misaligned: another pair's translation
        english[i] = english[599 - i]
    vocabulary = {}

    def encode(lines):
        return [[vocabulary.setdefault(word, len(vocabulary)) for word in line.split()] for line in lines]

    options = CleaningOptions(max_length_ratio=0, language=False, near_duplicates=False, lexical_below=1.5)
    kept, removed = clean(german, english, "de", "en", options, encode=encode, vocab_size=300)
    assert len(set(removed["lexical"]) & set(range(30))) >= 27  # nearly every misaligned pair
    assert len(set(removed["lexical"]) - set(range(30))) <= 15  # at most 2.5% of the aligned ones
    assert sorted(kept + removed["lexical"]) == list(range(600))
    with pytest.raises(ValueError, match="lexical rule needs a piece model"):
        clean(german, english, "de", "en", options)
    off = CleaningOptions(max_length_ratio=0, language=False, near_duplicates=False)
    assert clean(german, english, "de", "en", off)[0] == list(range(600))


FRENCH = ["Un homme fait du vélo dans la rue.", "Deux enfants jouent dans le jardin derrière la maison.",
          "Une femme lit un livre dans le parc.", "Le chien court sur la plage avec un ballon rouge.",
          "Les gens attendent le bus sous la pluie.", "Un garçon mange une glace devant la fenêtre ouverte."]
ENGLISH = ["A man rides a bike in the street.", "Two children play in the garden behind the house.",
           "A woman reads a book in the park.", "The dog runs on the beach with a red ball.",
           "People wait for the bus in the rain.", "A boy eats an ice cream in front of the open window."]


def test_a_side_declared_in_another_language_than_its_text_stops_with_the_flag_to_fix_it():
    # French under a German declaration: the language rule would remove nearly every pair; it stops first.
    with pytest.raises(PreparationError, match="the source side is declared 'de' .--src de. but reads as 'fr' in "
                                               r"\d+ of the \d+ sampled pairs.*--src fr.*--no-clean-language"):
        clean(FRENCH, ENGLISH, "de", "en", CleaningOptions(), pieces=words)
    kept, removed = clean(FRENCH, ENGLISH, "fr", "en", CleaningOptions(), pieces=words)
    assert kept == list(range(len(FRENCH))) and not any(removed.values())
    with pytest.raises(PreparationError, match="the target side is declared 'de' .--tgt de."):
        clean(FRENCH, ENGLISH, "fr", "de", CleaningOptions(), pieces=words)
    # Switched off, the rule neither checks nor removes.
    kept, _ = clean(FRENCH, ENGLISH, "de", "en", CleaningOptions(language=False), pieces=words)
    assert kept == list(range(len(FRENCH)))


def test_languages_compare_by_their_primary_subtag():
    assert cleaning.primary_language("zh-Hant") == "zh" and cleaning.primary_language("EN") == "en"
    found = cleaning.check_declared_languages(["x"] * 4, ["y"] * 4, "zh", "en",
                                              detect=lambda text: "zh-Hant" if text == "x" else "en")
    assert found == {"source": ("zh", "zh", 1.0), "target": ("en", "en", 1.0)}


def test_dual_cross_entropy_removes_a_misaligned_pair_and_keeps_a_clean_one():
    from fairseq_autoassist.corpus.cleaning import dual_cross_entropy
    from fairseq_autoassist.reference.filter_pairs import kept_by_dual_cross_entropy

    # Per-token cross-entropies of four pairs under a model of each direction: a clean pair (both low, alike), a
    # pair whose target is another sentence's (both high), an untranslated copy (one direction finds the copy
    # easy, the other not), a pair the backward model did not score.
    forward = np.array([1.0, 5.0, 0.5, 1.0])
    backward = np.array([1.2, 5.4, 4.0, np.nan])
    scores = dual_cross_entropy(forward, backward)
    np.testing.assert_allclose(scores[:3], [0.2 + 1.1, 0.4 + 5.2, 3.5 + 2.25])
    assert np.isnan(scores[3])
    np.testing.assert_array_equal(kept_by_dual_cross_entropy(scores, above=3.0), [0, 3])
    np.testing.assert_array_equal(kept_by_dual_cross_entropy(scores, worst_share=0.25), [0, 1, 3])  # 5.75 first
    np.testing.assert_array_equal(kept_by_dual_cross_entropy(scores, worst_share=0.5), [0, 3])
