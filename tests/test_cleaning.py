"""Cleaning (fairseq_autoassist/corpus/cleaning.py): each filter removes what it names and keeps clean pairs."""

import argparse
import builtins

import numpy as np
import pytest

from fairseq_autoassist.corpus import cleaning
from fairseq_autoassist.corpus.cleaning import CleaningOptions, clean, pair_badness
from fairseq_autoassist.corpus.raw_corpus import PreparationError

from .synthetic import synthetic_translations

CLEAN = ("Ein Hund rennt über die Wiese.", "A dog runs across the meadow.")
# The filters that need no corpus to learn from; the alignment filter has its own test.
ONE_PAIR_AT_A_TIME = CleaningOptions(alignment_like_random=0)


def words(text):
    return text.split()


@pytest.mark.parametrize("pair, name", [
    (CLEAN, "duplicate"),
    (("ein HUND rennt über die Wiese!!", "A dog runs across the meadow 2."), "near_duplicate"),
    (("Zwei Kinder spielen im Garten hinter dem alten Haus am See.", "Two children."), "length_ratio"),
    (("Ein Mann fährt Fahrrad.", "Ein Mann fährt Fahrrad."), "copy"),
    (("Ein Mann fährt mit dem Fahrrad.", "Ein mann fahrt mit dem fahrrad!"), "copy"),
    (("Eine Frau liest ein Buch im Park.", "Eine Katze schläft auf dem warmen Sofa."), "language"),
    (("Eine Frau liest ein Buch im Park.", "Una mujer lee un libro en el parque."), "language"),
])
def test_each_filter_removes_its_kind_and_keeps_the_clean_pairs(pair, name):
    # Three clean pairs set the corpus' median length ratio.
    source = [CLEAN[0], "Zwei Männer sitzen auf einer Bank.", "Die Sonne scheint über dem See.", pair[0]]
    target = [CLEAN[1], "Two men are sitting on a bench.", "The sun shines over the lake.", pair[1]]
    kept, removed, scores = clean(source, target, "de", "en", ONE_PAIR_AT_A_TIME, segment=words)
    assert kept == [0, 1, 2] and removed[name] == [3]
    assert sum(len(lines) for lines in removed.values()) == 1
    badness = pair_badness(scores, ONE_PAIR_AT_A_TIME)
    assert max(badness[:3]) < 1 and (badness[3] >= 1 or name in ("duplicate", "near_duplicate"))


def test_the_length_ratio_is_measured_against_the_corpus_median_so_that_a_shorter_language_keeps_its_pairs():
    # Chinese pieces (characters here) against English words: about 1.5 to 1, never a reason to remove a pair.
    chinese = ["我不知道你在说什么", "他明天去北京", "这本书很有意思", "我们走吧", "你好吗朋友"]
    english = ["I don't know what you are talking about", "He goes to Beijing tomorrow", "This book is very "
               "interesting", "Let's go", "How are you my friend"]
    segment = lambda text: text.split() if " " in text else list(text)  # noqa: E731
    options = CleaningOptions(language=False, alignment_like_random=0, max_similarity=0)
    assert clean(chinese, english, "zh", "en", options, segment=segment)[0] == [0, 1, 2, 3, 4]
    kept, removed, _ = clean(chinese + ["好"], english + ["Good morning to all of you here today my friends"], "zh",
                             "en", options, segment=segment)
    assert removed["length_ratio"] == [5]


def test_a_filter_switched_off_keeps_what_it_would_remove():
    options = CleaningOptions(max_similarity=0.0, language=False, alignment_like_random=0)
    kept, removed, _ = clean(["Ein Mann fährt Fahrrad."], ["Ein Mann fährt Fahrrad."], "de", "en", options,
                             segment=words)
    assert kept == [0] and not any(removed.values())


def test_the_alignment_filter_removes_misaligned_pairs_that_every_other_filter_keeps():
    german, english = synthetic_translations(600)
    for i in range(20):  # misaligned: another pair's translation, of a length every other filter accepts
        english[i] = english[599 - i]
    options = CleaningOptions(language=False, max_length_ratio=0)
    kept, removed, scores = clean(german, english, "de", "en", options, segment=words)
    # eflomal samples from a system seed: 14-20 of the 20 and none of the others in 19 runs; a filter no better than
    # chance would remove 3 of the 20 (its threshold's 15%).
    assert len(set(removed["alignment"]) & set(range(20))) >= 12  # most misaligned pairs
    assert len(set(removed["alignment"]) - set(range(20))) <= 6  # at most 1% of the aligned ones
    assert sorted(kept + removed["alignment"] + removed["duplicate"] + removed["near_duplicate"]) == list(range(600))
    np.testing.assert_array_equal(pair_badness(scores, options) >= 1, ~np.isin(np.arange(600), kept))
    with pytest.raises(ValueError, match="need a sentencepiece segmenter"):
        clean(german, english, "de", "en", options)


