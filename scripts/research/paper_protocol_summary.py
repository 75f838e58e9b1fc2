#!/usr/bin/env python
"""Issue 74's ``summary.json`` and ``waterfall.json``: the paper's comparison, in words, at its own protocol.

    python scripts/research/paper_protocol_summary.py --corpus multi30k \\
        --results docs/results/paper-protocol/finished-runs/multi30k.json --out docs/results/paper-protocol

``--results``: a ``scripts/benchmark.py`` results.json of the paper-protocol preset (``--report`` or ``--rescore``).
Every run is set against the stock run of its seed and recipe (``stock_arm``): the released protocol's arms against
``baseline``, the tuned recipe's against ``baseline-tuned``. A summary record's fields:

* ``words_ratio_valid_bleu``: the target tokens ("words", as the paper counts them) at which the run first reaches
  the stock run's best validation BLEU, over those at which the stock run does; None where it never does, and then
  ``words_ratio_at_least`` (its whole words over the stock run's, a lower bound);
* ``updates_ratio_valid_bleu`` (and ``updates_ratio_at_least``): the same in updates;
* ``seconds_ratio_valid_bleu`` (and ``seconds_ratio_at_least``), with ``--seconds-per-update``: the updates ratio
  times the arm's isolated time per update over the stock arm's; None where either is untimed;
* ``kept_share``: the mean share of pairs kept over the epochs after the first (1 for the stock task);
* ``max_tokens``, ``best_valid_bleu``, ``test_bleu`` (beam 5, the best validation checkpoint), ``words``: the target
  tokens the run trained on in all.

``waterfall.json``: the steps of ``WATERFALL``, from the paper's comparison as released to this project's benchmark,
one factor at a time, each with the mean ratio over the seeds that have both runs, in words (a step where some seed
never reaches the stock run's BLEU gives the mean with those seeds' lower bounds, ``at_least``) or, for the last step,
in seconds (the seconds ratio, or its lower bound likewise).

``waterfall.md``: the same steps as a table, with each seed's ratio.

Merges into ``--out``: the records of ``--corpus`` are replaced, those of other corpora kept.
"""

import argparse
import json
import logging
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from fairseq_autoassist.benchmark.arms import PRESETS, arm_spec  # noqa: E402
from fairseq_autoassist.benchmark.figures import (Bound, best, best_checkpoint_test_bleu, reach_ratio,  # noqa: E402
                                                  run_cost, with_tokens, with_validations)
from fairseq_autoassist.recipes import write_atomically  # noqa: E402

logger = logging.getLogger("paper_protocol_summary")

# From the paper's comparison as released to this project's benchmark, one factor at a time: (step, arm, stock arm).
WATERFALL = [
    ("as released: released at 2,500 tokens against the stock task at 3,000, the run scripts' recipe",
     "released-2500", "baseline", "words"),
    ("control of the step before: its batches, the pairs kept at random at its kept share", "uniform-released-2500",
     "baseline", "words"),
    ("control of the step before: its batches, every pair kept", "keep-all-released-2500", "baseline", "words"),
    ("equal batch sizes (3,000 tokens)", "released", "baseline", "words"),
    ("control of the step before: its batches, the pairs kept at random at its kept share", "uniform-released",
     "baseline", "words"),
    ("this project's tuned learning rate and schedule", "released-tuned", "baseline-tuned", "words"),
    ("batches sorted by length instead of mixed", "released-sorted-tuned", "baseline-tuned", "words"),
    ("this project's Assistant (assistant) instead of the released one", "assistant-tuned", "baseline-tuned", "words"),
    ("a random control at the same kept share", "uniform-tuned", "baseline-tuned", "words"),
    ("seconds instead of words", "assistant-tuned", "baseline-tuned", "seconds"),
]


def stock_arm(arm):
    """The stock run ``arm`` is measured against."""
    return "baseline-tuned" if "recipe" in arm_spec(arm) else "baseline"


def kept_share(run):
    """The mean share of pairs kept over the epochs after the first."""
    later = [row["kept_share"] for row in run.get("epochs", [])[1:] if row.get("kept_share") is not None]
    return round(statistics.mean(later), 4) if later else 1.0


def _ratio_fields(points, stock_points, cost, spent, name):
    level = best(stock_points, "valid_bleu")
    ratio = reach_ratio(points, stock_points, cost, level, spent)
    if isinstance(ratio, Bound):
        return {f"{name}_valid_bleu": None, f"{name}_at_least": round(float(ratio), 4)}
    return {f"{name}_valid_bleu": None if ratio is None else round(ratio, 4), f"{name}_at_least": None}


def _seconds_fields(record, time_ratio):
    """The updates ratio, or its lower bound where the run never reaches the stock run's best, in seconds: times the
    arm's time per update over the stock arm's (``time_ratio``; None where either is untimed)."""
    fields = {}
    for figure in ("valid_bleu", "at_least"):
        updates_ratio = record[f"updates_ratio_{figure}"]
        fields[f"seconds_ratio_{figure}"] = (None if None in (updates_ratio, time_ratio)
                                             else round(updates_ratio * time_ratio, 4))
    return fields


def timing_ratio(arm, timing):
    """``arm``'s time per update over the stock task's (median session) from ``timing`` (benchmark_overhead.py's
    ``ratio_to_baseline``), None where untimed. A tuned arm is timed as its protocol twin: the recipe changes the
    learning rate and dropout, not the work of an update."""
    for name in (arm, arm.removesuffix("-tuned")):
        if timing and name in timing:
            return timing[name]["median"]
    return None


