"""The benchmark (fairseq_autoassist.benchmark, autoassist-benchmark): the smoke preset end to end, resume after a
kill, and every figure on known numbers."""

import argparse
import json
import os
import re

import numpy as np
import pytest

from fairseq_autoassist.benchmark import figures, logs, report, runs as benchmark_runs
from fairseq_autoassist.benchmark.arms import ARMS, PRESETS, arm_argument, in_table_order, timed_arms, training_args
from fairseq_autoassist.corpus.raw_corpus import SCORES_FOLDER
from fairseq_autoassist.recipes import TRAINING_MALLOC_ENV
from fairseq_autoassist.benchmark import command as benchmark

from .conftest import run_script


def run(arm, *validations, seed=1, tokens_per_update=100.0, test_bleu=None, epochs=None, tested_at="best"):
    """A run of ``arm``: ``validations`` as ``(updates, valid_loss, valid_bleu)``, one epoch ending at the last
    validation (or ``epochs`` as ``(updates, target tokens)`` ends), a constant number of target tokens per update,
    its ``test_bleu`` that of the checkpoint at ``tested_at`` updates (default: its best validation's; None: not
    recorded)."""
    points = [{"updates": u, "valid_loss": loss, "valid_bleu": b} for u, loss, b in validations]
    ends = epochs or [(points[-1]["updates"], points[-1]["updates"] * tokens_per_update)]
    if tested_at == "best":
        tested_at = max(points, key=lambda point: point["valid_bleu"])["updates"]
    return {"arm": arm, "seed": seed, "test_bleu": test_bleu, "validations": points, "test_checkpoint_updates": tested_at,
            "epochs": [{"epoch": i + 1, "updates": u, "target_tokens": t, "kept_share": 1.0}
                       for i, (u, t) in enumerate(ends)]}


def test_best_is_taken_from_every_validation_mid_epoch_ones_included():
    # The baseline's best validation (30 at 150 updates) falls mid-epoch; its epoch ends read 20 and 28.
    base = run("baseline", (100, 4.5, 20), (150, 4.0, 30), (200, 4.1, 28), epochs=[(100, 1e4), (200, 2e4)])
    arm = run("keep-all", (100, 4.4, 25), (200, 3.9, 31), epochs=[(100, 1e4), (200, 2e4)])
    summary = figures.derive([base, arm], budget=200)
    assert summary["baseline"]["best_valid_bleu"]["mean"] == 30
    assert summary["baseline"]["lowest_valid_loss"]["mean"] == 4.0
    assert summary["keep-all"]["target_bleu"]["mean"] == 30
    # 30 first reached five sixths of the way from 25 at 100 updates to 31 at 200, against the baseline's 150.
    assert summary["keep-all"]["updates_ratio"]["mean"] == pytest.approx((100 + 100 * 5 / 6) / 150)


def test_ratios_by_target_tokens_count_the_larger_batches_of_an_arm():
    base = run("baseline", (100, 5.0, 10), (200, 4.0, 20), (400, 3.5, 30))
    # The same curve in 0.8 of the updates, with 1.1 times the target tokens per update.
    arm = run("keep-all", (80, 5.0, 10), (160, 4.0, 20), (320, 3.5, 30), tokens_per_update=110.0)
    summary = figures.derive([base, arm], budget=400, bleu_levels=[20])
    keep_all = summary["keep-all"]
    assert keep_all["tokens_per_update_ratio"]["mean"] == pytest.approx(1.1)
    assert keep_all["updates_ratio"]["mean"] == pytest.approx(0.8)
    assert keep_all["target_tokens_ratio"]["mean"] == pytest.approx(0.88)
    assert keep_all["target_tokens_ratio_at_bleu_20"]["mean"] == pytest.approx(0.88)
    assert "seconds_ratio" not in keep_all
    # Each arm's time per update over the stock task's (median session, range over sessions) turns updates into
    # seconds, with the range beside the median.
    timing = {"baseline": {"median": 1.0, "low": 1.0, "high": 1.0}, "keep-all": {"median": 1.1, "low": 1.05, "high": 1.2}}
    timed = figures.derive([base, arm], budget=400, time_per_update=timing)
    assert timed["keep-all"]["seconds_ratio"]["mean"] == pytest.approx(0.8 * 1.1)
    assert timed["keep-all"]["seconds_ratio_low"]["mean"] == pytest.approx(0.8 * 1.05)
    assert timed["keep-all"]["seconds_ratio_high"]["mean"] == pytest.approx(0.8 * 1.2)
    at_budget = figures.derive([base, dict(arm, arm="keep-all@0.8")], budget=400, time_per_update=timing)
    assert at_budget["keep-all@0.8"]["seconds_per_update_ratio"]["mean"] == pytest.approx(1.1)
    # A budget-matched stock run updates as the stock task does, as its curves against seconds show it.
    stock_at_budget = figures.derive([base, dict(base, arm="baseline-cosine-0.5")], budget=400, time_per_update=timing)
    assert stock_at_budget["baseline-cosine-0.5"]["seconds_per_update_ratio"]["mean"] == 1.0
    table = report.markdown(timed, {"command": "cmd"}, "machine", 400, timed=True)
    assert "| keep-all | 1.100 | 0.80 | 0.88 | 0.88 [0.84-0.96] |" in table
    assert "budget frontier" not in table  # no budget-matched baseline among the runs


def test_seconds_come_from_one_timing_of_every_arm_in_at_least_three_sessions(tmp_path, capsys):
    def timing(name, sessions, **ratios):
        path = tmp_path / name
        path.write_text(json.dumps({"sessions": [{}] * sessions, "ratio_to_baseline": {
            arm: {"median": median, "low": low, "high": high} for arm, (median, low, high) in ratios.items()}}))
        return str(path)

    complete = timing("all.json", 3, **{"baseline": (1, 1, 1), "keep-all": (1.1, 1.05, 1.2), "uniform": (1.0, 0.9, 1.1)})
    # The stock task's variants update as the stock task does: they need no timing of their own.
    assert benchmark.read_time_per_update(None, complete, ["baseline-cosine-0.6", "keep-all@0.7", "baseline"]) == {
        "baseline": {"median": 1, "low": 1, "high": 1}, "keep-all": {"median": 1.1, "low": 1.05, "high": 1.2}}
    assert benchmark.read_time_per_update(None, None, ["keep-all"]) is None
    # The stock task's own seconds per update, where the timing has them, price a reference model's scoring.
    with_seconds = json.loads(open(complete).read())
    with_seconds["median_seconds_per_update"] = {"baseline": 0.2, "keep-all": 0.22}
    (tmp_path / "seconds.json").write_text(json.dumps(with_seconds))
    assert benchmark.read_time_per_update(None, str(tmp_path / "seconds.json"), ["keep-all"])["baseline"] == {
        "median": 1, "low": 1, "high": 1, "seconds": 0.2}
    parser = argparse.ArgumentParser()
    one_session = timing("one.json", 1, **{"baseline": (1, 1, 1), "keep-all": (1.1, 1.1, 1.1)})
    with pytest.raises(SystemExit):
        benchmark.read_time_per_update(parser, one_session, ["keep-all"])
    assert "times 1 session(s), not the 3 that give a range" in capsys.readouterr().err
    # An arm the timing lacks is refused (it cannot come from another timing), with the command that times them all.
    with pytest.raises(SystemExit):
        benchmark.read_time_per_update(parser, complete, ["keep-all", "learnable"])
    assert "does not time learnable; time every arm of the preset together" in capsys.readouterr().err


