"""A record of the Boss's per-pair losses, for replaying them offline (no fairseq import).

``--autoassist-loss-log FILE`` appends one record per training step: the dataset ids of the step's
pairs, their per-token losses and the probability each was kept with.
``scripts/replay_assistant.py`` feeds such a log to Assistants of other settings and measures how
well each predicts the label, in seconds instead of a training run. A resumed run appends again
the steps since its last checkpoint.
"""

import numpy as np


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


def read_loss_log(path):
    """Yields ``(ids, per_token_losses, keep_prob)`` per recorded step."""
    with open(path, "rb") as f:
        while True:
            try:
                record = np.load(f)
            except (EOFError, ValueError):
                return
            yield record[:, 0].astype(np.int64), record[:, 1], record[:, 2]
