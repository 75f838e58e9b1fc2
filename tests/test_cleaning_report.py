"""scripts/research/cleaning_report.py: the corpus it builds, what it counts as lost, and its summary."""

import numpy as np

from scripts.research.cleaning_report import (accentless_with_speakers, alignment_sweep, corrupted_kept_by_kind,
                                              lost_clean, summary)


def test_the_accentless_corpus_drops_diacritics_and_labels_both_sides_with_one_speaker():
    source, target = accentless_with_speakers(["Schöne Grüße aus Köln."] * 200, ["Greetings from Cologne."] * 200)
    assert not any(c in "".join(source) for c in "öüäÖÜÄ")
    labelled = [i for i, line in enumerate(source) if ": " in line]
    assert 30 < len(labelled) < 90  # about 30%
    assert all(source[i].split(": ")[0] == target[i].split(": ")[0] for i in labelled)
    assert source[0].endswith("Schone Gruße aus Koln.")


def test_a_duplicate_removed_beside_its_kept_twin_is_not_a_lost_clean_pair():
    labels = np.array(["clean", "clean", "duplicate", "misaligned", "clean"])
    assert lost_clean(labels, {"duplicate": [0], "alignment": [3, 4], "language": []}) == 1


def test_the_sweep_counts_what_each_alignment_threshold_would_keep():
    labels = np.array(["clean", "clean", "misaligned", "misaligned", "clean"])
    alignment = np.array([0.0, 0.3, 0.9, 0.2, np.nan])  # the last pair was removed before the alignment
    rows = alignment_sweep(alignment, labels, {"length_ratio": [4], "alignment": []})
    at = {row["alignment_like_random"]: row for row in rows}
    assert at[0.25]["corrupted_kept"] == 0.5 and at[0.25]["clean_kept"] == 1 - 2 / 3
    assert at[0.1]["corrupted_kept"] == 0.0


def test_the_summary_takes_the_worse_fresh_copy_and_the_worst_clean_corpus():
    result = {"noisy": {"dev": {"corrupted_kept": 0.9, "clean_kept": 0.1},
                        "a": {"corrupted_kept": 0.04, "clean_kept": 0.97},
                        "b": {"corrupted_kept": 0.02, "clean_kept": 0.96}},
              "clean": {"x": {"removed_share_total": 0.02}, "y": {"removed_share_total": 0.035}},
              "paracrawl": {"auc": {"badness (the filters together)": {"v_vs_al": 0.6, "v_vs_all": 0.55}}}}
    assert summary(result) == {"paracrawl_auc_v_vs_al": 0.6, "paracrawl_auc_v_vs_all": 0.55,
                               "noisy_corrupted_kept": 0.04, "noisy_clean_kept": 0.96, "clean_corpus_removed": 0.035,
                               "stock_bleu_gain_over_clean": None}


def test_every_corrupted_pair_counts_whatever_its_kinds_name():
    """A noisy copy made elsewhere names its own kinds (before 2026-12-07 the report counted only its generator's, and
    a kept pair of another kind counted as removed: 2.1% reported where 17.3% was kept)."""
    labels = np.array(["clean", "shuffled_words", "shuffled_words", "misaligned", "duplicate", "next_line"])
    kept = np.array([True, True, False, True, True, True])
    assert corrupted_kept_by_kind(labels, kept, duplicates_removed=True) == {
        "misaligned": 1, "duplicate": 0, "next_line": 1, "shuffled_words": 1}


def test_the_paracrawl_scores_behind_each_auc_are_written_beside_the_results(tmp_path):
    import gzip
    import json

    from sklearn.metrics import roc_auc_score

    from scripts.research import cleaning_report

    (tmp_path / "judged").mkdir()
    rows = [(f"The house number {i} is red.", f"Das Haus Nummer {i} ist rot.", "V", 0.9) for i in range(30)]
    rows += [(f"Menu item {i}", f"Ein ganz anderer Satz über Katzen Nummer {i}.", "A", 0.2) for i in range(20)]
    with gzip.open(tmp_path / "judged" / "v6.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"u1\tu2\t{en}\t{de}\t{score}\t{label}\t\t3\n" for en, de, label, score in rows)
    out = tmp_path / "out"
    assert cleaning_report.main(["--out", str(out), "--paracrawl", str(tmp_path / "judged"),
                                 "--set", "max_length_ratio=0", "--set", "max_similarity=0", "--set", "language=false",
                                 "--set", "alignment_like_random=0"]) == 0
    scores = np.load(out / "paracrawl-scores.npz")
    table = json.loads((out / "results.json").read_text())["paracrawl"]["auc"]
    valid = scores["labels"] == "V"
    assert len(valid) == 50 and set(table) <= set(scores.files)
    for name in table:  # each AUC recomputed from the committed scores (lower is better)
        assert round(roc_auc_score(valid, -scores[name]), 4) == table[name]["v_vs_all"]
    assert table["bicleaner"]["v_vs_al"] == 1.0


def test_pairs_mixed_into_a_corpus_are_counted_apart_from_it(tmp_path):
    from scripts.research.cleaning_report import mixed_in
    from fairseq_autoassist.corpus.cleaning import CleaningOptions

    base = tmp_path / "base"
    base.mkdir()
    (base / "train.de").write_text("".join(f"Der Hund {i} rennt.\n" for i in range(40)))
    (base / "train.en").write_text("".join(f"The dog {i} runs.\n" for i in range(40)))
    months = [("Januar", "January"), ("Februar", "February"), ("März", "March"), ("April", "April"), ("Mai", "May"),
              ("Juni", "June"), ("Juli", "July"), ("August", "August")]
    added = [(f"Die Regierung hat im {de} entschieden.", f"The government decided in {en}.") for de, en in months]
    added += [("Das ist gleich.", "Das ist gleich."), ("Der Hund 3 rennt.", "The dog 3 runs.")]  # a copy, a duplicate
    (tmp_path / "news.de").write_text("".join(f"{de}\n" for de, _ in added))
    (tmp_path / "news.en").write_text("".join(f"{en}\n" for _, en in added))
    options = CleaningOptions(near_duplicates=False, language=False, max_length_ratio=0, alignment_like_random=0)
    result = mixed_in(str(base), str(tmp_path / "news"), "de", "en", options)
    assert (result["added_pairs"], result["base_pairs"]) == (10, 40)
    assert result["added_removed_by"] == {"copy": 1}
    assert result["added_removed_share"] == 1 / 9  # the exact duplicate is no loss: its twin stays
    assert result["base_removed_share"] == 0.0
