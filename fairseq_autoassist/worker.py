"""Feeding the Boss's losses to the Assistant: a background worker and its synchronous twin.

Selection must not depend on how fast the Assistant learns, or two runs of one seed (and a resumed run) would
train different pairs. Both workers therefore score with **snapshots** taken at fixed points of the feedback:
after every ``lag`` training steps' feedback the Assistant's parameters are copied, and a selection made after
training step ``t`` scores with the snapshot at ``lag * (t // lag - 1)`` steps (between ``lag`` and ``2 * lag - 1``
steps old; the untrained Assistant before that). The background worker is normally that far ahead of any need;
the training thread waits only where it is not (``waits``, ``wait_seconds``), and a full queue makes ``submit``
wait instead of dropping feedback. The synchronous worker learns in the caller's thread and selects exactly alike.

Calling contract (both classes):

* ``submit(ids, per_token_losses, keep_prob=None, labels=None, pass_index=1)`` exactly once per training step, in
  step order, with empty arrays for a step without feedback (a dummy batch): the snapshots count steps by these calls.
  ``pass_index``: the pass the batch stream generates when the losses arrive (the released Assistant's threshold
  follows it).
* ``snapshot(step)`` from the training thread when it selects after ``step`` training steps (``step`` never
  decreases, and is at least the number of steps submitted: the worker keeps only the snapshots such a selection can
  still need, at most three, on every rank); ``predict(ids, step)`` scores with it.
* ``stats()`` returns plain scalars for logging, among them ``cpu_seconds``: the CPU time spent in the
  Assistant's updates (per thread, so machine noise and the Boss's threads do not count).
* ``state_dict()`` / ``load_state_dict()`` checkpoint the Assistant, the number of steps learned from and the
  snapshots a later selection still needs; the background worker first learns from everything submitted.

If the Assistant's update raises, or makes no progress for ``STALL_SECONDS`` while the training thread waits for
it, the next ``submit``, ``snapshot`` or ``state_dict`` raises ``AssistantFailedError``: the run stops with one
line naming the failure, and its last checkpoint is intact (a run is never reported under a policy whose
Assistant did not work).
"""

import collections
import copy
import logging
import threading
import time

import numpy as np
import torch

from .compat import checkpointed_array
from .errors import AssistantFailedError

logger = logging.getLogger(__name__)

# How long the training thread waits for an Assistant update that makes no progress before it stops the run.
STALL_SECONDS = 600.0