def test_tokens_between_epoch_ends_are_interpolated():
    arm = run("keep-all", (50, 5.0, 1), (150, 4.0, 2), epochs=[(100, 1000.0), (200, 3000.0)])
    assert [point["target_tokens"] for point in figures.with_tokens(arm)] == [500.0, 2000.0]


def test_figures_compare_with_the_budget_matched_baseline():
    runs = [
        run("baseline", (100, 4, 10), (200, 4, 20), (300, 4, 29), (400, 4, 30)),
        # Decays to 0 at 320 updates (0.8 of 400) and ends at 26: never reaches the baseline's 30.
        run("baseline-cosine-0.8", (100, 4, 12), (200, 4, 22), (320, 4, 26)),
        # Reaches 30 at 250 updates: 0.625 of the baseline's 400, before the budget-matched baseline.
        run("assistant", (100, 4, 10), (200, 4, 25), (300, 4, 35), (400, 4, 36)),
        # Never reaches 30 and stands below the budget-matched baseline's 26 by 320 updates.
        run("uniform", (100, 4, 10), (200, 4, 20), (300, 4, 25), (400, 4, 28)),
    ]
    summary = figures.derive(runs, budget=400)
    assert summary["assistant"]["updates_ratio"]["mean"] == pytest.approx(250 / 400)
    assert summary["assistant"]["beats_budget_0.8"]["mean"] == 1.0
    # An arm that never reaches the target counts at its whole cost over the baseline's: at least 400 / 400.
    assert summary["uniform"]["updates_ratio"]["mean"] == 1.0 and summary["uniform"]["updates_ratio"]["below"] == 1
    assert summary["uniform"]["beats_budget_0.8"]["mean"] == 0.0
    assert summary["assistant"]["bleu_by_0.6"]["mean"] == 25 and summary["assistant"]["bleu_by_end"]["mean"] == 36
    # The baseline gained 1.0 BLEU in its last quarter (29 by 300 updates, 30 at 400): no plateau yet.
    assert summary["baseline"]["plateau_gain"]["mean"] == pytest.approx(1.0)
    assert "plateau_gain" not in summary["uniform"] and "beats_budget_0.8" not in summary["baseline-cosine-0.8"]
    table = report.markdown(summary, {"command": "cmd"}, "machine", 400)
    assert "| assistant | 1.000 | 0.62 | 0.62 |" in table
    assert "| uniform | 1.000 | >= 1.00 | >= 1.00 |" in table


def test_a_rule_at_a_smaller_budget_is_judged_against_the_baseline_of_that_budget():
    runs = [
        run("baseline", (100, 4, 10), (200, 4, 20), (300, 4, 29), (400, 4, 30)),
        run("baseline-cosine-0.6", (100, 4, 12), (200, 4, 24), (240, 4, 27)),
        # Never reaches the baseline's 30 but ends above the 0.6 baseline's 27 at the same budget.
        run("assistant@0.6", (100, 4, 12), (200, 4, 25), (240, 4, 28)),
        run("uniform@0.6", (100, 4, 12), (200, 4, 23), (240, 4, 26)),  # ends below it
    ]
    summary = figures.derive(runs, budget=400)
    assert summary["assistant@0.6"]["beats_same_budget"]["mean"] == 1.0
    assert summary["uniform@0.6"]["beats_same_budget"]["mean"] == 0.0
    # Without a 0.8 baseline among the runs that figure does not apply; nor does the comparison to itself.
    assert "beats_budget_0.8" not in summary["assistant@0.6"]
    assert "beats_same_budget" not in summary["baseline-cosine-0.6"]


def test_an_arm_is_placed_on_a_frontier_concave_in_the_cost():
    runs = [
        run("baseline", (200, 4.5, 25), (400, 3.8, 30), test_bleu=40),
        run("baseline-cosine-0.5", (200, 4.6, 20), test_bleu=34),
        run("baseline-cosine-0.6", (200, 4.4, 23), (240, 4.2, 24), test_bleu=36),
        run("baseline-cosine-0.8", (200, 4.4, 23), (320, 4.0, 28), test_bleu=38),
        # Best 26 at 240 updates: halfway from the 0.6 baseline's 24 to the 0.8 one's 28, which a curve linear in
        # log updates puts at sqrt(240 * 320) updates (a straight line: at 280, flattering the arm).
        run("assistant@0.6", (200, 4.1, 26), (240, 4.15, 25), test_bleu=39),
        # Below the smallest budget on each measure: no saving. Above the full one: beyond the frontier.
        run("uniform@0.6", (240, 4.7, 19), test_bleu=33),
        run("keep-all", (400, 3.7, 31), test_bleu=41),
    ]
    frontier = figures.budget_frontier(runs[:4], figures.MEASURES["valid_bleu"])
    assert frontier == [(200, 20), (240, 24), (320, 28), (400, 30)]
    assert figures.budget_frontier(runs[:4], figures.MEASURES["valid_loss"]) == [
        (200, -4.6), (240, -4.2), (320, -4.0), (400, -3.8)]
    summary = figures.derive(runs, budget=400)
    assistant = summary["assistant@0.6"]
    assert assistant["frontier_updates_valid_bleu"]["mean"] == pytest.approx(240 / (240 * 320) ** 0.5)
    assert assistant["frontier_target_tokens_valid_bleu"]["mean"] == pytest.approx(240 / (240 * 320) ** 0.5)
    # Its lowest loss, 4.1, lies halfway from the 0.6 baseline's to the 0.8 one's; its test BLEU, 39, halfway
    # from the 0.8 baseline's 38 to the full one's 40.
    assert assistant["frontier_updates_valid_loss"]["mean"] == pytest.approx(240 / (240 * 320) ** 0.5)
    assert assistant["frontier_updates_test_bleu"]["mean"] == pytest.approx(240 / (320 * 400) ** 0.5)
    for measure in figures.MEASURES:
        assert summary["uniform@0.6"][f"frontier_updates_{measure}"]["below"] == 1
        assert summary["keep-all"][f"frontier_updates_{measure}"]["above"] == 1
        assert f"frontier_updates_{measure}" not in summary["baseline"]
        assert f"frontier_updates_{measure}" not in summary["baseline-cosine-0.8"]
    # Outside the frontier a ratio is a bound at its nearer end: at least 240 / 200, at most 400 / 400.
    assert summary["uniform@0.6"]["frontier_updates_valid_bleu"]["mean"] == pytest.approx(1.2)
    assert summary["keep-all"]["frontier_updates_valid_bleu"]["mean"] == pytest.approx(1.0)
    table = report.markdown(summary, {"command": "cmd"}, "machine", 400)
    assert "| uniform@0.6 | >= 1.20 | >= 1.20 |" in table
    assert "| keep-all | <= 1.00 | <= 1.00 |" in table
    # Every seed counts in the mean: a seed below the frontier and one above it at their bounds, and then the mean
    # bounds nothing.
    second = [dict(r, seed=2) for r in runs[:4]] + [run("assistant@0.6", (240, 4.7, 19), seed=2, test_bleu=33)]
    third = [dict(r, seed=3) for r in runs[:4]] + [run("assistant@0.6", (240, 3.0, 35), seed=3, test_bleu=50)]
    summary = figures.derive(runs + second + third, budget=400)
    ratios = [240 / (240 * 320) ** 0.5, 240 / 200, 240 / 400]
    stat = summary["assistant@0.6"]["frontier_updates_valid_bleu"]
    assert stat["mean"] == pytest.approx(sum(ratios) / 3) and stat["reached"] == stat["seeds"] == 3
    assert report.cell(stat) == "0.89 ± 0.30 (1 at least, 1 at most: no bound)"
    # Two seeds, one of them without the figure: n beside the mean.
    assert report.cell({"mean": 0.9, "spread": 0.0, "reached": 1, "seeds": 2, "below": 0, "above": 0}) == \
        "0.90 (n=1 of 2)"


