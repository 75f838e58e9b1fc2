"""The offline screen of selection rules (scripts/research/replay_selection.py) on a planted loss log."""

import argparse

import numpy as np
import pytest

from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.loss_log import LossLog
from fairseq_autoassist.corpus.raw_corpus import write_noise
from scripts.research.replay_selection import (
    comparison,
    describe_run,
    difficulty_kinds,
    keep_auc,
    logged_passes,
    pair_kinds,
    parse_rule,
    replay_rule,
)
from tests.synthetic import random_features

PASSES = 6
BATCH = 100


@pytest.fixture
def planted_run(tmp_path):
    """600 pairs trained on every pass: 240 still learning (loss falls 30% a pass), 240 learned (low, flat)
    and 120 noisy (high, flat), listed as ``misaligned`` in a noise.tsv."""
    features = random_features(num_pairs=600, seed=3)
    rng = np.random.default_rng(0)
    learning, learned, noisy = np.arange(0, 240), np.arange(240, 480), np.arange(480, 600)
    noise_path = tmp_path / "noise.tsv"
    write_noise(noise_path, {int(i): "misaligned" for i in noisy})
    log_path = str(tmp_path / "losses.npy")
    log = LossLog(log_path)
    for pass_index in range(PASSES):
        losses = np.empty(600)
        losses[learning] = 5.0 * 0.7 ** pass_index
        losses[learned] = 0.5
        losses[noisy] = 6.0
        losses *= rng.uniform(0.97, 1.03, size=600)
        order = rng.permutation(600)
        for start in range(0, 600, BATCH):
            ids = order[start:start + BATCH]
            log.submit(ids, losses[ids], np.ones(len(ids)))
    kinds = pair_kinds(600, str(noise_path))
    kinds[learned] = "learned"  # named apart to read the result; the rules never see kinds
    return features, log_path, kinds


def test_passes_are_split_where_a_pair_comes_back(planted_run):
    _, log_path, _ = planted_run
    passes = [pass_index for pass_index, _, _ in logged_passes(log_path)]
    assert passes == [p for p in range(1, PASSES + 1) for _ in range(600 // BATCH)]


@pytest.mark.parametrize("rule", ["progress:base_prob=0.1,progress_fresh_passes=100",
                                  "learnable:base_prob=0.1,learned_quantile=0.3"])
def test_the_new_rules_skip_both_learned_and_noisy_pairs_and_the_papers_rule_keeps_noisy_ones(planted_run, rule):
    features, log_path, kinds = planted_run
    kept, keep_prob = replay_rule(parse_rule(rule)[1], features, log_path, kinds, warmup_epochs=1, seed=1,
                                  steps_per_pass=6)
    kept_paper = replay_rule(parse_rule("assistant:base_prob=0.1")[1], features, log_path, kinds, warmup_epochs=1,
                             seed=1, steps_per_pass=6)[0]
    last = kept[PASSES]
    assert kept[1] == {"clean": 1.0, "learned": 1.0, "misaligned": 1.0}
    assert last["clean"] > 0.8
    assert last["misaligned"] < 0.3 and last["learned"] < 0.3
    assert kept_paper[PASSES]["misaligned"] > 2 * last["misaligned"]
    # The last pass' keep probabilities rank the still-learning pairs above both others.
    assert keep_auc(keep_prob, kinds, "clean", ["misaligned", "learned"]) > 0.9
    assert keep_auc(keep_prob, kinds, "misaligned", ["clean"]) < 0.1
    assert keep_auc(keep_prob, kinds, "clean", ["nosuch"]) is None


def test_an_auc_comparison_names_one_kind_above_others():
    assert comparison("paracrawl-V:paracrawl-A+paracrawl-L") == (
        "paracrawl-V:paracrawl-A+paracrawl-L", "paracrawl-V", ["paracrawl-A", "paracrawl-L"])
    for bad in ("clean", ":misaligned", "clean:"):
        with pytest.raises(argparse.ArgumentTypeError):
            comparison(bad)


def test_pairs_are_grouped_into_fifths_by_their_loss_in_one_pass(planted_run):
    _, log_path, _ = planted_run
    # By pass 3 the learning pairs (0.7 ** 2 * 5.0 = 2.45) sit between the learned (0.5) and the noisy (6.0).
    kinds = difficulty_kinds(600, log_path, at_pass=3)
    assert set(kinds[240:480]) == {"loss-q1", "loss-q2"} and set(kinds[480:600]) == {"loss-q5"}
    assert set(kinds[:240]) == {"loss-q3", "loss-q4"}
    assert np.unique(kinds, return_counts=True)[1].tolist() == [120] * 5
    with pytest.raises(AutoAssistConfigError, match="--difficulty-groups-at 7"):
        difficulty_kinds(600, log_path, at_pass=PASSES + 1)


def test_the_run_description_shows_each_kinds_loss_and_labels(planted_run):
    _, log_path, kinds = planted_run
    run = describe_run(log_path, kinds, loss_mean_decay=0.9, steps_per_pass=6)
    assert run["loss"][1]["misaligned"] == pytest.approx(6.0, rel=0.02)
    assert run["progress"][3]["clean"] > 0.2 and abs(run["progress"][3]["misaligned"]) < 0.03
    # Every planted pair's loss varies by up to 3% a visit around its trend: a small spread for every kind.
    assert all(0 < spread < 0.05 for spread in run["progress_spread"][3].values())
    assert run["paper_label"][PASSES]["misaligned"] == 1.0
    assert run["progress_label"][PASSES]["misaligned"] < 0.2 and run["progress_label"][PASSES]["clean"] > 0.8


def test_a_rule_names_a_policy_selection_options_and_assistant_settings():
    text, options, config = parse_rule("progress:base_prob=0.2,importance_weighting=true,progress_fresh_passes=2,"
                                       "pair_features=true")
    assert (options.policy, options.base_prob, options.importance_weighting, options.progress_fresh_passes) == (
        "progress", 0.2, True, 2.0)
    assert config.pair_features and not parse_rule("progress")[2].pair_features
    for bad in ("nosuch", "none", "progress:speed=2", "progress:base_prob"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_rule(bad)
