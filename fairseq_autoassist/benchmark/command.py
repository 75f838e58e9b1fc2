"""Side-by-side benchmark of the selection policies on one prepared corpus (``fairseq_autoassist.benchmark``).

    python scripts/benchmark.py --preset smoke --out runs/benchmark-smoke
    python scripts/benchmark.py --preset multi30k-long --data data-bin/multi30k.de-en --out runs/bench-long
    python scripts/benchmark.py --preset multi30k-long ... --arms keep-all@0.6 --seeds 2
    python scripts/benchmark.py --preset multi30k-long --out runs/bench-long --report \\
        --seconds-per-update docs/results/archive/overhead-multi30k-small.json

Every arm trains with the same recipe (model, optimizer, learning-rate schedule, batch size, seed) for the
preset's number of updates, except the budget-matched baselines and any ``ARM@FRACTION``, which train for that
fraction of them with their schedule ending there. One command runs its arms and seeds one after another; two
commands may share OUT when their runs differ, and ``--report`` tabulates every finished run in OUT without
training. A run that finished is reused; an interrupted one resumes from its last checkpoint, so rerunning the
same command after a kill at any moment continues where it stopped.

Every figure comes from every validation of a run, in updates and in target tokens, against the stock task of
the same seed and the budget frontier of its stock runs; seconds only from isolated times per update
(``--seconds-per-update``). Outputs: OUT/results.json (every record and figure), OUT/results.md (the tables and
the command) and plots of validation BLEU against updates and target tokens, validation loss against target
tokens and the kept share against updates.
"""

import argparse
import json
import logging
import os
import shlex
import sys

from fairseq_autoassist.benchmark.arms import (ARMS, PRESETS, arm_argument, arm_data, in_table_order, noise_list,
                                               timed_arms)
from fairseq_autoassist.benchmark.figures import MIN_TIMING_SESSIONS, derive, with_validations
from fairseq_autoassist.benchmark.report import (describe_machine, equal_token_table, equal_update_table, markdown,
                                                 peak_memory_table, plot, test_checkpoint_table)
from fairseq_autoassist.benchmark.runs import finished_runs, run_arm, smoke_data
from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.recipes import require_prepared, write_atomically


def train_arms(parser, args, preset):
    data = smoke_data(args.out) if args.preset == "smoke" else args.data
    try:
        require_prepared(data)
    except AutoAssistConfigError as error:
        parser.error(str(error))
    if preset.get("noisy") and not os.path.isfile(noise_list(data)):
        parser.error(f"--preset {args.preset} needs a noisy corpus, but {noise_list(data)} is missing; prepare "
                     "the output of scripts/research/make_noisy_corpus.py with scripts/prepare_multi30k.py --raw-dir")
    arms = args.arms or preset["arms"]
    for arm in arms:  # an arm's own data folder is checked before any arm trains
        try:
            arm_data(arm, data)
        except FileNotFoundError as error:
            parser.error(str(error))
    if "baseline" not in arms:
        logging.getLogger("benchmark").warning(
            "--arms has no baseline: every figure is against the stock baseline of the same seed, so tabulate these "
            "runs with one (--rescore with the results.json that holds it, or add baseline to --arms)")
    return [run_arm(arm, seed, data, args.out, preset, args.device == "cpu")
            for seed in (args.seeds or preset["seeds"]) for arm in arms]


def read_recorded_runs(parser, paths):
    """The runs of the results.json files ``paths`` (a later file wins for the same arm and seed), and the files'
    commands and machines, each named once."""
    runs, commands, machines = {}, [], []
    for path in paths:
        try:
            with open(path) as f:
                recorded = json.load(f)
        except (OSError, ValueError) as error:
            parser.error(f"--rescore {path}: not a results.json of scripts/benchmark.py ({error})")
        runs.update({(run["seed"], run["arm"]): with_validations(run) for run in recorded["runs"]})
        # A rescored file's command and machine already join its sources' (" ; "): each is named once.
        commands += recorded["command"].split(" ; ")
        machines += (recorded.get("machine") or "unknown").split(" ; ")
    order = in_table_order(arm for _, arm in runs)
    return {"runs": [runs[key] for key in sorted(runs, key=lambda key: (key[0], order.index(key[1])))],
            "command": " ; ".join(dict.fromkeys(commands)), "machine": " ; ".join(dict.fromkeys(machines))}