def test_further_test_sets_place_an_arm_on_their_own_frontier():
    def scored(arm_run, news):
        return dict(arm_run, other_test_bleu={"news": news})

    runs = [scored(run("baseline", (400, 3.8, 30), test_bleu=40), 12.0),
            scored(run("baseline-cosine-0.6", (240, 4.2, 24), test_bleu=36), 10.0),
            scored(run("baseline-cosine-0.8", (320, 4.0, 28), test_bleu=38), 11.0),
            # In domain halfway from the 0.6 to the 0.8 baseline; on the further test set at the 0.8 one's.
            scored(run("assistant@0.6", (240, 4.1, 26), test_bleu=37), 11.0)]
    assistant = figures.derive(runs, budget=400)["assistant@0.6"]
    assert assistant["frontier_updates_test_bleu"]["mean"] == pytest.approx(240 / (240 * 320) ** 0.5)
    assert assistant["frontier_updates_test_bleu_news"]["mean"] == pytest.approx(240 / 320)
    table = report.markdown(figures.derive(runs, budget=400), {"command": "cmd"}, "machine", 400)
    assert "by test bleu: target tokens | by test bleu news: updates |" in table
    assert "| 0.75 | 0.75 |\n" in table


def test_an_arm_that_selects_by_a_reference_pays_for_the_reference_on_the_frontier():
    runs = [run("baseline", (200, 4.5, 25), (400, 3.8, 30)),
            run("baseline-cosine-0.6", (200, 4.4, 23), (240, 4.2, 24)),
            run("baseline-cosine-0.8", (200, 4.4, 23), (320, 4.0, 28)),
            # At the 0.8 baseline's BLEU in 240 updates of its own, after reference models that took 40 updates
            # (and 40 x 100 target tokens, as the arm's updates carry here).
            dict(run("reducible@0.6", (200, 4.1, 26), (240, 4.0, 28)),
                 reference_cost={"updates": 40, "target_tokens": 4000, "score_seconds": 5.0})]
    reducible = figures.derive(runs, budget=400)["reducible@0.6"]
    assert reducible["frontier_updates_valid_bleu"]["mean"] == pytest.approx(240 / 320)
    assert reducible["frontier_updates_valid_bleu_with_reference"]["mean"] == pytest.approx(280 / 320)
    assert reducible["frontier_target_tokens_valid_bleu_with_reference"]["mean"] == pytest.approx(280 / 320)
    table = report.markdown(figures.derive(runs, budget=400), {"command": "cmd"}, "machine", 400)
    assert "by valid bleu with reference: updates | by valid bleu with reference: target tokens |" in table
    assert "with_reference" not in str(figures.derive(runs[:3], budget=400))
    # In seconds: the arm's updates at 1.1 (1.0-1.2) of the stock task's time per update, the reference's 40 updates
    # at the stock task's, and its 5 s of scoring at 0.25 s per stock update: 20 updates more.
    timing = {"baseline": {"median": 1.0, "low": 1.0, "high": 1.0, "seconds": 0.25},
              "reducible": {"median": 1.1, "low": 1.0, "high": 1.2}}
    timed = figures.derive(runs, budget=400, time_per_update=timing)["reducible@0.6"]
    assert timed["frontier_seconds_valid_bleu"]["mean"] == pytest.approx(240 * 1.1 / 320)
    assert timed["frontier_seconds_valid_bleu_with_reference"]["mean"] == pytest.approx((240 * 1.1 + 60) / 320)
    assert timed["frontier_seconds_valid_bleu_with_reference_high"]["mean"] == pytest.approx((240 * 1.2 + 60) / 320)


def test_a_baseline_without_a_test_bleu_gives_no_test_bleu_frontier():
    runs = [run("baseline", (400, 3.8, 30), test_bleu=40), run("baseline-cosine-0.6", (240, 4.2, 24)),
            run("assistant@0.6", (240, 4.1, 26), test_bleu=39)]
    assert figures.budget_frontier(runs[:2], figures.MEASURES["test_bleu"]) is None
    summary = figures.derive(runs, budget=400)
    assert "frontier_updates_test_bleu" not in summary["assistant@0.6"]
    assert "frontier_updates_valid_bleu" in summary["assistant@0.6"]


def test_kept_shares_of_corrupted_and_clean_pairs_are_tabulated_after_the_first_epoch():
    base = run("baseline", (100, 4, 10), (200, 4, 20), (300, 4, 30), epochs=[(100, 1e4), (200, 2e4), (300, 3e4)])
    learnable = run("learnable", (100, 4, 10), (200, 4, 20), (300, 4, 30), epochs=[(100, 1e4), (200, 2e4), (300, 3e4)])
    for row, (noisy, clean) in zip(learnable["epochs"], [(1.0, 1.0), (0.4, 0.9), (0.2, 0.9)]):
        row.update(kept_share_noisy=noisy, kept_share_clean=clean)
    summary = figures.derive([base, learnable], budget=300)
    assert summary["learnable"]["kept_share_noisy"]["mean"] == pytest.approx(0.3)
    assert summary["learnable"]["kept_share_clean"]["mean"] == pytest.approx(0.9)
    assert "kept_share_noisy" not in summary["baseline"]
    assert "| learnable | 0.30 | 0.90 |" in report.markdown(summary, {"command": "cmd"}, "machine", 300)


def test_a_per_epoch_figure_is_drawn_as_one_step_per_epoch():
    # Two passes of 100 updates, all pairs then 0.7: the share holds over each pass and drops at its boundary.
    xs, ys = report.epoch_steps([100, 200], [1.0, 0.7])
    assert list(zip(xs, ys)) == [(0, 1.0), (100, 1.0), (100, 0.7), (200, 0.7)]
    assert report.epoch_steps([], []) == ([], [])


TRAIN_LINE = ("2026-11-30 | INFO | train | epoch {epoch:03d} | loss 4.1 | wpb 1700 | train_wall {wall} "
              "| num_updates {updates}{extra}")


VALID_LINE = ("2026-11-30 | INFO | valid | epoch {epoch:03d} | valid on 'valid' subset | loss {loss} | nll_loss 3.1 "
              "| ppl 8.6 | bleu {bleu} | wps 3000 | wpb 1500 | bsz 100 | num_updates {updates} | best_bleu {bleu}")


