#!/usr/bin/env python
"""Side-by-side time-to-BLEU benchmark of the selection policies on one prepared corpus.

    python scripts/benchmark.py --preset smoke --out runs/benchmark-smoke
    python scripts/benchmark.py --preset multi30k-quick --data data-bin/multi30k.de-en --out runs/bench
    python scripts/benchmark.py --preset multi30k-quick ... --arms baseline assistant --seeds 1 2

Every arm uses the same model, optimizer, learning-rate schedule, batch size, seeds and number of
updates (the recipe of fairseq_autoassist/recipes.py with the preset's --max-update, no epoch limit, and
the preset's schedule: inverse_sqrt, or cosine to 0 at the budget in multi30k-long), except the
budget-matched baselines (``baseline-cosine-0.6``/``-0.8``: a fraction of the updates, the learning rate
decaying to 0 there), ``baseline-inverse-sqrt`` (the recipe's own schedule in a cosine preset) and any
``ARM@FRACTION`` of --arms (ARM for that fraction of the updates, its schedule ending there). One command runs
its arms and seeds one after another; two commands may share OUT when their runs differ (``--seeds 1`` and
``--seeds 2``, say), and ``--report`` tabulates every finished run in OUT without training. Each run
lives in OUT/runs/ARM-seedS/; a run that finished (its test BLEU is written, atomically) is skipped, an
interrupted one resumes from its last checkpoint (repaired from the best one when a kill truncated
it), so rerunning the same command after a kill at any moment continues where it stopped.

Per arm, seed and epoch it records training wall time without validation (fairseq's train_wall,
restored from the checkpoint on resume), cumulative target tokens and updates, validation loss and
BLEU (greedy) and the kept share; with --validate-interval-updates also every validation by update
count; at the end the test BLEU (beam 5) of the best checkpoint. Derived figures, against the baseline
of the same seed: time and tokens to reach the baseline's best validation BLEU, BLEU at the baseline's
training time, time per update; at equal update counts, updates to the baseline's best, BLEU by 0.6 and
0.8 of the budget, whether the arm beats the 0.8 budget-matched baseline (and an ARM@FRACTION the one of
its own budget), its updates against the budget frontier of the stock baselines, and the baseline's plateau;
mean and spread over seeds. Time figures are only meaningful from a run that had the machine to itself.
Outputs: OUT/results.json (every measurement), OUT/results.md (the tables and the command),
OUT/bleu_vs_updates.png, OUT/bleu_vs_time.png, OUT/bleu_vs_tokens.png, OUT/kept_share.png (against updates).
"""

import argparse
import json
import logging
import math
import os
import re
import shutil
import statistics
import sys

from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.raw_corpus import NOISE_LIST
from fairseq_autoassist.recipes import (
    ROOT,
    recipe,
    require_prepared,
    run_logged,
    write_atomically,
    write_synthetic_multi30k,
)

logger = logging.getLogger("benchmark")

# ``budget``: a budget-matched baseline trains for this fraction of the preset's updates with a cosine
# schedule whose learning rate reaches 0 exactly there ("No Train No Gain", NeurIPS 2023): a rule saves
# time only if it reaches the full baseline's best BLEU before such a baseline of the same budget does.
ARMS = {
    "baseline": {"policy": None},  # fairseq's stock translation task
    # The stock task with the recipe's own inverse_sqrt schedule, where a preset gives every arm another one.
    "baseline-inverse-sqrt": {"policy": None, "lr_scheduler": "inverse_sqrt"},
    "baseline-cosine-0.6": {"policy": None, "lr_scheduler": "cosine", "budget": 0.6},
    "baseline-cosine-0.8": {"policy": None, "lr_scheduler": "cosine", "budget": 0.8},
    "assistant": {"policy": "assistant"},
    "assistant-iw": {"policy": "assistant", "extra": ["--autoassist-importance-weighting"]},
    "infobatch": {"policy": "infobatch"},
    "uniform": {"policy": "uniform"},
    # The plugin's iterator without selection: batches rebuilt from a fresh shuffle every pass, as in every
    # selecting arm (the stock task fixes them once). Separates what the iterator does from what selection does.
    # ``loss_log``: records every step's per-pair losses in the run's losses.npy, for screening rules offline
    # with scripts/replay_selection.py. (Runs before the keep-all policy existed used uniform at keep probability
    # 1.0, which forms the same batches: tests/test_batch_stream.py.)
    "keep-all": {"policy": "keep-all", "loss_log": True},
    "spl": {"policy": "spl"},
    "progress": {"policy": "progress"},  # the learning-progress hybrid, the paper's keep floor 0.5
    "loss-percentile": {"policy": "loss-percentile"},  # Selective Backprop, keeping about half the pairs
    "competence": {"policy": "competence"},  # a curriculum by source rarity (Platanios et al., 2019)
    # Skips pairs whose loss, relative to the corpus' median when measured, is in the top 20% (the
    # unlearnable ones of a noisy corpus) down to a keep probability of 0.1 (scripts/replay_selection.py
    # chose these on a keep-all run of the noisy corpus; docs/results/benchmark-multi30k-noisy/).
    "learnable": {"policy": "learnable", "extra": ["--autoassist-base-prob", "0.1"]},
    # The uniform control at about the kept share of "learnable" on the noisy corpus.
    "uniform-0.85": {"policy": "uniform", "extra": ["--autoassist-uniform-keep-prob", "0.85"]},
}

