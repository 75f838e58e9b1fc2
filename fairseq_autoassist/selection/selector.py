"""The selector: turns a policy, its schedule and (for AutoAssist) the Assistant into kept pairs."""

from dataclasses import dataclass

import numpy as np

from .keep_rules import (
    SelectionSchedule,
    assistant_keep_probabilities,
    infobatch_keep_probabilities,
    self_paced_keep_probabilities,
    uniform_keep_probabilities,
)
from .sampling import draw_keep_mask


@dataclass
class SelectionOptions:
    policy: str = "assistant"
    base_prob: float = 0.5
    min_keep_prob: float = 0.05
    uniform_keep_prob: float = 0.7
    importance_weighting: bool = False
    infobatch_prune_ratio: float = 0.5
    infobatch_delta: float = 0.875
    spl_start_fraction: float = 0.5

    @property
    def weighted(self):
        """Whether kept pairs' losses carry importance weights ``1 / p_keep``: InfoBatch is
        defined with its rescaling; the others weight only when asked."""
        return self.importance_weighting or self.policy == "infobatch"


class Selector:
    """Calling contract: ``select`` is called by the batch stream for each chunk (and again for the
    same chunk when an epoch is planned, with the same random draws); ``num_updates`` is kept
    current by the training loop so that update-based annealing knows where training is.

    ``worker`` (an Assistant worker, see ``fairseq_autoassist.worker``) is needed by the
    ``assistant`` policy, ``loss_table`` (a ``LatestLossTable``) by ``infobatch`` and ``spl``.
    """

    def __init__(self, options: SelectionOptions, schedule: SelectionSchedule, seed: int, worker=None,
                 loss_table=None):
        if options.policy == "assistant" and worker is None:
            raise ValueError("the assistant policy needs an Assistant worker")
        if options.policy in ("infobatch", "spl") and loss_table is None:
            raise ValueError(f"the {options.policy} policy needs a loss table")
        self.loss_table = loss_table
        self.options = options
        self.schedule = schedule
        self.seed = int(seed)
        self.worker = worker
        self.num_updates = 0

    def keep_probabilities(self, indices, epoch):
        """Per-pair keep probability for ``indices``; all ones outside the selection phase."""
        if not self.schedule.selection_active(epoch, self.num_updates):
            return None
        policy = self.options.policy
        if policy == "assistant":
            if not self.worker.healthy:
                return None
            assistant = self.worker.snapshot()
            return assistant_keep_probabilities(
                assistant.predict(indices),
                assistant.confidence,
                self.options.base_prob,
                self.options.min_keep_prob,
            )
        if policy == "uniform":
            return uniform_keep_probabilities(
                len(indices), self.options.uniform_keep_prob, self.options.min_keep_prob
            )
        progress = self.schedule.progress(epoch, self.num_updates)
        if policy == "infobatch":
            if progress is not None and progress >= self.options.infobatch_delta:
                return None
            return infobatch_keep_probabilities(
                self.loss_table.lookup(indices), self.loss_table.seen_mean(),
                self.options.infobatch_prune_ratio, self.options.min_keep_prob,
            )
        if policy == "spl":
            start = self.options.spl_start_fraction
            keep_fraction = start + (1.0 - start) * min(progress or 0.0, 1.0)
            return self_paced_keep_probabilities(
                self.loss_table.lookup(indices), self.loss_table.seen_quantile(keep_fraction),
                self.options.min_keep_prob,
            )
        raise ValueError(f"unknown selection policy {policy!r}")

    def select(self, indices, epoch, pass_index, chunk):
        """The kept pairs of ``indices`` and the probability each was kept with (None: all kept)."""
        keep_prob = self.keep_probabilities(indices, epoch)
        if keep_prob is None:
            return indices, None
        mask = draw_keep_mask(keep_prob, self.seed, pass_index, chunk)
        return indices[mask], keep_prob[mask].astype(np.float32)
