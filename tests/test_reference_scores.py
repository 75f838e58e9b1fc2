"""autoassist-score (fairseq_autoassist/reference/scores.py): every training pair's per-token loss under a tiny
trained model equals the criterion's own, in either direction; a killed run resumes; bad input is one line."""

import json
import re

import numpy as np
import pytest

from fairseq_autoassist.corpus.raw_corpus import write_noise
from fairseq_autoassist.recipes import recipe

from .conftest import run_script


@pytest.fixture(scope="module")
def reference_checkpoints(prepared_data, tmp_path_factory):
    """A tiny stock model trained briefly in each direction of the synthetic corpus."""
    checkpoints = {}
    for src, tgt in (("de", "en"), ("en", "de")):
        save_dir = tmp_path_factory.mktemp(f"reference-{src}-{tgt}")
        args = recipe(prepared_data, str(save_dir), None, arch="tiny", max_epoch=1, max_update=8, max_tokens=600,
                      lr=1e-3, warmup_updates=4, cpu=True, eval_bleu=False)
        run_script("-m", "fairseq_cli.train", *args, "--source-lang", src, "--target-lang", tgt,
                   "--no-progress-bar")
        checkpoints[src, tgt] = str(save_dir / "checkpoint_last.pt")
    return checkpoints


def criterion_nll_per_pair(checkpoint, data):
    """Per training pair, the label-smoothed criterion's nll_loss on a batch of that pair alone, over its target
    tokens: fairseq's own loss, computed independently of the scorer's batching."""
    import torch
    from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion

    from fairseq_autoassist.reference.scores import load_reference

    model, task = load_reference(checkpoint, data, "cpu")
    task.load_dataset("train")
    dataset = task.dataset("train")
    criterion = LabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.1)
    losses = np.empty(len(dataset), dtype=np.float64)
    with torch.no_grad():
        for index in range(len(dataset)):
            sample = dataset.collater([dataset[index]])
            _, _, logging_output = criterion(model, sample)
            losses[index] = float(logging_output["nll_loss"]) / logging_output["ntokens"]
    return losses


@pytest.mark.slow
def test_scores_equal_the_criterions_loss_in_both_directions_and_resume(prepared_data, reference_checkpoints,
                                                                       tmp_path):
    from fairseq_autoassist.reference import scores as reference_scores

    by_direction = {}
    for (src, tgt), checkpoint in reference_checkpoints.items():
        output = str(tmp_path / f"{src}-{tgt}.npy")
        info = reference_scores.score_split(checkpoint, prepared_data, output=output, max_tokens=300)
        scores = np.load(output)
        assert scores.dtype == np.float32 and scores.shape == (info["pairs"],) and info["scored"] == info["pairs"]
        assert (info["source"], info["target"]) == (src, tgt)
        np.testing.assert_allclose(scores, criterion_nll_per_pair(checkpoint, prepared_data), rtol=1e-4, atol=1e-5)
        by_direction[src, tgt] = scores
    # The two directions score the same pairs in the same order, differently.
    assert not np.allclose(by_direction["de", "en"], by_direction["en", "de"])

    # A run killed part way leaves NaN where it stopped; the same command scores only those.
    output = str(tmp_path / "de-en.npy")
    complete = np.load(output).copy()
    partial = np.load(output, mmap_mode="r+")
    partial[::3] = np.nan
    partial.flush()
    del partial
    info = reference_scores.score_split(reference_checkpoints["de", "en"], prepared_data, output=output,
                                        max_tokens=300)
    assert info["scored_this_run"] == len(complete[::3])
    np.testing.assert_allclose(np.load(output), complete, rtol=1e-5, atol=1e-6)
    with open(output + ".json") as f:
        assert json.load(f)["seconds_per_million_pairs"] > 0


