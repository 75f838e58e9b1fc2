"""The scripts that explain a benchmark's runs, on hand-made inputs: scripts/research/bleu_breakdown.py (BLEU by
reference length and by the pair's copies in training, recall by training frequency) and
scripts/research/skipped_pairs_report.py (which pairs a selecting rule skips)."""

import json

import numpy as np
import pytest

from fairseq_autoassist.corpus.raw_corpus import PreparationError
from scripts.research import bleu_breakdown, skipped_pairs_report

REFERENCES = ["the cat sat .", "a dog ran .", "the quick brown fox jumps over the lazy dog ."]


def test_bleu_is_split_by_reference_length_and_recall_by_training_frequency():
    band_of = bleu_breakdown.frequency_bands({"the": 9, ".": 8, "dog": 5, "cat": 4, "fox": 1}, edges=(2, 4))
    assert band_of == {"the": 0, ".": 0, "dog": 1, "cat": 1, "fox": 2}
    # The two short sentences exact, the long one all wrong but for its frequent tokens.
    hypotheses = ["the cat sat .", "a dog ran .", "the the . x y z w v u t"]
    figures = bleu_breakdown.breakdown(hypotheses, REFERENCES, band_of, length_edges=(4,), frequency_edges=(2, 4),
                                       occurrences=[0, 3, 1])
    by_length = figures["bleu_by_reference_length"]
    assert list(by_length) == ["<= 4", "> 4"] and by_length["<= 4"] == 100.0 and by_length["> 4"] < 10
    # The pair seen three times in training is exact, the one seen once all wrong.
    by_occurrence = figures["bleu_by_training_occurrences"]
    assert by_occurrence["never"] == by_occurrence["more often"] == 100.0 and by_occurrence["once"] < 10
    # Reference tokens by band: the/. 2+1+3 (all produced), dog/cat 1+1+1 (the long one's dog missed), the rest
    # (sat, a, ran, quick, ...) 3 of 9.
    assert figures["recall_by_training_frequency"] == {"top 2": 1.0, "3-4": round(2 / 3, 3), "beyond 4": round(3 / 9, 3)}
    assert figures["bleu_signature"].startswith("nrefs:1|case:mixed")


def test_each_held_out_pair_counts_its_copies_in_training_by_both_sides():
    from fairseq_autoassist.assistant import CorpusSide, PairFeatures

    def pairs(sources, targets):
        def side(sentences):
            return CorpusSide(np.concatenate(sentences), np.r_[0, np.cumsum([len(s) for s in sentences])])
        return PairFeatures(side([np.array(s) for s in sources]), side([np.array(t) for t in targets]), vocab_size=10)

    training = pairs([[1, 2], [1, 2], [3], [1, 2], [4]], [[5], [5], [6], [6], [5]])  # (12, 5) twice
    held_out = pairs([[1, 2], [3], [4], [2, 1], [1, 2]], [[5], [6], [6], [5], [6]])
    keys = bleu_breakdown.pair_keys(held_out)
    occurrences = bleu_breakdown.occurrences_in(bleu_breakdown.pair_keys(training), keys)
    # The same source with another target, or the same pieces in another order, is another pair.
    assert occurrences.tolist() == [2, 1, 0, 0, 1]
    assert bleu_breakdown.occurrence_bands(occurrences).tolist() == [2, 1, 0, 0, 1]


def test_length_edges_default_to_the_references_terciles():
    references = ["a"] * 3 + ["a b c"] * 3 + ["a b c d e f"] * 3
    assert bleu_breakdown.length_edges_of(references) == (1, 3)
    assert bleu_breakdown.bucket_labels((1, 3)) == ["<= 1", "2-3", "> 3"]
    assert bleu_breakdown.bucket_labels((0.7, 1.4)) == ["<= 0.7", "0.7-1.4", "> 1.4"]


def test_each_arm_is_the_mean_of_its_seeds_and_empty_buckets_stay_empty():
    run = {"bleu": 10.0, "precisions": [50.0, 20.0], "brevity_penalty": 1.0, "length_ratio": 1.0,
           "bleu_by_reference_length": {"<= 5": 10.0, "> 5": None},
           "bleu_by_training_occurrences": {"never": 8.0, "once": None},
           "recall_by_training_frequency": {"top 2": 0.5}}
    other = {**run, "bleu": 20.0, "precisions": [60.0, 30.0], "recall_by_training_frequency": {"top 2": 0.7}}
    mean = bleu_breakdown.mean_figures([run, other])
    assert mean["bleu"] == 15.0 and mean["precisions"] == [55.0, 25.0] and mean["seeds"] == 2
    assert mean["bleu_by_reference_length"] == {"<= 5": 10.0, "> 5": None}
    assert mean["bleu_by_training_occurrences"] == {"never": 8.0, "once": None}
    assert mean["recall_by_training_frequency"] == {"top 2": 0.6}


