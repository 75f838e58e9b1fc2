"""The benchmark's tables (Markdown) and plots, from ``figures``' summary and the runs' records."""

import math
import os
import re
import statistics

import numpy as np

from .arms import arm_spec, in_table_order, timed_as
from .figures import COSTS, MEASURES, best_checkpoint_tested, level_key, run_cost, with_tokens


def cell(stat, digits=2):
    """A table cell: the mean over every seed with a value (± half the range), ">= " or "<= " where some of them are
    only bounds of one side (an arm short of or beyond what the stock runs measure), and n beside a mean that is not
    over all seeds; "-" where the figure does not apply to the arm (``stat`` None)."""
    if stat is None:
        return "-"
    if stat["mean"] is None:
        return "not measured"
    below, above = stat.get("below", 0), stat.get("above", 0)
    text = (">= " if below and not above else "<= " if above and not below else "") + f"{stat['mean']:.{digits}f}"
    if stat["reached"] > 1:
        text += f" ± {stat['spread'] / 2:.{digits}f}"
    notes = [f"n={stat['reached']} of {stat['seeds']}"] if stat["reached"] < stat["seeds"] else []
    if below and above:
        notes.append(f"{below} at least, {above} at most: no bound")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def seconds_cell(figures, key, digits=2):
    """The cell of a seconds figure ``key`` of one arm's ``figures``: the median timing session's, and the range
    over the sessions in brackets."""
    if key not in figures:
        return "-"
    low, high = figures.get(key + "_low"), figures.get(key + "_high")
    if low is None or high is None or low["mean"] is None:
        return cell(figures[key], digits)
    return f"{cell(figures[key], digits)} [{low['mean']:.{digits}f}-{high['mean']:.{digits}f}]"


def bucket_labels(edges, unit=""):
    """Names of the buckets ``np.searchsorted(edges, values, side="left")`` numbers (upper ends inclusive):
    ``<= a``, then ``a+1-b`` between whole-number edges (``a-b`` otherwise), ..., ``> z``."""
    labels, low = [], None
    for edge in edges:
        if low is None:
            labels.append(f"<= {edge}{unit}")
        else:
            start = low + 1 if float(low).is_integer() and float(edge).is_integer() else low
            labels.append(f"{start}-{edge}{unit}")
        low = edge
    return labels + [f"> {low}{unit}"]


def _row(arm, cells):
    return f"| {arm} | " + " | ".join(cells) + " |"


def main_table(summary, timed):
    """Against the full stock baseline of the same seed."""
    header = ["arm", "target tokens per update (ratio)", "updates to the baseline's best", "target tokens to it"]
    header += ["seconds to it (isolated s/update)"] if timed else []
    header += ["best valid BLEU", "lowest valid loss", "test BLEU (beam 5, best checkpoint)", "BLEU by 0.6 of the budget",
               "by 0.8", "by the end", "final valid loss", "beats the 0.8 budget baseline",
               "beats the baseline of its own budget", "baseline gain in the last quarter"]
    lines = [_row(header[0], header[1:]), "|---" * len(header) + "|"]
    for arm in in_table_order(summary):
        s = summary[arm]
        cells = [cell(s["tokens_per_update_ratio"], 3), cell(s["updates_ratio"]), cell(s["target_tokens_ratio"])]
        cells += [seconds_cell(s, "seconds_ratio")] if timed else []
        cells += [cell(s["best_valid_bleu"]), cell(s["lowest_valid_loss"], 3), cell(s["test_bleu"]),
                  cell(s["bleu_by_0.6"]), cell(s["bleu_by_0.8"]), cell(s["bleu_by_end"]), cell(s["final_valid_loss"], 3),
                  cell(s.get("beats_budget_0.8")), cell(s.get("beats_same_budget")), cell(s.get("plateau_gain"))]
        lines.append(_row(arm, cells))
    return lines


