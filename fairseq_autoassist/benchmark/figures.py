"""Every figure of a benchmark run, from its validations, against the stock runs of its seed (no fairseq import).

One pipeline and one definition of each figure:

* A run's points are all its validations by update count (every ``--validate-interval-updates`` and each epoch
  end), each with the target tokens trained on by then (``with_tokens``). Its best validation figure is ``best``
  over all of them, and its test BLEU comes from the checkpoint saved at that validation (``arms.training_args``
  saves one at every validation; fairseq keeps the best as ``checkpoint_best.pt``).
* Cost is counted in updates and in target tokens: the plugin's batches carry more target tokens per update than
  the stock task's, so a ratio of updates alone flatters it. Given each arm's isolated seconds per update on its
  own batches (``scripts/benchmark_overhead.py``), also in seconds.
* The budget frontier of a seed: its stock runs that anneal at their budgets (the budget-matched baselines and
  the full baseline), each at its cost and its best figure. An arm's cost is set against the cost at which the
  frontier reaches the arm's figure, interpolated between budgets linearly in the logarithm of the cost: a
  concave curve through the measured points, where a straight line between two points of a concave learning
  curve lies below it and overstates what a stock run needs. A figure below the smallest budget's gives a ratio
  of at least the arm's cost over that budget's (``BELOW``: no saving it can measure), one above the full
  baseline's a ratio of at most the arm's cost over the full run's (``ABOVE``); an arm that never reaches the
  stock run's best validation BLEU, at least its whole cost over the cost at which the stock run did. Such a ratio
  is a ``Bound`` at its limit, and every mean counts every seed, bounds included (``summarize``).
* Seconds are updates times each arm's isolated time per update over the stock task's, timed by the one timing
  rule (``scripts/benchmark_overhead.py``: every arm of a preset together, in at least three sessions): the median
  session's, and the range over the sessions beside it (``_low``, ``_high``).
"""

import math
import statistics

import numpy as np

from .arms import arm_spec, budget_matched, timed_as

BELOW, ABOVE = "below", "above"
COSTS = ("updates", "target_tokens")
# Timing sessions the one timing rule needs for a range (scripts/benchmark_overhead.py).
MIN_TIMING_SESSIONS = 3


class Bound(float):
    """A ratio known only from one side: the true ratio is at least this value (``side`` BELOW: the arm falls
    short of what the measured stock runs reach) or at most it (``side`` ABOVE: beyond them)."""

    def __new__(cls, value, side):
        bound = super().__new__(cls, value)
        bound.side = side
        return bound


def best(points, key):
    """The best ``key`` over every validation of ``points``: the highest BLEU or the lowest loss (None if none)."""
    values = [point[key] for point in points if point.get(key) is not None]
    if not values:
        return None
    return min(values) if key == "valid_loss" else max(values)


def best_checkpoint_tested(run):
    """Whether ``run``'s test BLEU is that of the checkpoint of its best validation BLEU: recorded
    (``test_checkpoint_updates``, from scripts/evaluate_bleu.py, at a validation of the best BLEU) or, for a run
    recorded before that, implied (every validation at an epoch end, each with its checkpoint, fairseq keeping the
    best). A run validated between epoch ends without a checkpoint there was tested on an epoch end's."""
    top = best(run["validations"], "valid_bleu")
    if top is None:
        return False
    tested = run.get("test_checkpoint_updates")
    if tested is not None:
        return any(point["updates"] == tested and point["valid_bleu"] == top for point in run["validations"])
    epoch_ends = {row["updates"] for row in run.get("epochs", [])}
    return all(point["updates"] in epoch_ends for point in run["validations"])


def best_checkpoint_test_bleu(run):
    """The test BLEU of ``run``'s best checkpoint, None where another checkpoint was tested."""
    return run.get("test_bleu") if best_checkpoint_tested(run) else None


# The measures on which an arm is placed on the budget frontier, each a score where higher is better (None where
# the run lacks it). Greedy validation BLEU moves by up to 0.9 between neighbouring validations on Multi30K; the
# lowest validation loss and the beam-5 test BLEU of the best checkpoint check whether a saving it shows is real.
MEASURES = {
    "valid_bleu": lambda run: best(run["validations"], "valid_bleu"),
    "valid_loss": lambda run: None if best(run["validations"], "valid_loss") is None
    else -best(run["validations"], "valid_loss"),
    "test_bleu": best_checkpoint_test_bleu,
}


def measures(runs):
    """MEASURES, and the test BLEU of each further test set the runs were scored on (``other_test_bleu``, such as
    another domain's: a second opinion on a saving), as ``test_bleu_NAME``."""
    names = sorted({name for run in runs for name in run.get("other_test_bleu") or {}})
    return {**MEASURES, **{f"test_bleu_{name}": _other_test_bleu(name) for name in names}}


