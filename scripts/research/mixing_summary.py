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
  ``stock_best_valid_bleu``.

Merges into ``--out``: the records of ``--corpus`` are replaced, those of other corpora kept.
"""

import argparse
import json
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from fairseq_autoassist.benchmark.arms import PRESETS  # noqa: E402
from fairseq_autoassist.benchmark.figures import Bound, best_checkpoint_test_bleu, run_figures  # noqa: E402
from fairseq_autoassist.recipes import write_atomically  # noqa: E402

logger = logging.getLogger("mixing_summary")
TEST_BLEU_MARGIN = 0.3


def _reached(ratio):
    """A ratio the run reached (None for a ``Bound``: it never reached the stock run's level)."""
    return None if ratio is None or isinstance(ratio, Bound) else round(float(ratio), 4)


def _timing(time_per_update, arm):
    return (time_per_update or {}).get(arm.partition("@")[0])  # ARM@FRACTION updates as ARM does


def summary_records(corpus, results):
    """The records of ``results`` (a benchmark results.json, loaded), by seed in its run order."""
    budget = PRESETS[results["preset"]]["max_update"]
    stock = {run["seed"]: run for run in results["runs"] if run["arm"] == "baseline"}
    records = []
    for run in results["runs"]:
        base = stock.get(run["seed"])
        timing = _timing(results.get("time_per_update_vs_stock"), run["arm"])
        record = {"corpus": corpus, "seed": run["seed"], "arm": run["arm"],
                  "tokens_ratio_valid_bleu": None, "seconds_ratio_valid_bleu": None, "seconds_ratio_test_bleu": None,
                  "test_bleu": best_checkpoint_test_bleu(run), "stock_test_bleu": None,
                  "best_valid_bleu": max((p["valid_bleu"] for p in run["validations"]), default=None),
                  "stock_best_valid_bleu": None}
        if base is not None:
            figures = run_figures(run, base, budget, (), timing)
            stock_test = best_checkpoint_test_bleu(base)
            record.update(tokens_ratio_valid_bleu=_reached(figures["target_tokens_ratio"]),
                          seconds_ratio_valid_bleu=_reached(figures.get("seconds_ratio")),
                          stock_test_bleu=stock_test, stock_best_valid_bleu=figures["target_bleu"])
            test = record["test_bleu"]
            if (timing and test is not None and stock_test is not None and test >= stock_test - TEST_BLEU_MARGIN
                    and run.get("test_checkpoint_updates") and base.get("test_checkpoint_updates")):
                record["seconds_ratio_test_bleu"] = round(
                    run["test_checkpoint_updates"] * timing["median"] / base["test_checkpoint_updates"], 4)
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
