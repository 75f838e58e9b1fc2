"""The figures README.md's table and the results index state, recomputed from the committed records.

Each claim names a document, the exact words it states and how the figure in them follows from a committed json
file: a figure edited by hand, or a record rerun without its sentence, fails here. Covered so far: in README.md's
table the clean, noisy and as-released rows; in the results index the rows of the paper's method as released (issue
74), the soak (issue 75), the pair classifier (issue 76), the cleaning filters and the mixing's figures from its
summary; the frontier ratios the README's large-corpus and paper's-method rows and the benchmark rows of the index quote
from the benchmarks' two-seed summaries (``frontier``).
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


def paper_protocol(arm, field="words_ratio_valid_bleu", seeds=(1, 2)):
    return [r[field] for r in records("paper-protocol/summary.json")
            if r["corpus"] == "multi30k" and r["arm"] == arm and r["seed"] in seeds]


def soak(arm, ranks, field):
    return next(r[field] for r in records("soak/soak.json")["runs"] if r["arm"] == arm and r["ranks"] == ranks)


def classifier(field):
    return records("cleaning/classifier/summary.json")[field]


def cleaning(group):
    return records("cleaning/filters/results.json")[group]


def whole_clean(copy, field):
    """``field`` of a noisy copy under the whole ``--clean`` with the classifier."""
    return records("cleaning/classifier/whole-clean/results.json")["noisy"][copy][field]


# The news pairs in Tatoeba under the alignment's corpus-wide random pairings (the measurement that led to pairings
# matched in length).
CORPUS_WIDE_NEWS = "cleaning/corpus-wide-pairings/news-in-tatoeba.json"


def fresh_copies(field):
    """``field`` of the noisy copies but the first (the development copy the defaults were chosen on)."""
    return [copy[field] for copy in list(cleaning("noisy").values())[1:]]


def mixing(corpus, arm, seed=None):
    rows = [r for r in records("mixing/summary.json") if r["corpus"] == corpus and r["arm"] == arm]
    return rows if seed is None else next(r for r in rows if r["seed"] == seed)


def frontier(benchmark, arm, statistic="mean"):
    """A benchmark's two-seed mean (``statistic="mean"``), lower or higher seed (``"low"``, ``"high"``) of ``arm``'s
    target tokens to the stock frontier's validation BLEU, as a share of the frontier's (the benchmark's summary in
    results.json)."""
    entry = records(f"{benchmark}/results.json")["summary"][arm]["frontier_target_tokens_valid_bleu"]
    assert entry["reached"] == entry["seeds"] == 2 and not entry["above"], f"{benchmark} {arm}: not a two-seed ratio"
    return entry["mean"] + {"mean": 0.0, "low": -0.5, "high": 0.5}[statistic] * entry["spread"]


BENCHMARKS = ("benchmark-multi30k-long", "benchmark-tatoeba", "benchmark-tvsub")


def best_of(arm_prefix, benchmarks=BENCHMARKS):
    """The lowest two-seed frontier ratio of the arms named ``arm_prefix@FRACTION`` over ``benchmarks``."""
    return min(frontier(benchmark, arm) for benchmark in benchmarks
               for arm in records(f"{benchmark}/results.json")["summary"] if arm.partition("@")[0] == arm_prefix)


def span(values, scale=1.0, digits=1):
    return f"{scale * min(values):.{digits}f}-{scale * max(values):.{digits}f}"


def keep_all_seconds_to_the_full_runs_bleu():
    """``keep-all``'s seconds to the full stock run's best validation BLEU over the stock run's, where it gets there."""
    return [r["seconds_ratio_valid_bleu"] for r in records("mixing/summary.json")
            if r["arm"].startswith("keep-all") and r["seconds_ratio_valid_bleu"] is not None]


def cleaning_gains():
    """The stock task's test BLEU on each cleaned noisy copy over the raw copy's, per seed (the cosine runs)."""
    def test_bleu(copy):
        rows = records(f"benchmark-multi30k-noisy/cosine/{copy}/results.json")["runs"]
        return {r["seed"]: r["test_bleu"] for r in rows if r["arm"] == "baseline"}

    gains = []
    for copy in ("multi30k-noisy30-seed2", "multi30k-noisy30-mixB"):
        raw, cleaned = test_bleu(copy), test_bleu(f"{copy}-cleaned")
        gains += [cleaned[seed] - raw[seed] for seed in raw]
    return gains


