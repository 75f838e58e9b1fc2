"""The selector: turns a policy, its schedule and (for AutoAssist) the Assistant into kept pairs."""

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..option_fields import option
from .keep_rules import SelectionSchedule, clip_keep_probabilities
from .policies import POLICIES, policy_names
from .sampling import draw_keep_mask


def _policy_help():
    return "which training pairs the Boss sees: " + "; ".join(
        f"'{policy.name}' ({policy.help})" for policy in POLICIES.values())


@dataclass
class SelectionOptions:
    """Which pairs are kept (each field is an ``--autoassist-*`` option)."""

    # A plain str, not a ChoiceEnum: fairseq pickles the config into checkpoints and the dynamic enum
    # class does not pickle. The registry's names are checked by ``options.validate``.
    policy: str = option("assistant", _policy_help(), choices=policy_names)
    base_prob: float = option(
        0.5, "lowest keep probability of the paper's rule b + (1 - b) p, b = max(base_prob, 1 - confidence); "
        "confidence is balanced accuracy (0.5 at chance), so at base_prob >= 0.5 the confidence term never acts",
        minimum=0, maximum=1)
    min_keep_prob: float = option(
        0.05, "floor on every pair's keep probability (> 0), which also bounds importance weights by "
        "1 / min_keep_prob", minimum=0, maximum=1, exclude_minimum=True)
    uniform_keep_prob: float = option(0.7, "keep probability of the 'uniform' policy", minimum=0, maximum=1,
                                      exclude_minimum=True)
    longest_share: float = option(0.2, "skip-longest: share of the pairs, longest target first, kept only with "
                                  "--autoassist-base-prob", minimum=0, maximum=1)
    importance_weighting: bool = option(
        False, "weight each kept pair's loss by 1 / p_keep so that the expected gradient equals the full-data "
        "gradient (weights scaled to a mean of 1 per target token within each batch, so the gradient keeps "
        "its scale)")
    infobatch_prune_ratio: float = option(
        0.5, "infobatch: share r of the below-mean-loss pairs dropped each pass; the kept ones among them are "
        "weighted 1 / (1 - r)", minimum=0, maximum=1)
    infobatch_delta: float = option(
        0.875, "infobatch: prune during this first fraction of --max-update (or --max-epoch), then train on "
        "every pair", minimum=0, maximum=1)
    progress_fresh_passes: float = option(
        1.5, "progress: a pair's own learning progress decides while its last visit is at most this many passes "
        "old; older or missing, the Assistant's prediction of it decides", minimum=0)
    learned_quantile: float = option(
        0.0, "learnable: a pair whose latest loss is below this running quantile of the reported losses counts as "
        "learned (0: none)", minimum=0, maximum=1)
    unlearnable_quantile: float = option(
        0.8, "learnable: a pair whose latest loss is above this running quantile of the reported losses counts as "
        "unlearnable (1: none)", minimum=0, maximum=1)
    reference_scores: Optional[str] = option(
        None, "reducible: FILE of every training pair's loss under a reference model (the .npy of autoassist-score: "
        "a model trained on held-out data, or on the other half of the corpus)")
    reducible_quantile: float = option(
        0.3, "reducible: a pair whose reducible loss (the Boss's latest loss minus the reference's) is below this "
        "running quantile of the reported pairs' counts as not worth training (learned, or noise the reference "
        "cannot learn either)", minimum=0, maximum=1)
    reducible_fresh_passes: float = option(
        1.0, "reducible: a pair's own reducible loss decides while its latest loss is at most this many passes old; "
        "older or missing, the Assistant's prediction of its label decides", minimum=0)
    percentile_power: float = option(
        1.0, "loss-percentile: a pair is kept with (percentile of its latest loss) ** this power; the mean keep "
        "probability is about 1 / (power + 1)", minimum=0, exclude_minimum=True)
    competence_start: float = option(
        0.01, "competence: share of the pairs, easiest first by source rarity (the sum of the source tokens' IDF), "
        "open to training at the start; it grows as the square root of the fraction of training done",
        minimum=0, maximum=1, exclude_minimum=True)
    competence_full_at: float = option(
        0.5, "competence: fraction of --max-update (or --max-epoch) from which every pair is open", minimum=0,
        maximum=1, exclude_minimum=True)
    spl_start_fraction: float = option(
        0.5, "spl: share of the easiest seen pairs kept at the start; it grows linearly to 1 over --max-update "
        "(or --max-epoch)", minimum=0, maximum=1)

    @property
    def weighted(self):
        """Whether kept pairs' losses carry importance weights ``1 / p_keep``: always for a policy defined
        with its rescaling (InfoBatch), for the others only when asked."""
        return self.importance_weighting or POLICIES[self.policy].always_weighted


