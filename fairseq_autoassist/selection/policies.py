"""The selection policies, one registry entry each (no fairseq import).

A policy is its keep rule (from ``keep_rules``) and what it needs: the Assistant worker, a table of
per-pair losses (``loss_table``: how to build it), whether the Assistant learns that table's labels
instead of the paper's, and whether its kept pairs' losses always carry importance weights.
Adding a policy is one ``Policy`` entry in ``POLICIES`` plus its rule; ``--autoassist-policy``,
its help text, the selector and the task's wiring all read the registry.

A rule is ``keep(selector, indices, progress) -> keep probabilities, or None to keep every pair``,
where ``selector`` offers ``options``, ``assistant()`` (the Assistant to score with) and ``loss_table`` and
``progress`` is the
fraction of training done (None when neither ``--max-update`` nor ``--max-epoch`` is set).
Rules do not clip: the selector applies ``--autoassist-min-keep-prob`` to every rule's output once.
"""

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .keep_rules import (
    assistant_keep_probabilities,
    competence,
    competence_keep_probabilities,
    difficulty_shares,
    infobatch_keep_probabilities,
    longest_keep_probabilities,
    loss_percentile_keep_probabilities,
    self_paced_keep_probabilities,
    uniform_keep_probabilities,
)
from .loss_table import LatestLossTable, LossBand, LossHistory, ReducibleLoss, SharedByNearDuplicates, reference_losses


def _latest_losses(num_pairs, options, steps_per_pass, mean_decay, groups):
    return LatestLossTable(num_pairs)


def _loss_history(num_pairs, options, steps_per_pass, mean_decay, groups):
    return LossHistory(num_pairs, mean_decay=mean_decay, fresh_steps=round(options.progress_fresh_passes * steps_per_pass),
                       steps_per_pass=steps_per_pass)


def _loss_band(num_pairs, options, steps_per_pass, mean_decay, groups):
    return LossBand(num_pairs, options.learned_quantile, options.unlearnable_quantile, mean_decay=mean_decay)


def _reducible_loss(num_pairs, options, steps_per_pass, mean_decay, groups):
    return ReducibleLoss(reference_losses(options.reference_scores, num_pairs), options.reducible_quantile,
                         mean_decay=mean_decay, fresh_steps=round(options.reducible_fresh_passes * steps_per_pass))


def _source_rarity(target_sizes, pair_features):
    return pair_features().source_rarity()


def _target_length(target_sizes, pair_features):
    return target_sizes


def _loss_band_of_near_duplicates(num_pairs, options, steps_per_pass, mean_decay, groups):
    return SharedByNearDuplicates(_loss_band(num_pairs, options, steps_per_pass, mean_decay, groups), groups)


# How the stream cuts batches: "sorted", each chunk's kept pairs sorted by --autoassist-packing and the batches
# shuffled within the chunk; "as-released", the first pass in fairseq's length order (short to long), later passes in
# their shuffled order, batches cut in visiting order (lengths mixed) and trained in that order.
BATCHINGS = ("sorted", "as-released")


