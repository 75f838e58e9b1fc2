"""The background Assistant worker and its synchronous twin."""

import threading

import numpy as np

from fairseq_autoassist.assistant import Assistant
from fairseq_autoassist.worker import AsyncAssistantWorker, SyncAssistantWorker

from .synthetic import planted_losses, random_features


def feed(worker, features, losses, batches=40):
    for batch in np.array_split(np.arange(len(features)), batches):
        worker.submit(batch, losses[batch])


def test_async_worker_learns_like_the_sync_one():
    features = random_features(num_pairs=1000, seed=1)
    losses, _ = planted_losses(features, [10, 11, 12])
    sync = SyncAssistantWorker(Assistant(features))
    background = AsyncAssistantWorker(Assistant(features), queue_size=1000)
    try:
        feed(sync, features, losses)
        feed(background, features, losses)
        background.drain()
        np.testing.assert_allclose(background.predict(np.arange(100)), sync.predict(np.arange(100)), rtol=1e-6)
        assert background.stats()["updates"] == 40 and background.stats()["dropped"] == 0
    finally:
        background.close()


def test_the_two_workers_offer_the_same_methods():
    # Callers (the runtime, scripts/benchmark_overhead.py) hold either one; a method only one has breaks the other.
    public = [{name for name in dir(worker) if not name.startswith("_")}
              for worker in (AsyncAssistantWorker, SyncAssistantWorker)]
    assert public[0] == public[1]


def test_full_queue_drops_the_oldest_feedback_and_counts_it():
    features = random_features(num_pairs=200)
    assistant = Assistant(features)
    release, started = threading.Event(), threading.Event()
    original_update = assistant.update

    def blocked_update(ids, losses, keep_prob=None, labels=None):
        started.set()
        release.wait(timeout=10)
        return original_update(ids, losses, keep_prob, labels)

    assistant.update = blocked_update
    worker = AsyncAssistantWorker(assistant, queue_size=3)
    try:
        worker.submit(np.array([0]), np.array([0.0]))
        assert started.wait(timeout=10)
        for i in range(1, 10):
            worker.submit(np.array([i]), np.array([float(i)]))
        release.set()
        worker.drain()
        # One batch was taken by the blocked worker, 3 waited, the other 6 were dropped.
        assert worker.dropped == 6
        assert assistant.num_updates == 4
    finally:
        worker.close()


def test_a_failing_worker_marks_itself_unhealthy_without_raising():
    features = random_features(num_pairs=50)
    assistant = Assistant(features)

    def broken_update(ids, losses, keep_prob=None, labels=None):
        raise RuntimeError("simulated Assistant crash")

    assistant.update = broken_update
    worker = AsyncAssistantWorker(assistant)
    try:
        worker.submit(np.arange(5), np.ones(5))
        worker.drain()
        assert not worker.healthy
        worker.submit(np.arange(5), np.ones(5))  # ignored, never blocks
        assert worker.stats()["healthy"] is False
    finally:
        worker.close()


def test_state_dict_waits_for_pending_feedback():
    features = random_features(num_pairs=400)
    losses, _ = planted_losses(features, [10])
    worker = AsyncAssistantWorker(Assistant(features), queue_size=100)
    try:
        feed(worker, features, losses, batches=20)
        assert worker.state_dict()["num_updates"] == 20
    finally:
        worker.close()


def test_a_stalled_worker_is_given_up_and_submit_never_blocks():
    features = random_features(num_pairs=50)
    assistant = Assistant(features)
    never = threading.Event()
    assistant.update = lambda *feedback: never.wait(timeout=30)
    worker = AsyncAssistantWorker(assistant, queue_size=2)
    try:
        for i in range(60):
            worker.submit(np.array([i % 50]), np.array([1.0]))
        assert not worker.healthy
        assert worker.dropped > 20
    finally:
        never.set()
        worker.close()