# Every arm gets the same number of updates (``max_update``; no epoch limit), so an arm that drops
# pairs runs more, shorter epochs in about the same time and the curves compare at equal cost.
# ``bleu_levels``: the fixed validation BLEU levels whose time and token ratios are reported.
QUICK_ARMS = ["baseline", "assistant", "assistant-iw", "infobatch", "uniform", "spl"]
PRESETS = {
    # Tiny synthetic data written by the benchmark itself: exercises the whole pipeline in minutes.
    "smoke": dict(arch="tiny", max_update=60, max_tokens=400, lr=1e-3, warmup_updates=10, seeds=[1],
                  bleu_levels=[0.1], arms=list(ARMS), validate_interval_updates=20),
    # About 10 minutes per arm and seed on 2 CPU cores, so that all six arms and two seeds fit in about
    # two hours: four epochs of the full corpus at 2,048 tokens per batch.
    "multi30k-quick": dict(arch="small", max_update=1050, max_tokens=2048, lr=2e-3, warmup_updates=300,
                           seeds=[1, 2], bleu_levels=[10, 15, 20], arms=QUICK_ARMS),
    # Long training on 2 CPU cores, about 70 minutes per arm and seed: the quick preset's model for 8,000
    # updates (about 30 baseline epochs), validated every 500 updates, every arm on a cosine schedule that
    # reaches 0 at its budget. With the recipe's inverse_sqrt schedule the baseline still gained 1.18 BLEU
    # over the last quarter of 8,000 updates (seed 1; arm baseline-inverse-sqrt), far from a plateau
    # (under 0.5): a plateau within about an hour needs a schedule that decays, for every arm alike. Under such
    # a schedule a rule saves time only by ending earlier, so the rules train at 0.6 of the budget (RULE@0.6),
    # against the baseline of that budget; keep-all (the plugin's iterator without selection) at both budgets.
    # The rules were screened at @0.6 on seed 1; the best, learnable, runs with its random control at its kept
    # share (uniform-0.85); baseline-inverse-sqrt ran once, for seed 1 (--report gathers every run).
    "multi30k-long": dict(arch="small", max_update=8000, max_tokens=2048, lr=2e-3, warmup_updates=300,
                          lr_scheduler="cosine", seeds=[1, 2], bleu_levels=[30, 35, 38], validate_interval_updates=500,
                          arms=["baseline", "baseline-cosine-0.6", "baseline-cosine-0.8", "keep-all", "keep-all@0.6",
                                "assistant@0.6", "uniform@0.6", "infobatch@0.6", "learnable@0.6",
                                "uniform-0.85@0.6"]),
    # A noisy copy of Multi30K (30% of the training pairs corrupted; --data must be prepared from
    # scripts/make_noisy_corpus.py's output and hold its noise.tsv): the quick preset's model for about six
    # baseline epochs, validated every 200 updates; every AutoAssist arm logs the kept share of corrupted
    # and clean pairs per epoch.
    "multi30k-noisy": dict(arch="small", max_update=1600, max_tokens=2048, lr=2e-3, warmup_updates=300,
                           seeds=[1, 2], bleu_levels=[15, 20, 25], validate_interval_updates=200, noisy=True,
                           arms=["baseline", "assistant", "learnable", "infobatch", "uniform-0.85"]),
    # The paper-like recipe, for a GPU: 40 epochs of the full corpus (135 batches of 4,096 tokens each).
    "multi30k-full": dict(arch="base", max_update=5400, max_tokens=4096, lr=5e-4, warmup_updates=4000,
                          seeds=[1, 2, 3], bleu_levels=[20, 30, 35], arms=QUICK_ARMS),
}


def arm_spec(arm):
    """The settings of ``arm``: an entry of ARMS, or ``NAME@FRACTION``, the arm NAME trained for that fraction of
    the preset's updates with its schedule ending there, as a user who wants to save time would run a rule
    (compare it with the budget-matched baselines)."""
    name, _, fraction = arm.partition("@")
    spec = dict(ARMS[name])
    if fraction:
        spec["budget"] = float(fraction)
    return spec


