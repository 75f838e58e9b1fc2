#!/usr/bin/env python
"""What a training run did, in a few lines: the policy, the updates, the share of pairs the last selecting
epoch kept, the Assistant's balanced accuracy, and the test BLEU with its sacreBLEU signature.

    python scripts/summarize_run.py --save-dir checkpoints/multi30k-learnable

Reads ``SAVE_DIR/train.log`` (written by scripts/train_multi30k.py) and ``bleu_test.json`` beside it
(scripts/evaluate_bleu.py). The main job (scripts/run_multi30k.sh) ends with it.
"""

import argparse
import json
import logging
import os
import re
import sys

from fairseq_autoassist.benchmark.logs import parse_epochs

logger = logging.getLogger("summarize_run")

EVIDENCE = ("is one run, not a comparison: the side-by-side benchmarks of every policy against the stock task "
            "at equal compute are in docs/results/ (scripts/benchmark.py reproduces them)")


def summarize(save_dir):
    """The summary lines of the run in ``save_dir``."""
    log_path = os.path.join(save_dir, "train.log")
    if not os.path.isfile(log_path):
        raise FileNotFoundError(f"{log_path} is missing; pass the --save-dir of a scripts/train_multi30k.py run")
    with open(log_path, encoding="utf-8") as f:
        log = f.read()
    policy = re.findall(r"AutoAssist: policy=([\w-]+)", log)
    epochs = parse_epochs(log)
    if not epochs:
        raise ValueError(f"{log_path} holds no finished epoch")
    last = epochs[-1]
    lines = [f"policy {policy[-1] if policy else 'none (the stock task)'}: {len(epochs)} epochs, "
             f"{int(last['updates'])} updates"]
    selecting = [row for row in epochs if row["kept_share"] < 1.0]
    if selecting:
        lines.append(f"pairs kept in the last epoch: {selecting[-1]['kept_share']:.1%} (every pair in the warm-up "
                     f"epoch{'s' if len(epochs) - len(selecting) > 1 else ''})")
    if last.get("assistant_accuracy") is not None:
        lines.append(f"the Assistant's balanced accuracy on fresh losses: {last['assistant_accuracy']:.3f} "
                     "(0.5 is chance)")
    bleu_path = os.path.join(save_dir, "bleu_test.json")
    if os.path.isfile(bleu_path):
        with open(bleu_path) as f:
            bleu = json.load(f)
        lines.append(f"test BLEU {bleu['bleu']:.2f} (checkpoint of update {bleu['checkpoint_updates']}, beam "
                     f"{bleu['beam']}; {bleu['bleu_signature']})")
    lines.append(f"this {EVIDENCE}")
    return lines


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--save-dir", required=True, help="the run's checkpoint folder (with train.log)")
    args = parser.parse_args(argv)
    try:
        lines = summarize(args.save_dir)
    except (FileNotFoundError, ValueError) as error:
        logger.error("error: %s", error)
        return 2
    for line in lines:
        logger.info("%s", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
