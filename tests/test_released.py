"""The authors' released Assistant and batches (``--autoassist-policy released``): one test per released decision."""

import numpy as np
import pytest

from fairseq_autoassist.assistant import CorpusSide, PairFeatures
from fairseq_autoassist.assistant.released import INITIAL_SCALE, L2, STEP_SIZE, ReleasedAssistant, sub_batches
from fairseq_autoassist.data import ShrinkingBatchStream
from fairseq_autoassist.selection import SelectionOptions, SelectionSchedule, Selector
from fairseq_autoassist.worker import SyncAssistantWorker

from .synthetic import EOS, random_features


def naive_logit(assistant, i):
    """Pair i's score term by term, as the released code defines it."""
    features, w = assistant.features, assistant.token_weights
    z = float(assistant.bias[0])
    for row, (side, idf) in enumerate(zip(features.sides, features.idf)):
        sentence = side.tokens[side.offsets[i] : side.offsets[i + 1]].astype(np.int64)
        types = np.unique(sentence)
        for token in types:
            z += np.count_nonzero(sentence == token) / len(sentence) * idf[token] * w[2 * row + 1, token]
        z += w[2 * row, types].mean()
        z += assistant.length_weights[row] * len(types) / 10
    return z


def test_scores_follow_the_released_features():
    assistant = ReleasedAssistant(random_features(num_pairs=40, vocab_size=25), seed=3)
    rng = np.random.default_rng(1)
    assistant.token_weights = rng.normal(size=assistant.token_weights.shape)
    assistant.length_weights = rng.normal(size=2)
    assistant.bias[:] = -0.2
    expected = 1 / (1 + np.exp(-np.array([naive_logit(assistant, i) for i in range(40)])))
    np.testing.assert_allclose(assistant.predict(), expected, rtol=1e-6)
    np.testing.assert_allclose(assistant.predict([9, 2]), expected[[9, 2]], rtol=1e-6)


def test_weights_start_small_and_random_the_length_weights_at_the_released_constant():
    assistant = ReleasedAssistant(random_features(num_pairs=10, vocab_size=500), seed=1)
    assert 0.5 * INITIAL_SCALE < assistant.token_weights.std() < 1.5 * INITIAL_SCALE
    np.testing.assert_array_equal(assistant.length_weights, [INITIAL_SCALE, INITIAL_SCALE])
    assert assistant.bias[0] == 0 and assistant.confidence == 0 and assistant.loss_bar == 0
    again = ReleasedAssistant(random_features(num_pairs=10, vocab_size=500), seed=1)
    np.testing.assert_array_equal(again.token_weights, assistant.token_weights)


def test_a_batch_of_ten_pairs_takes_three_sub_steps(monkeypatch):
    assert sub_batches(10) == [(0, 4), (4, 8), (8, 10)]
    assert sub_batches(3) == [(0, 3)]
    assert len(sub_batches(100)) == 4
    assistant = ReleasedAssistant(random_features(num_pairs=30, vocab_size=20))
    sizes = []
    original = ReleasedAssistant._sub_step
    monkeypatch.setattr(ReleasedAssistant, "_sub_step",
                        lambda self, ids, losses: sizes.append(len(ids)) or original(self, ids, losses))
    assistant.update(np.arange(10), np.ones(10))
    assert sizes == [4, 4, 2]


def test_each_batch_is_resampled_with_replacement_from_seed_and_update(monkeypatch):
    drawn = []
    original = ReleasedAssistant._sub_step
    monkeypatch.setattr(ReleasedAssistant, "_sub_step",
                        lambda self, ids, losses: drawn.append(ids.copy()) or original(self, ids, losses))
    for _ in range(2):
        ReleasedAssistant(random_features(num_pairs=60, vocab_size=20), seed=5).update(np.arange(60), np.ones(60))
    first, second = np.concatenate(drawn[:4]), np.concatenate(drawn[4:])
    assert len(first) == 60 and len(np.unique(first)) < 50  # duplicates, so some pairs are left out
    np.testing.assert_array_equal(first, second)