@dataclass(frozen=True)
class Policy:
    name: str
    help: str
    keep: Optional[Callable] = None  # None: no selection, the stock translation task
    needs_assistant: bool = False
    # ``loss_table(num_pairs, options, steps_per_pass, mean_decay, groups) -> table``, None: no table.
    loss_table: Optional[Callable] = None
    always_weighted: bool = False
    learns_table_labels: bool = False  # the Assistant learns the loss table's labels, not the paper's
    # ``difficulty(target_sizes, pair_features) -> one value per pair`` that ranks the pairs for the rule
    # (``difficulty_shares``; ``pair_features``: f() -> PairFeatures), None: no ranking.
    difficulty: Optional[Callable] = None
    needs_groups: bool = False  # every pair's group of near-duplicates (PairFeatures.near_duplicate_groups)
    paced: bool = False  # the rule follows the fraction of training done: needs --max-update or --max-epoch
    # Which Assistant learns (``runtime.AutoAssistRuntime._build_worker``): this project's ("adagrad") or the authors'
    # code as released ("released").
    assistant: str = "adagrad"
    # The per-token loss the Assistant and the loss table receive: the label-smoothed training loss (as released)
    # instead of the negative log-likelihood.
    smoothed_loss: bool = False
    # The batches of ``--autoassist-batching by-policy`` (``BATCHINGS``).
    batching: str = "sorted"

    @property
    def own_loss_decides_once_seen(self):
        """Whether a pair's own loss, once it has one, decides instead of the Assistant (which then predicts only
        for pairs not yet seen)."""
        return self.keep is _own_label_or_assistant

    def difficulty_shares(self, target_sizes, pair_features):
        """Every pair's difficulty share for a rule that ranks the pairs, None for the others; ``pair_features`` is
        called only by a ranking that needs the features."""
        if self.difficulty is None:
            return None
        return difficulty_shares(self.difficulty(target_sizes, pair_features))

    def build_loss_table(self, num_pairs, options, steps_per_pass, mean_decay, groups=None):
        if self.loss_table is None:
            return None
        return self.loss_table(num_pairs, options, steps_per_pass, mean_decay, groups)


def _assistant(selector, indices, progress):
    """The Assistant's prediction decides for every pair, in the paper's rule (the label it learns: the paper's,
    or the loss table's when the policy ``learns_table_labels``)."""
    assistant = selector.assistant()
    selector.count_decisions(0, len(indices))
    return assistant_keep_probabilities(assistant.predict(indices), assistant.confidence, selector.options.base_prob)


def _uniform(selector, indices, progress):
    return uniform_keep_probabilities(len(indices), selector.options.uniform_keep_prob)


def _own_label_or_assistant(selector, indices, progress):
    """A pair's own label from its recent losses (the loss table's) where it is fresh, the Assistant's
    prediction of that label where it is stale or missing; either in the paper's rule ``b + (1 - b) p``.
    (A ``LossBand``'s labels never go stale: its relative losses stay comparable over training.)"""
    options = selector.options
    own = selector.loss_table.fresh_labels(indices)
    assistant = selector.assistant()
    predicted = assistant_keep_probabilities(assistant.predict(indices), assistant.confidence, options.base_prob)
    from_own = assistant_keep_probabilities(np.nan_to_num(own), 1.0, options.base_prob)
    selector.count_decisions(np.isfinite(own).sum(), len(indices))
    return np.where(np.isfinite(own), from_own, predicted)


def _every_pair(selector, indices, progress):
    return None


def _infobatch(selector, indices, progress):
    options, table = selector.options, selector.loss_table
    if progress is not None and progress >= options.infobatch_delta:
        return None
    return infobatch_keep_probabilities(table.lookup(indices), table.seen_mean(), options.infobatch_prune_ratio)


def _loss_percentile(selector, indices, progress):
    table = selector.loss_table
    return loss_percentile_keep_probabilities(table.seen_percentiles(table.lookup(indices)),
                                              selector.options.percentile_power)


def _self_paced(selector, indices, progress):
    options, table = selector.options, selector.loss_table
    start = options.spl_start_fraction
    keep_fraction = start + (1.0 - start) * min(progress or 0.0, 1.0)
    return self_paced_keep_probabilities(table.lookup(indices), table.seen_quantile(keep_fraction))


def _competence(selector, indices, progress):
    options = selector.options
    return competence_keep_probabilities(
        selector.difficulty[indices], competence(progress or 0.0, options.competence_start, options.competence_full_at))


def _skip_longest(selector, indices, progress):
    options = selector.options
    return longest_keep_probabilities(selector.difficulty[indices], options.longest_share, options.base_prob)


