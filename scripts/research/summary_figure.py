#!/usr/bin/env python
"""One picture of every benchmark: each arm's share of the stock frontier's target tokens (bar) and seconds (dot,
with the timing range) to reach the frontier's validation BLEU, per corpus, from the committed results.json files.

    python scripts/research/summary_figure.py            # writes docs/results/summary.png

Random controls (``uniform*``) are hatched; the dashed line is the 0.70 of the tokens that the selection issues
asked for. Arms that never reached the frontier's BLEU (no ratio) are left out.
"""

import argparse
import json
import logging
import os
import sys

from fairseq_autoassist.recipes import ROOT

logger = logging.getLogger("summary_figure")

RESULTS = os.path.join(ROOT, "docs", "results")
# (panel title, results.json under docs/results): the current benchmark of each corpus.
CORPORA = [
    ("Multi30K, trained long (clean)", "benchmark-multi30k-long/results.json"),
    ("Multi30K, 30% noisy (fresh copy)", "benchmark-multi30k-noisy/cosine/multi30k-noisy30-seed2/results.json"),
    ("Multi30K, 30% noisy (mix B)", "benchmark-multi30k-noisy/cosine/multi30k-noisy30-mixB/results.json"),
    ("Tatoeba, five passes", "benchmark-tatoeba/results.json"),
    ("TVsub zh-en, two passes", "benchmark-tvsub/results.json"),
]
TARGET = 0.70


def arm_ratios(path):
    """``[(arm, tokens ratio, seconds ratio, seconds low, seconds high)]`` of the selecting arms (``NAME@SHARE``)
    that reached the stock frontier's validation BLEU, by tokens ratio."""
    with open(path) as f:
        summary = json.load(f)["summary"]
    rows = []
    for arm, figures in summary.items():
        if "@" not in arm or arm.startswith("baseline"):
            continue
        tokens = figures.get("frontier_target_tokens_valid_bleu", {}).get("mean")
        if tokens is None:
            continue
        seconds = [figures.get(f"frontier_seconds_valid_bleu{suffix}", {}).get("mean") for suffix in ("", "_low", "_high")]
        rows.append((arm, tokens, *seconds))
    return sorted(rows, key=lambda row: row[1])


def draw(output):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(title, arm_ratios(os.path.join(RESULTS, path))) for title, path in CORPORA]
    heights = [max(len(rows), 1) for _, rows in panels]
    figure, axes = plt.subplots(len(panels), 1, figsize=(7.5, 0.32 * sum(heights) + 1.2 * len(panels)),
                                gridspec_kw={"height_ratios": heights}, sharex=True)
    for axis, (title, rows) in zip(axes, panels):
        names = [row[0] for row in rows]
        positions = range(len(rows))
        axis.barh(positions, [row[1] for row in rows], color="#9ecae1",
                  hatch=["//" if name.startswith("uniform") else "" for name in names], edgecolor="#3182bd",
                  label="target tokens")
        for position, (_, _, seconds, low, high) in zip(positions, rows):
            if seconds is not None:
                axis.errorbar(seconds, position, xerr=[[seconds - (low or seconds)], [(high or seconds) - seconds]],
                              fmt="o", color="#de2d26", markersize=4, capsize=2)
        axis.set_yticks(list(positions))
        axis.set_yticklabels(names, fontsize=8)
        axis.axvline(TARGET, color="black", linestyle="--", linewidth=1)
        axis.axvline(1.0, color="grey", linewidth=0.8)
        axis.set_title(title, fontsize=9, loc="left")
    axes[-1].set_xlabel("share of the stock frontier's cost to its validation BLEU\n"
                        "bars: target tokens (hatched: random controls); red: seconds with the timing range; "
                        "dashed: 0.70", fontsize=8)
    axes[-1].set_xlim(0.5, 1.4)
    figure.tight_layout()
    figure.savefig(output, dpi=110)
    logger.info("wrote %s", output)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default=os.path.join(RESULTS, "summary.png"))
    draw(parser.parse_args(argv).output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