def _other_test_bleu(name):
    """The further test set ``name``'s BLEU of a run's best checkpoint (tested on the same checkpoint as its test)."""
    return lambda run: (run.get("other_test_bleu") or {}).get(name) if best_checkpoint_tested(run) else None


def with_validations(run):
    """``run`` with its validations; a run recorded before they were (validated at epoch ends only) gets its
    epoch ends'."""
    if "validations" in run:
        return run
    return dict(run, validations=[{"updates": row["updates"], "valid_loss": row["valid_loss"],
                                   "valid_bleu": row["valid_bleu"]} for row in run["epochs"]])


def with_tokens(run):
    """The run's validations, each with the target tokens trained on by its update count (interpolated within an
    epoch from the totals at the epoch ends). Batches are capped by tokens, so tokens per update hardly drift
    within an epoch: on TVsub's one-pass runs (a single epoch) the sum of the log's per-interval ``wpb`` placed every
    validation within 0.2% of this, the selecting arms' included."""
    updates = [0] + [row["updates"] for row in run.get("epochs", [])]
    tokens = [0.0] + [row["target_tokens"] for row in run.get("epochs", [])]
    return [dict(point, target_tokens=float(np.interp(point["updates"], updates, tokens)) if len(updates) > 1
                 else None) for point in run["validations"]]


def run_cost(run, cost):
    """What ``run`` spent in all: its updates or its target tokens."""
    if cost == "updates":
        return run["validations"][-1]["updates"] if run["validations"] else None
    return run["epochs"][-1]["target_tokens"] if run.get("epochs") else None


def first_reaching(points, key, level):
    """``key`` (updates or target tokens) at which validation BLEU first reaches ``level``, interpolated."""
    previous = None
    for point in points:
        if point["valid_bleu"] is not None and point["valid_bleu"] >= level:
            if previous is None or previous["valid_bleu"] is None or previous[key] is None:
                return point[key]
            fraction = (level - previous["valid_bleu"]) / max(point["valid_bleu"] - previous["valid_bleu"], 1e-9)
            return previous[key] + fraction * (point[key] - previous[key])
        previous = point
    return None


def bleu_at(points, limit, key="updates"):
    """The best validation BLEU of ``points`` whose ``key`` is at most ``limit``."""
    return best([point for point in points if point[key] <= limit + 1e-9], "valid_bleu")


def _ratio(value, reference):
    return value / reference if value is not None and reference else None


def budget_frontier(stock_runs, score, cost="updates"):
    """``[(cost, score)]`` of the stock runs of one seed that anneal at their budgets, in budget order, each at its
    whole cost and its ``score`` as a running maximum (a larger budget buys at least what a smaller one does);
    None where a run lacks the score or the cost, or without a budget-matched baseline beside the full one."""
    runs = sorted(stock_runs, key=lambda run: arm_spec(run["arm"]).get("budget", 1.0))
    scores = [score(run) for run in runs]
    costs = [run_cost(run, cost) for run in runs]
    if None in scores or None in costs or len(runs) < 2:
        return None
    frontier, highest = [], float("-inf")
    for spent, value in zip(costs, scores):
        highest = max(highest, value)
        frontier.append((spent, highest))
    return frontier


def frontier_ratio(spent, value, frontier):
    """``spent`` over the cost at which ``frontier`` reaches ``value`` (linear in the logarithm of the cost between
    budgets); where ``value`` lies outside it, a ``Bound`` at the frontier's nearer end."""
    if value < frontier[0][1]:
        return Bound(spent / frontier[0][0], BELOW)
    if value > frontier[-1][1]:
        return Bound(spent / frontier[-1][0], ABOVE)
    for (low_cost, low), (high_cost, high) in zip(frontier, frontier[1:]):
        if low <= value <= high:
            share = (value - low) / (high - low) if high > low else 0.0
            return spent / math.exp(math.log(low_cost) + share * (math.log(high_cost) - math.log(low_cost)))
    return spent / frontier[0][0]


def beats(points, reach, reference, target, limit):
    """Whether an arm with validations ``points``, first reaching ``target`` at ``reach`` updates, beats the
    budget-matched baseline ``reference``: reaches the target before it does, or stands above the reference's
    best BLEU by ``limit`` updates."""
    reference_reach = first_reaching(reference["validations"], "updates", target)
    reference_final = bleu_at(reference["validations"], limit) or 0.0
    earlier = reach is not None and (reference_reach is None or reach < reference_reach)
    return float(earlier or (bleu_at(points, limit) or 0.0) > reference_final)


def on_frontier(arm):
    return arm == "baseline" or budget_matched(arm)