POLICIES = {
    policy.name: policy
    for policy in (
        Policy("assistant", "AutoAssist: the Assistant's P(informative) in the paper's rule", _assistant,
               needs_assistant=True),
        Policy("released", "AutoAssist as the authors released it for translation: their features, plain SGD with "
               "L2 0.1 on every weight, label above the previous pass's mean label-smoothed loss, plain-accuracy "
               "confidence, batches as released (fairseq_autoassist/assistant/released.py)", _assistant,
               needs_assistant=True, assistant="released", smoothed_loss=True, batching="as-released"),
        Policy("progress", "learning progress: skip pairs whose loss has stopped falling, learned or unlearnable; "
               "own recent losses where fresh, the Assistant's prediction elsewhere", _own_label_or_assistant,
               needs_assistant=True, loss_table=_loss_history, learns_table_labels=True),
        Policy("learnable", "skip learned pairs (loss below the running --autoassist-learned-quantile) and "
               "unlearnable ones (loss above the running --autoassist-unlearnable-quantile: misaligned, "
               "untranslated, wrong-language pairs), both relative to the corpus' loss when measured; a pair's own "
               "latest loss once seen, the Assistant's prediction before", _own_label_or_assistant, needs_assistant=True, loss_table=_loss_band,
               learns_table_labels=True),
        Policy("predicted-learnable", "learnable's label, but the Assistant's prediction of it decides for every pair, "
               "seen or not: for features that see what a pair's own loss cannot (--autoassist-pair-features)",
               _assistant, needs_assistant=True, loss_table=_loss_band, learns_table_labels=True),
        Policy("near-duplicates", "for redundant corpora: the learnable rule with one latest loss shared by "
               "near-duplicate pairs (an identical source or target sentence, such as several translations of one "
               "sentence), so a pair whose sibling the Boss has just learned counts as learned; the Assistant "
               "predicts for groups not yet seen. Meant with --autoassist-learned-quantile above 0",
               _own_label_or_assistant, needs_assistant=True, loss_table=_loss_band_of_near_duplicates,
               learns_table_labels=True, needs_groups=True),
        Policy("reducible", "RHO-LOSS: skip pairs with little reducible loss (the Boss's latest loss minus a "
               "reference model's, --autoassist-reference-scores), below the running --autoassist-reducible-quantile: "
               "learned pairs and noise alike; a pair's own reducible loss while fresh, the Assistant's prediction "
               "before and after", _own_label_or_assistant, needs_assistant=True, loss_table=_reducible_loss,
               learns_table_labels=True),
        Policy("uniform", "keep each pair with --autoassist-uniform-keep-prob, a control", _uniform),
        Policy("skip-longest", "keep the longest --autoassist-longest-share of the pairs (by target length) only "
               "with --autoassist-base-prob, every other pair always: a static control for rules that skip long "
               "pairs", _skip_longest, difficulty=_target_length),
        Policy("infobatch", "InfoBatch: prune below-mean-loss pairs, rescale the kept ones", _infobatch,
               loss_table=_latest_losses, always_weighted=True),
        Policy("loss-percentile", "Selective Backprop: keep each pair with the percentile of its latest loss among "
               "all pairs' to the power --autoassist-percentile-power", _loss_percentile, loss_table=_latest_losses),
        Policy("spl", "self-paced learning: the easiest seen pairs first", _self_paced, loss_table=_latest_losses,
               paced=True),
        Policy("competence", "competence-based curriculum (Platanios et al., 2019): the pairs of rarest source "
               "sentences open last, on a square-root schedule", _competence, difficulty=_source_rarity, paced=True),
        Policy("keep-all", "every pair, through the plugin's iterator: batches cut anew every pass from chunks of a "
               "fresh shuffle, packed by --autoassist-packing (the stock task cuts its batches once)", _every_pair),
        Policy("none", "every pair, exactly like --task translation"),
    )
}


def policy_names():
    return tuple(POLICIES)
