"""A record of the Boss's per-pair losses, for replaying them offline (no fairseq import).

``--autoassist-loss-log FILE`` appends one record per training step: the dataset ids of the step's
pairs, their per-token losses and the probability each was kept with.
``scripts/research/replay_assistant.py`` feeds such a log to Assistants of other settings and measures how
well each predicts the label, in seconds instead of a training run. A checkpoint records the log's
length; a run resumed from it cuts the log back there, so the steps it trains again are logged once.
``write_compact`` stores a finished log small enough to commit beside the results it gave (``.npz``: ids in the
smallest unsigned type that holds them, losses and keep probabilities in float16); ``read_loss_log`` reads both.
"""

import logging
import os

import numpy as np

logger = logging.getLogger(__name__)


class LossLog:
    """Writes records as consecutive ``np.save`` arrays of shape (pairs, 3): id, loss, keep_prob."""

    def __init__(self, path):
        self.path = path

    def submit(self, ids, per_token_losses, keep_prob):
        record = np.empty((len(ids), 3), dtype=np.float64)
        record[:, 0] = ids
        record[:, 1] = per_token_losses
        record[:, 2] = keep_prob
        with open(self.path, "ab") as f:
            np.save(f, record)

    def length(self):
        """Bytes written so far, for the checkpoint."""
        return os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def rewind(self, length):
        """Drops the records written after a checkpoint that recorded ``length``."""
        current = self.length()
        if current > length:
            with open(self.path, "r+b") as f:
                f.truncate(length)
        elif current < length:
            logger.warning("%s holds %d bytes, fewer than the %d its checkpoint recorded: records before the "
                           "resume are missing", self.path, current, length)


COMPACT_SUFFIX = ".npz"


def write_compact(records, path):
    """Writes ``records`` (``read_loss_log``'s steps) to ``path`` (``.npz``), losses rounded to float16: a loss of
    about 2 moves by at most 0.001, so an offline replay reads the compact log, not the original, to be reproducible."""
    if not os.fspath(path).endswith(COMPACT_SUFFIX):
        raise ValueError(f"{path}: a compact loss log's name ends in {COMPACT_SUFFIX}")
    records = list(records)
    ids = np.concatenate([np.zeros(0, dtype=np.int64)] + [step_ids for step_ids, _, _ in records])
    np.savez_compressed(path, step_sizes=np.array([len(step_ids) for step_ids, _, _ in records], dtype=np.int32),
                        ids=ids.astype(np.min_scalar_type(int(ids.max(initial=0)))),
                        losses=np.concatenate([np.zeros(0)] + [losses for _, losses, _ in records]).astype(np.float16),
                        keep_prob=np.concatenate([np.zeros(0)] + [keep for _, _, keep in records]).astype(np.float16))


def read_loss_log(path):
    """Yields ``(ids, per_token_losses, keep_prob)`` per recorded step, from a log or its compact form (``path``: a
    string or a path object)."""
    if os.fspath(path).endswith(COMPACT_SUFFIX):
        with np.load(path) as compact:
            bounds = np.cumsum(np.r_[0, compact["step_sizes"]])
            ids = compact["ids"].astype(np.int64)
            losses, keep_prob = compact["losses"].astype(np.float64), compact["keep_prob"].astype(np.float64)
        for start, end in zip(bounds[:-1], bounds[1:]):
            yield ids[start:end], losses[start:end], keep_prob[start:end]
        return
    with open(path, "rb") as f:
        while True:
            try:
                record = np.load(f)
            except (EOFError, ValueError):
                return
            yield record[:, 0].astype(np.int64), record[:, 1], record[:, 2]
