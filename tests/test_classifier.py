"""The label-free pair classifier (fairseq_autoassist/corpus/classifier.py) and its cleaning filter."""

import argparse
import builtins
import collections

import numpy as np
import pytest

from fairseq_autoassist.corpus import cleaning
from fairseq_autoassist.corpus.classifier import (FEATURES, NEGATIVE_KINDS, PairClassifier, TranslationDictionary,
                                                  pair_table, synthetic_negatives)
from fairseq_autoassist.corpus.cleaning import CleaningOptions, clean, pair_badness
from fairseq_autoassist.corpus.raw_corpus import PreparationError

from .synthetic import synthetic_translations


def named_translations(pairs, seed=0):
    """``synthetic_translations`` whose every third pair carries a capitalised name and a number on both sides."""
    german, english = synthetic_translations(pairs, seed)
    for i in range(0, pairs, 3):
        german[i] += f" Anna{i % 7} {i % 11}"
        english[i] += f" Anna{i % 7} {i % 11}"
    return german, english


def test_the_dictionary_turns_link_counts_into_probabilities_both_ways_and_drops_single_links():
    links = {("hund", "dog"): 6, ("hund", "hound"): 2, ("katze", "cat"): 4, ("katze", "dog"): 1}
    dictionary = TranslationDictionary.from_links(links)
    assert dictionary.given_source["dog"] == {"hund": 0.75}  # p(dog | hund) = 6 / 8; the single link dropped
    assert dictionary.given_source["hound"] == {"hund": 0.25}
    assert dictionary.given_target["hund"] == {"dog": 1.0, "hound": 1.0}  # p(hund | dog), p(hund | hound)
    assert "katze" not in dictionary.given_target["dog"] if "dog" in dictionary.given_target else True


def test_a_translation_scores_higher_than_a_re_paired_one_on_every_lexical_feature():
    german, english = synthetic_translations(400)
    dictionary = TranslationDictionary.learn(german, english)
    table = pair_table(german[:50], english[:50] , dictionary)
    shifted = pair_table(german[:50], english[50:100], dictionary)
    for name in ("lexical_forward", "lexical_backward", "covered_forward", "covered_backward"):
        column = FEATURES.index(name)
        assert table[:, column].mean() > shifted[:, column].mean() + 0.3, name
    assert (table[:, FEATURES.index("known_forward")] == 1).all()  # every word of the made-up language is known


def test_each_negative_kind_corrupts_its_pair_as_named():
    german, english = named_translations(600)
    bad_german, bad_english, kinds = synthetic_negatives(german, english, seed=3)
    counts = collections.Counter(kinds)
    # shared_name falls back to misaligned for the two pairs in three without a name or number.
    assert set(counts) == set(NEGATIVE_KINDS) and min(counts.values()) >= 25
    for i, kind in enumerate(kinds):
        pair, bad = (german[i], english[i]), (bad_german[i], bad_english[i])
        assert bad != pair, kind
        if kind == "copied":
            assert bad == (german[i], german[i])
        elif kind == "shuffled":
            assert bad[0] == german[i] and sorted(bad[1].split()) == sorted(english[i].split())
        elif kind == "truncated":
            changed = bad[0] if bad[0] != german[i] else bad[1]
            whole = german[i] if bad[0] != german[i] else english[i]
            assert whole.startswith(changed) and len(changed.split()) < len(whole.split())
        elif kind == "shared_name":
            assert bad[0] == german[i] and bad[1] in english
            assert {w for w in english[i].split() if w[0].isupper() or w.isdigit()} & set(bad[1].split())
        elif kind == "misaligned":
            assert bad[0] == german[i] and bad[1] in english
        elif kind == "replaced":
            changed = bad[0] if bad[0] != german[i] else bad[1]
            assert len(changed.split()) == len((german[i] if bad[0] != german[i] else english[i]).split())