def arm_argument(text):
    """argparse type of ``--arms``: an arm of ARMS, optionally ``@FRACTION`` with 0 < FRACTION <= 1."""
    name, at, fraction = text.partition("@")
    if name not in ARMS:
        raise argparse.ArgumentTypeError(f"unknown arm '{name}'; the arms are {', '.join(ARMS)}")
    try:
        valid = not at or 0 < float(fraction) <= 1
    except ValueError:
        valid = False
    if not valid:
        raise argparse.ArgumentTypeError(
            f"'{text}': the budget after '@' must be a fraction in (0, 1], e.g. {name}@0.7")
    return text


def in_table_order(arms):
    """``arms`` in the order of ARMS, each arm's budget variants after it, largest budget first."""
    names = list(ARMS)
    return sorted(set(arms), key=lambda arm: (names.index(arm.partition("@")[0]), -arm_spec(arm).get("budget", 1.0)))


def run_command(command, log_path):
    if run_logged(command, log_path) != 0:
        raise RuntimeError(f"{command[2]} failed; see {log_path}")


def training_args(arm, data, save_dir, preset, seed, cpu):
    spec = arm_spec(arm)
    interval = preset.get("validate_interval_updates", 0)
    return recipe(
        data, save_dir, spec["policy"], arch=preset["arch"], max_epoch=0,
        max_update=round(spec.get("budget", 1.0) * preset["max_update"]), max_tokens=preset["max_tokens"],
        lr=preset["lr"], warmup_updates=preset["warmup_updates"], seed=seed, cpu=cpu, eval_bleu=True,
        lr_scheduler=spec.get("lr_scheduler", preset.get("lr_scheduler", "inverse_sqrt")),
    ) + spec.get("extra", []) + ["--no-progress-bar"] + (
        ["--validate-interval-updates", str(interval)] if interval else []) + (
        ["--autoassist-noise-ids", noise_list(data)] if spec["policy"] and os.path.isfile(noise_list(data)) else []) + (
        ["--autoassist-loss-log", os.path.join(save_dir, "losses.npy")] if spec.get("loss_log") else [])


def noise_list(data):
    """The corrupted pairs of a noisy corpus, copied beside the data by prepare_multi30k.py."""
    return os.path.join(data, NOISE_LIST)


def parse_validations(log_text):
    """Every validation of a fairseq-train log by update count (the last one at a count wins):
    ``[{"updates", "valid_loss", "valid_bleu"}]`` in update order."""
    points = {}
    for match in re.finditer(r"\| valid \| epoch \d+ \| valid on '\w+' subset \|(.*)", log_text):
        fields = dict((key, float(value)) for key, value in re.findall(r"(\w+) ([-\d.]+)(?= \||$)", match.group(1)))
        if "num_updates" in fields:
            points[int(fields["num_updates"])] = {"updates": int(fields["num_updates"]),
                                                  "valid_loss": fields.get("loss"), "valid_bleu": fields.get("bleu")}
    return [points[updates] for updates in sorted(points)]


def parse_epochs(log_text):
    """Per-epoch records from a fairseq-train log (the last occurrence of each epoch wins)."""
    epochs = {}
    for line in log_text.splitlines():
        summary = re.search(r"\| train \| epoch (\d+) \|(.*)", line)
        valid = re.search(r"\| valid \| epoch (\d+) \| valid on '\w+' subset \|(.*)", line)
        match = summary or valid
        if not match:
            continue
        fields = dict(
            (key, float(value)) for key, value in re.findall(r"(\w+) ([-\d.]+)(?= \||$)", match.group(2))
        )
        record = epochs.setdefault(int(match.group(1)), {})
        if summary:
            record.update(train_wall=fields.get("train_wall"), num_updates=fields.get("num_updates"),
                          wpb=fields.get("wpb"), kept=fields.get("aa_kept", 1.0),
                          kept_noisy=fields.get("aa_kept_noisy"), kept_clean=fields.get("aa_kept_clean"),
                          cpu_share=selection_cpu_share(fields))
        else:
            record.update(valid_loss=fields.get("loss"), valid_bleu=fields.get("bleu"))
    rows, time, tokens, previous_updates = [], 0.0, 0.0, 0.0
    for epoch in sorted(epochs):
        record = epochs[epoch]
        if record.get("num_updates") is None:
            continue
        updates = record["num_updates"] - previous_updates
        previous_updates = record["num_updates"]
        time += record["train_wall"]
        tokens += updates * record["wpb"]
        rows.append(dict(epoch=epoch, train_seconds=time, target_tokens=tokens,
                         updates=record["num_updates"], valid_loss=record.get("valid_loss"),
                         valid_bleu=record.get("valid_bleu"), kept_share=record["kept"],
                         kept_share_noisy=record["kept_noisy"], kept_share_clean=record["kept_clean"],
                         selection_cpu_share=record["cpu_share"]))
    return rows