def test_a_long_translation_is_compared_with_random_pairings_of_its_length(monkeypatch):
    """An aligner's cost grows with a pair's length (rarer words, more of them): a long translation among short pairs
    must not look like a random pairing of short ones (WMT21's news pairs in Tatoeba)."""
    rng = np.random.default_rng(0)
    lengths = np.r_[rng.integers(3, 9, 360), rng.integers(30, 41, 40)]
    source = [[f"s{pair}.{k}" for k in range(n)] for pair, n in enumerate(lengths)]
    target = [[f"t{pair}.{k}" for k in range(n)] for pair, n in enumerate(lengths)]
    for i in range(20):  # misaligned short pairs: another short pair's target
        target[i] = target[359 - i]

    def length_dependent_scores(source_pieces, target_pieces):
        translates = [src[0][1:].split(".")[0] == tgt[0][1:].split(".")[0]
                      for src, tgt in zip(source_pieces, target_pieces)]
        cost = np.array([np.log(len(src) + len(tgt)) + (0.0 if ok else 1.0)
                         for src, tgt, ok in zip(source_pieces, target_pieces, translates)])
        cost += np.random.default_rng(1).normal(0, 0.3, len(cost))  # the sampler's spread
        return np.stack([cost, cost], axis=1)

    monkeypatch.setattr(cleaning, "alignment_scores", length_dependent_scores)
    shares = cleaning.like_random_shares(source, target)
    assert np.mean(shares[360:] >= 0.15) <= 0.05  # the long translations stay (all pairings: every one removed)
    assert np.sum(shares[:20] >= 0.15) >= 12  # most misaligned pairs go (each is a random pairing: 85% expected)
    assert np.mean(shares[20:360] >= 0.15) < 0.05


def test_the_language_model_filter_removes_a_side_unlike_the_rest_of_its_side(tmp_path):
    german, english = synthetic_translations(300)
    english[7] = "zzqx vvkj qqpl xxzz jjvk"  # letters the English side never shows together
    options = CleaningOptions(language=False, max_length_ratio=0, max_similarity=0, alignment_like_random=0, lm_above=6)
    kept, removed, _ = clean(german, english, "de", "en", options, segment=words, workdir=str(tmp_path))
    assert 7 in removed["lm"] and len(removed["lm"]) <= 6
    with pytest.raises(ValueError, match="needs a working folder"):
        clean(german, english, "de", "en", options, segment=words)


def test_flags_switch_filters_off_and_bad_thresholds_are_refused():
    parser = argparse.ArgumentParser()
    cleaning.add_arguments(parser)
    assert cleaning.options_from(parser.parse_args([])) is None
    options = cleaning.options_from(parser.parse_args(["--clean", "--no-clean-language", "--clean-max-length-ratio",
                                                       "3", "--clean-alignment-like-random", "0"]))
    assert options == CleaningOptions(language=False, max_length_ratio=3.0, alignment_like_random=0.0)
    with pytest.raises(PreparationError, match=r"--clean-max-similarity=1.5 is outside \[0, 1\]"):
        cleaning.options_from(parser.parse_args(["--clean", "--clean-max-similarity", "1.5"]))


@pytest.mark.parametrize("module, flag", [("heliport", "--no-clean-language"),
                                          ("opusfilter.word_alignment", "--clean-alignment-like-random 0")])
def test_a_missing_optional_dependency_names_the_install_and_the_flag(monkeypatch, module, flag):
    real_import = builtins.__import__

    def without(name, *args, **kwargs):
        if name == module:
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    german, english = synthetic_translations(20)
    with pytest.raises(PreparationError) as error:
        clean(german, english, "de", "en", CleaningOptions(language=module == "heliport"), segment=words)
    message = str(error.value)
    assert "\n" not in message and "pip install 'opusfilter[eflomal,varikn,heliport]'" in message
    assert message.startswith(f"cleaning needs {module.split('.')[0]} ") and flag in message


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


