"""The latest per-token loss of every pair, for the loss-based peer policies (InfoBatch, SPL)."""

import numpy as np
import torch


class LatestLossTable:
    """One float per pair; NaN until the Boss has reported a loss for the pair."""

    def __init__(self, num_pairs):
        self.losses = np.full(int(num_pairs), np.nan, dtype=np.float32)

    def submit(self, ids, per_token_losses):
        per_token_losses = np.asarray(per_token_losses, dtype=np.float32)
        finite = np.isfinite(per_token_losses)
        self.losses[np.asarray(ids)[finite]] = per_token_losses[finite]

    def lookup(self, ids):
        return self.losses[ids]

    def state_dict(self):
        return {"losses": torch.from_numpy(self.losses.copy())}

    def load_state_dict(self, state):
        losses = state["losses"]
        losses = losses.numpy() if isinstance(losses, torch.Tensor) else np.asarray(losses)
        if losses.shape != self.losses.shape:
            raise ValueError(f"loss table has {losses.shape[0]} pairs, the data has {self.losses.shape[0]}")
        self.losses = losses.astype(np.float32)