def selection_cpu_share(fields):
    """The CPU seconds spent choosing pairs (training thread) and in the Assistant's thread, as a share of the
    training process' CPU seconds (validation included), both counted since the process started (a resumed run:
    since its resume); None for an arm without them. Machine noise cannot hide this one, unlike seconds."""
    if not fields.get("aa_cpu_process"):
        return None
    return (fields.get("aa_cpu_select", 0.0) + fields.get("aa_cpu_assistant", 0.0)) / fields["aa_cpu_process"]


def first_reaching(rows, key, bleu):
    """``key`` (time, tokens or updates) at which validation BLEU first reaches ``bleu``, interpolated."""
    previous = None
    for row in rows:
        if row["valid_bleu"] is not None and row["valid_bleu"] >= bleu:
            if previous is None or previous["valid_bleu"] is None:
                return row[key]
            fraction = (bleu - previous["valid_bleu"]) / max(row["valid_bleu"] - previous["valid_bleu"], 1e-9)
            return previous[key] + fraction * (row[key] - previous[key])
        previous = row
    return None


def best_bleu(rows):
    """The best validation BLEU of ``rows``, 0 where none scored."""
    return max(row["valid_bleu"] or 0.0 for row in rows)


def bleu_at(rows, limit, key="train_seconds"):
    """The best validation BLEU of ``rows`` whose ``key`` is at most ``limit``."""
    reached = [row["valid_bleu"] for row in rows if row[key] <= limit + 1e-9 and row["valid_bleu"] is not None]
    return max(reached) if reached else None


def repair_last_checkpoint(run_dir):
    """fairseq writes its first checkpoint of a save atomically but copies it to the others
    (``checkpoint_last.pt`` after ``checkpoint_best.pt``), so a kill during the copy leaves a truncated
    ``checkpoint_last.pt`` that the resume cannot load. It then holds what ``checkpoint_best.pt`` holds."""
    import torch

    last, best = (os.path.join(run_dir, name) for name in ("checkpoint_last.pt", "checkpoint_best.pt"))
    if not os.path.isfile(last):
        return
    try:
        torch.load(last, map_location="cpu", weights_only=False)
    except Exception as error:  # a truncated file fails in pickle, zipfile or torch, each in its own way
        logger.warning("%s is unreadable (%s: %s); resuming from checkpoint_best.pt", last, type(error).__name__, error)
        if os.path.isfile(best):
            shutil.copyfile(best, last + ".tmp")
            os.replace(last + ".tmp", last)
        else:
            os.unlink(last)


# A run's folder OUT/runs/ARM-seedS holds its training log and, once it finished, its test BLEU (written last).
RUN_LOG, RUN_RESULT = "train.log", "bleu_test.json"


def run_arm(arm, seed, data, out, preset, cpu):
    run_dir = os.path.join(out, "runs", f"{arm}-seed{seed}")
    result_path = os.path.join(run_dir, RUN_RESULT)
    os.makedirs(run_dir, exist_ok=True)
    log_path = os.path.join(run_dir, RUN_LOG)
    if not os.path.isfile(result_path):
        logger.info("running %s seed %d (log: %s)", arm, seed, log_path)
        repair_last_checkpoint(run_dir)
        run_command([sys.executable, "-m", "fairseq_cli.train",
                     *training_args(arm, data, run_dir, preset, seed, cpu)], log_path)
        run_command([sys.executable, os.path.join(ROOT, "scripts", "evaluate_bleu.py"),
                     "--checkpoint", os.path.join(run_dir, "checkpoint_best.pt"), "--data", data,
                     "--split", "test", "--beam", "5", "--device", "cpu" if cpu else "gpu",
                     "--output", result_path], os.path.join(run_dir, "evaluate.log"))
    else:
        logger.info("%s seed %d already finished; reusing it", arm, seed)
    return read_run(arm, seed, run_dir)


def read_run(arm, seed, run_dir):
    """The records of a finished run: its training log's epochs and validations, its test BLEU."""
    with open(os.path.join(run_dir, RUN_LOG)) as f:
        log_text = f.read()
    with open(os.path.join(run_dir, RUN_RESULT)) as f:
        test = json.load(f)
    return {"arm": arm, "seed": seed, "epochs": parse_epochs(log_text), "validations": parse_validations(log_text),
            "test_bleu": test["bleu"], "test_bleu_signature": test["bleu_signature"]}


def finished_runs(out):
    """Every finished run in OUT/runs (its test BLEU written), whatever command ran it, by seed and arm."""
    found = []
    for name in sorted(os.listdir(os.path.join(out, "runs"))):
        match = re.fullmatch(r"(.+)-seed(\d+)", name)
        run_dir = os.path.join(out, "runs", name)
        if match and os.path.isfile(os.path.join(run_dir, RUN_RESULT)):
            try:
                arm_argument(match.group(1))
            except argparse.ArgumentTypeError:
                logger.warning("skipping %s: not an arm of this benchmark", run_dir)
                continue
            found.append((int(match.group(2)), match.group(1), run_dir))
    order = {arm: i for i, arm in enumerate(in_table_order(arm for _, arm, _ in found))}
    return [read_run(arm, seed, run_dir) for seed, arm, run_dir in sorted(found, key=lambda f: (f[0], order[f[1]]))]


