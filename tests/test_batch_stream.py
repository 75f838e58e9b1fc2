"""The shrinking batch stream: epochs, chunks, token budget, carry-over and exact resume."""

import functools

import numpy as np

from fairseq_autoassist.data import ShrinkingBatchStream
from fairseq_autoassist.selection import SelectionOptions, SelectionSchedule, Selector, draw_keep_mask

from .synthetic import padded_token_budget_batches

NUM_PAIRS = 1000
MAX_TOKENS = 200
SIZES = np.random.default_rng(0).integers(3, 30, size=NUM_PAIRS)


def token_budget_batches(kept, sizes=SIZES):
    return padded_token_budget_batches(kept, sizes, MAX_TOKENS)


class RecordingSelector:
    """Keeps each pair with a probability that changes with every call (a drifting Assistant)."""

    def __init__(self, keep_prob=0.6, drift=0.0):
        self.keep_prob, self.drift, self.calls = keep_prob, drift, []

    def __call__(self, indices, epoch, pass_index, chunk):
        self.calls.append((epoch, pass_index, chunk))
        if epoch == 1:
            return indices, None
        p = np.clip(self.keep_prob + self.drift * len(self.calls), 0.05, 1.0)
        mask = draw_keep_mask(np.full(len(indices), p), 0, pass_index, chunk)
        return indices[mask], np.full(mask.sum(), p, dtype=np.float32)


def make_stream(selector, chunk_pairs=150):
    return ShrinkingBatchStream(np.arange(NUM_PAIRS), SIZES, chunk_pairs, 3, token_budget_batches, selector)


def run_epoch(stream, epoch):
    return [b.copy() for b, _ in stream.iterate_epoch(epoch)]


def test_first_epoch_visits_every_pair_once_within_the_token_budget():
    stream = make_stream(RecordingSelector())
    batches = run_epoch(stream, 1)
    assert len(batches) == stream.plan_epoch(1)
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(NUM_PAIRS))
    assert all(SIZES[b].max() * len(b) <= MAX_TOKENS for b in batches)
    assert stream.epoch_stats.kept_pairs == NUM_PAIRS


def test_later_epochs_shrink_and_no_pair_repeats_within_a_pass():
    stream = make_stream(RecordingSelector(keep_prob=0.5))
    first = run_epoch(stream, 1)
    second = run_epoch(stream, 2)
    assert len(second) < 0.75 * len(first)
    ids = np.concatenate(second)
    assert len(ids) == len(set(ids.tolist()))
    assert 0.4 < stream.epoch_stats.kept_pairs / stream.epoch_stats.candidate_pairs < 0.6


def test_selection_is_refreshed_every_chunk():
    selector = RecordingSelector(keep_prob=0.5)
    stream = make_stream(selector, chunk_pairs=100)
    run_epoch(stream, 1)
    selector.calls.clear()
    stream.plan_epoch(2)
    planning_calls = len(selector.calls)
    batches = run_epoch(stream, 2)
    generation_calls = selector.calls[planning_calls:]
    # One fresh selection per chunk, each governing at most a chunk's worth of batches.
    assert len(generation_calls) >= stream.chunks_per_pass - 1
    assert len(batches) / len(generation_calls) < 100 / np.mean([len(b) for b in batches]) + 1


def test_epoch_lengths_are_exact_and_nothing_is_lost_when_parameters_drift():
    selector = RecordingSelector(keep_prob=0.3, drift=0.01)
    stream = make_stream(selector, chunk_pairs=100)
    yielded = []
    for epoch in range(1, 6):
        planned = stream.plan_epoch(epoch)
        batches = run_epoch(stream, epoch)
        assert len(batches) == planned
        yielded.extend(batches)
    # Pending batches carry over instead of being dropped or repeated: a pair is trained on at
    # most once per pass, and every pass the stream started reached the training loop.
    counts = np.bincount(np.concatenate(yielded), minlength=NUM_PAIRS)
    assert counts.max() <= stream.pass_index
    assert counts.min() >= 1


def test_every_batch_of_a_pass_is_full_but_one():
    """A chunk's remainder is carried into the next chunk instead of becoming a tiny batch."""
    num_pairs = 3000
    sizes = np.random.default_rng(1).integers(3, 30, size=num_pairs)
    make_batches = functools.partial(token_budget_batches, sizes=sizes)
    stock = make_batches(np.arange(num_pairs))
    # A chunk every 5 full batches, as with --autoassist-refresh-updates 5.
    chunk_pairs = 5 * num_pairs // len(stock)
    stream = ShrinkingBatchStream(np.arange(num_pairs), sizes, chunk_pairs, 3, make_batches,
                                  RecordingSelector(keep_prob=1.0))
    run_epoch(stream, 1)
    second_pass = run_epoch(stream, 2)
    assert sorted(np.concatenate(second_pass).tolist()) == list(range(num_pairs))
    padded_tokens = [sizes[b].max() * len(b) for b in second_pass]
    assert sum(tokens < MAX_TOKENS / 2 for tokens in padded_tokens) <= 1


