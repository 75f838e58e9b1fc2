"""Feeding the Boss's losses to the Assistant: a background worker and its synchronous twin.

Calling contract (both classes):

* ``submit(ids, per_token_losses, keep_prob=None, labels=None)`` from the training loop after each
  Boss step, with the probability each pair was kept with and optional labels (see
  ``Assistant.update``); never blocks
  for longer than a queue append. The async worker keeps at most ``queue_size`` pending batches;
  when full, the oldest pending batch is dropped and counted in ``dropped``.
* ``predict(ids)`` scores pairs with a consistent snapshot of the Assistant's parameters (the
  update lock is held only while the O(vocabulary) parameters are copied).
* ``stats()`` returns plain scalars for logging, among them ``cpu_seconds``: the CPU time spent in
  the Assistant's updates (measured per thread, so machine noise and the Boss's threads do not count).
* ``state_dict()`` / ``load_state_dict()`` checkpoint the Assistant; the async worker first
  drains its queue so that a saved state holds every loss reported before the save.

If the async worker's thread dies, or stalls (no update finished while ``STALL_DROPS`` times
the queue size of feedback batches were dropped), training goes on: ``healthy`` turns False, a
warning is logged once, and callers fall back to keeping every pair.
"""

import collections
import copy
import logging
import threading
import time

import numpy as np

logger = logging.getLogger(__name__)

STALL_DROPS = 10


class SyncAssistantWorker:
    """Updates the Assistant in the caller's thread: deterministic, for tests and debugging."""

    def __init__(self, assistant):
        self.assistant = assistant
        self.dropped = 0
        self.healthy = True
        self.cpu_seconds = 0.0

    def submit(self, ids, per_token_losses, keep_prob=None, labels=None):
        self._timed_update(ids, per_token_losses, keep_prob, labels)

    def _timed_update(self, *feedback):
        started = time.thread_time()
        self.assistant.update(*feedback)
        self.cpu_seconds += time.thread_time() - started

    def snapshot(self):
        return self.assistant

    def predict(self, ids):
        return self.snapshot().predict(ids)

    def drain(self):
        pass

    def close(self):
        """Nothing runs beside training; here so that tools may close either worker alike."""

    def stats(self):
        # Plain scalar reads without the update lock: a stalled update must not block logging.
        a = self.assistant
        return {
            "accuracy": a.accuracy,
            "confidence": a.confidence,
            "loss_mean": a.loss_mean if a.loss_mean is not None else float("nan"),
            "positive_rate": a.positive_rate,
            "auc_new": a.quality.auc(seen=False),
            "auc_seen": a.quality.auc(seen=True),
            "updates": a.num_updates,
            "dropped": self.dropped,
            "healthy": self.healthy,
            "cpu_seconds": self.cpu_seconds,
        }

    def state_dict(self):
        self.drain()
        return self.assistant.state_dict()

    def load_state_dict(self, state):
        self.drain()
        self.assistant.load_state_dict(state)


class AsyncAssistantWorker(SyncAssistantWorker):
    """Updates the Assistant in a daemon thread fed by a bounded drop-oldest queue."""

    def __init__(self, assistant, queue_size=64):
        super().__init__(assistant)
        self._pending = collections.deque()
        self._queue_size = int(queue_size)
        self._cond = threading.Condition()
        self._update_lock = threading.Lock()
        self._busy = False
        self._closed = False
        self._failure_logged = False
        self._drops_since_progress = 0
        self._thread = threading.Thread(target=self._run, name="autoassist-assistant", daemon=True)
        self._thread.start()

    def submit(self, ids, per_token_losses, keep_prob=None, labels=None):
        if not self.healthy:
            return
        with self._cond:
            if len(self._pending) >= self._queue_size:
                self._pending.popleft()
                self.dropped += 1
                self._drops_since_progress += 1
            self._pending.append((np.asarray(ids), np.asarray(per_token_losses),
                                  None if keep_prob is None else np.asarray(keep_prob),
                                  None if labels is None else np.asarray(labels)))
            self._cond.notify()
            stalled = self._drops_since_progress > STALL_DROPS * self._queue_size
        if stalled:
            self._mark_failed("stalled")

    def _run(self):
        try:
            while True:
                with self._cond:
                    while not self._pending and not self._closed:
                        self._cond.wait()
                    if self._closed and not self._pending:
                        return
                    feedback = self._pending.popleft()
                    self._busy = True
                with self._update_lock:
                    self._timed_update(*feedback)
                with self._cond:
                    self._busy = False
                    self._drops_since_progress = 0
                    self._cond.notify_all()
        except Exception:
            logger.exception("AutoAssist: the Assistant worker failed")
            self._mark_failed("failed")

    def _mark_failed(self, reason):
        with self._cond:
            self.healthy = False
            self._busy = False
            self._pending.clear()
            self._cond.notify_all()
        if not self._failure_logged:
            self._failure_logged = True
            logger.warning(
                "AutoAssist: the Assistant worker %s; training goes on and selection keeps every pair", reason
            )

    def snapshot(self):
        with self._update_lock:
            return _snapshot(self.assistant)

    def drain(self):
        with self._cond:
            while self.healthy and (self._pending or self._busy):
                self._cond.wait(timeout=1.0)
                if not self._thread.is_alive():
                    break

    def load_state_dict(self, state):
        self.drain()
        with self._update_lock:
            self.assistant.load_state_dict(state)

    def close(self):
        """Stops the thread after the pending feedback (for tools and tests; training leaves the
        daemon thread to end with the process)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5.0)


def _snapshot(assistant):
    """A copy of the Assistant that shares the (read-only) features and copies the parameters."""
    clone = copy.copy(assistant)
    clone.token_weights = assistant.token_weights.copy()
    clone.length_weights = assistant.length_weights.copy()
    clone.pair_weights = assistant.pair_weights.copy()
    clone.bias = assistant.bias.copy()
    return clone