def _ratio(value, reference):
    """value / reference, or None when either is missing or the reference is 0 (fairseq rounds
    train_wall to whole seconds, so a very short run can measure 0)."""
    return value / reference if value is not None and reference else None


def reach_ratios(run, base, bleu):
    """(time ratio, token ratio) of ``run`` against ``base`` for first reaching validation ``bleu``."""
    return tuple(_ratio(first_reaching(run["epochs"], key, bleu), first_reaching(base["epochs"], key, bleu))
                 for key in ("train_seconds", "target_tokens"))


def level_key(kind, bleu):
    return f"{kind}_ratio_at_bleu_{bleu:g}"


def derive(runs, bleu_levels=()):
    """Figures of each arm against the baseline of the same seed, then mean and spread over seeds."""
    baselines = {run["seed"]: run for run in runs if run["arm"] == "baseline"}
    per_arm = {}
    for run in runs:
        base = baselines.get(run["seed"])
        if base is None or not base["epochs"] or not run["epochs"]:
            continue
        target = best_bleu(base["epochs"])
        if target <= 0:
            # A baseline that never scored gives no target: time-to-BLEU is undefined, not 1.
            target = float("inf")
        time_ratio, token_ratio = reach_ratios(run, base, target)
        last, base_last = run["epochs"][-1], base["epochs"][-1]
        figures = {
            "target_bleu": target if target != float("inf") else None,
            "time_ratio": time_ratio,
            "token_ratio": token_ratio,
            "bleu_at_baseline_time": bleu_at(run["epochs"], base_last["train_seconds"]),
            "bleu_at_60pct_baseline_time": bleu_at(run["epochs"], 0.6 * base_last["train_seconds"]),
            "seconds_per_update_ratio": _ratio(last["train_seconds"] / max(last["updates"], 1),
                                               base_last["train_seconds"] / max(base_last["updates"], 1)),
            "best_valid_bleu": best_bleu(run["epochs"]),
            "test_bleu": run["test_bleu"],
        }
        if last.get("selection_cpu_share") is not None:
            figures["selection_cpu_share"] = last["selection_cpu_share"]
        selecting = [row for row in run["epochs"][1:] if row.get("kept_share_noisy") is not None]
        if selecting:
            # After the first epoch, which trains on every pair in every preset.
            figures["kept_share_noisy"] = statistics.mean(row["kept_share_noisy"] for row in selecting)
            figures["kept_share_clean"] = statistics.mean(row["kept_share_clean"] for row in selecting)
        for bleu in bleu_levels:
            figures[level_key("time", bleu)], figures[level_key("token", bleu)] = reach_ratios(run, base, bleu)
        per_arm.setdefault(run["arm"], []).append(figures)
    return summarize(per_arm)


def summarize(per_arm):
    """Mean, spread and the number of seeds that reached each figure, per arm, over the seeds to which the
    figure applies (a figure is None where it was not reached and absent where it does not apply)."""
    summary = {}
    for arm, seeds in per_arm.items():
        summary[arm] = {}
        for key in dict.fromkeys(key for figures in seeds for key in figures):
            applying = [figures[key] for figures in seeds if key in figures]
            values = [value for value in applying if value is not None]
            summary[arm][key] = {
                "mean": statistics.mean(values) if values else None,
                "spread": (max(values) - min(values)) if len(values) > 1 else 0.0,
                "reached": len(values), "seeds": len(applying),
            }
    return summary


def cell(stat, digits=2, unreached="not reached"):
    """A table cell: mean (± half the range over seeds), the seeds that reached it, "-" where the figure
    does not apply to the arm (``stat`` None), ``unreached`` where no seed reached it."""
    if stat is None:
        return "-"
    if stat["mean"] is None:
        return unreached
    text = f"{stat['mean']:.{digits}f}"
    if stat["seeds"] > 1:
        text += f" ± {stat['spread'] / 2:.{digits}f}"
    if stat["reached"] < stat["seeds"]:
        text += f" ({stat['reached']}/{stat['seeds']} seeds)"
    return text


def budget_matched(arm):
    """Whether ``arm`` is a budget-matched baseline: the stock task on a cosine schedule ending at its budget."""
    spec = arm_spec(arm)
    return spec["policy"] is None and spec.get("lr_scheduler") == "cosine" and "budget" in spec


def beats(points, reach, reference, target, limit):
    """Whether an arm with validations ``points``, first reaching ``target`` at ``reach`` updates, beats the
    budget-matched baseline ``reference``: reaches the target before it does, or stands above the
    reference's final BLEU by ``limit`` updates."""
    reference_reach = first_reaching(reference["validations"], "updates", target)
    reference_final = bleu_at(reference["validations"], limit, "updates") or 0.0
    earlier = reach is not None and (reference_reach is None or reach < reference_reach)
    return float(earlier or (bleu_at(points, limit, "updates") or 0.0) > reference_final)


