"""Keep rules, their schedule, the seeded draw and importance weights: model-free."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fairseq_autoassist.selection import (
    POLICIES,
    LatestLossTable,
    LossBand,
    LossHistory,
    ReducibleLoss,
    SelectionOptions,
    SelectionSchedule,
    Selector,
    assistant_keep_probabilities,
    batch_importance_weights,
    clip_keep_probabilities,
    competence_keep_probabilities,
    difficulty_shares,
    draw_keep_mask,
    importance_weights,
    infobatch_keep_probabilities,
    longest_keep_probabilities,
    loss_percentile_keep_probabilities,
    SharedByNearDuplicates,
    selection_corrected_quantile,
    self_paced_keep_probabilities,
    uniform_keep_probabilities,
)
from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.selection.keep_rules import competence

probabilities = st.floats(allow_nan=True, allow_infinity=True, width=32)


@settings(max_examples=200, deadline=None)
@given(st.lists(probabilities, min_size=1, max_size=50), st.floats(1e-4, 1))
def test_clipped_keep_probabilities_are_bounded_for_any_rule_output(keep, floor):
    keep = clip_keep_probabilities(np.array(keep), floor)
    assert np.all(keep >= floor) and np.all(keep <= 1.0)
    weights = importance_weights(keep)
    assert np.all(np.isfinite(weights)) and np.all(weights <= 1.0 / floor + 1e-3)


def _selector_of_every_rule(policy, floor, folder):
    """A selector of ``policy`` whose loss table has seen pairs 0-49 (a rising loss) and whose Assistant
    predicts 0 for every pair: every rule then has pairs it would keep with probability 0 (``folder``: where the
    reference scores of ``reducible`` go, a zero loss for every pair)."""
    reference = str(folder / "reference.npy")
    np.save(reference, np.zeros(100, dtype=np.float32))
    options = SelectionOptions(policy=policy.name, min_keep_prob=floor, base_prob=0.0, uniform_keep_prob=1e-6,
                               infobatch_prune_ratio=1.0, percentile_power=8.0, competence_start=1e-6,
                               spl_start_fraction=0.0, reference_scores=reference)
    table = policy.build_loss_table(100, options, steps_per_pass=10, mean_decay=0.0, groups=np.arange(100) // 2)
    if table is not None:
        for _ in range(3):
            table.submit(np.arange(50), np.linspace(0.1, 9.0, 50))
    return Selector(options, SelectionSchedule(warmup_epochs=0, max_update=100), seed=1,
                    worker=_Worker(_ConstantAssistant(0.0, 1.0)), loss_table=table,
                    difficulty=difficulty_shares(np.arange(100.0)))


@pytest.mark.parametrize("policy", [p for p in POLICIES.values() if p.keep is not None], ids=lambda p: p.name)
def test_every_policy_keeps_every_pair_with_at_least_the_floor(policy, tmp_path):
    selector = _selector_of_every_rule(policy, floor=0.07, folder=tmp_path)
    keep = selector.keep_probabilities(np.arange(100), epoch=2)
    if keep is not None:
        assert keep.min() == pytest.approx(0.07) and keep.max() <= 1.0


def test_paper_rule():
    p = np.array([0.0, 0.5, 1.0])
    # Confident Assistant: b = base_prob.
    np.testing.assert_allclose(assistant_keep_probabilities(p, 0.9, 0.5), [0.5, 0.75, 1.0])
    # Unconfident Assistant: b = 1 - confidence, so it filters little.
    np.testing.assert_allclose(assistant_keep_probabilities(p, 0.2, 0.5), [0.8, 0.9, 1.0])
    np.testing.assert_allclose(assistant_keep_probabilities(p, 1.0, 0.0), [0.0, 0.5, 1.0])


def test_nan_predictions_keep_the_pair():
    keep = assistant_keep_probabilities(np.array([np.nan, 0.0]), np.nan, 0.0)
    np.testing.assert_allclose(keep, [1.0, 1.0])


def test_schedule_warmup_and_annealing_by_epoch():
    schedule = SelectionSchedule(warmup_epochs=1, anneal_fraction=0.25, max_epoch=8)
    active = [schedule.selection_active(epoch) for epoch in range(1, 9)]
    assert active == [False, True, True, True, True, True, False, False]


def test_schedule_annealing_by_updates_takes_precedence():
    schedule = SelectionSchedule(warmup_epochs=0, anneal_fraction=0.5, max_epoch=100, max_update=1000)
    assert schedule.selection_active(epoch=50, num_updates=499)
    assert not schedule.selection_active(epoch=2, num_updates=500)


def test_keep_mask_frequency_matches_probability():
    keep = np.linspace(0.05, 1.0, 20).repeat(5000)
    mask = draw_keep_mask(keep, seed=1, pass_index=2, chunk=3)
    observed = mask.reshape(20, 5000).mean(axis=1)
    # 5 standard errors of a binomial mean with n = 5000.
    tolerance = 5 * np.sqrt(keep[::5000] * (1 - keep[::5000]) / 5000) + 1e-9
    assert np.all(np.abs(observed - keep[::5000]) <= tolerance)


def test_keep_mask_depends_only_on_seed_epoch_and_chunk():
    keep = np.full(1000, 0.5)
    np.random.seed(0)
    first = draw_keep_mask(keep, 7, 3, 1)
    np.random.seed(123)  # global state must not matter
    np.testing.assert_array_equal(first, draw_keep_mask(keep, 7, 3, 1))
    assert not np.array_equal(first, draw_keep_mask(keep, 7, 3, 2))
    assert not np.array_equal(first, draw_keep_mask(keep, 7, 4, 1))
    assert not np.array_equal(first, draw_keep_mask(keep, 8, 3, 1))


def test_importance_weighting_makes_the_expected_loss_unbiased():
    rng = np.random.default_rng(0)
    losses = rng.gamma(2.0, 1.0, size=500)
    keep = assistant_keep_probabilities(rng.random(500), 0.9, 0.3)
    weights = importance_weights(keep)
    totals = [
        np.sum(losses * weights * draw_keep_mask(keep, seed=0, pass_index=2, chunk=trial))
        for trial in range(2000)
    ]
    standard_error = np.std(totals) / np.sqrt(len(totals))
    assert abs(np.mean(totals) - losses.sum()) < 4 * standard_error
    # Without weights the kept loss is biased low.
    unweighted = np.mean([np.sum(losses * draw_keep_mask(keep, 0, 2, t)) for t in range(200)])
    assert unweighted < 0.95 * losses.sum()


class _ConstantAssistant:
    def __init__(self, probability, confidence):
        self.probability, self.confidence = probability, confidence

    def predict(self, ids):
        return np.full(len(ids), self.probability)


class _Worker:
    def __init__(self, assistant):
        self.assistant = assistant

    def snapshot(self, step):
        return self.assistant


def test_selector_keeps_everything_during_warmup_only():
    options = SelectionOptions(policy="assistant", base_prob=0.0)
    schedule = SelectionSchedule(warmup_epochs=1)
    ids = np.arange(1000)
    selector = Selector(options, schedule, seed=1, worker=_Worker(_ConstantAssistant(0.0, 1.0)))
    kept, keep_prob = selector.select(ids, epoch=1, pass_index=1, chunk=0)
    assert len(kept) == 1000 and keep_prob is None
    kept, _ = selector.select(ids, epoch=2, pass_index=2, chunk=0)
    assert 0 < len(kept) < 150  # keep probability is the 0.05 floor


def test_selector_reports_the_keep_probability_of_each_kept_pair():
    options = SelectionOptions(policy="uniform", uniform_keep_prob=0.25, importance_weighting=True)
    selector = Selector(options, SelectionSchedule(warmup_epochs=0), seed=1)
    kept, keep_prob = selector.select(np.arange(4000), epoch=1, pass_index=1, chunk=0)
    assert len(kept) == pytest.approx(1000, abs=120)
    np.testing.assert_allclose(keep_prob, 0.25)
    np.testing.assert_allclose(importance_weights(keep_prob), 4.0)


def test_a_weighted_batch_has_the_gradient_scale_of_an_unweighted_one():
    """Weights 1 / p scaled per batch: mean gradient norm as without weights, relative weights 1 / p."""
    rng = np.random.default_rng(0)
    model = torch.nn.Linear(8, 1)
    inputs = torch.as_tensor(rng.normal(size=(2000, 8)), dtype=torch.float32)
    tokens = rng.integers(5, 30, size=2000)
    keep = assistant_keep_probabilities(rng.random(2000), 0.9, 0.3)

    def gradient_norm(batch, weights):
        model.zero_grad()
        per_token = model(inputs[batch]).squeeze(1) ** 2
        sentence_loss = per_token * torch.as_tensor(tokens[batch], dtype=torch.float32)
        loss = (sentence_loss * torch.as_tensor(weights)).sum() / tokens[batch].sum()
        loss.backward()
        return float(model.weight.grad.norm())

    weighted, unweighted = [], []
    for trial in range(200):
        candidates = rng.choice(2000, size=100, replace=False)
        batch = candidates[draw_keep_mask(keep[candidates], seed=0, pass_index=1, chunk=trial)]
        weights = batch_importance_weights(keep[batch], tokens[batch])
        np.testing.assert_allclose(np.sum(weights * tokens[batch]), tokens[batch].sum(), rtol=1e-4)
        np.testing.assert_allclose(weights / weights[0], keep[batch][0] / keep[batch], rtol=1e-4)
        weighted.append(gradient_norm(batch, weights))
        unweighted.append(gradient_norm(batch, np.ones(len(batch), dtype=np.float32)))
    assert np.mean(weighted) == pytest.approx(np.mean(unweighted), rel=0.1)


def test_uniform_rule_keeps_every_pair_with_the_same_probability():
    np.testing.assert_allclose(uniform_keep_probabilities(3, 0.3), [0.3, 0.3, 0.3])


def test_infobatch_prunes_only_below_mean_pairs_and_keeps_unseen_ones():
    losses = np.array([np.nan, 1.0, 2.0, 3.0, 6.0])
    keep = infobatch_keep_probabilities(losses, mean_loss=3.0, prune_ratio=0.5)
    np.testing.assert_allclose(keep, [1.0, 0.5, 0.5, 1.0, 1.0])
    np.testing.assert_allclose(infobatch_keep_probabilities(losses, np.nan, 0.5), [1.0] * 5)


def test_peer_policies_compare_a_chunk_with_the_whole_corpus():
    """A chunk of only easy pairs is pruned against the corpus' statistics, not its own."""
    table = LatestLossTable(1000)
    table.submit(np.arange(1000), np.r_[np.full(500, 1.0), np.full(500, 3.0)])
    assert table.seen_mean() == pytest.approx(2.0)
    easy_chunk = np.arange(100)
    infobatch = Selector(SelectionOptions(policy="infobatch"), SelectionSchedule(warmup_epochs=0), 0, loss_table=table)
    assert infobatch.keep_probabilities(easy_chunk, epoch=2) == pytest.approx(np.full(100, 0.5))
    spl = Selector(SelectionOptions(policy="spl", spl_start_fraction=0.4), SelectionSchedule(warmup_epochs=0), 0,
                   loss_table=table)
    assert spl.keep_probabilities(easy_chunk, epoch=2) == pytest.approx(np.ones(100))
    assert spl.keep_probabilities(np.arange(900, 1000), epoch=2) == pytest.approx(np.full(100, 0.05))


