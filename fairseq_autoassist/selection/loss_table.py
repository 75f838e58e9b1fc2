"""Per-pair losses: the latest one (for the peers InfoBatch and SPL), and the tables that also label
each pair informative or not from its own losses (for the hybrid policies ``progress``,
``learnable`` and ``reducible``, whose Assistant learns those labels)."""

import os

import numpy as np
import torch

from ..compat import checkpointed_array
from ..errors import AutoAssistConfigError
from .sampling import selection_corrected_mean, selection_corrected_quantile


PERCENTILE_SAMPLE = 65536


def moving_average(running, value, decay):
    """An exponential moving average's next value: ``value`` itself while ``running`` is unknown (NaN)."""
    return value if not np.isfinite(running) else decay * running + (1 - decay) * value


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

    def seen_percentiles(self, values, sample=PERCENTILE_SAMPLE):
        """The share of seen latest losses below each of ``values`` (NaN where a value is NaN or nothing is
        seen), against at most ``sample`` of them, evenly strided: a sort per call stays cheap at any size."""
        seen = self._seen()
        values = np.asarray(values, dtype=np.float64)
        if not len(seen):
            return np.full(len(values), np.nan)
        reference = np.sort(seen[:: max(1, len(seen) // sample)])
        return np.where(np.isfinite(values), np.searchsorted(reference, values) / len(reference), np.nan)

    def state_dict(self):
        return {"losses": torch.from_numpy(self.losses.copy())}

    def load_state_dict(self, state):
        losses = checkpointed_array(state["losses"], np.float32)
        if losses.shape != self.losses.shape:
            raise ValueError(f"loss table has {losses.shape[0]} pairs, the data has {self.losses.shape[0]}")
        self.losses = losses


class LabelledLossTable(LatestLossTable):
    """A loss table that labels pairs: ``labels(ids)`` gives 1.0 (informative), 0.0 or NaN (unknown);
    ``fresh_labels(ids)`` only for pairs seen within ``fresh_steps`` reports (the clock counts ``submit``
    calls, one per training step; None: a label never goes stale), NaN for the others."""

    def __init__(self, num_pairs, fresh_steps=None):
        super().__init__(num_pairs)
        self.last_step = np.full(int(num_pairs), -1, dtype=np.int32)
        self.step = 0
        self.fresh_steps = fresh_steps

    def _record_visit(self, ids):
        self.last_step[ids] = self.step
        self.step += 1

    def labels(self, ids):
        raise NotImplementedError

    def fresh_labels(self, ids):
        labels = self.labels(ids)
        stale = self.last_step[ids] < 0
        if self.fresh_steps is not None:
            stale |= self.step - self.last_step[ids] > self.fresh_steps
        labels[stale] = np.nan
        return labels

    def state_dict(self):
        return {**super().state_dict(), "last_step": torch.from_numpy(self.last_step.copy()), "step": self.step}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.last_step = checkpointed_array(state["last_step"], np.int32)
        self.step = int(state["step"])


def _finite_pairs(ids, per_token_losses, keep_prob):
    ids = np.asarray(ids, dtype=np.int64)
    per_token_losses = np.asarray(per_token_losses, dtype=np.float32)
    finite = np.isfinite(per_token_losses)
    return ids[finite], per_token_losses[finite], None if keep_prob is None else np.asarray(keep_prob)[finite]


class LossHistory(LabelledLossTable):
    """Each pair's latest and previous per-token loss and when it was last seen: its learning progress.

    A pair's *progress* is the relative fall of its loss between its last two visits,
    ``(previous - latest) / previous``, per pass where the visits lie more than a pass apart (with
    ``steps_per_pass`` known): a pair skipped for several passes and seen again would otherwise show the
    fall of several passes and look like one still learning fast. Its label is *still learning* when
    that progress is above the running mean progress of the reported pairs (an exponential moving
    average per step with decay ``mean_decay``, each pair weighted by ``1 / p_keep`` so that the
    selection does not move it). A learned pair (low, flat loss) and an unlearnable one (high, flat
    loss: a misaligned or noisy pair) both fall below it.

    Memory: 16 bytes per pair.
    """

    def __init__(self, num_pairs, mean_decay=0.9, fresh_steps=0, steps_per_pass=None):
        super().__init__(num_pairs, fresh_steps)
        self.previous = np.full(int(num_pairs), np.nan, dtype=np.float32)
        self.previous_step = np.full(int(num_pairs), -1, dtype=np.int32)
        self.steps_per_pass = steps_per_pass
        self.mean_decay = float(mean_decay)
        self.progress_mean = float("nan")

    def submit(self, ids, per_token_losses, keep_prob=None):
        ids, per_token_losses, keep_prob = _finite_pairs(ids, per_token_losses, keep_prob)
        self.previous[ids] = self.losses[ids]
        self.losses[ids] = per_token_losses
        self.previous_step[ids] = self.last_step[ids]
        self._record_visit(ids)
        progress = self.progress(ids)
        known = np.isfinite(progress)
        if known.any():
            batch_mean = selection_corrected_mean(progress[known], None if keep_prob is None else keep_prob[known])
            self.progress_mean = moving_average(self.progress_mean, batch_mean, self.mean_decay)

    def progress(self, ids):
        """Relative loss fall between the last two visits, per pass beyond one pass apart; NaN for a pair
        seen fewer than twice."""
        previous, latest = self.previous[ids].astype(np.float64), self.losses[ids].astype(np.float64)
        passes_apart = 1.0
        if self.steps_per_pass:
            passes_apart = np.maximum(1.0, (self.last_step[ids] - self.previous_step[ids]) / self.steps_per_pass)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(previous > 0, (previous - latest) / previous / passes_apart, np.nan)

    def labels(self, ids):
        """1.0 (still learning) or 0.0 for each pair, NaN where its progress or the mean is unknown."""
        progress = self.progress(ids)
        if not np.isfinite(self.progress_mean):
            return np.full(len(progress), np.nan)
        return np.where(np.isfinite(progress), (progress > self.progress_mean).astype(np.float64), np.nan)

    def state_dict(self):
        return {**super().state_dict(), "previous": torch.from_numpy(self.previous.copy()),
                "previous_step": torch.from_numpy(self.previous_step.copy()), "progress_mean": self.progress_mean}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.previous = checkpointed_array(state["previous"], np.float32)
        self.previous_step = checkpointed_array(state["previous_step"], np.int32)
        self.progress_mean = float(state["progress_mean"])


class LossBand(LabelledLossTable):
    """Each pair's latest per-token loss relative to the corpus' at the time, against two running
    quantiles of those relative losses.

    A pair's *relative loss* is its per-token loss divided by the running median loss of the reported
    pairs when it was measured (the median, unlike the mean, does not move with the share of noisy pairs); unlike the loss itself it stays comparable while the corpus' loss
    falls, so a pair skipped for passes is judged by a figure of its own time, not against today's
    lower losses. A pair is *learnable and not yet learned* while its relative loss lies above the
    running ``lower_quantile`` (below it the pair is learned; 0 keeps every pair on that side) and
    below the running ``upper_quantile`` (above it the pair is among those the model fails on most:
    on a noisy corpus misaligned, untranslated and wrong-language pairs, whose loss stays high while
    the corpus' falls; 1 keeps every pair on that side). The median and both quantiles are exponential
    moving averages (decay ``mean_decay`` per step) of each step's figure, every pair weighted by
    ``1 / p_keep`` so that the selection's own choices do not move them.

    Memory: 8 bytes per pair.
    """

    def __init__(self, num_pairs, lower_quantile=0.0, upper_quantile=0.8, mean_decay=0.9):
        super().__init__(num_pairs)
        self.quantiles = (float(lower_quantile), float(upper_quantile))
        self.mean_decay = float(mean_decay)
        self.loss_median = float("nan")
        self.bounds = [float("nan"), float("nan")]

    def submit(self, ids, per_token_losses, keep_prob=None):
        """Stores each pair's relative loss (in ``losses``), then moves the running median and bounds."""
        ids, per_token_losses, keep_prob = _finite_pairs(ids, per_token_losses, keep_prob)
        self._record_visit(ids)
        if not len(ids):
            return
        self.loss_median = moving_average(self.loss_median,
                                           selection_corrected_quantile(per_token_losses, 0.5, keep_prob),
                                           self.mean_decay)
        relative = per_token_losses / max(self.loss_median, 1e-6)
        self.losses[ids] = relative
        for side, quantile in enumerate(self.quantiles):
            self.bounds[side] = moving_average(self.bounds[side],
                                               selection_corrected_quantile(relative, quantile, keep_prob),
                                               self.mean_decay)

    def labels(self, ids):
        """1.0 (within the band) or 0.0 for each pair, NaN where its loss or the band is unknown."""
        relative = self.losses[ids].astype(np.float64)
        if not np.isfinite(self.bounds).all():
            return np.full(len(relative), np.nan)
        lower = self.bounds[0] if self.quantiles[0] > 0 else -np.inf
        upper = self.bounds[1] if self.quantiles[1] < 1 else np.inf
        return np.where(np.isfinite(relative), ((relative > lower) & (relative < upper)).astype(np.float64), np.nan)

    def state_dict(self):
        return {**super().state_dict(), "loss_median": self.loss_median, "bounds": list(self.bounds)}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.loss_median = float(state["loss_median"])
        self.bounds = [float(bound) for bound in state["bounds"]]


class ReducibleLoss(LabelledLossTable):
    """Each pair's *reducible loss* (RHO-LOSS, Mindermann et al. 2022): the Boss's latest per-token loss minus the
    pair's loss under a reference model (``reference``, one float per pair; NaN: not scored). A pair the Boss has
    learned has a low latest loss; a pair that cannot be learned (misaligned, untranslated) has a high reference
    loss as well: both have a low reducible loss. A pair is *worth training* while its reducible loss lies above the
    running ``quantile`` of the reported pairs' (an exponential moving average per step with decay ``mean_decay``,
    each pair weighted by ``1 / p_keep``). Its own label is fresh for ``fresh_steps`` reports after its latest loss
    (a loss from passes ago overstates what is left to learn).

    Memory: 12 bytes per pair, the reference's 4 included.
    """

    def __init__(self, reference, quantile=0.3, mean_decay=0.9, fresh_steps=None):
        super().__init__(len(reference), fresh_steps)
        self.reference = np.asarray(reference, dtype=np.float32)
        self.quantile = float(quantile)
        self.mean_decay = float(mean_decay)
        self.threshold = float("nan")

    def reducible(self, ids):
        return self.losses[ids].astype(np.float64) - self.reference[ids]

    def submit(self, ids, per_token_losses, keep_prob=None):
        """Stores each pair's latest loss, then moves the running quantile of the reducible losses."""
        ids, per_token_losses, keep_prob = _finite_pairs(ids, per_token_losses, keep_prob)
        self._record_visit(ids)
        if not len(ids):
            return
        self.losses[ids] = per_token_losses
        reducible = self.reducible(ids)
        known = np.isfinite(reducible)
        if known.any():
            batch = selection_corrected_quantile(reducible[known], self.quantile,
                                                 None if keep_prob is None else keep_prob[known])
            self.threshold = moving_average(self.threshold, batch, self.mean_decay)

    def labels(self, ids):
        """1.0 (worth training) or 0.0 for each pair, NaN where its reducible loss or the threshold is unknown."""
        reducible = self.reducible(ids)
        if not np.isfinite(self.threshold):
            return np.full(len(reducible), np.nan)
        return np.where(np.isfinite(reducible), (reducible > self.threshold).astype(np.float64), np.nan)

    def state_dict(self):
        return {**super().state_dict(), "threshold": self.threshold}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.threshold = float(state["threshold"])


def reference_losses(path, num_pairs):
    """The reference scores of ``--autoassist-reference-scores`` (``autoassist-score``'s float32 .npy, one per
    training pair), refused with one line where missing or of another corpus."""
    flag = "--autoassist-reference-scores"
    if not path:
        raise AutoAssistConfigError(f"--autoassist-policy reducible needs {flag} FILE: score the training pairs with "
                                    "a reference model first (autoassist-score --checkpoint CKPT --data DATA)")
    if not os.path.isfile(path):
        raise AutoAssistConfigError(f"{flag} {path} does not exist; write it with autoassist-score")
    try:
        scores = np.load(path, mmap_mode="r")
    except ValueError as error:
        raise AutoAssistConfigError(f"{flag} {path} is not a .npy file of autoassist-score ({error})") from None
    if scores.shape != (num_pairs,):
        raise AutoAssistConfigError(f"{flag} {path} holds {scores.shape[0] if scores.ndim else 0} scores for "
                                    f"{num_pairs} training pairs; score this data folder's training split")
    return np.asarray(scores, dtype=np.float32)


class SharedByNearDuplicates:
    """A labelled loss table whose entries near-duplicate pairs share: every call maps a pair to its group
    (``PairFeatures.near_duplicate_groups``), so the latest loss of any pair of a group, such as another
    translation of the same sentence, stands for all of them. In a corpus seen a few times that gives a fresh
    measurement for pairs not yet visited this pass. Memory: the groups' 8 bytes per pair beside the table's."""

    def __init__(self, table, groups):
        self.table = table
        self.groups = np.asarray(groups, dtype=np.int64)

    def submit(self, ids, per_token_losses, keep_prob=None):
        self.table.submit(self.groups[np.asarray(ids, dtype=np.int64)], per_token_losses, keep_prob)

    def labels(self, ids):
        return self.table.labels(self.groups[np.asarray(ids, dtype=np.int64)])

    def fresh_labels(self, ids):
        return self.table.fresh_labels(self.groups[np.asarray(ids, dtype=np.int64)])

    def state_dict(self):
        return self.table.state_dict()

    def load_state_dict(self, state):
        self.table.load_state_dict(state)