# The measures on which an arm is placed on the budget frontier, each a score where higher is better (None
# where the run lacks it). Greedy validation BLEU is the measure of the target, but moves by up to 0.9
# BLEU between neighbouring validations on Multi30K; the lowest validation loss and the beam-5 test BLEU of the
# best checkpoint check whether a saving it shows is real.
FRONTIER_MEASURES = {
    "valid_bleu": lambda run: best_bleu(run["validations"]),
    "valid_loss": lambda run: -min(point["valid_loss"] for point in run["validations"]),
    "test_bleu": lambda run: run.get("test_bleu"),
}


def budget_frontier(base, matched_runs, budget, score=FRONTIER_MEASURES["valid_bleu"]):
    """``[(updates, score)]`` of the stock runs of one seed that anneal fully at their budgets (the budget-matched
    baselines and the full ``base``), in budget order: each run's budget and its ``score``, as a running maximum
    (a larger budget buys at least what a smaller one does); None where a run lacks the score."""
    runs = sorted(matched_runs, key=lambda run: arm_spec(run["arm"])["budget"]) + [base]
    scores = [score(run) for run in runs]
    if None in scores:
        return None
    frontier, best = [], float("-inf")
    for run, value in zip(runs, scores):
        best = max(best, value)
        frontier.append((arm_spec(run["arm"]).get("budget", 1.0) * budget, best))
    return frontier


def frontier_ratio(updates, value, frontier):
    """``updates`` over those a stock baseline annealing at its budget would need to score ``value``, interpolated
    between the budgets of ``frontier``; None where ``value`` lies outside it."""
    for (updates_low, score_low), (updates_high, score_high) in zip(frontier, frontier[1:]):
        if score_low <= value <= score_high:
            share = (value - score_low) / max(score_high - score_low, 1e-9)
            return updates / (updates_low + share * (updates_high - updates_low))
    return None


def update_figures(runs, budget):
    """Figures at equal update counts (the validations every ``--validate-interval-updates``), per arm
    against the baseline of the same seed: updates to the baseline's best validation BLEU as a ratio of
    the baseline's own; the best BLEU by 0.6 and 0.8 of the ``budget`` and by its end; the final validation
    loss; whether the arm beats the budget-matched baseline of 0.8 and, for an ``ARM@FRACTION``, the one of
    its own budget (see ``beats``); the arm's updates against the budget frontier of the stock baselines on each
    of FRONTIER_MEASURES (see ``frontier_ratio``; not reached where the arm's score lies below it, absent where
    above it); and the baseline's gain over its last quarter (under 0.5: a plateau)."""
    baselines = {run["seed"]: run for run in runs if run["arm"] == "baseline"}
    matched = {(run["seed"], arm_spec(run["arm"])["budget"]): run for run in runs
               if budget_matched(run["arm"]) and run.get("validations")}
    matched_by_seed = {}
    for (seed, _), run in matched.items():
        matched_by_seed.setdefault(seed, []).append(run)
    frontiers = {(seed, measure): budget_frontier(baselines[seed], seed_runs, budget, score)
                 for seed, seed_runs in matched_by_seed.items() if baselines.get(seed, {}).get("validations")
                 for measure, score in FRONTIER_MEASURES.items()}
    per_arm = {}
    for run in runs:
        base = baselines.get(run["seed"])
        if base is None or not base.get("validations") or not run.get("validations"):
            continue
        points, base_points = run["validations"], base["validations"]
        target = best_bleu(base_points)
        reach = first_reaching(points, "updates", target)
        figures = {
            "update_ratio": _ratio(reach, first_reaching(base_points, "updates", target)),
            "bleu_by_0.6": bleu_at(points, 0.6 * budget, "updates"),
            "bleu_by_0.8": bleu_at(points, 0.8 * budget, "updates"),
            "bleu_by_end": bleu_at(points, budget, "updates"),
            "final_valid_loss": points[-1]["valid_loss"],
        }
        if not budget_matched(run["arm"]):
            fractions = {"beats_budget_0.8": 0.8}
            own_budget = arm_spec(run["arm"]).get("budget", 1.0)
            if own_budget < 1:
                fractions["beats_same_budget"] = own_budget
            for key, fraction in fractions.items():
                reference = matched.get((run["seed"], fraction))
                if reference is not None:
                    figures[key] = beats(points, reach, reference, target, fraction * budget)
            for measure, score in FRONTIER_MEASURES.items():
                frontier = frontiers.get((run["seed"], measure)) if run is not base else None
                value = score(run) if frontier else None
                # Above the full baseline's figure the frontier cannot say how many updates a stock run would
                # need; below its smallest budget's the arm saves nothing, and that seed counts as not reached.
                if value is not None and value <= frontier[-1][1]:
                    figures[f"frontier_ratio_{measure}"] = frontier_ratio(points[-1]["updates"], value, frontier)
        if run is base:
            figures["plateau_gain"] = target - (bleu_at(points, 0.75 * budget, "updates") or 0.0)
        per_arm.setdefault(run["arm"], []).append(figures)
    return summarize(per_arm)