def test_a_benchmark_folder_without_scored_runs_is_refused_with_the_flag_to_fix(tmp_path):
    with pytest.raises(PreparationError, match="--bench"):
        bleu_breakdown.finished_hypotheses(str(tmp_path), "test", ())
    run_dir = tmp_path / "runs" / "keep-all-seed1"
    run_dir.mkdir(parents=True)
    (run_dir / "bleu_test.json").write_text(json.dumps({"bleu": 1.0, "hypotheses": "/elsewhere/bleu_test.hyp.txt"}))
    with pytest.raises(PreparationError, match="bleu_test1.json"):
        bleu_breakdown.finished_hypotheses(str(tmp_path), "test1", ())
    found = bleu_breakdown.finished_hypotheses(str(tmp_path), "test", ())
    # The hypotheses are read beside the result, wherever the run was when it wrote them.
    assert found == [("keep-all", 1, str(run_dir / "bleu_test.hyp.txt"))]


def test_skipped_shares_are_expected_skips_per_bucket_and_per_side_of_the_band():
    keep = np.array([1.0, 0.1, 0.1, 1.0, 0.5, 0.1])
    side = np.array([np.nan, 0.0, 1.0, np.nan, np.nan, 1.0])
    bucket = np.array([0, 0, 0, 0, 1, 1])
    groups = {"length": (["short", "long", "empty"], bucket)}
    [rows] = skipped_pairs_report.skipped_shares(keep, side, groups).values()
    assert rows["short"] == {"pairs": 4, "skipped": 0.45, "skipped_as_learned": 0.25, "skipped_as_unlearnable": 0.25}
    assert rows["long"] == {"pairs": 2, "skipped": 0.7, "skipped_as_learned": 0.0, "skipped_as_unlearnable": 0.5}
    assert rows["empty"] == {"pairs": 0, "skipped": None, "skipped_as_learned": None, "skipped_as_unlearnable": None}
    # A rule without a loss band has no sides.
    [rows] = skipped_pairs_report.skipped_shares(keep, None, groups).values()
    assert rows["long"] == {"pairs": 2, "skipped": 0.7}


def test_a_pair_is_repeated_when_another_pair_has_its_target_or_both_its_sentences():
    from fairseq_autoassist.assistant import CorpusSide

    targets = CorpusSide(np.array([5, 6, 7, 5, 6, 6, 5]), np.array([0, 2, 3, 5, 7]))  # (5 6) (7) (5 6) (6 5)
    sources = CorpusSide(np.array([8, 9, 8, 8]), np.array([0, 1, 2, 3, 4]))  # (8) (9) (8) (8)
    assert skipped_pairs_report.repeated(targets.sentence_hashes()).tolist() == [True, False, True, False]
    # Pairs 0 and 2 are the same pair; pair 3 shares its source with them, not its target.
    assert skipped_pairs_report.repeated(sources.sentence_hashes(), targets.sentence_hashes()).tolist() == [
        True, False, True, False]


def test_a_target_ends_a_sentence_by_its_last_piece_before_the_end_of_sentence():
    from fairseq_autoassist.assistant import CorpusSide

    symbols = ["<s>", "<pad>", "</s>", "<unk>", "\u2581Hello", ",", ".", "?\"", "\u2581and", "\u3002"]
    # "Hello ." / "Hello ," / "and ?"" / "Hello" / (nothing but the end of sentence) / a Chinese full stop
    targets = CorpusSide(np.array([4, 6, 2, 4, 5, 2, 8, 7, 2, 4, 2, 2, 9, 2]),
                         np.array([0, 3, 6, 9, 11, 12, 14]))
    assert skipped_pairs_report.ends_a_sentence(targets, symbols).tolist() == [True, False, True, False, False, True]


def test_losses_are_split_in_fifths_of_the_scored_pairs(tmp_path):
    losses = np.concatenate([np.arange(1, 11, dtype=np.float32), [np.nan, np.nan]])
    path = tmp_path / "losses.npy"
    np.save(path, losses)
    names, bucket = skipped_pairs_report.loss_fifths(str(path), len(losses))
    assert names == ["<= 2.8 nats", "2.8-4.6 nats", "4.6-6.4 nats", "6.4-8.2 nats", "> 8.2 nats", "not scored"]
    assert bucket.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    with pytest.raises(PreparationError, match="holds 12 scores for 13 training pairs"):
        skipped_pairs_report.loss_fifths(str(path), 13)
    with pytest.raises(PreparationError, match="does not exist"):
        skipped_pairs_report.loss_fifths(str(tmp_path / "missing.npy"), 12)


