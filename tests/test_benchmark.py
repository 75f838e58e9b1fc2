"""scripts/benchmark.py: the smoke preset end to end, and the derived figures on known numbers."""

import json
import os

import pytest

from scripts import benchmark

from .conftest import run_script


def rows(bleus, seconds_per_epoch, tokens_per_epoch=100.0, updates_per_epoch=10):
    return [
        dict(epoch=e + 1, train_seconds=seconds_per_epoch * (e + 1), target_tokens=tokens_per_epoch * (e + 1),
             updates=updates_per_epoch * (e + 1), valid_loss=None, valid_bleu=b, kept_share=1.0)
        for e, b in enumerate(bleus)
    ]


def test_time_and_token_ratios_interpolate_to_the_baseline_best():
    runs = [
        {"arm": "baseline", "seed": 1, "epochs": rows([10, 20, 30], 100.0), "test_bleu": 29.0},
        # Reaches 30 halfway through its third epoch of 50 s: 125 s against 300 s.
        {"arm": "assistant", "seed": 1, "epochs": rows([10, 20, 40], 50.0, tokens_per_epoch=60.0), "test_bleu": 31.0},
    ]
    summary = benchmark.derive(runs, bleu_levels=[15])
    assert summary["assistant"]["time_ratio"]["mean"] == pytest.approx(125.0 / 300.0)
    assert summary["assistant"]["token_ratio"]["mean"] == pytest.approx(150.0 / 300.0)
    assert summary["assistant"]["bleu_at_baseline_time"]["mean"] == 40
    assert summary["baseline"]["bleu_at_60pct_baseline_time"]["mean"] == 10  # 180 s: only its first epoch
    assert summary["baseline"]["time_ratio"]["mean"] == pytest.approx(1.0)
    # BLEU 15 halfway through the second epoch: 75 s against 150 s, 90 tokens against 150.
    assert summary["assistant"]["time_ratio_at_bleu_15"]["mean"] == pytest.approx(0.5)
    assert summary["assistant"]["token_ratio_at_bleu_15"]["mean"] == pytest.approx(0.6)
    assert "time to BLEU 15" in benchmark.markdown(summary, "cmd", "machine", [15])


def test_an_arm_that_never_reaches_the_target_is_reported_as_such():
    runs = [
        {"arm": "baseline", "seed": 1, "epochs": rows([10, 30], 100.0), "test_bleu": 29.0},
        {"arm": "uniform", "seed": 1, "epochs": rows([10, 20], 100.0), "test_bleu": 20.0},
    ]
    summary = benchmark.derive(runs)
    assert summary["uniform"]["time_ratio"]["mean"] is None
    assert "not reached" in benchmark.markdown(summary, "cmd", "machine")


TRAIN_LINE = ("2026-11-30 | INFO | train | epoch {epoch:03d} | loss 4.1 | wpb 1700 | train_wall {wall} "
              "| num_updates {updates}{extra}")