def derive(runs, budget, bleu_levels=(), time_per_update=None):
    """Every figure of each arm against the stock runs of the same seed, then mean and spread over seeds
    (``summarize``). ``budget``: the preset's updates; ``time_per_update``: optional ``{arm: {"median", "low",
    "high"}}``, each arm's isolated time per update over the stock task's, in the median session and the range
    over the sessions (``scripts/benchmark.py``'s ``read_time_per_update``), which adds the cost in seconds."""
    time_per_update = time_per_update or {}
    baselines = {run["seed"]: run for run in runs if run["arm"] == "baseline" and run["validations"]}
    matched = {(run["seed"], arm_spec(run["arm"])["budget"]): run for run in runs
               if budget_matched(run["arm"]) and run["validations"]}
    scores = measures(runs)
    frontiers = {}
    for seed, base in baselines.items():
        stock = [base] + [run for (run_seed, _), run in matched.items() if run_seed == seed]
        for measure, score in scores.items():
            for cost in COSTS:
                frontiers[(seed, measure, cost)] = budget_frontier(stock, score, cost)
    per_arm = {}
    for run in runs:
        base = baselines.get(run["seed"])
        if base is None or not run["validations"]:
            continue
        timing = time_per_update.get(timed_as(run["arm"]))
        figures = run_figures(run, base, budget, bleu_levels, timing)
        figures.update(budget_comparisons(run, base, matched, budget))
        if not on_frontier(run["arm"]):
            figures.update(frontier_figures(run, frontiers, timing, scores,
                                            time_per_update.get("baseline", {}).get("seconds")))
        per_arm.setdefault(run["arm"], []).append(figures)
    return summarize(per_arm)


def frontier_figures(run, frontiers, timing, scores, baseline_seconds=None):
    """``run`` on its seed's budget frontiers, per measure of ``scores`` and cost (``frontier_ratio``), and in
    seconds (``in_seconds``) when the arm's ``timing`` is known; for an arm that selects by a reference model's
    scores, also with the reference models' cost counted as its own (``_with_reference``; the columns without it
    are the cost amortized over many runs), in seconds where ``baseline_seconds``, the stock task's isolated
    seconds per update, is known too."""
    figures = {}
    reference = run.get("reference_cost")
    for measure, score in scores.items():
        value = score(run)
        for cost in COSTS:
            frontier = frontiers[(run["seed"], measure, cost)]
            if frontier and value is not None:
                figures[f"frontier_{cost}_{measure}"] = frontier_ratio(run_cost(run, cost), value, frontier)
                if reference:
                    figures[f"frontier_{cost}_{measure}_with_reference"] = frontier_ratio(
                        run_cost(run, cost) + reference[cost], value, frontier)
        figures.update(in_seconds(f"frontier_seconds_{measure}", figures.get(f"frontier_updates_{measure}"), timing))
        frontier = frontiers[(run["seed"], measure, "updates")]
        if reference and timing and baseline_seconds and frontier and value is not None:
            extra = reference_in_stock_updates(reference, baseline_seconds)
            for suffix, stat in RANGE.items():
                figures[f"frontier_seconds_{measure}_with_reference{suffix}"] = frontier_ratio(
                    run_cost(run, "updates") * timing[stat] + extra, value, frontier)
    return figures


def reference_in_stock_updates(reference, baseline_seconds):
    """The reference models' cost in the stock task's isolated updates: their own updates (stock training with the
    recipe's batches), plus their scoring's wall seconds over the stock task's seconds per update (the scoring's
    seconds are those the reference command measured, on whatever else the machine ran: an upper bound)."""
    return reference["updates"] + reference["score_seconds"] / baseline_seconds


RANGE = {"": "median", "_low": "low", "_high": "high"}


def in_seconds(key, by_updates, timing):
    """A ratio of updates ``by_updates`` in seconds: times the arm's time per update over the stock task's in the
    median timing session (``key``) and at the ends of their range (``key_low``, ``key_high``); {} without both."""
    if by_updates is None or timing is None:
        return {}
    side = getattr(by_updates, "side", None)
    return {key + suffix: Bound(by_updates * timing[stat], side) if side else by_updates * timing[stat]
            for suffix, stat in RANGE.items()}


def reach_ratio(points, base_points, cost, level, spent):
    """``cost`` at which ``points`` first reach validation BLEU ``level`` over the baseline's; for an arm that
    never does, at least its whole cost ``spent`` over the baseline's (a ``Bound``); None where the baseline never
    reaches ``level``."""
    reference = first_reaching(base_points, cost, level) if level is not None else None
    if not reference:
        return None
    reach = first_reaching(points, cost, level)
    if reach is None:
        return Bound(spent / reference, BELOW) if spent else None
    return reach / reference