def derive_beside_a_baseline(arm, log_text, updates):
    """``figures.derive`` of a run of ``arm`` logged as ``log_text`` and a one-epoch stock run of ``updates``."""
    baseline = "\n".join([TRAIN_LINE.format(epoch=1, wall=30, updates=updates, extra=""),
                          VALID_LINE.format(epoch=1, loss=4.0, bleu=20.0, updates=updates)])
    runs = [{"arm": name, "seed": 1, "epochs": logs.parse_epochs(text), "validations": logs.parse_validations(text),
             "test_bleu": 1.0} for name, text in (("baseline", baseline), (arm, log_text))]
    return figures.derive(runs, budget=updates)


def test_the_selection_cpu_share_comes_from_the_last_epoch_of_an_arm_that_logs_it():
    selecting = "\n".join([
        TRAIN_LINE.format(epoch=1, wall=10, updates=10, extra=" | aa_cpu_select 1 | aa_cpu_process 100"),
        TRAIN_LINE.format(epoch=2, wall=20, updates=20,
                          extra=" | aa_kept 0.7 | aa_cpu_select 2 | aa_cpu_process 400 | aa_cpu_assistant 6"),
        VALID_LINE.format(epoch=2, loss=4.0, bleu=20.0, updates=20),
    ])
    summary = derive_beside_a_baseline("assistant", selecting, updates=20)
    assert summary["assistant"]["selection_cpu_share"]["mean"] == pytest.approx(8 / 400)
    assert "selection_cpu_share" not in summary["baseline"]
    assert "| assistant | 0.0200 |" in report.markdown(summary, {"command": "cmd"}, "machine", 20)


def test_who_decides_is_averaged_over_the_epochs_that_consulted_the_assistant():
    # Epoch 1 is the warm-up: the log shows nan there (no decision), so its AUC is left out too.
    text = "\n".join([
        TRAIN_LINE.format(epoch=1, wall=10, updates=10, extra=" | aa_auc_new 0.5 | aa_own_share nan"),
        TRAIN_LINE.format(epoch=2, wall=20, updates=20, extra=" | aa_kept 0.7 | aa_auc_new 0.8 | aa_own_share 0.2"
                                                                    " | aa_auc_seen 0.6"),
        TRAIN_LINE.format(epoch=3, wall=30, updates=30, extra=" | aa_kept 0.7 | aa_auc_new 0.9 | aa_own_share 0.6"),
        VALID_LINE.format(epoch=3, loss=4.0, bleu=20.0, updates=30),
    ])
    summary = derive_beside_a_baseline("learnable", text, updates=30)
    assert summary["learnable"]["own_loss_share"]["mean"] == pytest.approx(0.4)
    assert summary["learnable"]["assistant_auc_new"]["mean"] == pytest.approx(0.85)
    assert "own_loss_share" not in summary["baseline"]
    assert summary["learnable"]["assistant_auc_seen"]["mean"] == pytest.approx(0.6)
    assert "| learnable | 0.40 | 0.85 | 0.60 |" in report.markdown(summary, {"command": "cmd"}, "machine", 30)


INNER_LINE = ("2026-12-04 | INFO | train_inner | epoch {epoch:03d}:     17 / 8918 loss=5.7, wpb=1911, "
              "num_updates={updates}, lr=0.0003, aa_kept=0.74, aa_auc_new=0.89, aa_auc_seen={seen}, aa_own_share=0")


def test_an_epoch_mean_made_nan_by_undefined_steps_is_the_mean_of_its_defined_intervals():
    # The log of a run whose epoch 2 started with too few pairs seen before: the epoch's own mean is NaN.
    text = "\n".join([
        TRAIN_LINE.format(epoch=1, wall=10, updates=10, extra=" | aa_auc_new 0.5 | aa_auc_seen nan"),
        INNER_LINE.format(epoch=2, updates=12, seen="nan"),
        INNER_LINE.format(epoch=2, updates=14, seen="0.9").replace("aa_auc_new=0.89", "aa_auc_new=0.5"),
        INNER_LINE.format(epoch=2, updates=16, seen="0.5"),
        INNER_LINE.format(epoch=2, updates=16, seen="0.7"),  # after a resume, logged again: the last one counts
        TRAIN_LINE.format(epoch=2, wall=20, updates=20,
                          extra=" | aa_kept 0.7 | aa_auc_new 0.89 | aa_auc_seen nan | aa_own_share 0"),
    ])
    first, second = logs.parse_epochs(text)
    assert first["assistant_auc_seen"] is None
    assert second["assistant_auc_seen"] == pytest.approx(0.8)
    assert second["assistant_auc_new"] == 0.89  # the epoch's own mean where it has one
    assert second["own_loss_share"] == 0


def test_test_bleu_counts_only_where_the_best_validations_checkpoint_was_tested():
    # Recorded before the tested checkpoint was: validated at its epoch ends only, each with its checkpoint.
    base = run("baseline", (100, 4.5, 20), (200, 4.0, 30), test_bleu=31, epochs=[(100, 1e4), (200, 2e4)], tested_at=None)
    # Validated mid-epoch at 150 (its best), tested on a checkpoint of the epoch end at 200 (or one not recorded).
    elsewhere = run("keep-all", (150, 4.0, 33), (200, 4.1, 32), test_bleu=35, tested_at=200)
    unrecorded = run("uniform", (150, 4.0, 33), (200, 4.1, 32), test_bleu=35, tested_at=None)
    at_best = run("learnable", (150, 4.0, 33), (200, 4.1, 32), test_bleu=34)
    assert [figures.best_checkpoint_tested(r) for r in (base, elsewhere, unrecorded, at_best)] == [True, False, False, True]
    summary = figures.derive([base, elsewhere, unrecorded, at_best], budget=200)
    assert summary["keep-all"]["test_bleu"]["mean"] is None and summary["uniform"]["test_bleu"]["mean"] is None
    assert summary["learnable"]["test_bleu"]["mean"] == 34 and summary["baseline"]["test_bleu"]["mean"] == 31
    table = report.test_checkpoint_table([base, elsewhere, unrecorded, at_best])
    assert "| baseline | an epoch end, best |" in table and "| keep-all | 200, not the best |" in table
    assert "| uniform | an epoch end, not the best |" in table and "| learnable | 150, best |" in table


def test_the_memory_table_shows_each_runs_peak_and_says_where_none_was_recorded():
    recorded = dict(run("baseline", (100, 4.5, 20)), peak_resident_mb=1650)
    older = run("learnable", (100, 4.5, 20), seed=2)
    table = report.peak_memory_table([recorded, older])
    assert "| baseline | 1,650 | - |" in table and "| learnable | - | not recorded |" in table


def test_equal_tokens_compare_every_seed_and_at_the_common_end_of_the_whole_budget_runs():
    def curve(arm, seed, *points):  # (updates, valid loss) at 100 target tokens per update
        return run(arm, *[(u, loss, 10.0) for u, loss in points], seed=seed)

    runs = [curve("baseline", 1, (100, 6.0), (200, 5.0)), curve("keep-all", 1, (100, 5.8), (200, 4.8)),
            curve("baseline", 2, (100, 6.2), (180, 5.4)), curve("keep-all", 2, (100, 5.6), (200, 4.6)),
            curve("baseline-cosine-0.4", 1, (80, 6.5)), curve("baseline-cosine-0.4", 2, (80, 6.7))]
    table = report.equal_token_table(runs, interval=100)
    # Seed 2's stock run ends at 18,000 tokens: there every whole-budget run compares, on both seeds; at 20,000
    # the stock task has one seed only, so no mean.
    assert "common end of the runs of the whole budget, 0.018M" in table
    assert "| baseline | 6.100 | 5.300 (5.200 / 5.400) | - |" in table
    assert "| keep-all | 5.700 | 4.900 (5.000 / 4.800) | 4.700 |" in table
    # A shorter budget does not move the common end; where it does not span a count, "-".
    assert "| baseline-cosine-0.4 | - | - | - |" in table


