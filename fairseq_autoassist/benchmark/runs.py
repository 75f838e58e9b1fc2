"""Training an arm to its end, resuming it after a kill at any moment, and reading a finished run back.

A run lives in OUT/runs/ARM-seedS/: its training log and, once it finished, its test BLEU (written last,
atomically). A finished run is reused; an interrupted one resumes from its last checkpoint.
"""

import argparse
import json
import logging
import os
import re
import shutil
import sys

from ..recipes import run_logged, reported_test_set_name, write_synthetic_multi30k
from .arms import arm_argument, arm_data, arm_spec, in_table_order, reference_scores, training_args
from .logs import parse_epochs, parse_peak_memory, parse_validations

logger = logging.getLogger(__name__)


def run_command(command, log_path):
    if run_logged(command, log_path) != 0:
        raise RuntimeError(f"{command[2]} failed; see {log_path}")


def repair_last_checkpoint(run_dir):
    """fairseq writes its first checkpoint of a save atomically but copies it to the others
    (``checkpoint_last.pt`` after ``checkpoint_best.pt``), so a kill during the copy leaves a truncated
    ``checkpoint_last.pt`` that the resume cannot load. It then holds what ``checkpoint_best.pt`` holds."""
    import torch

    last, best = (os.path.join(run_dir, name) for name in ("checkpoint_last.pt", "checkpoint_best.pt"))
    if not os.path.isfile(last):
        return
    try:
        torch.load(last, map_location="cpu", weights_only=False)
    except Exception as error:  # a truncated file fails in pickle, zipfile or torch, each in its own way
        logger.warning("%s is unreadable (%s: %s); resuming from checkpoint_best.pt", last, type(error).__name__, error)
        if os.path.isfile(best):
            shutil.copyfile(best, last + ".tmp")
            os.replace(last + ".tmp", last)
        else:
            os.unlink(last)


RUN_LOG, RUN_RESULT = "train.log", "bleu_test.json"
# The reference models' cost of an arm that selects by their scores (record_reference_cost).
REFERENCE_COST = "reference_cost.json"


def prepared_test_splits(data, splits):
    """Those of ``splits`` that the data folder's preparation wrote (its prepare.json's ``test_sets``)."""
    with open(os.path.join(data, "prepare.json")) as f:
        prepared = json.load(f).get("test_sets", {})
    return [split for split in splits if split in prepared]


def run_arm(arm, seed, data, out, preset, cpu):
    run_dir = os.path.join(out, "runs", f"{arm}-seed{seed}")
    result_path = os.path.join(run_dir, RUN_RESULT)
    os.makedirs(run_dir, exist_ok=True)
    log_path = os.path.join(run_dir, RUN_LOG)
    if not os.path.isfile(result_path):
        logger.info("running %s seed %d (log: %s)", arm, seed, log_path)
        repair_last_checkpoint(run_dir)
        record_reference_cost(arm, data, run_dir)
        run_command([sys.executable, "-m", "fairseq_cli.train",
                     *training_args(arm, data, run_dir, preset, seed, cpu)], log_path)
        # Other domains' test sets first: the main test's result, written last, marks the run finished.
        tested_on = arm_data(arm, data)
        for split in [*prepared_test_splits(tested_on, preset.get("other_test_splits", [])), "test"]:
            run_command([sys.executable, "-m", "fairseq_autoassist.evaluate",
                         "--checkpoint", os.path.join(run_dir, "checkpoint_best.pt"), "--data", tested_on,
                         "--split", split, "--beam", "5", "--device", "cpu" if cpu else "gpu",
                         "--output", os.path.join(run_dir, f"bleu_{split}.json")],
                        os.path.join(run_dir, f"evaluate_{split}.log"))
    else:
        logger.info("%s seed %d already finished; reusing it", arm, seed)
    return read_run(arm, seed, run_dir)


def record_reference_cost(arm, data, run_dir):
    """For an arm that selects by reference scores, the cost of the reference models (their ``RECIPE.json``'s
    updates and target tokens) beside the run, which ``read_run`` adds to its record."""
    recipe_name = arm_spec(arm).get("reference")
    if recipe_name:
        with open(os.path.splitext(reference_scores(data, recipe_name))[0] + ".json") as f:
            cost = json.load(f)["cost"]
        with open(os.path.join(run_dir, REFERENCE_COST), "w") as f:
            json.dump({"recipe": recipe_name, **cost}, f, indent=2)


def read_run(arm, seed, run_dir):
    """The records of a finished run: its training log's epochs and validations, its test BLEU."""
    with open(os.path.join(run_dir, RUN_LOG)) as f:
        log_text = f.read()
    with open(os.path.join(run_dir, RUN_RESULT)) as f:
        test = json.load(f)
    other_tests = {}
    for name in sorted(os.listdir(run_dir)):
        split = re.fullmatch(r"bleu_(test\d+)\.json", name)
        if split:
            with open(os.path.join(run_dir, name)) as f:
                other = json.load(f)
            other_tests[reported_test_set_name(split.group(1), other.get("test_set", split.group(1)))] = other["bleu"]
    record = {"arm": arm, "seed": seed, "epochs": parse_epochs(log_text), "validations": parse_validations(log_text),
              "test_bleu": test["bleu"], "test_bleu_signature": test["bleu_signature"],
              "test_checkpoint_updates": test.get("checkpoint_updates"), "other_test_bleu": other_tests,
              "peak_resident_mb": parse_peak_memory(log_text)}
    if os.path.isfile(os.path.join(run_dir, REFERENCE_COST)):
        with open(os.path.join(run_dir, REFERENCE_COST)) as f:
            record["reference_cost"] = json.load(f)
    return record


def finished_runs(out):
    """Every finished run in OUT/runs (its test BLEU written), whatever command ran it, by seed and arm."""
    return [read_run(arm, seed, run_dir) for seed, arm, run_dir in finished_run_dirs(out)]


def finished_run_dirs(out):
    """(seed, arm, folder) of every finished run in OUT/runs, by seed and then in table order."""
    found = []
    for name in sorted(os.listdir(os.path.join(out, "runs"))):
        match = re.fullmatch(r"(.+)-seed(\d+)", name)
        run_dir = os.path.join(out, "runs", name)
        if match and os.path.isfile(os.path.join(run_dir, RUN_RESULT)):
            try:
                arm_argument(match.group(1))
            except argparse.ArgumentTypeError:
                logger.warning("skipping %s: not an arm of this benchmark", run_dir)
                continue
            found.append((int(match.group(2)), match.group(1), run_dir))
    order = {arm: i for i, arm in enumerate(in_table_order(arm for _, arm, _ in found))}
    return sorted(found, key=lambda f: (f[0], order[f[1]]))


def smoke_data(out):
    """Prepare the synthetic corpus of the tests for the smoke preset (once)."""
    dest = os.path.join(out, "data-bin")
    if not os.path.isfile(os.path.join(dest, "prepare.json")):
        raw = write_synthetic_multi30k(os.path.join(out, "raw"))
        run_command([sys.executable, "-m", "fairseq_autoassist.corpus.prepare_corpus", "--input", raw, "--src", "de",
                     "--tgt", "en", "--dest", dest, "--vocab-size", "120", "--workers", "1"],
                    os.path.join(out, "prepare.log"))
    return dest