def update_table(summary, budget):
    if not summary:
        return ""
    lines = ["", f"At equal update counts (budget {budget} updates; mean over seeds; a budget-matched baseline "
             "trains for its fraction of the budget with a cosine schedule that reaches 0 there). The budget "
             "frontier: the updates a stock baseline annealing at that budget needs for the arm's best "
             "validation BLEU, its lowest validation loss or its test BLEU, interpolated between the budget-matched "
             "and the full baselines of its seed; the arm's updates over those (under 1: it saves updates; - where "
             "the arm's figure lies above the full baseline's, beyond what the frontier can measure; \"no saving\" "
             "where it lies below the smallest budget's in every seed, and (k/n seeds) where it lies within the "
             "frontier in only k of them):", "",
             "| arm | updates to baseline best (ratio) | BLEU by 0.6 | by 0.8 | by the end | final valid loss "
             "| beats the 0.8 budget baseline (share of seeds) | beats the baseline of its own budget "
             "| updates against the baselines' budget frontier, by best valid BLEU | by lowest valid loss "
             "| by test BLEU | baseline gain in the last quarter |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm in in_table_order(summary):
        s = summary[arm]
        lines.append(f"| {arm} | {cell(s['update_ratio'])} | {cell(s['bleu_by_0.6'])} | {cell(s['bleu_by_0.8'])} | "
                     f"{cell(s['bleu_by_end'])} | {cell(s['final_valid_loss'], 3)} | "
                     f"{cell(s.get('beats_budget_0.8'))} | {cell(s.get('beats_same_budget'))} | "
                     + "".join(f"{cell(s.get(f'frontier_ratio_{measure}'), unreached='no saving')} | "
                               for measure in FRONTIER_MEASURES)
                     + f"{cell(s.get('plateau_gain'))} |")
    return "\n".join(lines) + "\n"


def markdown(summary, command, machine, bleu_levels=()):
    arms = in_table_order(summary)
    lines = [
        f"Command: `{command}`", "", f"Machine: {machine}", "",
        "Ratios are against the stock translation task with the same seed (mean ± half the range over seeds); "
        "time is fairseq's train_wall (validation excluded), meaningful only for runs that had the machine to "
        "themselves; tokens are target tokens trained on; every arm trains for the preset's number of updates "
        "but a budget-matched baseline and an ARM@FRACTION, which train for that fraction of them.", "",
        "| arm | time to baseline best BLEU | tokens to it | BLEU at baseline time | BLEU at 60% of it "
        "| time per update | best valid BLEU | test BLEU (beam 5) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm in arms:
        s = summary[arm]
        lines.append(f"| {arm} | {cell(s['time_ratio'])} | {cell(s['token_ratio'])} | "
                     f"{cell(s['bleu_at_baseline_time'])} | {cell(s['bleu_at_60pct_baseline_time'])} | "
                     f"{cell(s['seconds_per_update_ratio'], 3)} | {cell(s['best_valid_bleu'])} | {cell(s['test_bleu'])} |")
    noisy = [arm for arm in arms if "kept_share_noisy" in summary[arm]]
    if noisy:
        lines += ["", "Kept share after the first epoch (mean over the epochs), of the corrupted and of the clean pairs:", "",
                  "| arm | corrupted pairs kept | clean pairs kept |", "|---|---|---|"]
        lines += [f"| {arm} | {cell(summary[arm]['kept_share_noisy'])} | {cell(summary[arm]['kept_share_clean'])} |"
                  for arm in noisy]
    measured = [arm for arm in arms if "selection_cpu_share" in summary[arm]]
    if measured:
        lines += ["", "CPU seconds spent choosing pairs and in the Assistant's thread, as a share of the training "
                  "process' CPU seconds (the last process of a resumed run):", "", "| arm | selection CPU share |",
                  "|---|---|"]
        lines += [f"| {arm} | {cell(summary[arm]['selection_cpu_share'], 4)} |" for arm in measured]
    if bleu_levels:
        header = " | ".join(f"time to BLEU {b:g} | tokens to it" for b in bleu_levels)
        lines += ["", "Time and token ratios to fixed validation BLEU levels:", "",
                  f"| arm | {header} |", "|---|" + "---|" * (2 * len(bleu_levels))]
        for arm in arms:
            cells = " | ".join(f"{cell(summary[arm][level_key('time', b)])} | {cell(summary[arm][level_key('token', b)])}"
                               for b in bleu_levels)
            lines.append(f"| {arm} | {cells} |")
    return "\n".join(lines) + "\n"


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


# (records, x, y, x label, y label, file): per-epoch records, or every validation (by update count).
PLOTS = (
    ("validations", "updates", "valid_bleu", "updates", "validation BLEU (greedy)", "bleu_vs_updates.png"),
    ("epochs", "train_seconds", "valid_bleu", "training time (s; only from a run that had the machine to itself)",
     "validation BLEU (greedy)", "bleu_vs_time.png"),
    ("epochs", "target_tokens", "valid_bleu", "target tokens trained on", "validation BLEU (greedy)",
     "bleu_vs_tokens.png"),
    ("epochs", "updates", "kept_share", "updates", "kept share of pairs", "kept_share.png"),
)


def plot(runs, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = in_table_order(run["arm"] for run in runs)
    colors = plt.get_cmap("tab10" if len(arms) <= 10 else "tab20").colors
    for records, x_key, y_key, xlabel, ylabel, name in PLOTS:
        figure, axis = plt.subplots(figsize=(7, 4.5))
        for arm_index, arm in enumerate(arms):
            arm_runs = [run for run in runs if run["arm"] == arm and run[records]]
            for i, run in enumerate(arm_runs):
                xs = [row[x_key] for row in run[records]]
                ys = [row[y_key] if row[y_key] is not None else float("nan") for row in run[records]]
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


def smoke_data(out):
    """Prepare the synthetic corpus of the tests for the smoke preset (once)."""
    dest = os.path.join(out, "data-bin")
    if not os.path.isfile(os.path.join(dest, "prepare.json")):
        raw = write_synthetic_multi30k(os.path.join(out, "raw"))
        run_command([sys.executable, os.path.join(ROOT, "scripts", "prepare_multi30k.py"), "--raw-dir", raw,
                     "--dest", dest, "--vocab-size", "120", "--workers", "1", "--no-download"],
                    os.path.join(out, "prepare.log"))
    return dest


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


def train_arms(parser, args, preset):
    data = smoke_data(args.out) if args.preset == "smoke" else args.data
    try:
        require_prepared(data)
    except AutoAssistConfigError as error:
        parser.error(str(error))
    if preset.get("noisy") and not os.path.isfile(noise_list(data)):
        parser.error(f"--preset {args.preset} needs a noisy corpus, but {noise_list(data)} is missing; prepare "
                     "the output of scripts/make_noisy_corpus.py with scripts/prepare_multi30k.py --raw-dir")
    arms = ["baseline"] + [arm for arm in (args.arms or preset["arms"]) if arm != "baseline"]
    return [run_arm(arm, seed, data, args.out, preset, args.device == "cpu")
            for seed in (args.seeds or preset["seeds"]) for arm in arms]


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--data", help="prepared data-bin folder (not for --preset smoke)")
    parser.add_argument("--out", required=True, help="output folder; rerun the same command to resume")
    parser.add_argument("--arms", nargs="+", type=arm_argument, metavar="ARM[@BUDGET]",
                        help=f"default: the preset's arms; of {', '.join(ARMS)}; ARM@0.7 trains ARM for 0.7 of the "
                        "preset's updates, its schedule ending there")
    parser.add_argument("--seeds", nargs="+", type=int, help="override the preset's seeds")
    parser.add_argument("--validate-interval-updates", type=int,
                        help="also validate every N updates and tabulate every arm at those counts "
                        "(default: the preset's value; 0: per epoch only)")
    parser.add_argument("--report", action="store_true",
                        help="train nothing: tabulate every finished run in OUT/runs, of any arm and seed (while other "
                        "commands still run, or to gather what several commands ran)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--machine", default=describe_machine(),
                        help="description of the machine, written into results.md (default: read from this one)")
    args = parser.parse_args(argv)
    preset = dict(PRESETS[args.preset])
    if args.validate_interval_updates is not None:
        preset["validate_interval_updates"] = args.validate_interval_updates
    os.makedirs(args.out, exist_ok=True)
    if args.report:
        if not os.path.isdir(os.path.join(args.out, "runs")):
            parser.error(f"--report: {args.out} holds no runs/ folder; give the --out of the runs to tabulate")
        runs = finished_runs(args.out)
    else:
        runs = train_arms(parser, args, preset)
    summary = derive(runs, preset["bleu_levels"])
    at_updates = update_figures(runs, preset["max_update"])
    command = "python scripts/benchmark.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_atomically(os.path.join(args.out, "results.json"), json.dumps(
        {"preset": args.preset, "settings": preset, "command": command, "machine": args.machine, "runs": runs,
         "summary": summary, "at_equal_updates": at_updates}, indent=2))
    table = (markdown(summary, command, args.machine, preset["bleu_levels"])
             + update_table(at_updates, preset["max_update"])
             + equal_update_table(runs, preset.get("validate_interval_updates", 0)))
    write_atomically(os.path.join(args.out, "results.md"), table)
    plot(runs, args.out)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