def test_validations_are_tabulated_at_equal_update_counts():
    def log(points):
        return "\n".join(VALID_LINE.format(epoch=e, loss=l, bleu=b, updates=u) for e, u, l, b in points)

    baseline = logs.parse_validations(log([(1, 100, 5.0, 10.0), (1, 120, 4.9, 11.0), (2, 200, 4.0, 20.0)]))
    assert [p["updates"] for p in baseline] == [100, 120, 200]
    assert baseline[2] == {"updates": 200, "valid_loss": 4.0, "valid_bleu": 20.0}
    # A shrinking arm ends its epochs elsewhere; only the multiples of the interval are compared, and a
    # budget-matched arm that stopped earlier has none past its budget.
    assistant = logs.parse_validations(log([(1, 100, 4.8, 12.0), (2, 160, 4.5, 15.0), (3, 200, 3.8, 22.0)]))
    matched = logs.parse_validations(log([(1, 100, 4.7, 13.0), (2, 150, 4.6, 14.0)]))
    runs = [{"arm": "baseline", "validations": baseline}, {"arm": "assistant", "validations": assistant},
            {"arm": "baseline-cosine-0.8", "validations": matched}]
    table = report.equal_update_table(runs, interval=100)
    assert "| 100 | 200 |" in table
    assert "| assistant | 4.800 / 12.00 | 3.800 / 22.00 |" in table
    assert "| baseline-cosine-0.8 | 4.700 / 13.00 | - |" in table
    # Past MAX_UPDATE_COLUMNS multiples, every k-th is shown, the last one always.
    long_run = [{"arm": "baseline", "validations": [{"updates": u, "valid_loss": 4.0, "valid_bleu": 30.0}
                                                    for u in range(100, 1700, 100)]}]
    assert "| 200 | 400 | 600 | 800 | 1000 | 1200 | 1400 | 1600 |" in report.equal_update_table(long_run, 100)
    assert report.equal_update_table(runs, interval=0) == ""