def read_time_per_update(parser, path, arms):
    """``{arm: {"median", "low", "high"}}``: each arm's isolated time per update over the stock task's (the stock
    task's also with its own ``seconds`` per update), from one timing of scripts/benchmark_overhead.py that timed
    every arm ``arms`` need (``timed_arms``) together, in at least MIN_TIMING_SESSIONS sessions (the benchmark's one
    timing rule); None without ``path``."""
    if path is None:
        return None
    try:
        with open(path) as f:
            timing = json.load(f)
        ratios, sessions = timing["ratio_to_baseline"], len(timing["sessions"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        parser.error(f"--seconds-per-update {path}: not the --output of scripts/benchmark_overhead.py with "
                     f"--sessions ({error})")
    missing = [arm for arm in timed_arms(arms) if arm not in ratios]
    if sessions < MIN_TIMING_SESSIONS or missing:
        problem = (f"times {sessions} session(s), not the {MIN_TIMING_SESSIONS} that give a range"
                   if sessions < MIN_TIMING_SESSIONS else f"does not time {', '.join(missing)}")
        parser.error(f"--seconds-per-update {path} {problem}; time every arm of the preset together: python "
                     f"scripts/benchmark_overhead.py --data DATA --preset PRESET --sessions {MIN_TIMING_SESSIONS} "
                     f"--output {path}")
    found = {arm: {stat: ratios[arm][stat] for stat in ("median", "low", "high")} for arm in timed_arms(arms)}
    # The stock task's own seconds per update price a reference model's scoring (figures.frontier_figures).
    seconds = timing.get("median_seconds_per_update", {}).get("baseline")
    if seconds:
        found["baseline"]["seconds"] = seconds
    return found


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--data", help="prepared data-bin folder (not for --preset smoke)")
    parser.add_argument("--out", required=True, help="output folder; rerun the same command to resume")
    parser.add_argument("--arms", nargs="+", type=arm_argument, metavar="ARM[@BUDGET]",
                        help=f"default: the preset's arms; of {', '.join(ARMS)}; ARM@0.7 trains ARM for 0.7 of the "
                        "preset's updates, its schedule ending there; with --rescore or --report, the recorded runs "
                        "to tabulate (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int,
                        help="override the preset's seeds; with --rescore or --report, the recorded seeds to "
                        "tabulate (default: all), e.g. one seed's ratios against its own frontier")
    parser.add_argument("--validate-interval-updates", type=int,
                        help="validate (and checkpoint) every N updates and tabulate every arm at those counts "
                        "(default: the preset's value; 0: per epoch only)")
    parser.add_argument("--report", action="store_true",
                        help="train nothing: tabulate every finished run in OUT/runs, of any arm and seed (while other "
                        "commands still run, or to gather what several commands ran)")
    parser.add_argument("--rescore", metavar="RESULTS_JSON", nargs="+",
                        help="train nothing: recompute every figure from the runs recorded in one or more results.json "
                        "(a committed benchmark's, and the --report of new runs beside it; a run recorded twice is "
                        "taken from the later file) and write the outputs to OUT")
    parser.add_argument("--seconds-per-update", metavar="FILE",
                        help="the --output of scripts/benchmark_overhead.py that timed every arm of the runs together "
                        f"in at least {MIN_TIMING_SESSIONS} sessions (each arm's isolated time per update on its own "
                        "batches over the stock task's, median and range), for the time columns")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--machine", default=None,
                        help="description of the machine, written into results.md (default: read from this one)")
    args = parser.parse_args(argv)
    preset = dict(PRESETS[args.preset])
    if args.validate_interval_updates is not None:
        preset["validate_interval_updates"] = args.validate_interval_updates
    os.makedirs(args.out, exist_ok=True)
    machine = args.machine
    if args.rescore:
        recorded = read_recorded_runs(parser, args.rescore)
        runs, machine = recorded["runs"], machine or recorded["machine"]
    elif args.report:
        if not os.path.isdir(os.path.join(args.out, "runs")):
            parser.error(f"--report: {args.out} holds no runs/ folder; give the --out of the runs to tabulate")
        runs = finished_runs(args.out)
    else:
        runs = train_arms(parser, args, preset)
    if args.arms and (args.rescore or args.report):
        runs = [run for run in runs if run["arm"] in args.arms]
    if args.seeds and (args.rescore or args.report):
        runs = [run for run in runs if run["seed"] in args.seeds]
    machine = machine or describe_machine()
    time_per_update = read_time_per_update(parser, args.seconds_per_update, [run["arm"] for run in runs])
    summary = derive(runs, preset["max_update"], preset["bleu_levels"], time_per_update)
    command = "autoassist-benchmark " + shlex.join(argv if argv is not None else sys.argv[1:])
    record = {"command": command}
    if args.rescore:  # the runs' own command stays the record of how they were trained
        record = {"command": recorded["command"], "rescored_with": command}
    write_atomically(os.path.join(args.out, "results.json"), json.dumps(
        {"preset": args.preset, "settings": preset, **record, "machine": machine,
         "time_per_update_vs_stock": time_per_update, "time_sources": args.seconds_per_update, "runs": runs,
         "summary": summary}, indent=2))
    table = (markdown(summary, record, machine, preset["max_update"], preset["bleu_levels"],
                      timed=time_per_update is not None)
             + equal_update_table(runs, preset.get("validate_interval_updates", 0))
             + equal_token_table(runs, preset.get("validate_interval_updates", 0))
             + test_checkpoint_table(runs) + peak_memory_table(runs))
    write_atomically(os.path.join(args.out, "results.md"), table)
    plot(runs, args.out, time_per_update)
    logging.getLogger("benchmark").info("wrote %s\n%s", args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
