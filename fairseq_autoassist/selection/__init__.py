"""Selection policies (``policies``: the registry), their keep rules, schedule and the seeded draw of
kept pairs; no fairseq import."""

from .keep_rules import (
    SelectionSchedule,
    assistant_keep_probabilities,
    clip_keep_probabilities,
    competence_keep_probabilities,
    difficulty_shares,
    infobatch_keep_probabilities,
    longest_keep_probabilities,
    loss_percentile_keep_probabilities,
    self_paced_keep_probabilities,
    uniform_keep_probabilities,
)
from .loss_table import LatestLossTable, LossBand, LossHistory, ReducibleLoss, SharedByNearDuplicates
from .policies import POLICIES, Policy
from .sampling import (
    batch_importance_weights,
    draw_keep_mask,
    importance_weights,
    local_generator,
    selection_corrected_mean,
    selection_corrected_quantile,
)
from .selector import SelectionOptions, Selector

__all__ = [
    "POLICIES",
    "LatestLossTable",
    "LossBand",
    "LossHistory",
    "Policy",
    "ReducibleLoss",
    "SharedByNearDuplicates",
    "competence_keep_probabilities",
    "difficulty_shares",
    "infobatch_keep_probabilities",
    "longest_keep_probabilities",
    "loss_percentile_keep_probabilities",
    "self_paced_keep_probabilities",
    "SelectionOptions",
    "SelectionSchedule",
    "Selector",
    "assistant_keep_probabilities",
    "clip_keep_probabilities",
    "uniform_keep_probabilities",
    "batch_importance_weights",
    "draw_keep_mask",
    "importance_weights",
    "local_generator",
    "selection_corrected_mean",
    "selection_corrected_quantile",
]