def test_a_carried_remainder_survives_a_resume():
    expected = run_epoch(after_first_epoch(chunk_pairs=40), 2)
    interrupted = after_first_epoch(chunk_pairs=40)
    iterator = interrupted.iterate_epoch(2)
    consumed = [next(iterator)[0].copy() for _ in range(3)]
    assert len(interrupted.carry[0]) > 0
    resumed = make_stream(RecordingSelector(keep_prob=0.5), chunk_pairs=40)
    resumed.load_state_dict(interrupted.state_dict(consumed_in_epoch=3))
    rest = [b.copy() for b, _ in resumed.iterate_epoch(2, start=3)]
    assert [b.tolist() for b in consumed + rest] == [b.tolist() for b in expected]


def after_first_epoch(chunk_pairs=120):
    """A stream that has finished epoch 1, with a keep probability of 0.5 from epoch 2 on."""
    stream = make_stream(RecordingSelector(keep_prob=0.5), chunk_pairs=chunk_pairs)
    run_epoch(stream, 1)
    return stream


def test_resume_mid_epoch_reproduces_the_remaining_batches():
    reference_batches = run_epoch(after_first_epoch(), 2)

    interrupted = after_first_epoch()
    iterator = interrupted.iterate_epoch(2)
    consumed = [next(iterator)[0].copy() for _ in range(5)]
    [next(iterator) for _ in range(2)]  # pulled by a data loader, not trained on
    state = interrupted.state_dict(consumed_in_epoch=len(consumed))

    resumed = make_stream(RecordingSelector(keep_prob=0.5), chunk_pairs=120)
    resumed.load_state_dict(state)
    rest, rest_keep_prob = zip(*resumed.iterate_epoch(2, start=len(consumed)))
    assert len(consumed) + len(rest) == len(reference_batches)
    for expected, actual in zip(reference_batches, consumed + list(rest)):
        np.testing.assert_array_equal(expected, actual)
    np.testing.assert_allclose(rest_keep_prob[0], 0.5)


def test_a_second_save_after_a_resume_still_keeps_prefetched_batches():
    expected = run_epoch(after_first_epoch(), 2)

    first = after_first_epoch()
    iterator = first.iterate_epoch(2)
    [next(iterator) for _ in range(4)]
    second = make_stream(RecordingSelector(keep_prob=0.5), chunk_pairs=120)
    second.load_state_dict(first.state_dict(consumed_in_epoch=4))
    iterator = second.iterate_epoch(2, start=4)
    [next(iterator) for _ in range(5)]  # 3 trained on, 2 prefetched
    third = make_stream(RecordingSelector(keep_prob=0.5), chunk_pairs=120)
    third.load_state_dict(second.state_dict(consumed_in_epoch=7))
    rest = [b.copy() for b, _ in third.iterate_epoch(2, start=7)]
    assert [b.tolist() for b in rest] == [b.tolist() for b in expected[7:]]


def test_resume_at_an_epoch_boundary_replans_the_next_epoch():
    expected = run_epoch(after_first_epoch(chunk_pairs=150), 2)

    interrupted = make_stream(RecordingSelector(keep_prob=0.5))
    first = run_epoch(interrupted, 1)
    resumed = make_stream(RecordingSelector(keep_prob=0.5))
    resumed.load_state_dict(interrupted.state_dict(consumed_in_epoch=len(first)))
    actual = run_epoch(resumed, 2)
    assert [b.tolist() for b in actual] == [b.tolist() for b in expected]


def test_a_selector_that_keeps_nothing_still_yields_a_batch_per_rank():
    keep_nothing = lambda indices, *args: (indices[:0], None)  # noqa: E731
    stream = make_stream(keep_nothing)
    assert stream.plan_epoch(1) == 1
    assert len(run_epoch(stream, 1)) == 1
    four_ranks = ShrinkingBatchStream(np.arange(NUM_PAIRS), SIZES, 150, 3, token_budget_batches, keep_nothing,
                                      min_batches_per_epoch=4)
    batches = run_epoch(four_ranks, 1)
    assert len(batches) == 4 and all(len(batch) > 0 for batch in batches)


def test_keep_all_rebuilds_batches_every_pass_exactly_as_uniform_at_keep_probability_one():
    def epochs(options):
        stream = make_stream(Selector(options, SelectionSchedule(warmup_epochs=0), seed=1).select)
        return [[batch.tolist() for batch in run_epoch(stream, epoch)] for epoch in (1, 2, 3)]

    keep_all = epochs(SelectionOptions(policy="keep-all"))
    assert keep_all == epochs(SelectionOptions(policy="uniform", uniform_keep_prob=1.0))
    for batches in keep_all:
        assert sorted(pair for batch in batches for pair in batch) == list(range(NUM_PAIRS))
    # A fresh shuffle every pass: the second pass's batches are not the first's in another order.
    assert sorted(map(sorted, keep_all[0])) != sorted(map(sorted, keep_all[1]))