def level_key(cost, level):
    return f"{cost}_ratio_at_bleu_{level:g}"


def run_figures(run, base, budget, bleu_levels, timing):
    """The figures of ``run`` on its own and against the full baseline ``base`` of its seed."""
    points, base_points = with_tokens(run), with_tokens(base)
    target = best(base_points, "valid_bleu")
    target = target if target and target > 0 else None  # a baseline that never scored gives no target
    spent_updates, spent_tokens = run_cost(run, "updates"), run_cost(run, "target_tokens")
    figures = {
        "target_bleu": target,
        "best_valid_bleu": best(points, "valid_bleu"),
        "lowest_valid_loss": best(points, "valid_loss"),
        "test_bleu": best_checkpoint_test_bleu(run),
        "tokens_per_update": _ratio(spent_tokens, spent_updates),
        "tokens_per_update_ratio": _ratio(_ratio(spent_tokens, spent_updates),
                                          _ratio(run_cost(base, "target_tokens"), run_cost(base, "updates"))),
        "bleu_by_0.6": bleu_at(points, 0.6 * budget),
        "bleu_by_0.8": bleu_at(points, 0.8 * budget),
        "bleu_by_end": bleu_at(points, budget),
        "final_valid_loss": points[-1]["valid_loss"],
    }
    for cost in COSTS:
        spent = run_cost(run, cost)
        figures[f"{cost}_ratio"] = reach_ratio(points, base_points, cost, target, spent)
        for level in bleu_levels:
            figures[level_key(cost, level)] = reach_ratio(points, base_points, cost, level, spent)
    if timing is not None:
        figures["seconds_per_update_ratio"] = timing["median"]
        figures.update(in_seconds("seconds_ratio", figures["updates_ratio"], timing))
    epochs = run.get("epochs", [])
    if epochs and epochs[-1].get("selection_cpu_share") is not None:
        figures["selection_cpu_share"] = epochs[-1]["selection_cpu_share"]
    # The share is logged (not NaN) only in epochs where a rule consulted the Assistant: not in a warm-up epoch.
    consulted = [row for row in epochs if row.get("own_loss_share") is not None]
    if consulted:
        figures["own_loss_share"] = statistics.mean(row["own_loss_share"] for row in consulted)
        for key in ("assistant_auc_new", "assistant_auc_seen"):
            aucs = [row[key] for row in consulted if row.get(key) is not None]
            if aucs:
                figures[key] = statistics.mean(aucs)
    selecting = [row for row in epochs[1:] if row.get("kept_share_noisy") is not None]
    if selecting:
        # After the first epoch, which trains on every pair in every preset.
        figures["kept_share_noisy"] = statistics.mean(row["kept_share_noisy"] for row in selecting)
        figures["kept_share_clean"] = statistics.mean(row["kept_share_clean"] for row in selecting)
    if run is base:
        figures["plateau_gain"] = (target or 0.0) - (bleu_at(points, 0.75 * budget) or 0.0)
    return figures


def budget_comparisons(run, base, matched, budget):
    """Whether a run that is not a budget-matched baseline beats the one of 0.8 of the budget and, for an
    ``ARM@FRACTION``, the one of its own budget (``beats``)."""
    if budget_matched(run["arm"]):
        return {}
    target = best(base["validations"], "valid_bleu")
    reach = first_reaching(run["validations"], "updates", target)
    fractions = {"beats_budget_0.8": 0.8}
    own_budget = arm_spec(run["arm"]).get("budget", 1.0)
    if own_budget < 1:
        fractions["beats_same_budget"] = own_budget
    figures = {}
    for key, fraction in fractions.items():
        reference = matched.get((run["seed"], fraction))
        if reference is not None:
            figures[key] = beats(run["validations"], reach, reference, target, fraction * budget)
    return figures


def summarize(per_arm):
    """Per arm and figure, over the seeds to which the figure applies (absent where it does not): the mean and
    spread of every seed's value, bounds included, how many seeds have one (``reached``; None: not measured) and
    how many of them are a ``Bound`` of each side (``below``: at least; ``above``: at most)."""
    summary = {}
    for arm, seeds in per_arm.items():
        summary[arm] = {}
        for key in dict.fromkeys(key for figures in seeds for key in figures):
            applying = [figures[key] for figures in seeds if key in figures]
            values = [value for value in applying if isinstance(value, (int, float))]
            summary[arm][key] = {
                "mean": statistics.mean(map(float, values)) if values else None,
                "spread": float(max(values) - min(values)) if len(values) > 1 else 0.0,
                "reached": len(values), "seeds": len(applying),
                "below": sum(getattr(value, "side", None) == BELOW for value in values),
                "above": sum(getattr(value, "side", None) == ABOVE for value in values),
            }
    return summary