def percent(value):
    return f"{100 * value:+.1f}%"


NOISY = "benchmark-multi30k-noisy/cosine/multi30k-noisy30-"

CLAIMS = [
    ("README.md", "`learnable`: {} of the tokens to validation BLEU at best",
     lambda: f"{best_of('learnable'):.2f}"),
    ("README.md", "no saving over random: {} of the stock tokens at best", lambda: f"{best_of('assistant'):.2f}"),
    ("docs/results/README.md", "`learnable` {} of the tokens, the iterator alone {}, the paper's rule {};",
     lambda: tuple(f"{frontier('benchmark-tvsub', arm):.2f}" for arm in ("learnable@0.7", "keep-all@0.7",
                                                                          "assistant@0.7"))),
    ("docs/results/README.md", "`learnable` {}, random at its share {}, `keep-all` {}.",
     lambda: tuple(f"{frontier('benchmark-tatoeba', arm):.2f}" for arm in ("learnable@0.7", "uniform-0.85@0.7",
                                                                            "keep-all@0.7"))),
    ("docs/results/README.md", "with {} / {} of its target tokens",
     lambda: tuple(f"{frontier('benchmark-multi30k-long', 'keep-all@0.6', end):.2f}" for end in ("low", "high"))),
    ("docs/results/README.md", "`learnable` {} / {} of the frontier's tokens, random {} / {}, `keep-all` {} / {};",
     lambda: tuple(f"{frontier(NOISY + copy, arm):.2f}" for arm in ("learnable@0.7", "uniform-0.85@0.7",
                                                                     "keep-all@0.7") for copy in ("seed2", "mixB"))),
    ("README.md", "the stock run's best BLEU in {} of its words",
     lambda: f"{statistics.mean(paper_protocol('released-2500')):.2f}"),
    ("docs/results/README.md", "reaches the stock run's best validation BLEU in {} of its words",
     lambda: "-".join(f"{value:.3f}" for value in sorted(paper_protocol("released-2500")))),
    ("docs/results/README.md", "and {} of its seconds;",
     lambda: f"{statistics.mean(paper_protocol('released-2500', 'seconds_ratio_valid_bleu')):.2f}"),
    ("docs/results/README.md", "at its share in {} (two seeds), with every pair kept in {} (",
     lambda: (f"{statistics.mean(paper_protocol('uniform-released-2500')):.3f}",
              f"{statistics.mean(paper_protocol('keep-all-released-2500')):.3f}")),
    ("docs/results/README.md", "at the stock task's batch size (3,000 tokens) in {} (two seeds), at random at its "
     "share in {} (one seed)", lambda: ("-".join(f"{value:.3f}" for value in sorted(paper_protocol("released"))),
                                        f"{paper_protocol('uniform-released', seeds=[1])[0]:.3f}")),
    ("README.md", "({} at equal batch sizes)", lambda: f"{statistics.mean(paper_protocol('released')):.2f}"),
    ("docs/results/README.md", "`released` needs at least {} of the stock run's words to its best and this project's "
     "Assistant at least {};", lambda: tuple(f"{paper_protocol(arm, 'words_ratio_at_least', seeds=[1])[0]:.3f}"
                                             for arm in ("released-tuned", "assistant-tuned"))),
    ("docs/results/paper-protocol/README.md", "`released-tuned` at least {}, `released-sorted-tuned` {} (seed 2: {}), "
     "`assistant-tuned` {} (the waterfall's last step)",
     lambda: tuple(f"{paper_protocol(arm, 'seconds_ratio_at_least', seeds=[seed])[0]:.2f}"
                   for arm, seed in (("released-tuned", 1), ("released-sorted-tuned", 1), ("released-sorted-tuned", 2),
                                     ("assistant-tuned", 1)))),
    ("README.md", "the full stock run's BLEU no sooner: in {} of its seconds at best",
     lambda: f"{min(keep_all_seconds_to_the_full_runs_bleu()):.2f}"),
    ("README.md", "+{} to +{} test BLEU over training on the raw corpus",
     lambda: tuple(f"{value:.1f}" for value in (min(cleaning_gains()), max(cleaning_gains())))),
    ("docs/results/README.md", "resident memory grows {} (one rank) and {} (two ranks) with AutoAssist, {} and {} with",
     lambda: (percent(soak("assistant", 1, "memory_growth")), percent(soak("assistant", 2, "memory_growth")),
              percent(soak("stock", 1, "memory_growth")), percent(soak("stock", 2, "memory_growth")))),
    ("docs/results/README.md", "at most {} Assistant snapshots",
     lambda: str(max(soak("assistant", ranks, "most_snapshots") for ranks in (1, 2)))),
    ("docs/results/README.md",
     "ranks ParaCrawl's valid pairs above misaligned and wrong-language ones at AUC {} (bicleaner {})",
     lambda: (f"{classifier('paracrawl_auc_v_vs_al'):.3f}", f"{classifier('bicleaner')['auc_v_vs_al']:.3f}")),
    ("docs/results/README.md", "keeps {}% of the valid pairs for {}% of the misaligned ones",
     lambda: (f"{100 * classifier('paracrawl_valid_kept'):.1f}",
              f"{100 * classifier('paracrawl_misaligned_kept'):.1f}")),
    ("docs/results/README.md", "keeps at most {}% of a noisy copy's corrupted pairs ({}% on the default mix)",
     lambda: (f"{100 * classifier('noisy_corrupted_kept'):.1f}",
              f"{100 * whole_clean('multi30k-noisy30-seed2', 'corrupted_kept'):.1f}")),
    ("docs/results/README.md", "; {}% of long professional translations (WMT21's news) mixed into Tatoeba ({}% before",
     lambda: (f"{100 * cleaning('mixed_in')['news-in-tatoeba']['added_removed_share']:.1f}",
              f"{100 * records(CORPUS_WIDE_NEWS)['rules']['news_removed']:.1f}")),
    ("docs/results/README.md", "removes up to {}% of a clean corpus",
     lambda: f"{100 * classifier('clean_corpus_removed'):.1f}"),
    ("docs/results/README.md", "so it stays off by default; {} seconds per million pairs",
     lambda: f"{classifier('seconds_per_million'):.0f}"),
    ("docs/results/README.md", "{}% of the fresh noisy copies' corrupted pairs kept for {}% of the clean ones",
     lambda: (span(fresh_copies("corrupted_kept"), 100), span(fresh_copies("clean_kept"), 100))),
    ("docs/results/README.md", "; {}% of clean corpora removed;",
     lambda: span([c["removed_share_total"] for c in cleaning("clean").values()], 100)),
    ("docs/results/README.md", "; on ParaCrawl AUC {} of valid against misaligned, below bicleaner's {};",
     lambda: (f"{cleaning('paracrawl')['auc']['badness (the filters together)']['v_vs_al']:.2f}",
              f"{cleaning('paracrawl')['auc']['bicleaner']['v_vs_al']:.2f}")),
    ("docs/results/README.md", "Multi30K at 0.8 of the budget {} / test {} against {} / {} in {} of its seconds on "
     "seed 1, never on seed 2 ({} / {} against {} / {})",
     lambda: tuple(f"{value:.2f}" for value in (
         *(mixing("multi30k-long", "keep-all@0.8", 1)[field] for field in (
             "best_valid_bleu", "test_bleu", "stock_best_valid_bleu", "stock_test_bleu", "seconds_ratio_valid_bleu")),
         *(mixing("multi30k-long", "keep-all@0.8", 2)[field] for field in (
             "best_valid_bleu", "test_bleu", "stock_best_valid_bleu", "stock_test_bleu"))))),
    ("docs/results/README.md", "/ {} (Tatoeba) / {} (TVsub) of the seconds",
     lambda: tuple(f"{statistics.mean(r['frontier_seconds_ratio_valid_bleu'] for r in mixing(corpus, arm)):.2f}"
                   for corpus, arm in (("tatoeba", "keep-all@0.8"), ("tvsub", "keep-all@0.7")))),
]


@pytest.mark.parametrize("document, words, figure", CLAIMS, ids=[f"{d}: {w}" for d, w, _ in CLAIMS])
def test_a_stated_figure_is_the_one_its_record_gives(document, words, figure):
    value = figure()
    stated = words.format(*value) if isinstance(value, tuple) else words.format(value)
    text = " ".join((ROOT / document).read_text(encoding="utf-8").split())
    assert stated in text, f"{document} should state {stated!r} (from its record)"
