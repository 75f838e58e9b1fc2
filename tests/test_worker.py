"""The background Assistant worker and its synchronous twin: snapshots by step, back-pressure, failures."""

import threading
import time

import numpy as np
import pytest

from fairseq_autoassist import worker as worker_module
from fairseq_autoassist.assistant import Assistant
from fairseq_autoassist.assistant.released import ReleasedAssistant
from fairseq_autoassist.errors import AssistantFailedError
from fairseq_autoassist.worker import AsyncAssistantWorker, SyncAssistantWorker, snapshot_step

from .synthetic import planted_losses, random_features

LAG = 4


def feed(worker, features, losses, batches=40):
    for batch in np.array_split(np.arange(len(features)), batches):
        worker.submit(batch, losses[batch])


def slowed(assistant, seconds):
    update = assistant.update

    def slow_update(*feedback):
        time.sleep(seconds)
        return update(*feedback)

    assistant.update = slow_update
    return assistant


def test_a_selection_scores_with_the_snapshot_between_lag_and_twice_the_lag_steps_old():
    assert [snapshot_step(step, 4) for step in (0, 3, 4, 7, 8, 9, 11, 12)] == [0, 0, 0, 0, 4, 4, 4, 8]


def test_the_two_workers_offer_the_same_methods():
    # Callers (the runtime, scripts/benchmark_overhead.py) hold either one; a method only one has breaks the other.
    public = [{name for name in dir(worker) if not name.startswith("_")}
              for worker in (AsyncAssistantWorker, SyncAssistantWorker)]
    assert public[0] == public[1]


def test_a_slow_background_worker_selects_exactly_as_the_synchronous_one_and_counts_its_waits():
    features = random_features(num_pairs=600, seed=1)
    losses, _ = planted_losses(features, [10, 11, 12])
    sync = SyncAssistantWorker(Assistant(features), LAG)
    background = AsyncAssistantWorker(slowed(Assistant(features), 0.01), LAG, queue_size=1000)
    probe = np.arange(100)
    try:
        predictions = {"sync": [], "background": []}
        for step, batch in enumerate(np.array_split(np.arange(len(features)), 30), start=1):
            for name, worker in (("sync", sync), ("background", background)):
                worker.submit(batch, losses[batch])
                # As the task: the selection after `step` steps, while the step's own losses are still on their way.
                predictions[name].append(worker.predict(probe, step + 1))
        np.testing.assert_array_equal(predictions["background"], predictions["sync"])
        assert len({p.tobytes() for p in predictions["sync"]}) > 5  # the snapshots did move
        assert background.stats()["waits"] > 0 and sync.stats()["waits"] == 0
    finally:
        background.close()


def test_a_full_queue_makes_the_training_step_wait_and_drops_nothing():
    features = random_features(num_pairs=200)
    assistant = Assistant(features)
    release, started = threading.Event(), threading.Event()
    update = assistant.update

    def blocked_update(*feedback):
        started.set()
        release.wait(timeout=10)
        return update(*feedback)

    assistant.update = blocked_update
    worker = AsyncAssistantWorker(assistant, LAG, queue_size=3)
    try:
        worker.submit(np.array([0]), np.array([0.0]))
        assert started.wait(timeout=10)
        submitter = threading.Thread(target=lambda: [worker.submit(np.array([i]), np.array([float(i)]))
                                                      for i in range(1, 10)])
        submitter.start()
        submitter.join(timeout=0.5)
        assert submitter.is_alive()  # three wait in the queue, the fourth waits for a place
        release.set()
        submitter.join(timeout=10)
        worker.drain()
        assert assistant.num_updates == 10 and worker.learned_steps == 10 and worker.stats()["waits"] >= 1
    finally:
        release.set()
        worker.close()


@pytest.mark.parametrize("kind", [SyncAssistantWorker, AsyncAssistantWorker])
def test_a_failing_assistant_stops_training_with_its_error(kind):
    """Either worker: the one-line error (never the update's own exception, which fairseq would answer with a
    traceback and crash.pt), then again at every later call."""
    features = random_features(num_pairs=50)
    assistant = Assistant(features)

    def broken_update(*feedback):
        raise RuntimeError("simulated Assistant crash")

    assistant.update = broken_update
    worker = kind(assistant, LAG)
    expected = r"failed after learning 0 steps \(RuntimeError: simulated Assistant crash\).*--autoassist-policy keep-all"
    try:
        with pytest.raises(AssistantFailedError, match=expected):
            worker.submit(np.arange(5), np.ones(5))
            worker.drain()
        for call in (lambda: worker.submit(np.arange(5), np.ones(5)), lambda: worker.snapshot(20),
                     worker.state_dict):
            with pytest.raises(AssistantFailedError):
                call()
    finally:
        worker.close()