def one_pair_features(source, target, vocab_size=10):
    """A corpus of the pair (``source``, ``target``) and a second pair, so that every token has a non-zero IDF."""
    side = lambda first: CorpusSide(np.array([*first, 7, 8, EOS]), np.array([0, len(first), len(first) + 3]))
    return PairFeatures(side(source), side(target), vocab_size)


def test_a_token_twice_in_a_sentence_moves_its_tfidf_weight_twice_and_its_tf_weight_once():
    features = one_pair_features([5, 5, 6], [4, 6])
    assistant = ReleasedAssistant(features)
    assistant.token_weights[:] = 0
    before = assistant.predict([0])[0]
    assistant.update([0], [9.0])  # above the threshold (0.09 after the first moving average): label 1
    residual, step = before - 1.0, STEP_SIZE / 1
    idf = features.idf[0]
    # Token 5: 2 of 3 occurrences, TF-IDF value 2/3 * idf, applied once per occurrence; token 6 once.
    np.testing.assert_allclose(assistant.token_weights[1, 5], -step * residual * 2 * (2 / 3 * idf[5]), rtol=1e-6)
    np.testing.assert_allclose(assistant.token_weights[1, 6], -step * residual * (1 / 3 * idf[6]), rtol=1e-6)
    # TF: the mean over the sentence's 2 distinct types, each moved once.
    np.testing.assert_allclose(assistant.token_weights[0, [5, 6]], -step * residual / 2, rtol=1e-6)


def test_l2_shrinks_every_weight_at_every_sub_step():
    features = random_features(num_pairs=30, vocab_size=40)
    assistant = ReleasedAssistant(features)
    absent = np.setdiff1d(np.arange(40), np.concatenate([side.gather(np.arange(10))[0] for side in features.sides]))
    assert len(absent)
    weights = assistant.token_weights[:, absent].copy()
    assistant.bias[:] = 1.0
    assistant.update(np.arange(10), np.full(10, -1.0))  # every label 0 against the threshold 0
    shrink = np.prod([1 - STEP_SIZE / (stop - start) * L2 for start, stop in sub_batches(10)])
    np.testing.assert_allclose(assistant.token_weights[:, absent], weights * shrink, rtol=1e-9)
    assert assistant.bias[0] < 1.0


def test_the_first_pass_threshold_is_a_slow_moving_average_starting_at_zero():
    assistant = ReleasedAssistant(random_features(num_pairs=20, vocab_size=20))
    assistant.update(np.arange(5), np.full(5, 4.0))
    assert assistant.loss_bar == pytest.approx(0.04)
    assistant.update(np.arange(5, 10), np.full(5, 2.0))
    assert assistant.loss_bar == pytest.approx(0.99 * 0.04 + 0.02)


def test_from_the_second_pass_the_threshold_is_the_previous_passs_mean_of_received_losses(monkeypatch):
    assistant = ReleasedAssistant(random_features(num_pairs=20, vocab_size=20))
    assistant.update(np.arange(4), np.full(4, 2.0), pass_index=1)
    assistant.update(np.arange(4, 12), np.full(8, 5.0), pass_index=1)
    labels, received = [], []
    original = ReleasedAssistant._sub_step

    def recording(self, ids, losses):
        labels.append(losses > self.loss_bar)
        received.append(losses)
        return original(self, ids, losses)

    monkeypatch.setattr(ReleasedAssistant, "_sub_step", recording)
    # No correction for selection: every received loss counts once, kept probabilities or not.
    assistant.update(np.arange(4), np.array([3.9, 4.1, 3.9, 4.1]), keep_prob=np.full(4, 0.5), pass_index=2)
    assert assistant.loss_bar == pytest.approx(4.0)  # (4 x 2 + 8 x 5) / 12, fixed for the pass
    assistant.update(np.arange(4), np.full(4, 0.5), pass_index=2)
    assert assistant.loss_bar == pytest.approx(4.0)
    assert any(labels[0]) and not all(labels[0])
    assistant.update(np.arange(4), np.full(4, 1.0), pass_index=3)
    assert assistant.loss_bar == pytest.approx(np.concatenate(received[:-1]).mean())  # pass 2's, as resampled


