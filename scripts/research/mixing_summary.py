#!/usr/bin/env python
"""Issue 63's ``summary.json``: one record per corpus, seed and arm, each against the full stock run of its seed.

    python scripts/research/mixing_summary.py --corpus multi30k-long \\
        --results docs/results/mixing/multi30k-long/results.json --out docs/results/mixing/summary.json

``--results``: a ``scripts/benchmark.py`` results.json (``--rescore`` of the finished runs, with
``--seconds-per-update``: the arms' isolated time per update over the stock task's). A record's fields:

* ``tokens_ratio_valid_bleu``: the target tokens at which the run first reaches the full stock run's best validation
  BLEU over those at which the stock run does (the benchmark's ``target_tokens_ratio``); None where it never does;
* ``seconds_ratio_valid_bleu``: the same in updates, times the arm's time per update over the stock task's (the
  benchmark's ``seconds_ratio``, median timing session); None where it never does or the arm is untimed;
* ``seconds_ratio_test_bleu``: the updates to the run's tested checkpoint times its time per update, over the stock
  run's updates to its tested checkpoint; None where the run's test BLEU is more than ``TEST_BLEU_MARGIN`` below
  the stock run's (issue 63's target: its test BLEU within 0.3), or the arm is untimed;
* ``test_bleu`` and ``stock_test_bleu``: beam 5, each run's best validation checkpoint; ``best_valid_bleu`` and
  ``stock_best_valid_bleu``;
* ``frontier_seconds_ratio_valid_bleu`` and ``_test_bleu``: the run's seconds over those at which the seed's stock
  frontier (the full run and the budget-matched ones) reaches the run's own best validation BLEU or test BLEU (the
  benchmark's ``frontier_seconds_*``): the saving at the quality the run reached; None outside the frontier.

Merges into ``--out``: the records of ``--corpus`` are replaced, those of other corpora kept.
"""

import argparse
import json
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from fairseq_autoassist.benchmark.arms import PRESETS  # noqa: E402
from fairseq_autoassist.benchmark.figures import best, best_checkpoint_test_bleu, derive  # noqa: E402
from fairseq_autoassist.recipes import write_atomically  # noqa: E402

logger = logging.getLogger("mixing_summary")
TEST_BLEU_MARGIN = 0.3


def _reached(figure):
    """A per-seed figure of ``derive`` where the run reached what it is measured against (None for a bound: it
    never did, or for a figure that does not apply)."""
    if figure is None or figure["mean"] is None or figure["below"] or figure["above"]:
        return None
    return round(figure["mean"], 4)


def summary_records(corpus, results):
    """The records of ``results`` (a benchmark results.json, loaded), by seed in its run order."""
    budget = PRESETS[results["preset"]]["max_update"]
    timing = results.get("time_per_update_vs_stock")
    records = []
    for seed in dict.fromkeys(run["seed"] for run in results["runs"]):
        runs = [run for run in results["runs"] if run["seed"] == seed]
        figures = derive(runs, budget, (), timing)  # one seed: each mean is that seed's figure
        base = next((run for run in runs if run["arm"] == "baseline"), None)
        stock_test = best_checkpoint_test_bleu(base) if base else None
        for run in runs:
            arm = figures.get(run["arm"], {})
            test = best_checkpoint_test_bleu(run)
            record = {"corpus": corpus, "seed": seed, "arm": run["arm"],
                      "tokens_ratio_valid_bleu": _reached(arm.get("target_tokens_ratio")),
                      "seconds_ratio_valid_bleu": _reached(arm.get("seconds_ratio")),
                      "seconds_ratio_test_bleu": None, "test_bleu": test, "stock_test_bleu": stock_test,
                      "best_valid_bleu": best(run["validations"], "valid_bleu"),
                      "stock_best_valid_bleu": best(base["validations"], "valid_bleu") if base else None,
                      "frontier_seconds_ratio_valid_bleu": _reached(arm.get("frontier_seconds_valid_bleu")),
                      "frontier_seconds_ratio_test_bleu": _reached(arm.get("frontier_seconds_test_bleu"))}
            ratio = arm.get("seconds_per_update_ratio", {}).get("mean") or (1.0 if run["arm"] == "baseline" else None)
            if (ratio and test is not None and stock_test is not None and test >= stock_test - TEST_BLEU_MARGIN
                    and run.get("test_checkpoint_updates") and base.get("test_checkpoint_updates")):
                record["seconds_ratio_test_bleu"] = round(
                    run["test_checkpoint_updates"] * ratio / base["test_checkpoint_updates"], 4)
            records.append(record)
    return records


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="the corpus' name in the records (multi30k-long, tatoeba, ...)")
    parser.add_argument("--results", required=True, help="a scripts/benchmark.py results.json of its runs")
    parser.add_argument("--out", required=True, help="the summary.json to write (records of other corpora kept)")
    args = parser.parse_args(argv)
    with open(args.results) as f:
        records = summary_records(args.corpus, json.load(f))
    kept = []
    if os.path.isfile(args.out):
        with open(args.out) as f:
            kept = [record for record in json.load(f) if record["corpus"] != args.corpus]
    write_atomically(args.out, json.dumps(kept + records, indent=1))
    logger.info("wrote %d records of %s to %s", len(records), args.corpus, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
