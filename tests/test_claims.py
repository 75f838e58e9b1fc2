"""The figures README.md's table and the results index state, recomputed from the committed records.

Each claim names a document, the exact words it states and how the figure in them follows from a committed json
file: a figure edited by hand, or a record rerun without its sentence, fails here. Covered so far: the rows of the
paper's method as released (issue 74), the soak (issue 75) and the pair classifier (issue 76) in the results index;
the older rows are still to be added (they quote ranges from the benchmark tables' two-seed means).
"""

import json
import pathlib
import statistics

import pytest

from . import conftest

ROOT = pathlib.Path(conftest.ROOT)
RESULTS = ROOT / "docs" / "results"


def records(path):
    with open(RESULTS / path) as f:
        return json.load(f)


def paper_protocol(arm, field="words_ratio_valid_bleu"):
    return [r[field] for r in records("paper-protocol/summary.json") if r["corpus"] == "multi30k" and r["arm"] == arm]


def soak(arm, ranks, field):
    return next(r[field] for r in records("soak/soak.json")["runs"] if r["arm"] == arm and r["ranks"] == ranks)


def classifier(field):
    return records("cleaning/classifier/summary.json")[field]


def percent(value):
    return f"{100 * value:+.1f}%"


CLAIMS = [
    ("README.md", "the stock run's best BLEU in {} of its words",
     lambda: f"{statistics.mean(paper_protocol('released-2500')):.2f}"),
    ("README.md", "but so does a random choice of the same share ({})",
     lambda: f"{statistics.mean(paper_protocol('uniform-released-2500')):.3f}"),
    ("docs/results/README.md", "reaches the stock run's best validation BLEU in {} of its words",
     lambda: "-".join(f"{value:.3f}" for value in sorted(paper_protocol("released-2500")))),
    ("docs/results/README.md", "at its share in {} (",
     lambda: f"{statistics.mean(paper_protocol('uniform-released-2500')):.3f}"),
    ("docs/results/README.md", "resident memory grows {} (one rank) and {} (two ranks) with AutoAssist, {} and {} with",
     lambda: (percent(soak("assistant", 1, "memory_growth")), percent(soak("assistant", 2, "memory_growth")),
              percent(soak("stock", 1, "memory_growth")), percent(soak("stock", 2, "memory_growth")))),
    ("docs/results/README.md", "at most {} Assistant snapshots",
     lambda: str(max(soak("assistant", ranks, "most_snapshots") for ranks in (1, 2)))),
    ("docs/results/README.md", "ranks ParaCrawl's valid pairs above misaligned and wrong-language ones at AUC {} (bicleaner {})",
     lambda: (f"{classifier('paracrawl_auc_v_vs_al'):.3f}", f"{classifier('bicleaner')['auc_v_vs_al']:.3f}")),
    ("docs/results/README.md", "keeps {}% of the valid pairs for {}% of the misaligned ones",
     lambda: (f"{100 * classifier('paracrawl_valid_kept'):.1f}", f"{100 * classifier('paracrawl_misaligned_kept'):.1f}")),
    ("docs/results/README.md", "keeps at most {}% of a noisy copy's corrupted pairs",
     lambda: f"{100 * classifier('noisy_corrupted_kept'):.1f}"),
    ("docs/results/README.md", "removes up to {}% of a clean corpus",
     lambda: f"{100 * classifier('clean_corpus_removed'):.1f}"),
    ("docs/results/README.md", "so it stays off by default; {} seconds per million pairs",
     lambda: f"{classifier('seconds_per_million'):.0f}"),
]


@pytest.mark.parametrize("document, words, figure", CLAIMS, ids=[f"{d}: {w}" for d, w, _ in CLAIMS])
def test_a_stated_figure_is_the_one_its_record_gives(document, words, figure):
    value = figure()
    stated = words.format(*value) if isinstance(value, tuple) else words.format(value)
    text = " ".join((ROOT / document).read_text(encoding="utf-8").split())
    assert stated in text, f"{document} should state {stated!r} (from its record)"