class Selector:
    """Calling contract: ``select`` is called by the batch stream for each chunk (and again for the
    same chunk when an epoch is planned, with the same random draws); ``num_updates`` and ``steps`` (training
    steps so far, each of --update-freq batches) are kept current by the training loop, so that update-based
    annealing knows where training is and the Assistant is the snapshot of ``steps`` (see ``worker``).

    ``worker`` (an Assistant worker, see ``fairseq_autoassist.worker``) is needed by the policies
    with ``needs_assistant``, ``loss_table`` (``policy.build_loss_table``) by those with a ``loss_table``,
    ``difficulty`` (``policy.difficulty_shares``) by those with a ``difficulty``.
    """

    def __init__(self, options: SelectionOptions, schedule: SelectionSchedule, seed: int, worker=None,
                 loss_table=None, difficulty=None):
        self.policy = POLICIES[options.policy]
        if self.policy.needs_assistant and worker is None:
            raise ValueError(f"the {options.policy} policy needs an Assistant worker")
        if self.policy.loss_table is not None and loss_table is None:
            raise ValueError(f"the {options.policy} policy needs a loss table")
        if self.policy.difficulty is not None and difficulty is None:
            raise ValueError(f"the {options.policy} policy needs every pair's difficulty "
                             f"({self.policy.difficulty.__name__.strip('_').replace('_', ' ')})")
        self.difficulty = difficulty
        self.loss_table = loss_table
        self.options = options
        self.schedule = schedule
        self.seed = int(seed)
        self.worker = worker
        self.num_updates = 0
        self.steps = 0
        # Of the pairs a rule with an Assistant scored in the current epoch: how many its own latest loss decided
        # (see count_decisions), so that the log shows the share pass by pass.
        self.own_decisions = 0
        self.decisions = 0
        self._decisions_epoch = None

    def assistant(self):
        """The Assistant a selection after ``steps`` training steps scores with."""
        return self.worker.snapshot(self.steps)

    def count_decisions(self, by_own_loss, pairs):
        """Called by a rule that uses the Assistant: of ``pairs`` scored, ``by_own_loss`` were decided by their
        own latest loss, the rest by the Assistant's prediction."""
        self.own_decisions += int(by_own_loss)
        self.decisions += int(pairs)

    @property
    def own_loss_share(self):
        """Share of the pairs scored in the current epoch that their own loss decided (NaN before any)."""
        return self.own_decisions / self.decisions if self.decisions else float("nan")

    def keep_probabilities(self, indices, epoch):
        """Per-pair keep probability for ``indices``; None (keep every pair) outside the selection phase."""
        if self.policy.keep is None or not self.schedule.selection_active(epoch, self.num_updates):
            return None
        if epoch != self._decisions_epoch:
            self._decisions_epoch, self.own_decisions, self.decisions = epoch, 0, 0
        return self.rule_keep_probabilities(indices, self.schedule.progress(epoch, self.num_updates))

    def rule_keep_probabilities(self, indices, progress):
        """The rule's keep probability for ``indices`` at ``progress`` (the schedule's fraction of training done)
        whether or not the schedule selects then; None where the rule keeps every pair."""
        keep_prob = self.policy.keep(self, indices, progress)
        if keep_prob is None:
            return None
        return clip_keep_probabilities(keep_prob, self.options.min_keep_prob)

    def select(self, indices, epoch, pass_index, chunk):
        """The kept pairs of ``indices`` and the probability each was kept with (None: all kept)."""
        keep_prob = self.keep_probabilities(indices, epoch)
        if keep_prob is None:
            return indices, None
        mask = draw_keep_mask(keep_prob, self.seed, pass_index, chunk)
        return indices[mask], keep_prob[mask].astype(np.float32)
