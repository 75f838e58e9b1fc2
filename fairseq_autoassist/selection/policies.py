"""The selection policies, one registry entry each (no fairseq import).

A policy is its keep rule (from ``keep_rules``) and what it needs: the Assistant worker, the table
of each pair's latest loss, and whether its kept pairs' losses always carry importance weights.
Adding a policy is one ``Policy`` entry in ``POLICIES`` plus its rule; ``--autoassist-policy``,
its help text, the selector and the task's wiring all read the registry.

A rule is ``keep(selector, indices, progress) -> keep probabilities, or None to keep every pair``,
where ``selector`` offers ``options``, ``worker`` and ``loss_table`` and ``progress`` is the
fraction of training done (None when neither ``--max-update`` nor ``--max-epoch`` is set).
"""

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .keep_rules import (
    assistant_keep_probabilities,
    infobatch_keep_probabilities,
    self_paced_keep_probabilities,
    uniform_keep_probabilities,
)


@dataclass(frozen=True)
class Policy:
    name: str
    help: str
    keep: Optional[Callable] = None  # None: no selection, the stock translation task
    needs_assistant: bool = False
    needs_loss_table: bool = False
    always_weighted: bool = False
    learns_progress: bool = False  # the Assistant learns LossHistory's learning-progress label


def _assistant(selector, indices, progress):
    if not selector.worker.healthy:
        return None
    assistant = selector.worker.snapshot()
    options = selector.options
    return assistant_keep_probabilities(
        assistant.predict(indices), assistant.confidence, options.base_prob, options.min_keep_prob
    )


def _uniform(selector, indices, progress):
    return uniform_keep_probabilities(len(indices), selector.options.uniform_keep_prob,
                                      selector.options.min_keep_prob)


def _learning_progress(selector, indices, progress):
    """A pair's own learning-progress label where it is fresh, the Assistant's prediction of that label
    where it is stale or missing; either in the paper's rule ``b + (1 - b) p``."""
    options = selector.options
    own = selector.loss_table.fresh_labels(indices)
    if selector.worker.healthy:
        assistant = selector.worker.snapshot()
        predicted = assistant_keep_probabilities(assistant.predict(indices), assistant.confidence,
                                                 options.base_prob, options.min_keep_prob)
    else:
        predicted = np.ones(len(indices))
    from_own = assistant_keep_probabilities(np.nan_to_num(own), 1.0, options.base_prob, options.min_keep_prob)
    return np.where(np.isfinite(own), from_own, predicted)


def _infobatch(selector, indices, progress):
    options, table = selector.options, selector.loss_table
    if progress is not None and progress >= options.infobatch_delta:
        return None
    return infobatch_keep_probabilities(table.lookup(indices), table.seen_mean(), options.infobatch_prune_ratio,
                                        options.min_keep_prob)


def _self_paced(selector, indices, progress):
    options, table = selector.options, selector.loss_table
    start = options.spl_start_fraction
    keep_fraction = start + (1.0 - start) * min(progress or 0.0, 1.0)
    return self_paced_keep_probabilities(table.lookup(indices), table.seen_quantile(keep_fraction),
                                         options.min_keep_prob)


POLICIES = {
    policy.name: policy
    for policy in (
        Policy("assistant", "AutoAssist: the Assistant's P(informative) in the paper's rule", _assistant,
               needs_assistant=True),
        Policy("progress", "learning progress: skip pairs whose loss has stopped falling, learned or unlearnable; "
               "own recent losses where fresh, the Assistant's prediction elsewhere", _learning_progress,
               needs_assistant=True, needs_loss_table=True, learns_progress=True),
        Policy("uniform", "keep each pair with --autoassist-uniform-keep-prob, a control", _uniform),
        Policy("infobatch", "InfoBatch: prune below-mean-loss pairs, rescale the kept ones", _infobatch,
               needs_loss_table=True, always_weighted=True),
        Policy("spl", "self-paced learning: the easiest seen pairs first", _self_paced, needs_loss_table=True),
        Policy("none", "every pair, exactly like --task translation"),
    )
}


def policy_names():
    return tuple(POLICIES)