def summary_records(corpus, results, timing=None):
    """One record per seed and arm of ``results`` (a benchmark results.json, loaded); with ``timing``, also
    ``seconds_ratio_valid_bleu``: the updates ratio times the arm's time per update over the stock arm's."""
    preset = PRESETS[results["preset"]]
    runs = {(run["seed"], run["arm"]): with_validations(run) for run in results["runs"]}
    records = []
    for (seed, arm), run in runs.items():
        stock = runs.get((seed, stock_arm(arm)))
        if stock is None:
            logger.warning("%s seed %d has no %s run of its seed; left out", arm, seed, stock_arm(arm))
            continue
        points, stock_points = with_tokens(run), with_tokens(stock)
        record = {"corpus": corpus, "seed": seed, "arm": arm, "stock_arm": stock_arm(arm),
                  "max_tokens": arm_spec(arm).get("max_tokens", preset["max_tokens"])}
        record.update(_ratio_fields(points, stock_points, "target_tokens", run_cost(run, "target_tokens"),
                                    "words_ratio"))
        record.update(_ratio_fields(points, stock_points, "updates", run_cost(run, "updates"), "updates_ratio"))
        arm_time, stock_time = timing_ratio(arm, timing), timing_ratio(stock_arm(arm), timing)
        record.update(_seconds_fields(record, None if None in (arm_time, stock_time) else arm_time / stock_time))
        record.update(kept_share=kept_share(run), best_valid_bleu=best(points, "valid_bleu"),
                      test_bleu=best_checkpoint_test_bleu(run), words=run_cost(run, "target_tokens"))
        records.append(record)
    return records


def _ratio_or_bound(record, cost):
    """``record``'s ratio in ``cost`` (words, updates or seconds), or its lower bound where the run never reaches the
    stock run's best, and whether it is that bound; (None, False) where neither is known (an untimed arm's seconds)."""
    ratio = record[f"{cost}_ratio_valid_bleu"]
    if ratio is not None:
        return ratio, False
    bound = record[f"{cost}_ratio_at_least"]
    return bound, bound is not None


def waterfall_steps(records):
    """``WATERFALL``'s steps with each corpus's mean ratio (in the step's cost) over the seeds that have it."""
    steps = []
    for corpus in dict.fromkeys(record["corpus"] for record in records):
        for step, arm, stock, cost in WATERFALL:
            found = sorted((r["seed"], *_ratio_or_bound(r, cost)) for r in records
                           if r["corpus"] == corpus and r["arm"] == arm and r["stock_arm"] == stock)
            found = [(seed, ratio, bound) for seed, ratio, bound in found if ratio is not None]
            if not found:
                continue
            steps.append({"step": step, "corpus": corpus, "arm": arm, "stock_arm": stock, "cost": cost,
                          "ratio": round(statistics.mean(ratio for _, ratio, _ in found), 4),
                          "at_least": any(bound for _, _, bound in found),
                          "seeds": [seed for seed, _, _ in found], "ratios": [ratio for _, ratio, _ in found]})
    return steps


def waterfall_table(steps):
    """``steps`` as the Markdown table of waterfall.md; a ratio that is only a lower bound reads ">= x"."""
    lines = ["| corpus | step | arm against stock | cost | ratio per seed | mean |", "|---|---|---|---|---|---|"]
    for step in steps:
        per_seed = ", ".join(f"{ratio:.3f} (seed {seed})" for seed, ratio in zip(step["seeds"], step["ratios"]))
        mean = (">= " if step["at_least"] else "") + f"{step['ratio']:.3f}"
        lines.append(f"| {step['corpus']} | {step['step']} | `{step['arm']}` / `{step['stock_arm']}` | "
                     f"{step['cost']} | {per_seed} | {mean} |")
    return "\n".join(lines) + "\n"


def merged(path, corpus, records):
    """The records already in ``path`` of other corpora, then ``records``."""
    kept = []
    if os.path.isfile(path):
        with open(path) as f:
            kept = [record for record in json.load(f) if record["corpus"] != corpus]
    return kept + records


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="the corpus's name in the records (multi30k, tatoeba)")
    parser.add_argument("--results", required=True, help="a results.json of scripts/benchmark.py --preset paper-protocol")
    parser.add_argument("--out", required=True, help="folder of summary.json and waterfall.json (merged by corpus)")
    parser.add_argument("--seconds-per-update", metavar="FILE",
                        help="scripts/benchmark_overhead.py's --output that timed the arms (the seconds figures)")
    args = parser.parse_args(argv)
    with open(args.results) as f:
        results = json.load(f)
    timing = None
    if args.seconds_per_update:
        with open(args.seconds_per_update) as f:
            timing = json.load(f)["ratio_to_baseline"]
    if results.get("preset") != "paper-protocol":
        parser.error(f"--results {args.results} is a {results.get('preset')} benchmark, not paper-protocol")
    os.makedirs(args.out, exist_ok=True)
    summary_path = os.path.join(args.out, "summary.json")
    records = merged(summary_path, args.corpus, summary_records(args.corpus, results, timing))
    write_atomically(summary_path, json.dumps(records, indent=1))
    steps = waterfall_steps(records)
    write_atomically(os.path.join(args.out, "waterfall.json"), json.dumps(steps, indent=1))
    write_atomically(os.path.join(args.out, "waterfall.md"),
                     "# The waterfall (written by scripts/research/paper_protocol_summary.py)\n\n"
                     "Each step's ratio: the cost to the stock run's best validation BLEU over the stock run's "
                     "(README.md says how).\n\n" + waterfall_table(steps))
    logger.info("wrote %d records and the waterfall to %s", len(records), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