def protocol_run(arm, seed, bleu_by_update, words_per_update, kept=1.0, test_bleu=30.0):
    """A paper-protocol run record: validations every 100 updates, one epoch of every 100 updates."""
    updates = [100 * (i + 1) for i in range(len(bleu_by_update))]
    return {"arm": arm, "seed": seed, "test_bleu": test_bleu, "test_checkpoint_updates": None,
            "validations": [{"updates": u, "valid_bleu": b, "valid_loss": 5.0} for u, b in zip(updates, bleu_by_update)],
            "epochs": [{"updates": u, "target_tokens": u * words_per_update, "kept_share": 1.0 if i == 0 else kept,
                        "valid_bleu": b, "valid_loss": 5.0} for i, (u, b) in enumerate(zip(updates, bleu_by_update))]}


def test_the_paper_protocol_summary_counts_words_to_the_stock_runs_best_and_builds_the_waterfall(tmp_path):
    from scripts.research import paper_protocol_summary

    results = {"preset": "paper-protocol", "runs": [
        protocol_run("baseline", 1, [10, 20, 30], words_per_update=2000),  # its best, 30, after 600,000 words
        # Half the words per update, reaching 30 at 400 updates: 400,000 words, 2/3 of the stock run's.
        protocol_run("released-2500", 1, [5, 15, 25, 30, 31], words_per_update=1000, kept=0.6),
        protocol_run("released", 1, [5, 10, 15, 20, 25], words_per_update=1200, kept=0.7),  # never: >= 1.0
        protocol_run("baseline-tuned", 1, [20, 30, 35], words_per_update=2000),
        protocol_run("assistant-tuned", 1, [15, 25, 33], words_per_update=2100),  # never: >= 1.05 words, 1.0 updates
    ]}
    records = {r["arm"]: r for r in paper_protocol_summary.summary_records("multi30k", results)}
    assert records["released-2500"]["words_ratio_valid_bleu"] == pytest.approx(400_000 / 600_000, abs=1e-4)
    assert records["released-2500"]["updates_ratio_valid_bleu"] == pytest.approx(400 / 300, abs=1e-4)
    assert records["released-2500"]["max_tokens"] == 2500 and records["released"]["max_tokens"] == 3000
    assert records["released-2500"]["kept_share"] == 0.6 and records["baseline"]["kept_share"] == 1.0
    assert records["released"]["words_ratio_valid_bleu"] is None
    assert records["released"]["words_ratio_at_least"] == pytest.approx(600_000 / 600_000, abs=1e-4)
    assert records["baseline-tuned"]["stock_arm"] == "baseline-tuned"
    timing = tmp_path / "timing.json"
    timing.write_text(json.dumps({"ratio_to_baseline": {"baseline": {"median": 1.0}, "released": {"median": 0.9},
                                                        "assistant": {"median": 1.1}}}))
    paper_protocol_summary.main(["--corpus", "multi30k", "--results", str(_write(tmp_path, results)),
                                 "--out", str(tmp_path / "out"), "--seconds-per-update", str(timing)])
    by_arm = {record["arm"]: record for record in json.loads((tmp_path / "out" / "summary.json").read_text())}
    assert by_arm["released"]["seconds_ratio_valid_bleu"] is None  # it never reaches the stock run's best
    assert by_arm["released"]["seconds_ratio_at_least"] == pytest.approx(500 / 300 * 0.9, abs=1e-4)
    assert by_arm["baseline"]["seconds_ratio_valid_bleu"] == 1.0
    assert by_arm["released-2500"]["seconds_ratio_valid_bleu"] is None  # untimed
    # A tuned arm updates as its protocol twin does (the recipe changes the learning rate, not an update's work).
    assert paper_protocol_summary.timing_ratio("released-tuned", {"released": {"median": 0.9}}) == 0.9
    steps = json.loads((tmp_path / "out" / "waterfall.json").read_text())
    assert [(step["arm"], step["cost"]) for step in steps] == [("released-2500", "words"), ("released", "words"),
                                                               ("assistant-tuned", "words"),
                                                               ("assistant-tuned", "seconds")]
    assert steps[0]["ratio"] == pytest.approx(2 / 3, abs=1e-4) and not steps[0]["at_least"]
    assert steps[1]["at_least"] and steps[1]["seeds"] == [1] and steps[1]["ratios"] == [pytest.approx(1.0)]
    table = (tmp_path / "out" / "waterfall.md").read_text()
    assert "| `released` / `baseline` | words | 1.000 (seed 1) | >= 1.000 |" in table
    assert "0.667 (seed 1) | 0.667 |" in table
    # The last step in seconds: a run that never reaches the stock run's best gives its bound, its updates (1.0 of the
    # stock run's) times its time per update (assistant-tuned updates as assistant: 1.1 of the stock task's).
    assert steps[3]["ratios"] == [pytest.approx(1.1)] and steps[3]["at_least"]
    assert "| `assistant-tuned` / `baseline-tuned` | seconds | 1.100 (seed 1) | >= 1.100 |" in table


def _write(folder, results):
    path = folder / "results.json"
    path.write_text(json.dumps(results))
    return path