def test_the_selection_cpu_share_comes_from_the_last_epoch_of_an_arm_that_logs_it():
    selecting = "\n".join([
        TRAIN_LINE.format(epoch=1, wall=10, updates=10, extra=" | aa_cpu_select 1 | aa_cpu_process 100"),
        TRAIN_LINE.format(epoch=2, wall=20, updates=20,
                          extra=" | aa_kept 0.7 | aa_cpu_select 2 | aa_cpu_process 400 | aa_cpu_assistant 6"),
    ])
    runs = [{"arm": "baseline", "seed": 1, "epochs": benchmark.parse_epochs(TRAIN_LINE.format(
                epoch=1, wall=30, updates=20, extra="")), "test_bleu": 1.0},
            {"arm": "assistant", "seed": 1, "epochs": benchmark.parse_epochs(selecting), "test_bleu": 1.0}]
    summary = benchmark.derive(runs)
    assert summary["assistant"]["selection_cpu_share"]["mean"] == pytest.approx(8 / 400)
    assert "selection_cpu_share" not in summary["baseline"]
    assert "| assistant | 0.0200 |" in benchmark.markdown(summary, "cmd", "machine")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The smoke preset, run once for the tests of this module: its folder and what it printed."""
    out = tmp_path_factory.mktemp("benchmark") / "smoke"
    return out, run_script("scripts/benchmark.py", "--preset", "smoke", "--out", str(out), timeout=1500).stdout


@pytest.mark.slow
def test_smoke_preset_runs_every_arm_and_writes_every_output(smoke_run):
    out, printed = smoke_run
    with open(out / "results.json") as f:
        results = json.load(f)
    assert {run["arm"] for run in results["runs"]} == set(benchmark.ARMS)
    for run in results["runs"]:
        # The same update budget for every arm (three full epochs of the baseline), a fraction of it for
        # the budget-matched baselines.
        budget = benchmark.ARMS[run["arm"]].get("budget", 1.0) * benchmark.PRESETS["smoke"]["max_update"]
        assert run["epochs"][-1]["updates"] == round(budget)
        # Validated every 20 updates (and at each epoch end): every arm at the same update counts.
        assert {u for u in (20, 40, 60) if u <= budget} <= {point["updates"] for point in run["validations"]}
        assert run["test_bleu_signature"].startswith("nrefs:1|case:mixed")
    baseline_epochs = len(next(run for run in results["runs"] if run["arm"] == "baseline")["epochs"])
    assert baseline_epochs == 3
    shrinking = [run for run in results["runs"] if run["arm"] in ("assistant", "uniform", "infobatch", "spl")]
    assert all(run["epochs"][-1]["kept_share"] < 1.0 and len(run["epochs"]) > baseline_epochs for run in shrinking)
    for name in ("results.md", "bleu_vs_updates.png", "bleu_vs_time.png", "bleu_vs_tokens.png", "kept_share.png"):
        assert (out / name).stat().st_size > 0
    assert "| assistant |" in printed and "updates to baseline best" in printed
    assert results["at_equal_updates"]["baseline"]["update_ratio"]["mean"] == pytest.approx(1.0)
    # A second run reuses every finished arm.
    again = run_script("scripts/benchmark.py", "--preset", "smoke", "--out", str(out)).stdout
    assert again.count("already finished; reusing it") == len(benchmark.ARMS) and "running " not in again


VALID_LINE = ("2026-11-30 | INFO | valid | epoch {epoch:03d} | valid on 'valid' subset | loss {loss} | nll_loss 3.1 "
              "| ppl 8.6 | bleu {bleu} | wps 3000 | wpb 1500 | bsz 100 | num_updates {updates} | best_bleu {bleu}")


def test_validations_are_tabulated_at_equal_update_counts():
    def log(points):
        return "\n".join(VALID_LINE.format(epoch=e, loss=l, bleu=b, updates=u) for e, u, l, b in points)

    baseline = benchmark.parse_validations(log([(1, 100, 5.0, 10.0), (1, 120, 4.9, 11.0), (2, 200, 4.0, 20.0)]))
    assert [p["updates"] for p in baseline] == [100, 120, 200]
    assert baseline[2] == {"updates": 200, "valid_loss": 4.0, "valid_bleu": 20.0}
    # A shrinking arm ends its epochs elsewhere; only the multiples of the interval are compared, and a
    # budget-matched arm that stopped earlier has none past its budget.
    assistant = benchmark.parse_validations(log([(1, 100, 4.8, 12.0), (2, 160, 4.5, 15.0), (3, 200, 3.8, 22.0)]))
    matched = benchmark.parse_validations(log([(1, 100, 4.7, 13.0), (2, 150, 4.6, 14.0)]))
    runs = [{"arm": "baseline", "validations": baseline}, {"arm": "assistant", "validations": assistant},
            {"arm": "baseline-cosine-0.8", "validations": matched}]
    table = benchmark.equal_update_table(runs, interval=100)
    assert "| 100 | 200 |" in table
    assert "| assistant | 4.800 / 12.00 | 3.800 / 22.00 |" in table
    assert "| baseline-cosine-0.8 | 4.700 / 13.00 | - |" in table
    # Past MAX_UPDATE_COLUMNS multiples, every k-th is shown, the last one always.
    long_run = [{"arm": "baseline", "validations": [{"updates": u, "valid_loss": 4.0, "valid_bleu": 30.0}
                                                    for u in range(100, 1700, 100)]}]
    assert "| 200 | 400 | 600 | 800 | 1000 | 1200 | 1400 | 1600 |" in benchmark.equal_update_table(long_run, 100)
    assert benchmark.equal_update_table(runs, interval=0) == ""


def points(*pairs):
    return [{"updates": u, "valid_loss": 4.0, "valid_bleu": b} for u, b in pairs]


def test_figures_at_equal_updates_compare_with_the_budget_matched_baseline():
    runs = [
        {"arm": "baseline", "seed": 1, "validations": points((100, 10), (200, 20), (300, 29), (400, 30))},
        # Decays to 0 at 320 updates (0.8 of 400) and ends at 26: never reaches the baseline's 30.
        {"arm": "baseline-cosine-0.8", "seed": 1, "validations": points((100, 12), (200, 22), (300, 26))},
        # Reaches 30 at 250 updates: 0.625 of the baseline's 400, before the budget-matched baseline.
        {"arm": "assistant", "seed": 1, "validations": points((100, 10), (200, 25), (300, 35), (400, 36))},
        # Never reaches 30 and stands below the budget-matched baseline's 26 by 320 updates.
        {"arm": "uniform", "seed": 1, "validations": points((100, 10), (200, 20), (300, 25), (400, 28))},
    ]
    summary = benchmark.update_figures(runs, budget=400)
    assert summary["assistant"]["update_ratio"]["mean"] == pytest.approx(250 / 400)
    assert summary["assistant"]["beats_budget_0.8"]["mean"] == 1.0
    assert summary["uniform"]["update_ratio"]["mean"] is None
    assert summary["uniform"]["beats_budget_0.8"]["mean"] == 0.0
    assert summary["assistant"]["bleu_by_0.6"]["mean"] == 25 and summary["assistant"]["bleu_by_end"]["mean"] == 36
    # The baseline gained 1.0 BLEU in its last quarter (29 by 300 updates, 30 at 400): no plateau yet.
    assert summary["baseline"]["plateau_gain"]["mean"] == pytest.approx(1.0)
    table = benchmark.update_table(summary, 400)
    assert "| assistant | 0.62 |" in table
    # uniform's best, 28, lies between the 0.8 baseline's 26 (at 320 updates) and the full one's 30 (400): a stock
    # baseline annealing at 360 updates would reach it, and uniform took 400.
    assert summary["uniform"]["frontier_ratio_valid_bleu"]["mean"] == pytest.approx(400 / 360)
    # Not reached is said as such; a figure that does not apply to the arm (the plateau, the test BLEU frontier
    # of runs without test BLEU) is left empty. Every validation loss is 4.0: the 0.8 baseline's budget has it.
    assert "| uniform | not reached |" in table
    assert table.splitlines()[-1].endswith("| 0.00 | - | 1.11 | 1.25 | - | - |")
    assert "plateau_gain" not in summary["uniform"] and "beats_budget_0.8" not in summary["baseline-cosine-0.8"]
    assert "beats_same_budget" not in summary["assistant"]


def test_a_rule_at_a_smaller_budget_is_judged_against_the_baseline_of_that_budget():
    runs = [
        {"arm": "baseline", "seed": 1, "validations": points((100, 10), (200, 20), (300, 29), (400, 30))},
        {"arm": "baseline-cosine-0.6", "seed": 1, "validations": points((100, 12), (200, 24), (240, 27))},
        # Never reaches the baseline's 30 but ends above the 0.6 baseline's 27 at the same budget.
        {"arm": "assistant@0.6", "seed": 1, "validations": points((100, 12), (200, 25), (240, 28))},
        # Ends below it.
        {"arm": "uniform@0.6", "seed": 1, "validations": points((100, 12), (200, 23), (240, 26))},
    ]
    summary = benchmark.update_figures(runs, budget=400)
    assert summary["assistant@0.6"]["beats_same_budget"]["mean"] == 1.0
    assert summary["uniform@0.6"]["beats_same_budget"]["mean"] == 0.0
    # Without a 0.8 baseline among the runs that figure does not apply; nor does the comparison to itself.
    assert "beats_budget_0.8" not in summary["assistant@0.6"]
    assert "beats_same_budget" not in summary["baseline-cosine-0.6"]
    assert "| assistant@0.6 | not reached | 28.00 | 28.00 | 28.00 | 4.000 | - | 1.00 | 0.82 | 1.00 | - | - |" in \
        benchmark.update_table(summary, 400)


def scored(arm, test_bleu, *triples):
    """A run of ``arm`` with its test BLEU and validations ``(updates, valid_loss, valid_bleu)``."""
    return {"arm": arm, "seed": 1, "test_bleu": test_bleu,
            "validations": [{"updates": u, "valid_loss": loss, "valid_bleu": b} for u, loss, b in triples]}


def test_an_arm_is_placed_on_the_budget_frontier_of_the_stock_baselines():
    runs = [
        scored("baseline", 40, (200, 4.5, 25), (400, 3.8, 30)),
        scored("baseline-cosine-0.6", 36, (200, 4.4, 23), (240, 4.2, 24)),
        scored("baseline-cosine-0.8", 38, (200, 4.4, 23), (320, 4.0, 28)),
        # Best 26 at a budget of 240: a stock baseline would need 240 + (26 - 24) / (28 - 24) * 80 = 280 updates.
        # Its lowest loss, 4.1, lies halfway from the 0.6 baseline's to the 0.8 one's (280 updates again); its
        # test BLEU, 39, halfway from the 0.8 baseline's to the full one's: 360 updates.
        scored("assistant@0.6", 39, (200, 4.1, 26), (240, 4.15, 25)),
        # Below the smallest baseline on each measure: no saving. Above the full one: beyond the frontier.
        scored("uniform@0.6", 35, (240, 4.3, 23)),
        scored("keep-all", 41, (400, 3.7, 31)),
    ]
    assert benchmark.budget_frontier(runs[0], runs[1:3], 400) == [(240, 24), (320, 28), (400, 30)]
    loss = benchmark.FRONTIER_MEASURES["valid_loss"]
    assert benchmark.budget_frontier(runs[0], runs[1:3], 400, loss) == [(240, -4.2), (320, -4.0), (400, -3.8)]
    summary = benchmark.update_figures(runs, budget=400)
    assert summary["assistant@0.6"]["frontier_ratio_valid_bleu"]["mean"] == pytest.approx(240 / 280)
    assert summary["assistant@0.6"]["frontier_ratio_valid_loss"]["mean"] == pytest.approx(240 / 280)
    assert summary["assistant@0.6"]["frontier_ratio_test_bleu"]["mean"] == pytest.approx(240 / 360)
    for measure in benchmark.FRONTIER_MEASURES:
        key = f"frontier_ratio_{measure}"
        assert summary["uniform@0.6"][key] == {"mean": None, "spread": 0.0, "reached": 0, "seeds": 1}
        assert key not in summary["keep-all"]
        assert key not in summary["baseline"] and key not in summary["baseline-cosine-0.8"]
    table = benchmark.update_table(summary, 400)
    assert "| no saving | no saving | no saving | - |" in next(line for line in table.splitlines()
                                                           if line.startswith("| uniform@0.6 |"))
    # A seed below the frontier is not left out of the mean's count: the cell says it did not save.
    second_seed = [dict(run, seed=2) for run in runs[:3] + [scored("assistant@0.6", 35, (240, 4.3, 23))]]
    summary = benchmark.update_figures(runs + second_seed, budget=400)
    assert benchmark.cell(summary["assistant@0.6"]["frontier_ratio_valid_bleu"]) == "0.86 ± 0.00 (1/2 seeds)"
    # A baseline without a test BLEU gives no test BLEU frontier.
    runs[1] = dict(runs[1], test_bleu=None)
    assert benchmark.budget_frontier(runs[0], runs[1:3], 400, benchmark.FRONTIER_MEASURES["test_bleu"]) is None
    assert "frontier_ratio_test_bleu" not in benchmark.update_figures(runs, budget=400)["assistant@0.6"]


def test_every_arm_of_every_preset_is_a_valid_arm_argument():
    for preset in benchmark.PRESETS.values():
        for arm in preset["arms"]:
            assert benchmark.arm_argument(arm) == arm


def test_a_truncated_last_checkpoint_is_replaced_by_the_best_one(tmp_path):
    import torch

    torch.save({"num_updates": 7}, tmp_path / "checkpoint_best.pt")
    (tmp_path / "checkpoint_last.pt").write_bytes((tmp_path / "checkpoint_best.pt").read_bytes()[:40])
    with pytest.raises(Exception):
        torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)
    benchmark.repair_last_checkpoint(str(tmp_path))
    assert torch.load(tmp_path / "checkpoint_last.pt", weights_only=False) == {"num_updates": 7}


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
    command = [sys.executable, "scripts/benchmark.py", "--preset", "smoke", "--arms", "baseline", "--out", str(killed)]
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


def test_kept_shares_of_corrupted_and_clean_pairs_are_tabulated_after_the_first_epoch():
    noisy_rows = rows([10, 20, 30], 100.0)
    for row, (noisy, clean) in zip(noisy_rows, [(1.0, 1.0), (0.4, 0.9), (0.2, 0.9)]):
        row.update(kept_share_noisy=noisy, kept_share_clean=clean)
    runs = [{"arm": "baseline", "seed": 1, "epochs": rows([10, 20, 30], 100.0), "test_bleu": 29.0},
            {"arm": "learnable", "seed": 1, "epochs": noisy_rows, "test_bleu": 30.0}]
    summary = benchmark.derive(runs)
    assert summary["learnable"]["kept_share_noisy"]["mean"] == pytest.approx(0.3)
    assert summary["learnable"]["kept_share_clean"]["mean"] == pytest.approx(0.9)
    assert "kept_share_noisy" not in summary["baseline"]
    assert "| learnable | 0.30 | 0.90 |" in benchmark.markdown(summary, "cmd", "machine")


@pytest.mark.slow
def test_the_overhead_benchmark_times_every_policy_on_the_same_batches(prepared_data, tmp_path):
    output = tmp_path / "overhead.json"
    run_script("scripts/benchmark_overhead.py", "--data", prepared_data, "--arch", "tiny", "--max-tokens", "400",
               "--block-updates", "3", "--blocks", "1", "--refresh-updates", "2",
               "--policies", "assistant", "learnable", "infobatch", "--output", str(output))
    result = json.loads(output.read_text())
    assert set(result["arms"]) == {"assistant", "learnable", "infobatch"}
    assert all(arm["ratio_to_off"] > 0 for arm in result["arms"].values())
    assert result["arms"]["learnable"]["assistant_updates"] > 0 and "assistant_updates" not in result["arms"]["infobatch"]


def test_only_the_keep_all_arm_records_its_losses_in_its_run_folder(tmp_path):
    preset = benchmark.PRESETS["multi30k-long"]

    def args(arm):
        return benchmark.training_args(arm, str(tmp_path), str(tmp_path / arm), preset, seed=1, cpu=True)

    keep_all = args("keep-all")
    assert keep_all[keep_all.index("--autoassist-loss-log") + 1] == str(tmp_path / "keep-all" / "losses.npy")
    assert keep_all[keep_all.index("--autoassist-policy") + 1] == "keep-all"
    assert "--autoassist-loss-log" not in args("uniform") and "--autoassist-loss-log" not in args("baseline")


def test_an_arm_at_a_smaller_budget_trains_for_that_fraction_with_its_schedule_ending_there(tmp_path):
    preset = benchmark.PRESETS["multi30k-long"]
    argv = benchmark.training_args("learnable@0.7", str(tmp_path), str(tmp_path / "run"), preset, seed=1, cpu=True)
    assert argv[argv.index("--max-update") + 1] == str(round(0.7 * preset["max_update"]))
    assert argv[argv.index("--lr-scheduler") + 1] == "cosine"
    assert argv[argv.index("--autoassist-policy") + 1] == "learnable" and "--autoassist-base-prob" in argv
    arms = ["learnable@0.6", "baseline-cosine-0.8", "learnable", "learnable@0.8", "baseline"]
    assert benchmark.in_table_order(arms) == [
        "baseline", "baseline-cosine-0.8", "learnable", "learnable@0.8", "learnable@0.6"]
    for wrong in ("learnable@1.5", "learnable@x", "learnable@0", "unknown@0.5"):
        with pytest.raises(SystemExit):
            benchmark.main(["--preset", "smoke", "--out", str(tmp_path), "--arms", wrong])


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