def frontier_table(summary, timed):
    """Each arm on the budget frontier of the stock baselines, by each measure and cost (MEASURES first, then
    the further test sets' BLEU that the summary holds)."""
    costs = COSTS + (("seconds",) if timed else ())
    prefix = f"frontier_{COSTS[0]}_"
    further = sorted({key[len(prefix):] for figures in summary.values() for key in figures
                      if key.startswith(prefix) and key[len(prefix):] not in MEASURES})
    shown = [*MEASURES, *further]
    header = [f"by {measure.replace('_', ' ')}: {cost.replace('_', ' ')}" for measure in shown for cost in costs]
    rows = [_row(arm, [seconds_cell(summary[arm], f"frontier_{cost}_{measure}") if cost == "seconds"
                       else cell(summary[arm].get(f"frontier_{cost}_{measure}")) for measure in shown for cost in costs])
            for arm in in_table_order(summary) if any(key.startswith("frontier_") for key in summary[arm])]
    return [_row("arm", header), "|---" * (len(header) + 1) + "|", *rows] if rows else []


def _tokens_per_update_sentence(summary):
    """What the plugin's batches hold per update against the stock task's, from the summary's own figures."""
    ratios = [summary[arm]["tokens_per_update_ratio"]["mean"] for arm in summary
              if arm_spec(arm)["policy"] is not None and summary[arm]["tokens_per_update_ratio"]["mean"] is not None]
    if not ratios:
        return "no arm of the plugin here"
    return (f"the plugin's batches here carry {min(ratios):.2f}-{max(ratios):.2f} of the stock task's target tokens "
            "per update, so ratios of updates alone would misstate them")


def markdown(summary, record, machine, budget, bleu_levels=(), timed=False):
    """The tables of ``summary``; ``record``: the ``command`` that trained the runs and, when their figures were
    recomputed later, the command that did (``rescored_with``)."""
    arms = in_table_order(summary)
    lines = [f"Command: `{record['command']}`", ""]
    if "rescored_with" in record:
        lines += [f"Figures recomputed from the recorded runs with: `{record['rescored_with']}`", ""]
    lines += [
        f"Machine: {machine}", "",
        "Every figure comes from every validation of a run (one definition of \"best\"), mean ± half the range "
        "over every seed; \">= \" or \"<= \": some seeds give only a bound there (an arm that never reaches a level "
        "counts as reaching it at its end, one outside the frontier of stock budgets at its end), n=k of m: only k "
        "seeds have the figure. Ratios are against the stock translation task of the same seed, by updates and by "
        f"target tokens trained on ({_tokens_per_update_sentence(summary)})"
        + ("; seconds are updates times each arm's isolated time per update on its own batches over the stock "
           "task's (scripts/benchmark_overhead.py: every arm of the preset timed together in several sessions), in "
           "the median session, [the range over the sessions] beside it: a saving in seconds holds only where the "
           "whole range is under 1; never the wall time of runs that shared a machine" if timed else
           "; no time column: give --seconds-per-update the output of scripts/benchmark_overhead.py")
        + f". Every arm trains {budget} updates but a budget-matched baseline and an ARM@FRACTION, which train for "
        "that fraction of them. The test BLEU is that of the checkpoint of the best validation BLEU; a run tested on "
        "another checkpoint has none (the table of tested checkpoints below).", "",
        *main_table(summary, timed),
    ]
    frontier = frontier_table(summary, timed)
    if frontier:
        lines += [
            "", "The budget frontier: the cost at which a stock baseline annealing at that budget reaches the arm's "
            "best validation BLEU, its lowest validation loss or its test BLEU, interpolated between the budget-matched "
            "and the full baselines of its seed linearly in the logarithm of the cost; the arm's cost over that (under "
            "1: it saves). \">= \": some seeds fall below the smallest budget's figure, and count at the arm's cost over "
            "that budget's; \"<= \": some stand above the full baseline's, where the frontier cannot say what a stock run "
            "would need, and count at the arm's cost over the full run's. Every seed is counted.", "",
            *frontier]
    noisy = [arm for arm in arms if "kept_share_noisy" in summary[arm]]
    if noisy:
        lines += ["", "Kept share after the first epoch (mean over the epochs), of the corrupted and of the clean pairs:",
                  "", "| arm | corrupted pairs kept | clean pairs kept |", "|---|---|---|"]
        lines += [_row(arm, [cell(summary[arm]["kept_share_noisy"]), cell(summary[arm]["kept_share_clean"])])
                  for arm in noisy]
    deciding = [arm for arm in arms if "own_loss_share" in summary[arm]]
    if deciding:
        lines += ["", "Who decides, in the epochs where a rule consults the Assistant (mean over them): the share of pairs "
                  "decided by their own latest loss (the rest by the Assistant's prediction), and the Assistant's AUC, "
                  "before it learns from a batch, against the label the Boss's losses then give, on pairs it never "
                  "learned from and on pairs it learned from in an earlier pass (a pass visits each pair once; each AUC "
                  "follows the last few hundred batches, so a pass without new pairs shows, for its first few hundred "
                  "updates, the AUC on the previous pass' last new ones):", "",
                  "| arm | decided by their own loss | AUC on pairs never learned from | AUC on pairs from earlier passes |",
                  "|---|---|---|---|"]
        lines += [_row(arm, [cell(summary[arm].get(key)) for key in ("own_loss_share", "assistant_auc_new",
                                                                     "assistant_auc_seen")]) for arm in deciding]
    measured = [arm for arm in arms if "selection_cpu_share" in summary[arm]]
    if measured:
        lines += ["", "CPU seconds spent choosing pairs and in the Assistant's thread, as a share of the training "
                  "process' CPU seconds (the last process of a resumed run):", "", "| arm | selection CPU share |",
                  "|---|---|"]
        lines += [_row(arm, [cell(summary[arm]["selection_cpu_share"], 4)]) for arm in measured]
    if bleu_levels:
        header = [f"{cost.replace('_', ' ')} to BLEU {level:g}" for level in bleu_levels for cost in COSTS]
        lines += ["", "Update and target-token ratios to fixed validation BLEU levels:", "", _row("arm", header),
                  "|---" * (len(header) + 1) + "|"]
        lines += [_row(arm, [cell(summary[arm][level_key(cost, level)]) for level in bleu_levels for cost in COSTS])
                  for arm in arms]
    return "\n".join(lines) + "\n"