def test_the_trained_classifier_keeps_its_share_of_held_out_pairs_and_removes_their_corruptions(tmp_path):
    german, english = named_translations(1500)
    model = PairClassifier.train(german, english, keep_share=0.95, seed=0)
    assert model.held_out["clean_kept"] >= 0.94
    assert max(model.held_out["negatives_kept"].values()) <= 0.3
    assert np.mean(list(model.held_out["negatives_kept"].values())) <= 0.1
    # New pairs of the same language pair: kept; their targets re-paired: removed.
    new_german, new_english = synthetic_translations(200, seed=7)
    assert model.keeps(new_german, new_english).mean() >= 0.85
    assert model.keeps(new_german, new_english[100:] + new_english[:100]).mean() <= 0.1
    path = tmp_path / "clean-classifier.pkl"
    model.save(path)
    np.testing.assert_array_equal(PairClassifier.load(path).scores(new_german, new_english),
                                  model.scores(new_german, new_english))
    path.write_bytes(b"\x80\x04N.")  # a pickle of None: not a classifier
    with pytest.raises(ValueError, match="train one again with --clean-classifier"):
        PairClassifier.load(path)
    with pytest.raises(ValueError, match="too few to train"):
        PairClassifier.train(german[:30], english[:30], keep_share=0.95)


def test_the_classifier_filter_removes_misaligned_pairs_learning_from_a_trusted_corpus_and_saves_itself(tmp_path):
    trusted_german, trusted_english = named_translations(1200, seed=1)
    (tmp_path / "trusted.de").write_text("\n".join(trusted_german) + "\n", encoding="utf-8")
    (tmp_path / "trusted.en").write_text("\n".join(trusted_english) + "\n", encoding="utf-8")
    german, english = synthetic_translations(300, seed=2)
    for i in range(30):
        english[i] = english[299 - i]
    saved = tmp_path / "clean-classifier.pkl"
    options = CleaningOptions(language=False, max_length_ratio=0, alignment_like_random=0, classifier=True,
                              trusted=str(tmp_path / "trusted"))
    kept, removed, scores = clean(german, english, "de", "en", options, segment=str.split, classifier_path=saved)
    assert len(set(removed["classifier"]) & set(range(30))) >= 27
    assert len(set(removed["classifier"]) - set(range(30))) <= 27  # at most a tenth of the translations
    threshold = PairClassifier.load(saved).threshold
    np.testing.assert_array_equal(pair_badness(scores, options, threshold) >= 1, ~np.isin(np.arange(300), kept))
    # A second corpus scored with the saved classifier removes the same pairs.
    again = CleaningOptions(language=False, max_length_ratio=0, alignment_like_random=0, classifier=True,
                            classifier_model=str(saved))
    assert clean(german, english, "de", "en", again, segment=str.split)[0] == kept


def test_the_classifier_flags_are_refused_without_it_or_without_their_files(tmp_path):
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", default="de")
    parser.add_argument("--tgt", default="en")
    cleaning.add_arguments(parser)
    options = cleaning.options_from(parser.parse_args(["--clean", "--clean-classifier"]))
    assert options.classifier and options.classifier_keep == 0.97 and not options.trusted
    with pytest.raises(PreparationError, match="--clean-trusted is given without --clean-classifier"):
        cleaning.options_from(parser.parse_args(["--clean", "--clean-trusted", str(tmp_path / "corpus")]))
    with pytest.raises(PreparationError, match=r"corpus\.de\[\.gz\] is missing"):
        cleaning.options_from(parser.parse_args(["--clean", "--clean-classifier", "--clean-trusted",
                                                 str(tmp_path / "corpus")]))
    with pytest.raises(PreparationError, match="--clean-classifier-model .* does not exist"):
        cleaning.options_from(parser.parse_args(["--clean", "--clean-classifier", "--clean-classifier-model",
                                                 str(tmp_path / "missing.pkl")]))
    with pytest.raises(PreparationError, match=r"--clean-classifier-keep=0.0 is outside"):
        cleaning.options_from(parser.parse_args(["--clean", "--clean-classifier", "--clean-classifier-keep", "0"]))


def test_a_missing_package_stops_the_classifier_with_the_install_and_the_flag(monkeypatch):
    real_import = builtins.__import__

    def without_sklearn(name, *args, **kwargs):
        if name == "sklearn":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_sklearn)
    german, english = synthetic_translations(40)
    options = CleaningOptions(language=False, max_length_ratio=0, alignment_like_random=0, classifier=True)
    with pytest.raises(PreparationError) as error:
        clean(german, english, "de", "en", options, segment=str.split)
    message = str(error.value)
    assert message.startswith("cleaning needs sklearn (pip install 'opusfilter[eflomal,varikn,heliport]'")
    assert "no --clean-classifier" in message and "\n" not in message


