"""scripts/bleu_breakdown.py: BLEU by reference length and recall by training frequency, on hand-made sentences."""

import json

import pytest

from fairseq_autoassist.raw_corpus import PreparationError
from scripts import bleu_breakdown

REFERENCES = ["the cat sat .", "a dog ran .", "the quick brown fox jumps over the lazy dog ."]


def test_bleu_is_split_by_reference_length_and_recall_by_training_frequency():
    band_of = bleu_breakdown.frequency_bands({"the": 9, ".": 8, "dog": 5, "cat": 4, "fox": 1}, edges=(2, 4))
    assert band_of == {"the": 0, ".": 0, "dog": 1, "cat": 1, "fox": 2}
    # The two short sentences exact, the long one all wrong but for its frequent tokens.
    hypotheses = ["the cat sat .", "a dog ran .", "the the . x y z w v u t"]
    figures = bleu_breakdown.breakdown(hypotheses, REFERENCES, band_of, length_edges=(4,), frequency_edges=(2, 4))
    by_length = figures["bleu_by_reference_length"]
    assert list(by_length) == ["<= 4", "> 4"] and by_length["<= 4"] == 100.0 and by_length["> 4"] < 10
    # Reference tokens by band: the/. 2+1+3 (all produced), dog/cat 1+1+1 (the long one's dog missed), the rest
    # (sat, a, ran, quick, ...) 3 of 9.
    assert figures["recall_by_training_frequency"] == {"top 2": 1.0, "3-4": round(2 / 3, 3), "beyond 4": round(3 / 9, 3)}
    assert figures["bleu_signature"].startswith("nrefs:1|case:mixed")


def test_length_edges_default_to_the_references_terciles():
    references = ["a"] * 3 + ["a b c"] * 3 + ["a b c d e f"] * 3
    assert bleu_breakdown.length_edges_of(references) == (1, 3)
    assert bleu_breakdown.length_labels((1, 3)) == ["<= 1", "2-3", "> 3"]


def test_each_arm_is_the_mean_of_its_seeds_and_empty_buckets_stay_empty():
    run = {"bleu": 10.0, "precisions": [50.0, 20.0], "brevity_penalty": 1.0, "length_ratio": 1.0,
           "bleu_by_reference_length": {"<= 5": 10.0, "> 5": None},
           "recall_by_training_frequency": {"top 2": 0.5}}
    other = {**run, "bleu": 20.0, "precisions": [60.0, 30.0], "recall_by_training_frequency": {"top 2": 0.7}}
    mean = bleu_breakdown.mean_figures([run, other])
    assert mean["bleu"] == 15.0 and mean["precisions"] == [55.0, 25.0] and mean["seeds"] == 2
    assert mean["bleu_by_reference_length"] == {"<= 5": 10.0, "> 5": None}
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