def _per_run_table(runs, title, run_cell):
    """A table of one cell per arm (rows) and seed (columns), ``run_cell(run)``, "-" where the seed has no run."""
    seeds = sorted({run["seed"] for run in runs})
    lines = ["", title, "", "| arm | " + " | ".join(f"seed {seed}" for seed in seeds) + " |",
             "|---|" + "---|" * len(seeds)]
    by_key = {(run["arm"], run["seed"]): run for run in runs}
    for arm in in_table_order(run["arm"] for run in runs):
        lines.append(_row(arm, ["-" if (arm, seed) not in by_key else run_cell(by_key[(arm, seed)])
                                for seed in seeds]))
    return "\n".join(lines) + "\n"


def test_checkpoint_table(runs):
    """Per arm and seed, the update count of the checkpoint whose test BLEU the run reports, and whether it is the
    best validation's (``figures.best_checkpoint_tested``; the others' test BLEU is left out of every figure)."""
    def where(run):
        updates = run.get("test_checkpoint_updates")
        return (f"{'an epoch end' if updates is None else updates}, "
                f"{'best' if best_checkpoint_tested(run) else 'not the best'}")

    return _per_run_table(runs, "The checkpoint each run was tested on (update count; \"best\": its best validation "
                          "BLEU's; \"not the best\": an epoch end's, so its test BLEU is left out):", where)


def peak_memory_table(runs):
    """Per arm and seed, the training process' peak resident memory (the largest over a resumed run's processes)."""
    def peak(run):
        return "not recorded" if run.get("peak_resident_mb") is None else f"{run['peak_resident_mb']:,}"

    return _per_run_table(runs, "Peak resident memory of each run's training process, MB (the largest over its "
                          "resumptions; not recorded before 2026-12-04):", peak)


MAX_UPDATE_COLUMNS = 10