def test_a_stalled_assistant_stops_training_instead_of_being_saved_half_done(monkeypatch):
    monkeypatch.setattr(worker_module, "STALL_SECONDS", 0.3)
    features = random_features(num_pairs=50)
    assistant = Assistant(features)
    never = threading.Event()
    assistant.update = lambda *feedback: never.wait(timeout=30)
    worker = AsyncAssistantWorker(assistant, LAG, queue_size=100)
    try:
        for i in range(10):
            worker.submit(np.array([i]), np.array([1.0]))
        with pytest.raises(AssistantFailedError, match="made no progress in 0.3 s while training waited for the "
                                                       "Assistant of step 4"):
            worker.snapshot(9)
        with pytest.raises(AssistantFailedError):
            worker.state_dict()
    finally:
        never.set()
        worker.close()


@pytest.mark.parametrize("kind", [SyncAssistantWorker, AsyncAssistantWorker])
def test_a_restored_worker_selects_as_the_uninterrupted_one(kind):
    features = random_features(num_pairs=400)
    losses, _ = planted_losses(features, [10])
    batches = np.array_split(np.arange(len(features)), 20)
    uninterrupted, interrupted, restored = (kind(Assistant(features), LAG) for _ in range(3))
    try:
        for step, batch in enumerate(batches[:10], start=1):
            for worker in (uninterrupted, interrupted):
                worker.submit(batch, losses[batch])
        interrupted.snapshot(11)
        state = interrupted.state_dict()
        assert state["learned_steps"] == 10 and sorted(state["snapshots"]) == [4, 8]
        restored.load_state_dict(state)
        for step, batch in enumerate(batches[10:], start=11):
            # As the task: the selection after `step` steps, while the step's own losses are still on their way.
            np.testing.assert_array_equal(restored.predict(np.arange(50), step),
                                          uninterrupted.predict(np.arange(50), step))
            for worker in (uninterrupted, restored):
                worker.submit(batch, losses[batch])
    finally:
        for worker in (uninterrupted, interrupted, restored):
            worker.close()


def test_asking_for_a_snapshot_whose_steps_were_never_submitted_is_a_contract_error():
    worker = SyncAssistantWorker(Assistant(random_features(num_pairs=20)), LAG)
    with pytest.raises(RuntimeError, match="submit once per training step"):
        worker.snapshot(8)


@pytest.mark.parametrize("kind", [SyncAssistantWorker, AsyncAssistantWorker])
def test_a_worker_that_never_selects_keeps_at_most_three_snapshots(kind):
    """Ranks other than the first, warm-up epochs and annealing never ask for a snapshot: the worker prunes by its own
    step count, and its checkpoint holds as few."""
    features = random_features(num_pairs=300)
    losses, _ = planted_losses(features, [10])
    worker = kind(Assistant(features), LAG)
    try:
        for step in range(1, 101):
            batch = np.arange(step % 30 * 10, step % 30 * 10 + 10)
            worker.submit(batch, losses[batch])
        state = worker.state_dict()
        assert sorted(state["snapshots"]) == [96, 100]
        worker.snapshot(101)  # the selection after the steps submitted still finds its snapshot
    finally:
        worker.close()


@pytest.mark.parametrize("assistant_kind", [Assistant, ReleasedAssistant])
def test_a_snapshot_holds_only_the_scoring_weights_and_resumes_to_the_same_scores(assistant_kind):
    """Adagrad's accumulators are twice the weights' bytes: a snapshot (held and checkpointed) leaves them out, and
    still scores as the Assistant did when it was taken, also after a checkpoint round trip."""
    features = random_features(num_pairs=300)
    losses, _ = planted_losses(features, [10])
    assistant = assistant_kind(features)
    worker = SyncAssistantWorker(assistant, LAG)
    feed(worker, features, losses, batches=8)
    expected = assistant.predict()
    snapshot = worker.snapshot(LAG * 3)
    np.testing.assert_array_equal(snapshot.predict(), expected)
    held = sum(value.nbytes for value in vars(snapshot).values()
               if isinstance(value, np.ndarray) and value is not getattr(assistant, "pair_columns", None))
    assert held == sum(getattr(assistant, name).nbytes for name in assistant.SCORING_ARRAYS)
    saved = worker.state_dict()["snapshots"][2 * LAG]
    assert set(saved) == {"confidence", *assistant.SCORING_ARRAYS}
    restored = SyncAssistantWorker(assistant_kind(features), LAG)
    restored.load_state_dict(worker.state_dict())
    np.testing.assert_array_equal(restored.snapshot(LAG * 3).predict(), expected)
    assert restored.snapshot(LAG * 3).confidence == assistant.confidence


def test_a_checkpoint_whose_snapshots_are_whole_assistant_states_still_loads():
    """Checkpoints of 0.4.0 and before saved each snapshot as the Assistant's full state; they hold the same keys."""
    features = random_features(num_pairs=300)
    losses, _ = planted_losses(features, [10])
    worker = SyncAssistantWorker(Assistant(features), LAG)
    feed(worker, features, losses, batches=8)
    state = worker.state_dict()
    state["snapshots"] = {2 * LAG: worker.assistant.state_dict(with_quality=False)}  # the Assistant after 8 steps
    restored = SyncAssistantWorker(Assistant(features), LAG)
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.snapshot(LAG * 3).predict(), worker.assistant.predict())