def test_confidence_is_a_moving_average_of_plain_accuracy():
    assistant = ReleasedAssistant(random_features(num_pairs=20, vocab_size=20), seed=4)
    assistant.bias[:] = 30.0  # predicts "informative" for every pair, whatever a sub-step changes
    losses = np.array([1.0] * 9 + [-1.0])  # against the threshold (0.01 x their mean): 9 informative, 1 trivial
    draws = np.random.default_rng([4, 0]).integers(0, 10, 10)
    accuracy = assistant.update(np.arange(10), losses)
    assert accuracy == pytest.approx(np.mean(losses[draws] > 0))  # balanced accuracy would be 0.5 here
    assert assistant.confidence == pytest.approx(0.05 * accuracy)


def test_the_released_rule_keeps_everything_in_the_first_pass_then_follows_confidence_and_prediction():
    features = random_features(num_pairs=50, vocab_size=20)
    worker = SyncAssistantWorker(ReleasedAssistant(features), lag=1)
    selector = Selector(SelectionOptions(policy="released"), SelectionSchedule(), seed=1, worker=worker)
    assert selector.keep_probabilities(np.arange(50), epoch=1) is None
    worker.submit(np.arange(10), np.linspace(0, 2, 10), pass_index=1)
    worker.submit(np.arange(10, 20), np.linspace(0, 2, 10), pass_index=1)
    selector.steps = 2
    keep = selector.keep_probabilities(np.arange(50), epoch=2)
    snapshot = worker.snapshot(2)
    floor = max(0.5, 1 - snapshot.confidence)  # confidence starts at 0: a young Assistant filters little
    assert floor > 0.5
    np.testing.assert_allclose(keep, floor + (1 - floor) * snapshot.predict(np.arange(50)), rtol=1e-6)


def test_the_state_round_trips_and_learning_continues_alike():
    features = random_features(num_pairs=40, vocab_size=30)
    assistant = ReleasedAssistant(features, seed=2)
    assistant.update(np.arange(12), np.linspace(0, 3, 12), pass_index=1)
    assistant.update(np.arange(12, 24), np.linspace(0, 3, 12), pass_index=2)
    restored = ReleasedAssistant(features, seed=2)
    restored.load_state_dict(assistant.state_dict())
    for model in (assistant, restored):
        model.update(np.arange(24, 36), np.linspace(1, 2, 12), pass_index=2)
    np.testing.assert_array_equal(restored.predict(), assistant.predict())
    assert (restored.loss_bar, restored.confidence) == (assistant.loss_bar, assistant.confidence)


def test_only_its_own_label():
    with pytest.raises(ValueError, match="own label"):
        ReleasedAssistant(random_features(num_pairs=10, vocab_size=20)).update([0], [1.0], labels=np.ones(1))


SIZES = np.random.default_rng(4).integers(2, 40, size=400)


def padded_batches_in_order(indices, max_tokens=160):
    """fairseq's batch_by_size over ``indices`` as given: a batch closes when its padded size would pass the budget."""
    batches, current = [], []
    for index in indices:
        if current and max(SIZES[current + [index]]) * (len(current) + 1) > max_tokens:
            batches.append(np.array(current))
            current = []
        current.append(int(index))
    return batches + ([np.array(current)] if current else [])


def test_released_batches_run_short_to_long_first_then_mix_lengths_in_visiting_order():
    by_length = np.argsort(SIZES, kind="stable")
    stream = ShrinkingBatchStream(by_length, SIZES, 100, 3, padded_batches_in_order,
                                  lambda indices, epoch, pass_index, chunk: (indices, None), visiting_order=True)
    first = [batch for batch, _ in stream.iterate_epoch(1)]
    np.testing.assert_array_equal(np.concatenate(first), by_length)  # every pair, short to long, unshuffled
    second = [batch for batch, _ in stream.iterate_epoch(2)]
    visited = np.concatenate(second)
    assert sorted(visited.tolist()) == list(range(400))
    order = np.empty(400, dtype=np.int64)
    order[by_length[stream._pass_order(2)]] = np.arange(400)
    assert np.all(np.diff(order[visited]) > 0)  # trained in the pass's shuffled order
    spreads = [SIZES[batch].max() - SIZES[batch].min() for batch in second if len(batch) > 1]
    assert np.median(spreads) > 10  # lengths mix within a batch
    longest = [SIZES[batch].max() for batch in second]
    assert longest != sorted(longest)
