#!/usr/bin/env python
"""The reference models' measurements in one table: the figures the targets of docs/results/reference-models/
name, gathered from the benchmarks' own results.json (nothing recomputed but the kept share's mean).

    python scripts/research/reference_results.py --out docs/results/reference-models \\
        --benchmark tatoeba=docs/results/reference-models/tatoeba/results.json \\
        --benchmark "fresh copy=docs/results/reference-models/noisy/multi30k-noisy30-seed2/results.json"

For every arm of every ``--benchmark NAME=RESULTS_JSON`` (``autoassist-benchmark``'s output): the mean share of the
pairs it kept after its first pass, its best validation BLEU, its test BLEU (and the further test sets'), and its
cost on the stock budget frontier of its seed by validation BLEU and by test BLEU: target tokens and seconds, for
an arm that selects by reference scores also with the reference models' cost counted. Cells as the benchmark's:
the mean over the seeds ± half their range. Writes ``results.json`` and ``results.md`` to ``--out``.
"""

import argparse
import json
import logging
import statistics
import sys

from fairseq_autoassist.benchmark.arms import in_table_order
from fairseq_autoassist.benchmark.report import cell, seconds_cell
from fairseq_autoassist.corpus.raw_corpus import exit_code
from fairseq_autoassist.recipes import write_report

logger = logging.getLogger("reference_results")

# (column, summary key, seconds?) in the table's order.
COLUMNS = [
    ("best valid BLEU", "best_valid_bleu", False),
    ("test BLEU", "test_bleu", False),
    ("tokens by valid BLEU", "frontier_target_tokens_valid_bleu", False),
    ("with reference", "frontier_target_tokens_valid_bleu_with_reference", False),
    ("seconds by valid BLEU", "frontier_seconds_valid_bleu", True),
    ("with reference", "frontier_seconds_valid_bleu_with_reference", True),
    ("tokens by test BLEU", "frontier_target_tokens_test_bleu", False),
    ("with reference", "frontier_target_tokens_test_bleu_with_reference", False),
]
FURTHER_PREFIX = "frontier_target_tokens_test_bleu_"


def benchmark_argument(text):
    name, equals, path = text.partition("=")
    if not equals or not name or not path:
        raise argparse.ArgumentTypeError(f"'{text}': give NAME=RESULTS_JSON")
    return name, path


def kept_share(runs, arm):
    """The mean over seeds of the share of pairs ``arm`` kept in its passes after the first (None: not logged)."""
    means = []
    for run in runs:
        shares = [epoch["kept_share"] for epoch in run["epochs"][1:] if epoch.get("kept_share") is not None]
        if run["arm"] == arm and shares:
            means.append(statistics.mean(shares))
    return statistics.mean(means) if means else None


def collect(benchmarks):
    """``{name: {"results": path, "arms": {arm: {"kept_share", figures...}}}}`` of ``benchmarks`` (name, path)."""
    collected = {}
    for name, path in benchmarks:
        with open(path) as f:
            recorded = json.load(f)
        summary = recorded["summary"]
        arms = {}
        for arm in in_table_order(summary):
            figures = {key: value for key, value in summary[arm].items()
                       if key in {column[1] for column in COLUMNS} or key.startswith(FURTHER_PREFIX)
                       or key.startswith("frontier_seconds_valid_bleu") or key.startswith("frontier_seconds_test_bleu")}
            arms[arm] = {"kept_share": kept_share(recorded["runs"], arm), **figures,
                         "other_test_bleu": other_test_bleu(recorded["runs"], arm)}
        collected[name] = {"results": path, "arms": arms}
    return collected


def other_test_bleu(runs, arm):
    """``{test set: [BLEU of each seed]}`` of ``arm``'s further test sets."""
    found = {}
    for run in runs:
        if run["arm"] == arm:
            for test_set, bleu in run.get("other_test_bleu", {}).items():
                found.setdefault(test_set, []).append(bleu)
    return found


def markdown(collected):
    lines = []
    for name, benchmark in collected.items():
        header = ["arm", "kept after the first pass"] + [column for column, _, _ in COLUMNS]
        lines += [f"## {name}", "", f"From `{benchmark['results']}`.", "", "| " + " | ".join(header) + " |",
                  "|---" * len(header) + "|"]
        for arm, figures in benchmark["arms"].items():
            share = figures["kept_share"]
            cells = [arm, "-" if share is None else f"{share:.2f}"]
            cells += [seconds_cell(figures, key) if seconds else cell(figures.get(key)) for _, key, seconds in COLUMNS]
            lines.append("| " + " | ".join(cells) + " |")
        further = sorted({key[len(FURTHER_PREFIX):] for figures in benchmark["arms"].values() for key in figures
                          if key.startswith(FURTHER_PREFIX) and not key.endswith("_with_reference")})
        for test_set in further:
            lines += ["", f"Further test set `{test_set}`: test BLEU of each seed, and target tokens by its BLEU on the "
                      "frontier (with the reference's cost where an arm has one).", "",
                      "| arm | test BLEU per seed | tokens by its BLEU | with reference |", "|---|---|---|---|"]
            for arm, figures in benchmark["arms"].items():
                per_seed = figures["other_test_bleu"].get(test_set, [])
                lines.append(f"| {arm} | {' / '.join(f'{bleu:.2f}' for bleu in per_seed) or '-'} | "
                             f"{cell(figures.get(FURTHER_PREFIX + test_set))} | "
                             f"{cell(figures.get(FURTHER_PREFIX + test_set + '_with_reference'))} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", type=benchmark_argument, action="append", required=True,
                        metavar="NAME=RESULTS_JSON", help="a benchmark's results.json, under a name for its table")
    parser.add_argument("--out", required=True, help="folder for results.md and results.json")
    args = parser.parse_args(argv)

    def write():
        collected = collect(args.benchmark)
        logger.info("wrote %s", write_report(args.out, "results", collected, markdown(collected)))

    return exit_code(write, logger)


if __name__ == "__main__":
    sys.exit(main())
