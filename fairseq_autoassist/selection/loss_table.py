"""Per-pair losses: the latest one (for the peers InfoBatch and SPL) and the learning progress
(for the ``progress`` policy)."""

import numpy as np
import torch

from .sampling import selection_corrected_mean


class LatestLossTable:
    """One float per pair; NaN until the Boss has reported a loss for the pair."""

    def __init__(self, num_pairs):
        self.losses = np.full(int(num_pairs), np.nan, dtype=np.float32)

    def submit(self, ids, per_token_losses, keep_prob=None):
        """Records each pair's latest loss (``keep_prob``, the worker's extra argument, is not needed)."""
        per_token_losses = np.asarray(per_token_losses, dtype=np.float32)
        finite = np.isfinite(per_token_losses)
        self.losses[np.asarray(ids)[finite]] = per_token_losses[finite]

    def lookup(self, ids):
        return self.losses[ids]

    def _seen(self):
        return self.losses[np.isfinite(self.losses)]

    def seen_mean(self):
        """Mean latest loss over every pair seen so far; NaN before the first report."""
        seen = self._seen()
        return float(seen.mean(dtype=np.float64)) if len(seen) else float("nan")

    def seen_quantile(self, fraction):
        """The ``fraction`` quantile of the latest losses of every pair seen so far; NaN before the first report."""
        seen = self._seen()
        return float(np.quantile(seen, min(max(fraction, 0.0), 1.0))) if len(seen) else float("nan")

    def state_dict(self):
        return {"losses": torch.from_numpy(self.losses.copy())}

    def load_state_dict(self, state):
        losses = state["losses"]
        losses = losses.numpy() if isinstance(losses, torch.Tensor) else np.asarray(losses)
        if losses.shape != self.losses.shape:
            raise ValueError(f"loss table has {losses.shape[0]} pairs, the data has {self.losses.shape[0]}")
        self.losses = losses.astype(np.float32)


class LossHistory(LatestLossTable):
    """Each pair's latest and previous per-token loss and when it was last seen: its learning progress.

    A pair's *progress* is the relative fall of its loss between its last two visits,
    ``(previous - latest) / previous``. Its label is *still learning* when that progress is above the
    running mean progress of the reported pairs (an exponential moving average per step with decay
    ``mean_decay``, each pair weighted by ``1 / p_keep`` so that the selection does not move it). A
    learned pair (low, flat loss) and an unlearnable one (high, flat loss: a misaligned or noisy pair)
    both fall below it. The label is *fresh* while the pair's last visit is at most ``fresh_steps``
    reports old; the clock is the number of ``submit`` calls (one per training step).

    Memory: 12 bytes per pair.
    """

    def __init__(self, num_pairs, mean_decay=0.9, fresh_steps=0):
        super().__init__(num_pairs)
        self.previous = np.full(int(num_pairs), np.nan, dtype=np.float32)
        self.last_step = np.full(int(num_pairs), -1, dtype=np.int32)
        self.step = 0
        self.mean_decay = float(mean_decay)
        self.fresh_steps = int(fresh_steps)
        self.progress_mean = float("nan")

    def submit(self, ids, per_token_losses, keep_prob=None):
        ids = np.asarray(ids, dtype=np.int64)
        per_token_losses = np.asarray(per_token_losses, dtype=np.float32)
        finite = np.isfinite(per_token_losses)
        ids, per_token_losses = ids[finite], per_token_losses[finite]
        self.previous[ids] = self.losses[ids]
        self.losses[ids] = per_token_losses
        self.last_step[ids] = self.step
        self.step += 1
        progress = self.progress(ids)
        known = np.isfinite(progress)
        if known.any():
            batch_mean = selection_corrected_mean(
                progress[known], None if keep_prob is None else np.asarray(keep_prob)[finite][known])
            self.progress_mean = batch_mean if not np.isfinite(self.progress_mean) else (
                self.mean_decay * self.progress_mean + (1 - self.mean_decay) * batch_mean)

    def progress(self, ids):
        """Relative loss fall between the last two visits; NaN for a pair seen fewer than twice."""
        previous, latest = self.previous[ids].astype(np.float64), self.losses[ids].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(previous > 0, (previous - latest) / previous, np.nan)

    def learning_labels(self, ids):
        """1.0 (still learning) or 0.0 for each pair, NaN where its progress or the mean is unknown."""
        progress = self.progress(ids)
        if not np.isfinite(self.progress_mean):
            return np.full(len(progress), np.nan)
        return np.where(np.isfinite(progress), (progress > self.progress_mean).astype(np.float64), np.nan)

    def fresh_labels(self, ids):
        """``learning_labels`` where the pair was seen within ``fresh_steps`` reports, NaN elsewhere."""
        labels = self.learning_labels(ids)
        stale = (self.last_step[ids] < 0) | (self.step - self.last_step[ids] > self.fresh_steps)
        labels[stale] = np.nan
        return labels

    def state_dict(self):
        return {**super().state_dict(), "previous": torch.from_numpy(self.previous.copy()),
                "last_step": torch.from_numpy(self.last_step.copy()), "step": self.step,
                "progress_mean": self.progress_mean}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        previous, last_step = (value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
                               for value in (state["previous"], state["last_step"]))
        self.previous = previous.astype(np.float32)
        self.last_step = last_step.astype(np.int32)
        self.step = int(state["step"])
        self.progress_mean = float(state["progress_mean"])