def test_the_paracrawl_mixture_is_written_with_every_judged_pair_listed_by_its_label(tmp_path):
    import gzip

    from fairseq_autoassist.corpus.raw_corpus import read_noise, read_parallel
    from scripts.research.paracrawl_report import report

    with gzip.open(tmp_path / "v3.tsv.gz", "wt") as f:
        f.write("u1\tu2\tGood morning.\tGuten Morgen.\t0.9\t1.2\t0.81\tV\t\n"
                "u1\tu2\tMenu\tImpressum\t0.9\t1.2\t0.52\tA\t\n")
    raw_corpus = str(tmp_path / "corpus")
    write_corpus(raw_corpus, {"train": (GERMAN * 3, ENGLISH * 3), "val": (GERMAN[:2], ENGLISH[:2])})
    result = report(str(tmp_path), raw_corpus, vocab_size=60, mixed_corpus=str(tmp_path / "mixed"),
                    classifier_sizes=(), scores_path=str(tmp_path / "scores.npz"))
    scores = np.load(tmp_path / "scores.npz")
    assert list(scores["labels"]) == ["V", "A"] and list(scores["bicleaner (ParaCrawl's pipeline)"]) == [0.81, 0.52]
    assert set(result["auc"]) <= set(scores.files)
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
    write_corpus(str(corpus), {"train": (FRENCH * 3, ENGLISH * 3)})  # French under German names
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


def write_corpus(folder, splits):
    import os

    os.makedirs(folder)
    for stem, sides in splits.items():
        for lang, lines in zip(("de", "en"), sides):
            with open(os.path.join(folder, f"{stem}.{lang}"), "w", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)


GERMAN = ["Ein Mann fährt mit dem Fahrrad auf der Straße.", "Zwei Kinder spielen im Garten hinter dem Haus.",
          "Eine Frau liest ein Buch im Park.", "Der Hund läuft mit einem roten Ball am Strand.",
          "Die Leute warten im Regen auf den Bus.", "Ein Junge isst ein Eis vor dem offenen Fenster."]
FRENCH = ["Un homme fait du vélo dans la rue.", "Deux enfants jouent dans le jardin derrière la maison.",
          "Une femme lit un livre dans le parc.", "Le chien court sur la plage avec un ballon rouge.",
          "Les gens attendent le bus sous la pluie.", "Un garçon mange une glace devant la fenêtre ouverte."]
ENGLISH = ["A man rides a bike in the street.", "Two children play in the garden behind the house.",
           "A woman reads a book in the park.", "The dog runs on the beach with a red ball.",
           "People wait for the bus in the rain.", "A boy eats an ice cream in front of the open window."]


def test_a_side_declared_in_another_language_than_its_text_stops_with_the_flag_to_fix_it():
    # French under a German declaration: the language filter would remove nearly every pair; it stops first.
    with pytest.raises(PreparationError, match="the source side is declared 'de' .--src de. but reads as 'fr' in "
                                               r"\d+ of the \d+ sampled pairs.*--src fr.*--no-clean-language"):
        clean(FRENCH, ENGLISH, "de", "en", ONE_PAIR_AT_A_TIME, segment=words)
    kept, removed, _ = clean(FRENCH, ENGLISH, "fr", "en", ONE_PAIR_AT_A_TIME, segment=words)
    assert kept == list(range(len(FRENCH))) and not any(removed.values())
    with pytest.raises(PreparationError, match="the target side is declared 'de' .--tgt de."):
        clean(FRENCH, ENGLISH, "fr", "de", ONE_PAIR_AT_A_TIME, segment=words)
    # Switched off, the filter neither checks nor removes.
    kept, _, _ = clean(FRENCH, ENGLISH, "de", "en", CleaningOptions(language=False, alignment_like_random=0),
                       segment=words)
    assert kept == list(range(len(FRENCH)))


def test_languages_compare_as_iso_639_3_codes_folded_into_their_macrolanguage():
    assert cleaning.language_code("zh-Hant", "--src") == cleaning.language_code("cmn", "heliport") == "zho"
    assert cleaning.language_code("DE", "--src") == "deu" and cleaning.language_code("nob", "heliport") == "nor"
    with pytest.raises(PreparationError, match="--tgt xx is not an ISO 639 language code"):
        cleaning.language_code("xx", "--tgt")
    # Simplified Chinese that heliport reads as Japanese (it has no kana, which Japanese always writes) stays.
    chinese = ["我不知道你在说什么。", "他明天去北京。", "这本书很有意思。", "辩诉交易是什么内容", "伸出来"]
    kept, removed, _ = clean(chinese, ENGLISH[:5], "zh", "en", CleaningOptions(alignment_like_random=0,
                                                                                max_length_ratio=0), segment=list)
    assert kept == [0, 1, 2, 3, 4]
    assert cleaning.LanguageIdentifier().identify("これは日本語の文です。") == "jpn"


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
