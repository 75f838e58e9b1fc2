"""Keep probabilities of each selection policy and the schedule that switches selection on and off.

Every rule returns, for a set of candidate pairs, the probability of keeping each one. The selector
clips them once with ``clip_keep_probabilities``, so that every pair keeps a non-zero chance and an
importance weight ``1 / p`` stays at most ``1 / min_keep_prob`` whatever the rule.
"""

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..option_fields import option


def clip_keep_probabilities(keep_prob, min_keep_prob):
    """Keep probabilities in ``[min_keep_prob, 1]``; NaN (a rule that cannot tell) keeps the pair."""
    keep_prob = np.nan_to_num(np.asarray(keep_prob, dtype=np.float64), nan=1.0)
    return np.clip(keep_prob, min_keep_prob, 1.0)


def assistant_keep_probabilities(informative_prob, confidence, base_prob):
    """The paper's rule: ``b + (1 - b) * p`` with ``b = max(base_prob, 1 - confidence)``.

    An Assistant with low confidence filters little; a NaN prediction or confidence keeps the pair.
    """
    if not np.isfinite(confidence):
        confidence = 0.0
    floor = max(base_prob, 1.0 - float(confidence))
    informative_prob = np.nan_to_num(np.asarray(informative_prob, dtype=np.float64), nan=1.0)
    return floor + (1.0 - floor) * np.clip(informative_prob, 0.0, 1.0)


def uniform_keep_probabilities(num_pairs, keep_prob):
    return np.full(num_pairs, keep_prob, dtype=np.float64)


def infobatch_keep_probabilities(latest_losses, mean_loss, prune_ratio):
    """InfoBatch (ICLR 2024): pairs whose latest loss is below ``mean_loss`` (the mean over every
    seen pair of the corpus, not only the candidates) are kept with probability ``1 - prune_ratio``;
    unseen pairs (NaN), the rest, and every pair while no mean is known are kept."""
    latest_losses = np.asarray(latest_losses, dtype=np.float64)
    keep = np.ones(len(latest_losses))
    if np.isfinite(mean_loss):
        keep[np.isfinite(latest_losses) & (latest_losses < mean_loss)] = 1.0 - prune_ratio
    return keep


def self_paced_keep_probabilities(latest_losses, threshold):
    """Self-paced learning: keep the pairs whose per-token loss is at or below ``threshold`` (a
    quantile of the whole corpus' latest losses that grows over training); the others get 0 (the
    selector's floor); unseen pairs (NaN), and every pair while no threshold is known, are kept."""
    latest_losses = np.asarray(latest_losses, dtype=np.float64)
    keep = np.ones(len(latest_losses))
    if np.isfinite(threshold):
        keep[np.isfinite(latest_losses) & (latest_losses > threshold)] = 0.0
    return keep


def loss_percentile_keep_probabilities(percentiles, power):
    """Selective Backprop (Jiang et al., 2019): keep a pair with ``percentile ** power``, the percentile
    of its latest per-token loss among every seen pair's; unseen pairs (NaN) are kept. The mean keep
    probability is about ``1 / (power + 1)``."""
    percentiles = np.asarray(percentiles, dtype=np.float64)
    return np.where(np.isfinite(percentiles), np.clip(percentiles, 0.0, 1.0) ** power, 1.0)


def difficulty_shares(difficulty):
    """Each pair's share of the corpus that is at most as difficult as it, in (0, 1] (ties in index order)."""
    order = np.argsort(np.asarray(difficulty), kind="stable")
    shares = np.empty(len(order), dtype=np.float32)
    shares[order] = np.arange(1, len(order) + 1, dtype=np.float64) / max(len(order), 1)
    return shares


def longest_keep_probabilities(length_shares, longest_share, base_prob):
    """A control for rules that skip long pairs: the pairs among the longest ``longest_share`` of the corpus (by
    their ``difficulty_shares`` of target length) are kept with ``base_prob``, every other pair always."""
    return np.where(np.asarray(length_shares) > 1.0 - longest_share, base_prob, 1.0)


def competence(progress, start, full_at):
    """Platanios et al. (NAACL 2019)'s square-root competence: the share of the pairs, easiest first, open to
    training at ``progress`` (the fraction of training done): ``start`` at 0, every pair from ``full_at`` on."""
    return min(1.0, math.sqrt(progress / full_at * (1.0 - start ** 2) + start ** 2))


def competence_keep_probabilities(shares, competence_now):
    """Competence-based curriculum: keep the pairs whose difficulty share (``difficulty_shares``) is within
    the current competence; the others get 0 (the selector's floor)."""
    return np.where(np.asarray(shares) <= competence_now, 1.0, 0.0)


@dataclass
class SelectionSchedule:
    """When selection is active: after ``warmup_epochs`` and before the annealing phase.

    The annealing phase is the final ``anneal_fraction`` of training, measured in updates when
    ``max_update`` is set (> 0) and in epochs otherwise; with neither set there is no annealing.
    """

    warmup_epochs: int = option(1, "epochs at the start that train on every pair", minimum=0)
    anneal_fraction: float = option(
        0.0, "train on every pair for this final fraction of --max-update (or of --max-epoch when --max-update "
        "is not set)", minimum=0, maximum=1)
    max_epoch: int = 0
    max_update: int = 0

    def progress(self, epoch: int, num_updates: Optional[int] = None) -> Optional[float]:
        """Fraction of training done: by updates when ``max_update`` is set, else by epochs
        (epoch e starts at (e - 1) / max_epoch); None when neither limit is set."""
        if self.max_update > 0 and num_updates is not None:
            return num_updates / self.max_update
        if self.max_epoch > 0:
            return (epoch - 1) / self.max_epoch
        return None

    def selection_active(self, epoch: int, num_updates: Optional[int] = None) -> bool:
        if epoch <= self.warmup_epochs:
            return False
        if self.anneal_fraction <= 0:
            return True
        progress = self.progress(epoch, num_updates)
        return progress is None or progress < 1.0 - self.anneal_fraction