@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The smoke preset, run once for the tests of this module: its folder and what it printed."""
    out = tmp_path_factory.mktemp("benchmark") / "smoke"
    return out, run_script("-m", "fairseq_autoassist.benchmark.command", "--preset", "smoke", "--out", str(out), timeout=1500).stdout


@pytest.mark.slow
def test_smoke_preset_runs_every_arm_and_writes_every_output(smoke_run):
    out, printed = smoke_run
    with open(out / "results.json") as f:
        results = json.load(f)
    assert {run["arm"] for run in results["runs"]} == set(PRESETS["smoke"]["arms"])
    for run in results["runs"]:
        # The same update budget for every arm (three full epochs of the baseline), a fraction of it for
        # the budget-matched baselines, a multiple for the arms whose batches mix lengths (the released ones).
        spec = ARMS[run["arm"]]
        budget = spec.get("budget", 1.0) * spec.get("update_factor", 1.0) * PRESETS["smoke"]["max_update"]
        assert run["epochs"][-1]["updates"] == round(budget)
        # Validated every 20 updates (and at each epoch end): every arm at the same update counts.
        assert {u for u in (20, 40, 60) if u <= budget} <= {point["updates"] for point in run["validations"]}
        assert run["test_bleu_signature"].startswith("nrefs:1|case:mixed")
    baseline_epochs = len(next(run for run in results["runs"] if run["arm"] == "baseline")["epochs"])
    assert baseline_epochs == 3
    shrinking = [run for run in results["runs"] if run["arm"] in ("assistant", "uniform", "infobatch", "spl")]
    assert all(run["epochs"][-1]["kept_share"] < 1.0 and len(run["epochs"]) > baseline_epochs for run in shrinking)
    for name in ("results.md", "bleu_vs_updates.png", "bleu_vs_tokens.png", "loss_vs_tokens.png", "kept_share.png"):
        assert (out / name).stat().st_size > 0
    assert "| assistant |" in printed and "updates to the baseline's best" in printed
    assert results["summary"]["baseline"]["tokens_per_update_ratio"]["mean"] == pytest.approx(1.0)
    for run in results["runs"]:
        # The test BLEU is that of the checkpoint saved at the best validation.
        best = max(point["valid_bleu"] for point in run["validations"])
        assert run["test_checkpoint_updates"] in [p["updates"] for p in run["validations"] if p["valid_bleu"] == best]
    # The figures recomputed from results.json alone are the same.
    run_script("-m", "fairseq_autoassist.benchmark.command", "--preset", "smoke", "--out", str(out / "rescored"), "--rescore",
               str(out / "results.json"))
    with open(out / "rescored" / "results.json") as f:
        rescored = json.load(f)
    assert rescored["summary"] == results["summary"] and rescored["command"] == results["command"]
    assert "--rescore" in rescored["rescored_with"]
    # A second run reuses every finished arm.
    again = run_script("-m", "fairseq_autoassist.benchmark.command", "--preset", "smoke", "--out", str(out)).stdout
    assert again.count("already finished; reusing it") == len(PRESETS["smoke"]["arms"]) and "running " not in again


@pytest.mark.slow
def test_the_bleu_breakdown_reads_every_scored_run_of_a_benchmark(smoke_run, tmp_path):
    out, _ = smoke_run
    run_script("scripts/research/bleu_breakdown.py", "--data", str(out / "data-bin"), "--bench", str(out),
               "--out", str(tmp_path))
    with open(tmp_path / "bleu_breakdown_test.json") as f:
        breakdown = json.load(f)
    assert breakdown["languages"] == {"source": "de", "target": "en"}
    with open(out / "results.json") as f:
        scored = {run["arm"]: run["test_bleu"] for run in json.load(f)["runs"]}
    # Every run the benchmark scored, with the same sacreBLEU from the same hypotheses (the smoke preset's BLEU is
    # about 0, so the length ratio of the benchmark's own score tells more).
    assert {arm: figures["bleu"] for arm, figures in breakdown["arms"].items()} == pytest.approx(scored, abs=0.01)
    for run in breakdown["runs"]:
        with open(out / "runs" / f"{run['arm']}-seed1" / "bleu_test.json") as f:
            detail = json.load(f)["bleu_detail"]
        assert f"ratio = {run['length_ratio']:.3f}" in detail
    assert "| `assistant` | 1 |" in (tmp_path / "bleu_breakdown_test.md").read_text()


@pytest.mark.slow
def test_the_skipped_pairs_report_restores_the_selection_of_each_run(smoke_run, tmp_path):
    out, _ = smoke_run
    checkpoints = [str(out / "runs" / f"{arm}-seed1" / "checkpoint_last.pt") for arm in ("learnable", "assistant", "uniform")]
    run_script("scripts/research/skipped_pairs_report.py", "--data", str(out / "data-bin"), "--checkpoints",
               *checkpoints, "--out", str(tmp_path))
    with open(tmp_path / "skipped_pairs.json") as f:
        skipped = json.load(f)
    learnable, assistant, uniform = skipped["runs"]
    assert skipped["languages"] == {"source": "de", "target": "en"}
    assert [run["updates"] for run in skipped["runs"]] == [PRESETS["smoke"]["max_update"]] * 3
    # Every pair seen; the upper band (the running 0.8 quantile) labels some of them skipped, all as unlearnable
    # (the preset's lower quantile is 0), and those are the pairs the rule keeps least.
    assert learnable["not_seen"] == 0 and learnable["skipped_as_learned"] == 0
    assert 0 < learnable["skipped"] < learnable["skipped_as_unlearnable"] < 0.6
    # uniform keeps each pair with its fixed probability: the restored rule is the run's.
    assert uniform["skipped"] == pytest.approx(0.3) and "not_seen" not in uniform
    assert all(row["skipped"] == pytest.approx(0.3) for row in uniform["by"]["target length"].values() if row["pairs"])
    # The Assistant's keep probabilities differ by pair (the paper's rule floors them at its base probability 0.5).
    shares = [row["skipped"] for row in assistant["by"]["target length"].values() if row["pairs"]]
    assert 0 < min(shares) < max(shares) <= 0.5
    for run in skipped["runs"]:
        for rows in run["by"].values():
            assert sum(row["pairs"] for row in rows.values()) == 400  # the smoke corpus's training pairs
    refused = run_script("scripts/research/skipped_pairs_report.py", "--data", str(out / "data-bin"), "--checkpoints",
                         str(out / "runs" / "keep-all-seed1" / "checkpoint_last.pt"), "--out", str(tmp_path),
                         check=False)
    assert refused.returncode == 2 and "--autoassist-policy keep-all keeps every pair" in refused.stdout


@pytest.mark.slow
def test_a_benchmark_killed_mid_run_resumes_with_the_same_figures(smoke_run, tmp_path):
    import shutil
    import signal
    import subprocess
    import sys
    import time

    from .conftest import ROOT

    clean_out, _ = smoke_run
    killed = tmp_path / "killed"
    shutil.copytree(clean_out / "data-bin", killed / "data-bin")  # the same prepared corpus, not prepared again
    command = [sys.executable, "-m", "fairseq_autoassist.benchmark.command", "--preset", "smoke", "--arms", "baseline", "--out", str(killed)]
    log = killed / "runs" / "baseline-seed1" / "train.log"
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not (log.exists() and "begin training epoch 2" in log.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert "done training" not in log.read_text(), "the kill came too late to interrupt training"
    run_script(*command[1:], timeout=900)

    with open(clean_out / "results.json") as f:
        clean = next(run for run in json.load(f)["runs"] if run["arm"] == "baseline")
    with open(killed / "results.json") as f:
        [resumed] = json.load(f)["runs"]
    for key in ("updates", "target_tokens", "kept_share"):
        assert [row[key] for row in resumed["epochs"]] == [row[key] for row in clean["epochs"]], key
    # Training resumes from the checkpoint of epoch 1, so it is not bit-identical to the uninterrupted
    # run (valid loss 4.710 against 4.708 after epoch 2 when this test was written): compare within noise.
    assert [p["updates"] for p in resumed["validations"]] == [p["updates"] for p in clean["validations"]]
    for ours, theirs in zip(resumed["validations"], clean["validations"]):
        assert ours["valid_loss"] == pytest.approx(theirs["valid_loss"], abs=0.05)
        assert ours["valid_bleu"] == pytest.approx(theirs["valid_bleu"], abs=1.0)
    assert resumed["test_bleu"] == pytest.approx(clean["test_bleu"], abs=1.0)
    seconds = [row["train_seconds"] for row in resumed["epochs"]]
    assert seconds == sorted(seconds) and len(seconds) == 3


@pytest.mark.slow
def test_the_overhead_benchmark_times_every_arm_on_its_own_batches(prepared_data, tmp_path):
    output = tmp_path / "overhead.json"
    run_script("scripts/benchmark_overhead.py", "--data", prepared_data, "--preset", "smoke", "--block-updates", "3",
               "--blocks", "2", "--sessions", "3", "--arms", "keep-all@0.7", "learnable", "keep-all-stock-batches",
               "baseline-cosine-0.6", "released", "--output", str(output))
    result = json.loads(output.read_text())
    # The stock task's budget-matched variant is timed as the stock task; every arm once, whatever its budget.
    assert list(result["median_seconds_per_update"]) == ["baseline", "keep-all", "learnable", "keep-all-stock-batches",
                                                         "released"]
    # The released batches of a selecting pass mix lengths (its first pass's are sorted): more padding per token.
    fill = {arm: result["target_tokens_per_update"][arm] / result["padded_positions_per_update"][arm]
            for arm in ("keep-all", "released")}
    assert fill["released"] < 0.9 * fill["keep-all"], fill
    # Three sessions, each building every arm afresh with its own seed (its own batches) and timing them in another
    # order.
    sessions = result["sessions"]
    assert [session["order"][0] for session in sessions] == ["baseline", "keep-all", "learnable"]
    assert result["seeds"] == [session["seed"] for session in sessions] == [1, 2, 3]
    assert len({session["target_tokens_per_update"]["baseline"] for session in sessions}) > 1
    for arm, ratio in result["ratio_to_baseline"].items():
        per_session = [session["median_seconds_per_update"][arm] / session["median_seconds_per_update"]["baseline"]
                       for session in sessions]
        assert all(len(session["seconds_per_update"][arm]) == 2 for session in sessions)
        assert ratio == pytest.approx({"median": sorted(per_session)[1], "low": min(per_session),
                                       "high": max(per_session)})
    assert result["ratio_to_baseline"]["baseline"] == {"median": 1.0, "low": 1.0, "high": 1.0}
    assert "| learnable |" in (tmp_path / "overhead.md").read_text()
    assert result["cpu"]["learnable"]["assistant_updates"] > 0 and result["cpu"]["baseline"] == {}
    # learnable selects from epoch 2 (after the default warm-up epoch): that regime is the one timed.
    assert result["timed_from_epoch"] == {"baseline": 1, "keep-all": 2, "learnable": 2, "keep-all-stock-batches": 2,
                                          "released": 2}
    assert all(result["target_tokens_per_update"][arm] < result["padded_positions_per_update"][arm]
               for arm in result["median_seconds_per_update"])
    assert result["allocator"] == {key: os.environ.get(key, value) for key, value in TRAINING_MALLOC_ENV.items()}


@pytest.mark.slow
def test_the_overhead_sources_time_each_step_on_each_batch_set(prepared_data):
    result = run_script("scripts/research/overhead_sources.py", "--data", prepared_data, "--preset", "smoke",
                        "--arm", "learnable", "--block-updates", "2", "--blocks", "1", "--refresh-updates", "1", "4")
    for step, batches in [("baseline", "baseline"), ("baseline", "learnable"), ("learnable", "baseline"),
                          ("learnable", "learnable")]:
        assert re.search(rf"step of {step} +on the batches of {batches} +[0-9.]+ s per update", result.stdout)
    assert re.search(r"refresh every 1 updates +source positions per token [0-9.]+", result.stdout)
    assert "refresh every 4 updates" in result.stdout


@pytest.mark.parametrize("script, arguments", [
    ("scripts/benchmark_overhead.py", ["--arms", "keep-all", "--output", "timing.json"]),
    ("scripts/research/overhead_sources.py", ["--arm", "keep-all"]),
])
def test_the_timing_scripts_refuse_a_folder_that_is_not_prepared_before_building_anything(script, arguments, tmp_path):
    result = run_script(script, "--data", str(tmp_path), "--preset", "smoke", *arguments, check=False)
    assert result.returncode == 2
    assert f"{tmp_path} is not a prepared data-bin folder (no prepare.json)" in result.stdout


def test_batch_padding_counts_positions_against_tokens():
    from scripts.research.overhead_sources import batch_padding

    source, target = np.array([2, 4, 3, 3]), np.array([5, 5, 1, 3])
    figures = batch_padding([np.array([0, 1]), np.array([2, 3]), np.array([], dtype=np.int64)], source, target)
    assert figures == {"source positions per token": (2 * 4 + 2 * 3) / 12,
                       "target positions per token": (2 * 5 + 2 * 3) / 14, "target tokens per batch": 7}


def test_every_arm_of_every_preset_is_a_valid_arm_argument():
    for preset in PRESETS.values():
        for arm in preset["arms"]:
            assert arm_argument(arm) == arm


def test_every_arms_training_command_passes_fairseqs_parser_and_the_tasks_validation(tmp_path):
    """Every arm, not only the smoke preset's: a flag misspelt in an arm's ``extra`` or an option value the task
    refuses would otherwise surface only when a benchmark reaches that arm."""
    from fairseq import options as fairseq_options

    from fairseq_autoassist.options import validate
    from fairseq_autoassist.tasks import autoassist_translation  # noqa: F401  (fairseq-train imports --user-dir)

    # The files an arm's command names (another preparation's folder, reference scores), as empty stand-ins.
    for spec in ARMS.values():
        if "data" in spec:
            (tmp_path / spec["data"]).mkdir(exist_ok=True)
            (tmp_path / spec["data"] / "prepare.json").write_text("{}")
        if "reference" in spec:
            (tmp_path / SCORES_FOLDER).mkdir(exist_ok=True)
            (tmp_path / SCORES_FOLDER / f"{spec['reference']}.npy").write_bytes(b"")
    for arm in ARMS:
        argv = training_args(arm, str(tmp_path), str(tmp_path / arm), PRESETS["smoke"], seed=1, cpu=True)
        args = fairseq_options.parse_args_and_arch(fairseq_options.get_training_parser(), argv)
        if ARMS[arm]["policy"] is None:
            assert args.task == "translation", arm
        else:
            assert args.autoassist_policy == ARMS[arm]["policy"], arm
            validate(args)


def test_a_truncated_last_checkpoint_is_replaced_by_the_best_one(tmp_path):
    import torch

    torch.save({"num_updates": 7}, tmp_path / "checkpoint_best.pt")
    (tmp_path / "checkpoint_last.pt").write_bytes((tmp_path / "checkpoint_best.pt").read_bytes()[:40])
    with pytest.raises(Exception):
        torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)
    benchmark_runs.repair_last_checkpoint(str(tmp_path))
    assert torch.load(tmp_path / "checkpoint_last.pt", weights_only=False) == {"num_updates": 7}


def test_only_the_keep_all_arm_records_its_losses_in_its_run_folder(tmp_path):
    preset = PRESETS["multi30k-long"]

    def args(arm):
        return training_args(arm, str(tmp_path), str(tmp_path / arm), preset, seed=1, cpu=True)

    keep_all = args("keep-all")
    assert keep_all[keep_all.index("--autoassist-loss-log") + 1] == str(tmp_path / "keep-all" / "losses.npy")
    assert keep_all[keep_all.index("--autoassist-policy") + 1] == "keep-all"
    assert "--autoassist-loss-log" not in args("uniform") and "--autoassist-loss-log" not in args("baseline")


def test_an_arm_at_a_smaller_budget_trains_for_that_fraction_with_its_schedule_ending_there(tmp_path):
    preset = PRESETS["multi30k-long"]
    argv = training_args("learnable@0.7", str(tmp_path), str(tmp_path / "run"), preset, seed=1, cpu=True)
    assert argv[argv.index("--max-update") + 1] == str(round(0.7 * preset["max_update"]))
    assert argv[argv.index("--lr-scheduler") + 1] == "cosine"
    assert argv[argv.index("--autoassist-policy") + 1] == "learnable" and "--autoassist-base-prob" in argv
    arms = ["learnable@0.6", "baseline-cosine-0.8", "learnable", "learnable@0.8", "baseline"]
    assert in_table_order(arms) == [
        "baseline", "baseline-cosine-0.8", "learnable", "learnable@0.8", "learnable@0.6"]
    for wrong in ("learnable@1.5", "learnable@x", "learnable@0", "unknown@0.5"):
        with pytest.raises(SystemExit):
            benchmark.main(["--preset", "smoke", "--out", str(tmp_path), "--arms", wrong])


def test_an_arm_on_another_preparation_trains_there_and_is_refused_before_anything_trains_without_it(tmp_path, capsys):
    (tmp_path / "prepare.json").write_text("{}")
    argv = ["--preset", "tvsub", "--data", str(tmp_path), "--out", str(tmp_path / "out"),
            "--arms", "baseline", "deduplicated@0.7"]
    with pytest.raises(SystemExit):
        benchmark.main(argv)
    refusal = capsys.readouterr().err
    assert f"{tmp_path / 'deduplicated'} is missing: the deduplicated arm needs autoassist-prepare" in refusal
    assert not (tmp_path / "out" / "runs").exists()
    (tmp_path / "deduplicated").mkdir()
    (tmp_path / "deduplicated" / "prepare.json").write_text("{}")
    argv = training_args("deduplicated@0.7", str(tmp_path), str(tmp_path / "run"), PRESETS["tvsub"], seed=1, cpu=True)
    assert argv[0] == str(tmp_path / "deduplicated") and "--autoassist-policy" not in argv
    assert argv[argv.index("--task") + 1] == "translation"
    assert argv[argv.index("--max-update") + 1] == str(round(0.7 * PRESETS["tvsub"]["max_update"]))
    assert timed_arms(["deduplicated@0.7", "baseline-cosine-0.8"]) == ["baseline", "deduplicated"]


def test_report_tabulates_every_finished_run_and_trains_nothing(tmp_path):
    def write_run(name, finished=True):
        run_dir = tmp_path / "runs" / name
        run_dir.mkdir(parents=True)
        (run_dir / "train.log").write_text("\n".join([
            VALID_LINE.format(epoch=1, loss=4.5, bleu=20.0, updates=500),
            TRAIN_LINE.format(epoch=1, wall=50, updates=500, extra=""),
        ]))
        if finished:
            (run_dir / "bleu_test.json").write_text(json.dumps({"bleu": 21.0, "bleu_signature": "sig"}))

    write_run("keep-all@0.6-seed1")
    write_run("baseline-seed1")
    write_run("assistant-seed1", finished=False)  # still training elsewhere
    write_run("retired-rule-seed1")  # an arm this benchmark no longer has
    assert benchmark.main(["--preset", "multi30k-long", "--out", str(tmp_path), "--report"]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert [(run["arm"], run["seed"]) for run in results["runs"]] == [("baseline", 1), ("keep-all@0.6", 1)]
    assert results["runs"][1]["validations"] == [{"updates": 500, "valid_loss": 4.5, "valid_bleu": 20.0}]
    assert "| keep-all@0.6 |" in (tmp_path / "results.md").read_text()
    with pytest.raises(SystemExit):
        benchmark.main(["--preset", "multi30k-long", "--out", str(tmp_path / "elsewhere"), "--report"])


def test_rescore_merges_recorded_benchmarks_and_the_later_file_wins(tmp_path):
    def recorded(name, *runs):
        path = tmp_path / name
        path.write_text(json.dumps({"command": f"python scripts/benchmark.py {name}", "machine": "m", "runs": runs}))
        return str(path)

    old = recorded("old.json", run("baseline", (100, 4.0, 20)), run("keep-all@0.6", (60, 4.5, 10)))
    new = recorded("new.json", run("keep-all@0.6", (60, 4.2, 18)), run("keep-all-fixed@0.6", (60, 4.3, 15)))
    assert benchmark.main(["--preset", "smoke", "--out", str(tmp_path / "out"), "--rescore", old, new]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["arm"] for r in results["runs"]] == ["baseline", "keep-all@0.6", "keep-all-fixed@0.6"]
    assert results["summary"]["keep-all@0.6"]["best_valid_bleu"]["mean"] == 18
    assert results["command"] == "python scripts/benchmark.py old.json ; python scripts/benchmark.py new.json"
    # The merged file rescored with one of its sources again: each command still named once.
    merged = str(tmp_path / "out" / "results.json")
    assert benchmark.main(["--preset", "smoke", "--out", str(tmp_path / "again"), "--rescore", merged, new]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert again["command"] == results["command"] and again["machine"] == "m"
    # --arms tabulates a subset of the recorded runs.
    assert benchmark.main(["--preset", "smoke", "--out", str(tmp_path / "subset"), "--rescore", old, new,
                           "--arms", "baseline", "keep-all-fixed@0.6"]) == 0
    subset = json.loads((tmp_path / "subset" / "results.json").read_text())
    assert [r["arm"] for r in subset["runs"]] == ["baseline", "keep-all-fixed@0.6"]
    # --seeds tabulates one seed's runs against that seed's own baseline.
    seeds = recorded("seeds.json", run("baseline", (100, 4.0, 20)), run("keep-all@0.6", (60, 4.5, 10)),
                     run("baseline", (100, 4.1, 22), seed=2), run("keep-all@0.6", (60, 4.4, 12), seed=2))
    assert benchmark.main(["--preset", "smoke", "--out", str(tmp_path / "seed2"), "--rescore", seeds,
                           "--seeds", "2"]) == 0
    seed2 = json.loads((tmp_path / "seed2" / "results.json").read_text())
    assert [(r["arm"], r["seed"]) for r in seed2["runs"]] == [("baseline", 2), ("keep-all@0.6", 2)]
    assert seed2["summary"]["keep-all@0.6"]["best_valid_bleu"]["mean"] == 12
    with pytest.raises(SystemExit):
        benchmark.main(["--preset", "smoke", "--out", str(tmp_path / "out"), "--rescore", str(tmp_path / "none.json")])


def test_the_mixing_summary_gives_each_seed_its_ratios_to_its_own_stock_run():
    from scripts.research.mixing_summary import summary_records

    timing = {"baseline": {"median": 1.0, "low": 1.0, "high": 1.0},
              "keep-all": {"median": 1.05, "low": 1.0, "high": 1.1}}
    runs = [
        run("baseline", (100, 5.0, 10), (200, 4.0, 20), (400, 3.5, 30), test_bleu=31.0),
        run("baseline-cosine-0.5", (100, 5.0, 10), (200, 4.2, 18), test_bleu=20.0),
        # Seed 1: the stock run's best validation BLEU at 0.8 of its updates (1.1 times the tokens per update),
        # a test BLEU 0.2 below the stock run's, tested at 320 updates.
        run("keep-all@0.8", (80, 5.0, 10), (160, 4.0, 20), (320, 3.5, 30), tokens_per_update=110.0, test_bleu=30.8),
        # Seed 2 has no stock run: no ratios.
        run("keep-all@0.8", (80, 5.0, 10), (320, 3.5, 30), seed=2, test_bleu=30.0),
        # Never reaching the stock run's level, and a test BLEU 0.5 below it.
        run("keep-all@0.5", (100, 5.0, 12), (200, 4.0, 25), test_bleu=30.5),
    ]
    records = {(r["seed"], r["arm"]): r for r in summary_records(
        "tiny", {"preset": "multi30k-long", "runs": runs, "time_per_update_vs_stock": timing})}
    mixed = records[(1, "keep-all@0.8")]
    assert mixed["tokens_ratio_valid_bleu"] == pytest.approx(0.88)
    assert mixed["seconds_ratio_valid_bleu"] == pytest.approx(0.8 * 1.05)
    assert mixed["seconds_ratio_test_bleu"] == pytest.approx(320 * 1.05 / 400)
    assert (mixed["test_bleu"], mixed["stock_test_bleu"], mixed["stock_best_valid_bleu"]) == (30.8, 31.0, 30)
    # On the frontier (18 at 200 updates, 30 at 400), its 30 costs the stock task 400 updates.
    assert mixed["frontier_seconds_ratio_valid_bleu"] == pytest.approx(0.8 * 1.05)
    assert records[(2, "keep-all@0.8")]["stock_test_bleu"] is None
    assert records[(2, "keep-all@0.8")]["tokens_ratio_valid_bleu"] is None
    short = records[(1, "keep-all@0.5")]
    assert short["tokens_ratio_valid_bleu"] is None and short["seconds_ratio_test_bleu"] is None
    assert records[(1, "baseline")]["seconds_ratio_test_bleu"] == pytest.approx(1.0)


def test_curves_against_seconds_price_each_arm_at_its_own_time_per_update(tmp_path):
    timing = {"baseline": {"median": 1.0, "seconds": 0.2}, "keep-all": {"median": 1.05}}
    points = [{"updates": 100, "valid_bleu": 10.0}]
    assert report.with_seconds(points, "keep-all@0.7", timing)[0]["seconds"] == pytest.approx(100 * 1.05 * 0.2)
    assert report.with_seconds(points, "baseline-cosine-0.6", timing)[0]["seconds"] == pytest.approx(100 * 0.2)
    assert "seconds" not in report.with_seconds(points, "uniform@0.7", timing)[0]  # untimed: no such curve
    runs = [run("baseline", (100, 5.0, 10), (200, 4.0, 20)), run("keep-all@0.7", (100, 5.0, 12), (140, 4.5, 15))]
    report.plot(runs, str(tmp_path))
    assert not os.path.exists(tmp_path / "bleu_vs_seconds.png")
    report.plot(runs, str(tmp_path), timing)
    assert os.path.exists(tmp_path / "bleu_vs_seconds.png") and os.path.exists(tmp_path / "loss_vs_seconds.png")