@pytest.mark.slow
def test_bad_input_stops_with_one_line(prepared_data, reference_checkpoints, tmp_path):
    missing = run_script("-m", "fairseq_autoassist.reference.scores", "--checkpoint", str(tmp_path / "none.pt"),
                         "--data", prepared_data, check=False)
    assert missing.returncode == 2 and "--checkpoint" in missing.stdout and "does not exist" in missing.stdout
    assert "Traceback" not in missing.stdout
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros(3, dtype=np.float32))
    mismatch = run_script("-m", "fairseq_autoassist.reference.scores", "--checkpoint",
                          reference_checkpoints["de", "en"], "--data", prepared_data, "--output", str(wrong),
                          check=False)
    assert mismatch.returncode == 2 and "holds 3 float32 scores" in mismatch.stdout and "--restart" in mismatch.stdout


@pytest.mark.slow
def test_two_halves_score_every_pair_with_the_model_that_did_not_see_it(prepared_data, tmp_path):
    import shutil

    from fairseq_autoassist.reference import models as reference_models
    from fairseq_autoassist.reference import scores as reference_scores

    data = str(tmp_path / "data")
    shutil.copytree(prepared_data, data)
    info = reference_models.build_reference(data, "two-halves", max_update=20, arch="tiny", max_tokens=300)
    half = reference_models.halves_by_source(data, seed=1)
    source, _ = reference_models.load_split(data, "train", "de")
    by_source = {}
    for index in range(len(source)):
        by_source.setdefault(source[index].numpy().tobytes(), set()).add(int(half[index]))
    assert all(len(sides) == 1 for sides in by_source.values()) and 0 < half.mean() < 1
    scores = np.load(info["scores"])
    assert info["scored"] == info["pairs"] == len(scores) and np.isfinite(scores).all()
    # Each half's pairs carry the other half's model's losses, and not their own model's.
    for side in (0, 1):
        other = str(tmp_path / "data" / "reference" / "two-halves" / f"half{1 - side}" / "checkpoints-de-en"
                    / "checkpoint_last.pt")
        own = other.replace(f"half{1 - side}", f"half{side}")
        check = str(tmp_path / f"check{side}.npy")
        reference_scores.score_split(other, data, output=check, max_tokens=300)
        np.testing.assert_allclose(scores[half == side], np.load(check)[half == side], rtol=1e-5, atol=1e-6)
        reference_scores.score_split(own, data, output=check, max_tokens=300, restart=True)
        assert not np.allclose(scores[half == side], np.load(check)[half == side])
    cost = info["cost"]
    assert [model["updates"] for model in info["models"]] == [20, 20]
    # A checkpoint every quarter of the budget, so a kill loses at most a quarter of a model.
    log = (tmp_path / "data" / "reference" / "two-halves" / "half0" / "checkpoints-de-en" / "train.log").read_text()
    saved = {int(updates) for updates in re.findall(r"Saved checkpoint .*?@ (\d+) updates", log)}
    assert {5, 10, 15, 20} <= saved
    assert cost["target_tokens"] == sum(model["target_tokens"] for model in info["models"]) > 0
    with open(tmp_path / "data" / "scores" / "two-halves.json") as f:
        assert json.load(f)["cost"] == cost
    # Run again: nothing is trained or scored twice.
    again = reference_models.build_reference(data, "two-halves", max_update=20, arch="tiny", max_tokens=300)
    # The cost still counts the first run's scoring; no pair was scored twice.
    assert again["cost"] == cost and cost["score_seconds"] > 0
    assert [model["scored_pairs"] for model in again["models"]] == [np.count_nonzero(half == 1),
                                                                    np.count_nonzero(half == 0)]
    # The backward models (dual cross-entropy's) train from English to German on the same halves, into files of
    # their own; the forward scores stay as they were.
    backward = reference_models.build_reference(data, "two-halves", max_update=20, arch="tiny", max_tokens=300,
                                                reverse=True)
    assert backward["direction"] == "en-de" and backward["scores"].endswith("two-halves-reverse.npy")
    np.testing.assert_array_equal(np.load(info["scores"]), scores)
    reverse_scores = np.load(backward["scores"])
    assert np.isfinite(reverse_scores).all() and not np.allclose(reverse_scores, scores)
    reverse_model = str(tmp_path / "data" / "reference" / "two-halves" / "half1" / "checkpoints-en-de"
                        / "checkpoint_last.pt")
    reference_scores.score_split(reverse_model, data, output=check, max_tokens=300, restart=True)
    np.testing.assert_allclose(reverse_scores[half == 0], np.load(check)[half == 0], rtol=1e-5, atol=1e-6)
    # Another budget on the same folder would resume the old models and keep their scores: refused, naming what to
    # remove.
    refused = run_script("-m", "fairseq_autoassist.reference.models", "--data", data, "--recipe", "two-halves",
                         "--max-update", "30", check=False)
    assert refused.returncode == 2 and "max_update 20 (now 30)" in refused.stdout
    assert "two-halves.npy" in refused.stdout and "Traceback" not in refused.stdout