def snapshot_step(step, lag):
    """The feedback step whose snapshot a selection after ``step`` training steps scores with."""
    return max(0, lag * (step // lag - 1))


class SyncAssistantWorker:
    """Updates the Assistant in the caller's thread (no thread at all; for tests and debugging)."""

    def __init__(self, assistant, lag):
        if lag < 1:
            raise ValueError(f"the snapshot lag must be at least one step, not {lag}")
        self.assistant = assistant
        self.lag = int(lag)
        self.learned_steps = 0
        self.cpu_seconds = 0.0
        self.waits = 0
        self.wait_seconds = 0.0
        self._failure = None
        self._snapshots = {0: _snapshot(assistant)}
        # The update lock is held while the Assistant learns; the snapshot lock only while the dict changes.
        self._update_lock = threading.Lock()
        self._snapshot_lock = threading.Lock()

    def submit(self, ids, per_token_losses, keep_prob=None, labels=None, pass_index=1):
        self._raise_if_failed()
        try:
            self._learn((ids, per_token_losses, keep_prob, labels, pass_index))
        except Exception as error:
            self._record_failure(error)
            self._raise_if_failed()

    def _record_failure(self, error):
        # The traceback only at debug level: the run stops with the one line that AssistantFailedError makes.
        logger.debug("AutoAssist: the Assistant's update failed", exc_info=True)
        self._failure = (f"the Assistant worker failed after learning {self.learned_steps} steps "
                         f"({type(error).__name__}: {error})")

    def _raise_if_failed(self):
        if self._failure is not None:
            raise AssistantFailedError(self._failure)

    def _learn(self, feedback):
        """Learns one step's feedback and takes the snapshot that ends at it, if one does."""
        with self._update_lock:
            if len(feedback[0]):
                started = time.thread_time()
                self.assistant.update(*feedback)
                self.cpu_seconds += time.thread_time() - started
            if (self.learned_steps + 1) % self.lag == 0:
                snapshot = _snapshot(self.assistant)
                with self._snapshot_lock:
                    self._snapshots[self.learned_steps + 1] = snapshot
                    # By its own step count, whether or not this rank selects: a selection comes after at least the
                    # steps submitted, so it never needs a snapshot older than theirs.
                    self._drop_snapshots_before(snapshot_step(self.learned_steps + 1, self.lag))
            self.learned_steps += 1

    def _wait_until_learned(self, steps):
        """Returns once the feedback of ``steps`` steps is learned; here it is learned when submitted."""
        self._raise_if_failed()
        if self.learned_steps < steps:
            raise RuntimeError(f"the Assistant of step {steps} was asked for after {self.learned_steps} steps' "
                               "feedback: submit once per training step")

    def snapshot(self, step):
        wanted = snapshot_step(step, self.lag)
        self._wait_until_learned(wanted)
        with self._snapshot_lock:
            self._drop_snapshots_before(wanted)
            return self._snapshots[wanted]

    def _drop_snapshots_before(self, step):
        """Forgets the snapshots older than ``step`` (the caller holds the snapshot lock)."""
        for stale in [s for s in self._snapshots if s < step]:
            del self._snapshots[stale]

    def predict(self, ids, step):
        return self.snapshot(step).predict(ids)

    def drain(self):
        """Returns once every submitted step is learned (here: at once, unless an update failed)."""
        self._raise_if_failed()

    def close(self):
        """Nothing runs beside training; here so that tools may close either worker alike."""

    def stats(self):
        # Plain scalar reads without the update lock: a slow update must not block logging.
        a = self.assistant
        return {
            "accuracy": a.accuracy,
            "confidence": a.confidence,
            "loss_mean": a.loss_mean if a.loss_mean is not None else float("nan"),
            "positive_rate": a.positive_rate,
            "auc_new": a.quality.auc(seen=False),
            "auc_seen": a.quality.auc(seen=True),
            "updates": a.num_updates,
            "waits": self.waits,
            "wait_seconds": self.wait_seconds,
            "cpu_seconds": self.cpu_seconds,
        }

    def state_dict(self):
        self.drain()
        with self._update_lock, self._snapshot_lock:
            return {
                "assistant": self.assistant.state_dict(),
                "lag": self.lag,
                "learned_steps": self.learned_steps,
                "snapshots": {step: _scoring_state(snapshot) for step, snapshot in self._snapshots.items()},
            }

    def load_state_dict(self, state):
        self.drain()
        with self._update_lock, self._snapshot_lock:
            self.assistant.load_state_dict(state["assistant"])
            self.learned_steps = int(state["learned_steps"])
            self._snapshots = {int(step): _load_scoring_state(self.assistant, saved)
                                for step, saved in state["snapshots"].items()}


class AsyncAssistantWorker(SyncAssistantWorker):
    """Updates the Assistant in a daemon thread fed by a bounded queue (``submit`` waits while it is full)."""

    def __init__(self, assistant, lag, queue_size=64):
        super().__init__(assistant, lag)
        self._pending = collections.deque()
        self._queue_size = int(queue_size)
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="autoassist-assistant", daemon=True)
        self._thread.start()

    def submit(self, ids, per_token_losses, keep_prob=None, labels=None, pass_index=1):
        with self._cond:
            self._wait_for(lambda: len(self._pending) < self._queue_size, "a place in its queue")
            self._pending.append((np.asarray(ids), np.asarray(per_token_losses),
                                  None if keep_prob is None else np.asarray(keep_prob),
                                  None if labels is None else np.asarray(labels), int(pass_index)))
            self._cond.notify_all()

    def _wait_until_learned(self, steps):
        with self._cond:
            self._wait_for(lambda: self.learned_steps >= steps, f"the Assistant of step {steps}")

    def drain(self):
        with self._cond:
            self._wait_for(lambda: not self._pending and not self._busy, "every submitted step to be learned")

    def _wait_for(self, ready, what):
        """Waits (holding ``self._cond``) until ``ready()``, counting the wait; raises if the worker failed or
        stalled."""
        self._raise_if_failed()
        if ready():
            return
        self.waits += 1
        started = time.monotonic()
        progress = self.learned_steps
        deadline = started + STALL_SECONDS
        while not ready():
            self._raise_if_failed()
            if self.learned_steps != progress:
                progress, deadline = self.learned_steps, time.monotonic() + STALL_SECONDS
            elif time.monotonic() > deadline:
                self._failure = (f"the Assistant worker made no progress in {STALL_SECONDS:g} s while training "
                                 f"waited for {what} (learned {self.learned_steps} steps)")
                break
            elif not self._thread.is_alive():
                self._failure = "the Assistant worker's thread ended"
                break
            self._cond.wait(timeout=min(1.0, STALL_SECONDS))
        self.wait_seconds += time.monotonic() - started
        self._raise_if_failed()

    def _run(self):
        try:
            while True:
                with self._cond:
                    while not self._pending and not self._closed:
                        self._cond.wait()
                    if not self._pending:
                        return
                    feedback = self._pending.popleft()
                    self._busy = True
                self._learn(feedback)
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        except Exception as error:
            with self._cond:
                self._record_failure(error)
                self._busy = False
                self._cond.notify_all()

    def close(self):
        """Stops the thread after the pending feedback (for tools and tests; training leaves the
        daemon thread to end with the process)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5.0)


def _snapshot(assistant):
    """A copy that scores as the Assistant does now and holds only what scoring reads (``SCORING_ARRAYS`` and the
    confidence): features and diagnostics are shared, the optimiser's state (Adagrad's accumulators, twice the
    weights' bytes) is left out, so a held or checkpointed snapshot costs what the weights do."""
    clone = copy.copy(assistant)
    for name, value in vars(assistant).items():
        if isinstance(value, np.ndarray) and name != "pair_columns":
            setattr(clone, name, value.copy() if name in assistant.SCORING_ARRAYS else None)
    return clone


def _scoring_state(snapshot):
    return {"confidence": snapshot.confidence,
            **{name: torch.from_numpy(getattr(snapshot, name)) for name in snapshot.SCORING_ARRAYS}}


def _load_scoring_state(assistant, saved):
    """The snapshot ``saved`` by ``_scoring_state`` (or, from checkpoints of 0.4.0 and before, by the Assistant's
    ``state_dict``, which holds the same keys), shaped and typed as ``assistant``'s weights."""
    snapshot = _snapshot(assistant)
    for name in assistant.SCORING_ARRAYS:
        like = getattr(assistant, name)
        setattr(snapshot, name, checkpointed_array(saved[name], like.dtype).reshape(like.shape))
    snapshot.confidence = float(saved["confidence"])
    return snapshot