def equal_update_table(runs, interval):
    """Validation loss and BLEU of every arm at the multiples of ``interval``, mean over the seeds that
    reached each ("-" past an arm's budget): with fewer, longer epochs or more, shorter ones, arms compare
    at equal cost. At most MAX_UPDATE_COLUMNS columns: every k-th multiple, counted back from the last."""
    if not interval:
        return ""
    by_run = [{p["updates"]: p for p in run.get("validations", []) if p["updates"] % interval == 0} for run in runs]
    counts = sorted(set().union(*by_run))
    if not counts:
        return ""
    counts = counts[::-1][::math.ceil(len(counts) / MAX_UPDATE_COLUMNS)][::-1]
    lines = ["", "Validation loss / greedy BLEU at equal update counts (mean over seeds):", "",
             "| arm | " + " | ".join(str(u) for u in counts) + " |", "|---|" + "---|" * len(counts)]
    for arm in in_table_order(run["arm"] for run in runs):
        arm_points = [points for run, points in zip(runs, by_run) if run["arm"] == arm]
        if not arm_points:
            continue
        cells = []
        for updates in counts:
            reached = [points[updates] for points in arm_points if updates in points]
            cells.append(f"{statistics.mean(p['valid_loss'] for p in reached):.3f} / "
                         f"{statistics.mean(p['valid_bleu'] for p in reached):.2f}" if reached else "-")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def equal_token_table(runs, interval):
    """Validation loss of every arm at equal target tokens trained on, interpolated between its validations: the
    multiples of ``interval`` updates at the stock baseline's mean target tokens per update, and the most tokens that
    every run of the whole budget reaches (the common end, where every such arm compares on all its seeds). A cell
    is the mean over every seed of the arm, "-" where any seed's run does not span that count. At most
    MAX_UPDATE_COLUMNS multiples, as in ``equal_update_table``, and the common end."""
    stock = [run for run in runs if run["arm"] == "baseline" and run.get("epochs")]
    if not interval or not stock:
        return ""
    tokens_per_update = statistics.mean(run_cost(run, "target_tokens") / run_cost(run, "updates") for run in stock)
    step = interval * tokens_per_update
    curves = [[(p["target_tokens"], p["valid_loss"]) for p in with_tokens(run) if p["target_tokens"] is not None]
              for run in runs]
    longest = max((curve[-1][0] for curve in curves if curve), default=0.0)
    grid = [step * k for k in range(1, int(longest // step) + 1)]
    grid = grid[::-1][::max(1, math.ceil(len(grid) / MAX_UPDATE_COLUMNS))][::-1]
    whole_budget = [curve[-1][0] for run, curve in zip(runs, curves) if curve and "budget" not in arm_spec(run["arm"])]
    common_end = min(whole_budget) if whole_budget else None
    grid = sorted(set(grid) | ({common_end} if common_end else set()))
    if not grid:
        return ""
    lines = ["", "Validation loss at equal target tokens trained on (millions; interpolated between validations, "
             f"mean over every seed, \"-\" where a seed's run does not span it; one column per {interval} stock "
             "updates" + (f", and the common end of the runs of the whole budget, {common_end / 1e6:.3f}M, with each "
                          "seed's value" if common_end else "") + "):", "",
             "| arm | " + " | ".join(f"{tokens / 1e6:.2f}M" for tokens in grid) + " |", "|---|" + "---|" * len(grid)]
    for arm in in_table_order(run["arm"] for run in runs):
        arm_curves = [curve for run, curve in zip(runs, curves) if run["arm"] == arm and curve]
        cells = []
        for tokens in grid:
            spanning = [float(np.interp(tokens, *zip(*curve))) for curve in arm_curves
                        if curve[0][0] <= tokens <= curve[-1][0]]
            if not spanning or len(spanning) < len(arm_curves):
                cells.append("-")
                continue
            text = f"{statistics.mean(spanning):.3f}"
            if tokens == common_end and len(spanning) > 1:
                text += " (" + " / ".join(f"{value:.3f}" for value in spanning) + ")"
            cells.append(text)
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def epoch_steps(xs, ys):
    """The corners of a per-epoch figure drawn as steps: an epoch's value holds from the previous epoch's end (0
    for the first) to its own end ``xs[i]``, so a kept share reads as the pass it belongs to, not as a slope
    between two passes' ends."""
    step_xs, step_ys, start = [], [], 0
    for x, y in zip(xs, ys):
        step_xs += [start, x]
        step_ys += [y, y]
        start = x
    return step_xs, step_ys


SECONDS_LABEL = "seconds (updates times the arm's isolated time per update)"
# (records, x, y, x label, y label, file): every validation (with its target tokens), or per-epoch records.
PLOTS = (
    ("validations", "updates", "valid_bleu", "updates", "validation BLEU (greedy)", "bleu_vs_updates.png"),
    ("validations", "target_tokens", "valid_bleu", "target tokens trained on", "validation BLEU (greedy)",
     "bleu_vs_tokens.png"),
    ("validations", "target_tokens", "valid_loss", "target tokens trained on", "validation loss", "loss_vs_tokens.png"),
    ("epochs", "updates", "kept_share", "updates", "kept share of pairs", "kept_share.png"),
    ("validations", "seconds", "valid_bleu", SECONDS_LABEL, "validation BLEU (greedy)", "bleu_vs_seconds.png"),
    ("validations", "seconds", "valid_loss", SECONDS_LABEL, "validation loss", "loss_vs_seconds.png"),
)


def with_seconds(points, arm, time_per_update):
    """``points`` (validations) with the seconds their updates cost at the arm's isolated time per update (the stock
    task's seconds per update times the arm's ratio; in stock-task updates where the timing lacks seconds). A
    stock task's schedule variant updates as the stock task does (``timed_as``)."""
    ratio = time_per_update.get(timed_as(arm), {}).get("median")
    if ratio is None:
        return points
    stock_seconds = time_per_update.get("baseline", {}).get("seconds", 1.0)
    return [dict(point, seconds=point["updates"] * ratio * stock_seconds) for point in points]


def plot(runs, out, time_per_update=None):
    """The PLOTS of ``runs`` in ``out``; those against seconds only with ``time_per_update`` (the benchmark's
    ``read_time_per_update``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = in_table_order(run["arm"] for run in runs)
    colors = plt.get_cmap("tab10" if len(arms) <= 10 else "tab20").colors
    points = [dict(run, validations=with_seconds(with_tokens(run), run["arm"], time_per_update or {}))
              for run in runs]
    for records, x_key, y_key, xlabel, ylabel, name in PLOTS:
        if x_key == "seconds" and not time_per_update:
            continue
        figure, axis = plt.subplots(figsize=(7, 4.5))
        for arm_index, arm in enumerate(arms):
            arm_runs = [run for run in points if run["arm"] == arm and run[records] and x_key in run[records][0]]
            for i, run in enumerate(arm_runs):
                xs = [row[x_key] for row in run[records]]
                ys = [row[y_key] if row[y_key] is not None else float("nan") for row in run[records]]
                if records == "epochs":
                    xs, ys = epoch_steps(xs, ys)
                axis.plot(xs, ys, marker="o", markersize=3, label=arm if i == 0 else None,
                          color=colors[arm_index % len(colors)], alpha=0.8,
                          linestyle="--" if arm_spec(arm)["policy"] is None and arm != "baseline" else "-")
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        axis.legend(fontsize="small")
        axis.grid(alpha=0.3)
        figure.tight_layout()
        figure.savefig(os.path.join(out, name), dpi=100)
        plt.close(figure)


def describe_machine():
    """CPU model, cores, memory and GPU of this machine, for the results' record."""
    cpu = "unknown CPU"
    if os.path.isfile("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            models = re.findall(r"model name\s*:\s*(.+)", f.read())
        cpu = models[0].strip() if models else cpu
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{cpu}, {len(os.sched_getaffinity(0))} CPU cores, {memory_gib:.0f} GiB, {gpu}"