def test_the_classifier_report_scores_judged_pairs_and_fills_the_issues_fields(tmp_path):
    import gzip
    import json
    import zipfile

    from scripts.research import classifier_report

    german, english = named_translations(1400, seed=3)
    with zipfile.ZipFile(tmp_path / "deu-eng.zip", "w") as archive:
        archive.writestr("deu.txt", "".join(f"{en}\t{de}\tCC-BY\n" for de, en in zip(german[:1000], english[:1000])))
    (tmp_path / "multi30k").mkdir()
    (tmp_path / "multi30k" / "train.de").write_text("\n".join(german[1000:1300]) + "\n", encoding="utf-8")
    (tmp_path / "multi30k" / "train.en").write_text("\n".join(english[1000:1300]) + "\n", encoding="utf-8")
    judged_german, judged_english = synthetic_translations(100, seed=9)
    rows = [(en, de, "V") for de, en in zip(judged_german[:60], judged_english[:60])]
    rows += [(judged_english[99 - i], judged_german[i], "A" if i % 5 else "L") for i in range(60, 100)]
    (tmp_path / "paracrawl").mkdir()
    with gzip.open(tmp_path / "paracrawl" / "v6.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"u1\tu2\t{en}\t{de}\t0.5\t{label}\t\t3\n" for en, de, label in rows)
    (tmp_path / "news.de").write_text("\n".join(judged_german[:60]) + "\n", encoding="utf-8")
    (tmp_path / "news.en").write_text("\n".join(judged_english[:60]) + "\n", encoding="utf-8")
    result, scores = classifier_report.report(str(tmp_path / "paracrawl"), str(tmp_path / "deu-eng.zip"),
                                              str(tmp_path / "multi30k"), timing_pairs=2000,
                                              professional=str(tmp_path / "news"))
    assert result["professional_removed_by_tatoeba_classifier"]["by_keep_share"]["0.97"] <= 0.2
    summary = result["summary"]
    assert summary["paracrawl_auc_v_vs_al"] >= 0.95  # made-up translations against re-paired ones
    assert result["bicleaner"]["auc_v_vs_al"] == 0.5  # every judged pair has bicleaner's score 0.5
    assert summary["paracrawl_valid_kept"] >= 0.8 and summary["paracrawl_misaligned_kept"] <= 0.2
    assert set(result["clean_corpus_removed"]) == {"multi30k", "tatoeba"}
    assert len(scores["tatoeba_classifier"]) == len(scores["labels"]) == 100
    whole = {"noisy": {"a": {"corrupted_kept": 0.1, "clean_kept": 0.97},
                       "b": {"corrupted_kept": 0.3, "clean_kept": 0.9}},
             "clean": {"c": {"removed_share_total": 0.02}, "d": {"removed_share_total": 0.04}}}
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / "results.json").write_text(json.dumps(whole))
    assert classifier_report.whole_cleaning(str(tmp_path / "whole")) == {
        "noisy_corrupted_kept": 0.3, "noisy_clean_kept": 0.9, "clean_corpus_removed": 0.04}
    text = classifier_report.markdown(result)
    assert "| classifier trained on Tatoeba |" in text and "Removed of 60 long professional translations" in text


def test_the_classifier_report_refreshes_only_the_whole_cleanings_fields(tmp_path):
    import json

    from scripts.research import classifier_report

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "summary.json").write_text(json.dumps({"paracrawl_auc_v_vs_al": 0.77,
                                                               "noisy_corrupted_kept": 0.5}))
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / "results.json").write_text(json.dumps(
        {"noisy": {"a": {"corrupted_kept": 0.1, "clean_kept": 0.97}}, "clean": {"c": {"removed_share_total": 0.02}}}))
    classifier_report.main(["--out", str(tmp_path / "out"), "--cleaning-report", str(tmp_path / "whole"),
                            "--refresh-cleaning-report"])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["paracrawl_auc_v_vs_al"], summary["noisy_corrupted_kept"], summary["clean_corpus_removed"]) == (
        0.77, 0.1, 0.02)
    with pytest.raises(SystemExit):
        classifier_report.main(["--out", str(tmp_path / "out")])
