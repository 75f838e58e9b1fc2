"""How well the Assistant predicts what it has not learned from yet (no fairseq import).

In a corpus seen only a few times a pair's own latest loss is often missing, and the Assistant's prediction is all
a rule has. ``PredictionQuality`` measures that prediction where it matters: the ROC AUC of the Assistant's
P(informative), taken just before it learns from a batch, against the label the Boss's fresh losses then give,
separately for pairs it has never learned from (``new``: every pair of the first pass) and for the others
(``seen``). The scores are binned (``BINS`` bins of [0, 1]) and the counts decay by ``decay`` per batch, so the
figure follows the Assistant over the last few hundred batches; ties within a bin count half.
"""

import numpy as np
import torch

from ..compat import checkpointed_array

BINS = 64
# A kind of pair (new or seen) under this share of the recent pairs has no AUC: decay shrinks old counts but keeps
# their ratios, so without it the figure of a pass that had new pairs would be repeated through the passes after.
MIN_RECENT_SHARE = 0.01


def binned_auc(negatives, positives):
    """P(a positive scores above a negative) from per-bin counts (ties within a bin count half); NaN
    without both."""
    total = negatives.sum() * positives.sum()
    if total <= 0:
        return float("nan")
    below = np.cumsum(negatives) - negatives
    return float((positives * (below + 0.5 * negatives)).sum() / total)


class PredictionQuality:
    def __init__(self, num_pairs, decay=0.99):
        self.decay = decay
        self.seen = np.zeros(num_pairs, dtype=bool)
        self.counts = np.zeros((2, 2, BINS))  # [seen before][label][score bin]

    def add(self, ids, scores, labels):
        """One batch's predictions (made before learning from it) and labels; then its pairs count as seen."""
        ids = np.asarray(ids, dtype=np.int64)
        bins = np.minimum((np.clip(scores, 0.0, 1.0) * BINS).astype(np.int64), BINS - 1)
        self.counts *= self.decay
        np.add.at(self.counts, (self.seen[ids].astype(np.int64), (np.asarray(labels) > 0.5).astype(np.int64), bins), 1)
        self.seen[ids] = True

    def auc(self, seen):
        """The windowed AUC on pairs learned from before (``seen``) or never (not ``seen``); NaN while that kind
        is under ``MIN_RECENT_SHARE`` of the recent pairs."""
        if self.counts[int(seen)].sum() < MIN_RECENT_SHARE * self.counts.sum():
            return float("nan")
        negatives, positives = self.counts[int(seen)]
        return binned_auc(negatives, positives)

    def state_dict(self):
        return {"seen": torch.from_numpy(np.packbits(self.seen)), "counts": torch.from_numpy(self.counts.copy())}

    def load_state_dict(self, state):
        bits = checkpointed_array(state["seen"], np.uint8)
        self.seen = np.unpackbits(bits, count=len(self.seen)).astype(bool)
        self.counts = checkpointed_array(state["counts"], np.float64)
