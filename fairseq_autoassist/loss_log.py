"""A record of the Boss's per-pair losses, for replaying them offline (no fairseq import).

``--autoassist-loss-log FILE`` appends one record per training step: the dataset ids of the step's
pairs, their per-token losses and the probability each was kept with.
``scripts/research/replay_assistant.py`` feeds such a log to Assistants of other settings and measures how
well each predicts the label, in seconds instead of a training run. A checkpoint records the log's
length; a run resumed from it cuts the log back there, so the steps it trains again are logged once.
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


def read_loss_log(path):
    """Yields ``(ids, per_token_losses, keep_prob)`` per recorded step."""
    with open(path, "rb") as f:
        while True:
            try:
                record = np.load(f)
            except (EOFError, ValueError):
                return
            yield record[:, 0].astype(np.int64), record[:, 1], record[:, 2]
