"""scripts/research/benchmark_scale.py: the synthetic WMT-shaped corpus and the figures derived from measurements."""

import json

import numpy as np
import pytest

from fairseq_autoassist.recipes import SYNTHETIC_SPLIT_SIZES
from scripts.research import benchmark_scale


def test_the_synthetic_corpus_is_a_fairseq_dataset_of_the_asked_shape(tmp_path):
    from fairseq.data import Dictionary, data_utils

    dest = benchmark_scale.write_corpus(str(tmp_path / "bin"), pairs=5000, vocab_size=500, mean_length=30)
    dictionary = Dictionary.load(str(tmp_path / "bin" / "dict.en.txt"))
    assert len(dictionary) == 500
    dataset = data_utils.load_indexed_dataset(f"{dest}/train.en-de.de", dictionary)
    sizes = np.array(dataset.sizes)
    assert len(dataset) == 5000 and 27 < sizes.mean() < 33 and sizes.min() >= 1 and sizes.max() <= 250
    sentence = dataset[7].numpy()
    assert sentence[-1] == 2 and (sentence[:-1] >= 4).all() and (sentence < 500).all()


def test_per_pair_goals_are_judged_by_the_slope_not_the_fixed_cost():
    # A fixed 40 MB and 3 s (imports) plus 30 bytes and 2 s per million pairs.
    rows = [benchmark_scale.compare(
        {"pairs": n, "startup_seconds": 10.0 + 1e-6 * n, "anon_after_startup": 1e9, "file_after_startup": 1e8,
         "rss_peak_after_startup": 1.2e9},
        {"pairs": n, "startup_seconds": 13.0 + 3e-6 * n, "anon_after_startup": 1e9 + 4e7 + 30 * n,
         "file_after_startup": 1e8 + 120 * n, "rss_peak": 2e9,
         "batch_by_size_seconds": 1e-6 * n, "selecting_epoch_plan_seconds": 1.5e-6 * n,
         "chunk_selection_seconds": 0.01, "assistant_update_seconds": 0.001,
         "assistant_scoring_seconds": 0.3e-6 * n})
        for n in (1_000_000, 4_500_000)]
    projected = benchmark_scale.extrapolations(rows)
    assert projected["bytes_per_pair"] == pytest.approx(30.0)
    assert projected["startup_extra_seconds_per_million"] == pytest.approx(2.0)
    assert projected["planning_to_batch_by_size"] == pytest.approx(1.5, rel=1e-3)
    assert projected["assistant_scoring_seconds"] == pytest.approx(30.0)
    assert rows[0]["bytes_per_pair"] == pytest.approx(70.0)  # the fixed cost still shows at 1M pairs
    assert rows[0]["file_bytes_per_pair"] == pytest.approx(120.0)
    assert "| 100M pairs |" in benchmark_scale.markdown(rows, "cmd", "assistant")
    with_pairs = benchmark_scale.compare(
        {"pairs": 10**6, "startup_seconds": 1.0, "anon_after_startup": 0, "file_after_startup": 0,
         "rss_peak_after_startup": 0},
        {"pairs": 10**6, "startup_seconds": 3.0, "anon_after_startup": 36e6, "file_after_startup": 0, "rss_peak": 0,
         "batch_by_size_seconds": 1.0, "selecting_epoch_plan_seconds": 1.0, "chunk_selection_seconds": 0.01,
         "assistant_update_seconds": 0.001, "assistant_scoring_seconds": 0.1},
        {"startup_seconds": 8.0, "anon_after_startup": 48e6, "pair_feature_columns": 3})
    assert with_pairs["pair_features_seconds_per_million"] == pytest.approx(5.0)
    assert with_pairs["pair_features_bytes_per_pair"] == pytest.approx(12.0)


@pytest.mark.slow
def test_measures_both_tasks_on_a_small_corpus(tmp_path):
    assert benchmark_scale.main(["--pairs", "3000", "--chunks", "1", "--work", str(tmp_path / "work"),
                                 "--out", str(tmp_path / "out"), "--pair-features"]) == 0
    result = json.loads((tmp_path / "out" / "scale.json").read_text())
    (row,) = result["rows"]
    assert row["pairs"] == 3000
    for key in ("startup_extra_seconds", "bytes_per_pair", "file_bytes_per_pair", "selecting_epoch_plan_seconds",
                "chunk_selection_seconds", "assistant_update_ms", "pair_features_startup_seconds"):
        assert np.isfinite(row[key]), key
    assert row["startup_stock_seconds"] > 0 and row["assistant_update_ms"] > 0
    # Timing differences on 3,000 pairs are noise (-0.07 s once): the pair features' columns show they were computed.
    assert row["pair_feature_columns"] > 0
    assert "pair features' own start-up" in (tmp_path / "out" / "scale.md").read_text()


@pytest.mark.slow
def test_measures_a_prepared_folder_in_its_own_languages(prepared_data, tmp_path):
    # de-en, where the synthetic folders are en-de: the languages come from the folder's prepare.json.
    assert benchmark_scale.main(["--data", prepared_data, "--chunks", "1", "--out", str(tmp_path / "out")]) == 0
    (row,) = json.loads((tmp_path / "out" / "scale.json").read_text())["rows"]
    assert row["pairs"] == SYNTHETIC_SPLIT_SIZES["train"]  # the folder's split, not a synthetic WMT-shaped one
    assert row["assistant_scoring_seconds"] > 0