@pytest.mark.slow
def test_a_trusted_corpus_in_the_datas_own_pieces_scores_every_pair(prepared_data, raw_corpus, tmp_path):
    import os
    import shutil

    from fairseq_autoassist.reference import models as reference_models

    data = str(tmp_path / "data")
    shutil.copytree(prepared_data, data)
    trusted = [os.path.join(raw_corpus, f"val.{lang}") for lang in ("de", "en")]
    info = reference_models.build_reference(data, "trusted", max_update=20, arch="tiny", trusted=trusted,
                                            max_tokens=300)
    assert info["scored"] == info["pairs"] and info["models"][0]["pairs"] == 40
    folder = tmp_path / "data" / "reference" / "trusted" / "corpus"
    assert (folder / "dict.de.txt").read_text() == (tmp_path / "data" / "dict.de.txt").read_text()
    refused = run_script("-m", "fairseq_autoassist.reference.models", "--data", data, "--recipe", "trusted",
                         "--max-update", "5", check=False)
    assert refused.returncode == 2 and "--recipe trusted needs --trusted SRC_FILE TGT_FILE" in refused.stdout


@pytest.mark.slow
def test_fairseq_train_selects_by_reducible_loss_and_refuses_a_missing_reference(prepared_data, tmp_path):
    import re

    from .test_end_to_end import fairseq_train

    # A reference that finds the first half of the pairs hard (noise it cannot learn either): their reducible loss is
    # low, below the running median, so the rule keeps them with the floor and the second half always once the Boss
    # has seen them. The first half is listed as noise so that the logs count each half's kept share.
    reference = np.zeros(400, dtype=np.float32)
    reference[:200] = 50.0
    np.save(tmp_path / "reference.npy", reference)
    write_noise(str(tmp_path / "first-half.tsv"), {line: "hard" for line in range(200)})
    log = fairseq_train(prepared_data, tmp_path / "run",
                        "--autoassist-reference-scores", str(tmp_path / "reference.npy"),
                        "--autoassist-reducible-quantile", "0.5", "--autoassist-reducible-fresh-passes", "5",
                        "--autoassist-noise-ids", str(tmp_path / "first-half.tsv"), "--autoassist-sync",
                        "--autoassist-base-prob", "0.1", policy="reducible", max_epoch=3).stdout
    last = re.search(r"\| train \| epoch 003 \|.*", log).group(0)
    kept_hard, kept_rest = (float(re.search(rf"{name} ([\d.]+)", last).group(1))
                            for name in ("aa_kept_noisy", "aa_kept_clean"))
    assert kept_hard < 0.3 and kept_rest > 0.9, last
    assert float(re.search(r"aa_own_share ([\d.]+)", last).group(1)) > 0.9
    missing = fairseq_train(prepared_data, tmp_path / "missing", "--autoassist-reference-scores",
                            str(tmp_path / "none.npy"), policy="reducible", check=False)
    assert missing.returncode != 0 and "Traceback" not in missing.stdout
    assert "error: --autoassist-reference-scores" in missing.stdout and "autoassist-score" in missing.stdout