def test_infobatch_selector_rescales_and_stops_after_delta():
    table = LatestLossTable(1000)
    table.submit(np.arange(1000), np.r_[np.full(500, 1.0), np.full(500, 3.0)])
    options = SelectionOptions(policy="infobatch", infobatch_prune_ratio=0.5, infobatch_delta=0.5)
    schedule = SelectionSchedule(warmup_epochs=0, max_epoch=10)
    selector = Selector(options, schedule, seed=0, loss_table=table)
    kept, keep_prob = selector.select(np.arange(1000), epoch=2, pass_index=2, chunk=0)
    low = kept < 500
    assert 200 < low.sum() < 300 and (~low).sum() == 500
    assert selector.options.weighted
    np.testing.assert_allclose(importance_weights(keep_prob[low]), 2.0)
    np.testing.assert_allclose(importance_weights(keep_prob[~low]), 1.0)
    kept, keep_prob = selector.select(np.arange(1000), epoch=6, pass_index=6, chunk=0)
    assert len(kept) == 1000 and keep_prob is None


def test_self_paced_learning_compares_per_token_losses_with_a_growing_quantile():
    table = LatestLossTable(5)
    table.submit([1, 2, 3, 4], [0.5, 1.0, 1.5, 2.0])
    losses = table.lookup(np.arange(5))
    np.testing.assert_allclose(self_paced_keep_probabilities(losses, table.seen_quantile(0.5)),
                               [1.0, 1.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(self_paced_keep_probabilities(losses, table.seen_quantile(1.0)), [1.0] * 5)
    assert np.isnan(LatestLossTable(3).seen_quantile(0.5))


def test_loss_table_keeps_the_latest_finite_loss():
    table = LatestLossTable(4)
    table.submit([0, 1], [1.0, 2.0])
    table.submit([1, 2], [np.nan, 5.0])
    np.testing.assert_allclose(table.lookup([0, 1, 2]), [1.0, 2.0, 5.0])
    assert np.isnan(table.lookup([3])[0])
    restored = LatestLossTable(4)
    restored.load_state_dict(table.state_dict())
    np.testing.assert_array_equal(restored.losses, table.losses)


def test_learning_progress_labels_learning_pairs_and_neither_learned_nor_unlearnable_ones():
    history = LossHistory(300, mean_decay=0.0, fresh_steps=10)
    learned, unlearnable, learning = np.arange(100), np.arange(100, 200), np.arange(200, 300)
    rng = np.random.default_rng(0)
    for visit in range(3):
        losses = np.r_[np.full(100, 0.5), np.full(100, 6.0), np.full(100, 4.0 * 0.7 ** visit)]
        history.submit(np.arange(300), losses * rng.normal(1.0, 0.01, size=300))
    labels = history.labels(np.arange(300))
    assert labels[learning].mean() == 1.0
    assert labels[learned].mean() < 0.6 and labels[unlearnable].mean() < 0.6
    assert history.progress(learning) == pytest.approx(np.full(100, 0.3), abs=0.04)
    assert np.isnan(LossHistory(5).labels(np.arange(5))).all()


def test_learning_progress_labels_go_stale_and_the_mean_ignores_the_selection():
    history = LossHistory(4, mean_decay=0.0, fresh_steps=2)
    history.submit([0, 1, 2, 3], [2.0, 2.0, 2.0, 2.0])
    # Pairs 0 and 1 fell by half, 2 and 3 did not; only 0 was kept with certainty.
    history.submit([0, 1, 2, 3], [1.0, 1.0, 2.0, 2.0], keep_prob=[1.0, 0.25, 1.0, 1.0])
    assert history.progress_mean == pytest.approx((0.5 + 4 * 0.5) / (1 + 4 + 1 + 1))
    np.testing.assert_array_equal(history.fresh_labels(np.arange(4)), [1.0, 1.0, 0.0, 0.0])
    history.submit([0], [0.9])
    history.submit([0], [0.8])
    assert np.isnan(history.fresh_labels([1, 2, 3])).all() and np.isfinite(history.fresh_labels([0])).all()
    restored = LossHistory(4)
    restored.load_state_dict(history.state_dict())
    np.testing.assert_array_equal(restored.labels(np.arange(4)), history.labels(np.arange(4)))
    assert restored.step == history.step == 4


def test_learning_progress_is_per_pass_for_a_pair_seen_again_after_several_passes():
    history = LossHistory(2, mean_decay=0.0, steps_per_pass=10)
    history.submit([0, 1], [2.0, 2.0])
    for _ in range(9):
        history.submit([0], [2.0])
    history.submit([0], [1.0])  # pair 0: one pass later, half its loss
    for _ in range(19):
        history.submit([0], [1.0])
    history.submit([1], [0.8])  # pair 1: three passes later, 60% less
    np.testing.assert_allclose(history.progress([1]), [0.2])
    history.submit([0], [0.5])  # pair 0 again, a step after its last visit: no boost for short gaps
    np.testing.assert_allclose(history.progress([0]), [0.5])


def _hybrid_keep_probabilities(policy, loss_table):
    """Keep probabilities of pairs 0-3 under a policy that trusts own labels, with floor 0.2 and an
    Assistant that predicts 0.5 for every pair."""
    selector = Selector(SelectionOptions(policy=policy, base_prob=0.2), SelectionSchedule(warmup_epochs=0), seed=1,
                        worker=_Worker(_ConstantAssistant(0.5, 1.0)), loss_table=loss_table)
    return selector.keep_probabilities(np.arange(4), epoch=2)


def test_the_progress_policy_trusts_fresh_own_labels_and_the_assistant_elsewhere():
    history = LossHistory(4, mean_decay=0.0, fresh_steps=5)
    history.submit([0, 1, 2], [2.0, 2.0, 2.0])
    history.submit([0, 1, 2], [1.0, 2.0, 2.0])
    keep = _hybrid_keep_probabilities("progress", history)
    # Pair 0 is still learning (kept), 1 and 2 stopped (the floor), 3 was never seen (the Assistant's 0.5).
    np.testing.assert_allclose(keep, [1.0, 0.2, 0.2, 0.2 + 0.8 * 0.5])


def test_the_selection_corrected_quantile_counts_each_kept_pair_for_the_candidates_it_stands_for():
    values = np.array([1.0, 2.0, 3.0, 4.0])
    assert selection_corrected_quantile(values, 0.5) == 2.0
    # 4.0 was kept with probability 0.25: it stands for four candidates, so the median is 4.0.
    assert selection_corrected_quantile(values, 0.5, keep_prob=[1.0, 1.0, 1.0, 0.25]) == 4.0
    assert selection_corrected_quantile(values, 0.0) == 1.0 and selection_corrected_quantile(values, 1.0) == 4.0


def test_the_loss_band_labels_learned_and_unlearnable_pairs_uninformative():
    band = LossBand(100, lower_quantile=0.2, upper_quantile=0.8, mean_decay=0.0)
    assert np.isnan(band.labels(np.arange(3))).all()
    band.submit(np.arange(100), np.linspace(1.0, 3.0, 100))
    labels = band.labels(np.arange(100))
    assert labels[:19].sum() == 0 and labels[81:].sum() == 0 and labels[21:79].all()
    np.testing.assert_allclose(band.lookup([0, 99]), [1.0 / band.loss_median, 3.0 / band.loss_median])
    assert band.loss_median == pytest.approx(2.0, abs=0.03)


def test_a_pair_skipped_while_the_corpus_loss_fell_is_judged_by_its_loss_relative_to_its_time():
    band = LossBand(200, lower_quantile=0.0, upper_quantile=0.8, mean_decay=0.0)
    spread = np.linspace(0.9, 1.1, 80)
    band.submit(np.arange(100), np.r_[6.0 * spread, np.full(20, 15.0)])  # early: every loss high
    later, noisy = np.arange(100, 180), np.arange(180, 200)
    band.submit(np.r_[later, noisy], np.r_[2.0 * spread, np.full(20, 5.0)])
    # An ordinary pair last seen early has a high loss, but an ordinary one for its time: still in the band.
    assert band.labels(np.arange(70)).all()
    assert not band.labels(noisy).any() and not band.labels(np.arange(80, 100)).any()


def test_the_loss_band_ignores_the_selection_and_survives_a_checkpoint():
    band = LossBand(4, lower_quantile=0.3, upper_quantile=0.7, mean_decay=0.0)
    band.submit([0, 1, 2, 3], [1.0, 2.0, 2.0, 3.0], keep_prob=[1.0, 1.0, 1.0, 0.2])
    # The pair kept with 0.2 stands for five of eight candidates: the median is its loss.
    assert band.loss_median == 3.0
    restored = LossBand(4, lower_quantile=0.3, upper_quantile=0.7)
    restored.load_state_dict(band.state_dict())
    np.testing.assert_array_equal(restored.labels(np.arange(4)), band.labels(np.arange(4)))
    assert (restored.bounds, restored.loss_median, restored.step) == (band.bounds, band.loss_median, 1)


def test_the_learnable_policy_trusts_a_pairs_own_label_once_seen_and_the_assistant_before():
    band = LossBand(4, lower_quantile=0.0, upper_quantile=0.8, mean_decay=0.0)
    band.submit([0, 1, 2], [1.0, 2.0, 8.0])
    for _ in range(100):  # a label of the band never goes stale
        band.submit([3], [np.nan])
    keep = _hybrid_keep_probabilities("learnable", band)
    # 0 and 1 are in the band (kept), 2 is unlearnable (the floor), 3 was never seen (the Assistant's 0.5).
    np.testing.assert_allclose(keep, [1.0, 1.0, 0.2, 0.2 + 0.8 * 0.5])


def test_the_reducible_policy_skips_learned_pairs_and_noise_and_trusts_fresh_own_labels():
    # Six pairs, their latest losses and a reference model's (trained on held-out data): an ordinary pair still
    # to learn (3.0 over 1.0), one learned (0.6 over 0.5), one noisy (8.0, but the reference fails on it too:
    # 7.8), one half learned (2.0 over 1.0), one the Boss has not seen yet, one the reference did not score.
    reference = np.array([1.0, 0.5, 7.8, 1.0, 1.0, np.nan], dtype=np.float32)
    table = ReducibleLoss(reference, quantile=0.5, mean_decay=0.0, fresh_steps=3)
    table.submit([0, 1, 2, 3, 5], [3.0, 0.6, 8.0, 2.0, 4.0])
    np.testing.assert_allclose(table.reducible(np.arange(4)), [2.0, 0.1, 0.2, 1.0], rtol=1e-6)
    # The median of the reducible losses 2.0, 0.1, 0.2, 1.0 is 0.2 (the lower middle): the learned and the noisy pair
    # are not worth training, whatever their loss; the unseen and the unscored pair have no label.
    labels = table.labels(np.arange(6))
    np.testing.assert_array_equal(labels[:4], [1.0, 0.0, 0.0, 1.0])
    assert np.isnan(labels[4:]).all()
    selector = Selector(SelectionOptions(policy="reducible", base_prob=0.2), SelectionSchedule(warmup_epochs=0),
                        seed=1, worker=_Worker(_ConstantAssistant(0.5, 1.0)), loss_table=table)
    keep = selector.keep_probabilities(np.arange(6), epoch=2)
    np.testing.assert_allclose(keep, [1.0, 0.2, 0.2, 1.0, 0.6, 0.6])
    # Four steps later the own labels are stale: the Assistant decides for every pair.
    for _ in range(4):
        table.submit([4], [np.nan])
    np.testing.assert_allclose(selector.keep_probabilities(np.arange(4), epoch=2), [0.6] * 4)
    restored = ReducibleLoss(reference, quantile=0.5, fresh_steps=3)
    restored.load_state_dict(table.state_dict())
    assert restored.threshold == table.threshold and restored.step == table.step


def test_the_reducible_policy_refuses_a_missing_or_foreign_reference_with_one_line(tmp_path):
    options = SelectionOptions(policy="reducible")
    with pytest.raises(AutoAssistConfigError, match="needs --autoassist-reference-scores FILE"):
        POLICIES["reducible"].build_loss_table(10, options, steps_per_pass=5, mean_decay=0.9)
    path = tmp_path / "other.npy"
    np.save(path, np.zeros(7, dtype=np.float32))
    options = SelectionOptions(policy="reducible", reference_scores=str(path))
    with pytest.raises(AutoAssistConfigError, match="holds 7 scores for 10 training pairs"):
        POLICIES["reducible"].build_loss_table(10, options, steps_per_pass=5, mean_decay=0.9)


def test_loss_percentile_keeps_high_loss_pairs_and_every_unseen_one():
    table = LatestLossTable(6)
    table.submit([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])
    percentiles = table.seen_percentiles(table.lookup(np.arange(6)))
    np.testing.assert_allclose(percentiles[:4], [0.0, 0.25, 0.5, 0.75])
    assert np.isnan(percentiles[4:]).all()
    keep = loss_percentile_keep_probabilities(percentiles, power=2.0)
    np.testing.assert_allclose(keep, [0.0, 0.0625, 0.25, 0.5625, 1.0, 1.0])
    # With power p the mean keep probability over uniform percentiles is 1 / (p + 1).
    uniform = np.linspace(0, 1, 10001)
    assert loss_percentile_keep_probabilities(uniform, 3.0).mean() == pytest.approx(0.25, abs=1e-3)


def test_seen_percentiles_of_a_large_table_come_from_a_strided_sample():
    table = LatestLossTable(200_000)
    table.submit(np.arange(200_000), np.random.default_rng(0).permutation(200_000).astype(np.float32))
    np.testing.assert_allclose(table.seen_percentiles([50_000.0, 150_000.0]), [0.25, 0.75], atol=0.01)


def test_competence_grows_as_a_square_root_from_its_start_to_every_pair():
    assert competence(0.0, start=0.01, full_at=0.5) == pytest.approx(0.01)
    assert competence(0.125, start=0.01, full_at=0.5) == pytest.approx(np.sqrt(0.25 * (1 - 1e-4) + 1e-4))
    assert competence(0.5, start=0.01, full_at=0.5) == competence(0.9, start=0.01, full_at=0.5) == 1.0


def test_the_competence_rule_keeps_the_easiest_pairs_within_the_competence():
    shares = difficulty_shares(np.array([3.0, 1.0, 4.0, 1.5, 9.0]))
    np.testing.assert_allclose(shares, [0.6, 0.2, 0.8, 0.4, 1.0])
    np.testing.assert_allclose(competence_keep_probabilities(shares, 0.4), [0.0, 1.0, 0.0, 1.0, 0.0])
    # At 3/4 of the way to full competence (start 0.01) 86.6% of the pairs, easiest first, are open.
    selector = Selector(SelectionOptions(policy="competence", competence_full_at=0.5),
                        SelectionSchedule(warmup_epochs=0, max_update=1000), seed=1,
                        difficulty=difficulty_shares(np.arange(100.0)))
    selector.num_updates = 375
    keep = selector.keep_probabilities(np.arange(100), epoch=1)
    assert np.all(keep[:86] == 1.0) and np.all(keep[86:] == 0.05)
    with pytest.raises(ValueError, match="difficulty"):
        Selector(SelectionOptions(policy="competence"), SelectionSchedule(warmup_epochs=0), seed=1)


def test_the_longest_pairs_by_target_length_are_kept_with_the_base_probability():
    shares = difficulty_shares(np.array([12, 3, 30, 7, 9]))
    np.testing.assert_allclose(longest_keep_probabilities(shares, 0.4, 0.1), [0.1, 1.0, 0.1, 1.0, 1.0])
    np.testing.assert_allclose(longest_keep_probabilities(shares, 0.0, 0.1), np.ones(5))
    selector = Selector(SelectionOptions(policy="skip-longest", base_prob=0.1), SelectionSchedule(warmup_epochs=1),
                        seed=1, difficulty=difficulty_shares(np.arange(100)))
    assert selector.keep_probabilities(np.arange(100), epoch=1) is None  # the warm-up pass keeps every pair
    keep = selector.keep_probabilities(np.arange(100), epoch=2)
    assert np.all(keep[:80] == 1.0) and np.all(keep[80:] == 0.1)
    with pytest.raises(ValueError, match="target length"):
        Selector(SelectionOptions(policy="skip-longest"), SelectionSchedule(warmup_epochs=0), seed=1)


def test_the_selector_counts_which_pairs_their_own_loss_decided_and_which_the_assistant():
    history = LossHistory(4, mean_decay=0.0, fresh_steps=5)
    history.submit([0, 1, 2], [2.0, 2.0, 2.0])
    history.submit([0, 1, 2], [1.0, 2.0, 2.0])
    selector = Selector(SelectionOptions(policy="progress"), SelectionSchedule(warmup_epochs=0), seed=1,
                        worker=_Worker(_ConstantAssistant(0.5, 1.0)), loss_table=history)
    assert np.isnan(selector.own_loss_share)
    selector.keep_probabilities(np.arange(4), epoch=2)
    assert selector.own_loss_share == pytest.approx(0.75)  # pair 3 was never seen: the Assistant decided
    selector.keep_probabilities(np.array([3]), epoch=3)
    assert selector.own_loss_share == 0.0  # counted afresh each epoch
    paper = Selector(SelectionOptions(policy="assistant"), SelectionSchedule(warmup_epochs=0), seed=1,
                     worker=_Worker(_ConstantAssistant(0.5, 1.0)))
    paper.keep_probabilities(np.arange(4), epoch=2)
    assert paper.own_loss_share == 0.0


def test_near_duplicates_share_one_latest_loss_and_its_label():
    band = LossBand(6, lower_quantile=0.3, upper_quantile=1.0, mean_decay=0.0)
    shared = SharedByNearDuplicates(band, groups=np.array([0, 0, 2, 2, 4, 5]))
    shared.submit([0, 2, 4], [0.1, 2.0, 3.0])
    # Pairs 1 and 3 were never visited, but their siblings 0 and 2 were: learned (0) and still informative (1).
    np.testing.assert_array_equal(shared.fresh_labels(np.arange(6))[:4], [0.0, 0.0, 1.0, 1.0])
    assert np.isnan(shared.fresh_labels([5])).all()
    restored = SharedByNearDuplicates(LossBand(6, 0.3, 1.0, mean_decay=0.0), shared.groups)
    restored.load_state_dict(shared.state_dict())
    np.testing.assert_array_equal(restored.labels(np.arange(5)), shared.labels(np.arange(5)))
