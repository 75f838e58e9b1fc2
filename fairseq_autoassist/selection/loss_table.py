"""The latest per-token loss of every pair, for the loss-based peer policies (InfoBatch, SPL)."""

import numpy as np
import torch


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
