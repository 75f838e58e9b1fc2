#!/usr/bin/env python
"""Replay a training run's recorded losses through Assistants of several settings and score them.

    python scripts/train_multi30k.py --policy keep-all --save-dir runs/losslog ... \
        -- --autoassist-loss-log runs/losslog/losses.npy
    python scripts/research/replay_assistant.py --data data-bin/multi30k.de-en --loss-log runs/losslog/losses.npy \
        --out docs/results/assistant-replay-multi30k

A loss log (``--autoassist-loss-log``) of a run that trained on every pair holds every pair's
per-token loss at every pass (a pass ends where a pair comes back). The replay feeds those steps,
in order, to one fresh Assistant per setting. Before each step it scores the step's pairs and
compares the scores with the *reference label* of each pair: per-token loss above the running mean
loss (decay 0.9 per step) of *all* the step's pairs, the label an Assistant that saw every loss
would use. From the second pass on it simulates the selection: each pair reaches the Assistant only
with its keep probability under the paper's rule (``--base-prob``, the Assistant's own confidence),
as in a shrinking run, so a setting that lets the selection bias its threshold shows it here.
Reported per setting and pass: the AUC and balanced accuracy of the scores against the reference
label, the kept share, and the Assistant's threshold against the reference threshold. The Boss is
not simulated: it trained on every pair.

Outputs OUT/replay.json and OUT/replay.md.
"""

import argparse
import logging
import sys
from dataclasses import asdict

import numpy as np
from sklearn.metrics import roc_auc_score

from fairseq_autoassist.assistant import Assistant, AssistantConfig
from fairseq_autoassist.assistant.model import balanced_accuracy
from fairseq_autoassist.data.iterator import load_replay_features
from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.loss_log import read_loss_log
from fairseq_autoassist.recipes import data_languages, write_report
from fairseq_autoassist.selection import assistant_keep_probabilities, clip_keep_probabilities

logger = logging.getLogger("replay_assistant")

REFERENCE_LOSS_MEAN_DECAY = 0.9

# name -> (Assistant settings, whether the threshold is corrected for the selection)
SETTINGS = {
    "current": (AssistantConfig(), True),
    "forgetting-0.99": (AssistantConfig(grad_decay=0.99), True),
    "forgetting-0.9": (AssistantConfig(grad_decay=0.9), True),
    "no-forgetting": (AssistantConfig(grad_decay=1.0), True),
    "uncorrected-threshold": (AssistantConfig(), False),
    "no-forgetting-uncorrected": (AssistantConfig(grad_decay=1.0), False),
}


def replay(features, loss_log, config, correct_threshold, base_prob, min_keep_prob, seed):
    """Per-pass scores of one setting (see the module docstring)."""
    assistant = Assistant(features, config)
    rng = np.random.default_rng(seed)
    reference_mean = None
    passes = {}
    pass_index, seen_this_pass = 1, np.zeros(len(features), dtype=bool)
    for ids, losses, _ in read_loss_log(loss_log):
        if seen_this_pass[ids].any():
            pass_index, seen_this_pass[:] = pass_index + 1, False
        seen_this_pass[ids] = True
        finite = np.isfinite(losses)
        ids, losses = ids[finite], losses[finite]
        if not len(ids):
            continue
        scores = assistant.predict(ids)
        batch_mean = float(losses.mean())
        reference = losses > (reference_mean if reference_mean is not None else batch_mean)
        record = passes.setdefault(pass_index, {"scores": [], "labels": [], "balanced": [], "kept": 0, "pairs": 0,
                                           "threshold_ratio": []})
        record["scores"].append(scores)
        record["labels"].append(reference)
        record["balanced"].append(balanced_accuracy(scores > 0.5, reference))
        if reference_mean is not None and assistant.loss_mean is not None:
            record["threshold_ratio"].append(assistant.loss_mean / reference_mean)
        reference_mean = batch_mean if reference_mean is None else (
            REFERENCE_LOSS_MEAN_DECAY * reference_mean + (1 - REFERENCE_LOSS_MEAN_DECAY) * batch_mean)
        if pass_index > 1:
            keep_prob = clip_keep_probabilities(
                assistant_keep_probabilities(scores, assistant.confidence, base_prob), min_keep_prob)
        else:
            keep_prob = np.ones(len(ids))
        kept = rng.random(len(ids)) < keep_prob
        record["kept"] += int(kept.sum())
        record["pairs"] += len(ids)
        assistant.update(ids[kept], losses[kept], keep_prob[kept] if correct_threshold else None)
    rows = []
    for pass_index in sorted(passes):
        record = passes[pass_index]
        labels = np.concatenate(record["labels"])
        rows.append({
            "pass": pass_index,
            "auc": float(roc_auc_score(labels, np.concatenate(record["scores"]))),
            "balanced_accuracy": float(np.mean(record["balanced"])),
            "reference_positive_rate": float(labels.mean()),
            "kept_share": record["kept"] / record["pairs"],
            "threshold_ratio": float(np.mean(record["threshold_ratio"])) if record["threshold_ratio"] else None,
        })
    return rows


def markdown(results, command):
    lines = [f"Command: `{command}`", "",
             "| setting | pass | AUC | balanced accuracy | kept share | threshold / reference |",
             "|---|---|---|---|---|---|"]
    for name, result in results.items():
        for row in result["passes"]:
            ratio = "" if row["threshold_ratio"] is None else f"{row['threshold_ratio']:.3f}"
            lines.append(f"| {name} | {row['pass']} | {row['auc']:.3f} | {row['balanced_accuracy']:.3f} | "
                         f"{row['kept_share']:.3f} | {ratio} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the prepared data-bin folder the run trained on")
    parser.add_argument("--loss-log", required=True, help="FILE written by --autoassist-loss-log")
    parser.add_argument("--source-lang", help="default: the source language of --data's prepare.json")
    parser.add_argument("--target-lang", help="default: the target language of --data's prepare.json")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--base-prob", type=float, default=0.5, help="--autoassist-base-prob of the simulated selection")
    parser.add_argument("--min-keep-prob", type=float, default=0.05, help="--autoassist-min-keep-prob")
    parser.add_argument("--seed", type=int, default=1, help="seed of the simulated keep draws")
    parser.add_argument("--out", required=True, help="folder for replay.json and replay.md")
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    args = parse_args(argv)
    try:
        languages = data_languages(args.data, args.source_lang, args.target_lang)
        features = load_replay_features(args.data, args.loss_log, *languages.values())
    except AutoAssistConfigError as error:
        sys.exit(f"error: {error}")
    results = {}
    for name in args.settings:
        config, correct_threshold = SETTINGS[name]
        logger.info("replaying setting %s", name)
        results[name] = {"config": asdict(config), "threshold_corrected": correct_threshold,
                         "passes": replay(features, args.loss_log, config, correct_threshold, args.base_prob,
                                          args.min_keep_prob, args.seed)}
    command = "python scripts/research/replay_assistant.py " + " ".join(sys.argv[1:] if argv is None else argv)
    record = {"command": command, "languages": languages, "results": results}
    logger.info("wrote %s", write_report(args.out, "replay", record, markdown(results, command)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
