#!/usr/bin/env python
"""Which training pairs a selecting run's rule skips at its checkpoint, and what they have in common.

    python scripts/research/skipped_pairs_report.py --data data-bin/tatoeba.de-en \
        --checkpoints runs/bench-tatoeba/runs/learnable@0.7-seed*/checkpoint_last.pt \
        --out docs/results/benchmark-tatoeba/skipped-pairs
    autoassist-score --checkpoint runs/bench-tvsub/runs/baseline-seed1/checkpoint_best.pt --data data-bin/tvsub.zh-en \
        --output runs/tvsub-stock-losses.npy
    python scripts/research/skipped_pairs_report.py --data data-bin/tvsub.zh-en \
        --checkpoints runs/bench-tvsub/runs/assistant@0.7-seed1/checkpoint_last.pt \
        --losses runs/tvsub-stock-losses.npy --out docs/results/benchmark-tvsub/skipped-pairs

Restores each checkpoint's selection as its run would resume it (the task built from the checkpoint's own
configuration on ``--data``, the Assistant, loss table and stream loaded from its AutoAssist state) and asks the
rule for every training pair's keep probability at the checkpoint's point of training, whether or not the schedule
still selected there (a run annealed to keeping everything at its end is asked what the rule would keep). A pair's
expected skip is one minus its keep probability, so the shares below are what the next pass would drop. A loss-band
rule (``learnable``, ``predicted-learnable``) also says which side of its band each skipped pair falls on: learned
(relative loss below the lower bound) or unlearnable (above the upper bound), and which pairs it has not seen yet.

The skipped share is tabulated by target length (sentencepiece pieces, split at ``--length-edges``), by the ratio of
source to target length, by whether another training pair has the same target sentence (another translation of it),
by whether the very same pair occurs again (an exact repeat), by whether the target ends a sentence (a subtitle
line that does not is a fragment of one) and, with ``--losses`` (``autoassist-score``'s per-pair losses of a model,
e.g. the stock run's at the same budget), by fifths of that loss: so that what a rule trades for can be told from
what it is meant to find. Writes ``skipped_pairs.json`` and ``.md``.
"""

import argparse
import logging
import os
import sys

import numpy as np

from fairseq_autoassist.benchmark.report import bucket_labels
from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.corpus.raw_corpus import PreparationError, exit_code
from fairseq_autoassist.recipes import data_languages, require_prepared, write_report

logger = logging.getLogger("skipped_pairs_report")

LENGTH_EDGES = (6, 8, 12, 20)
RATIO_EDGES = (0.7, 1.4)
LOSS_QUANTILES = (0.2, 0.4, 0.6, 0.8)
# A target ends a sentence when its last piece, closing quotes and brackets aside, ends in one of these.
SENTENCE_ENDS = (".", "!", "?", "\u2026", "\u3002", "\uff01", "\uff1f")
CLOSING = "\"'\u2019\u201d)]\u00bb\u300d\u300f"


def skipped_shares(keep_prob, skipped_side, groups):
    """For each group (name -> (bucket labels, bucket index per pair)): per bucket the pairs, their expected skipped
    share (one minus the mean keep probability) and, where the rule has a loss band (``skipped_side`` per pair:
    0 labelled learned, 1 unlearnable, nan neither; None without a band), the share it labels skipped on each side."""
    def share(values):
        return round(float(np.mean(values)), 3) if len(values) else None

    tables = {}
    for name, (bucket_names, bucket) in groups.items():
        rows = {}
        for index, bucket_name in enumerate(bucket_names):
            members = bucket == index
            row = {"pairs": int(members.sum()), "skipped": share(1 - keep_prob[members])}
            if skipped_side is not None:
                row["skipped_as_learned"] = share(skipped_side[members] == 0)
                row["skipped_as_unlearnable"] = share(skipped_side[members] == 1)
            rows[bucket_name] = row
        tables[name] = rows
    return tables


def repeated(*sentence_hashes):
    """Whether another pair has the same key, the key being one ``CorpusSide.sentence_hashes`` array (the target's:
    another translation of the sentence) or several (source and target: the very same pair again)."""
    keys = np.stack(sentence_hashes, axis=1)
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)] > 1


def ends_a_sentence(side, symbols):
    """Per sentence of ``side`` (a ``CorpusSide``, end of sentence included), whether its last piece before the end
    of sentence ends in sentence-final punctuation; ``symbols``: the dictionary's symbol of each token id."""
    final = np.array([symbol.rstrip(CLOSING).endswith(SENTENCE_ENDS) for symbol in symbols])
    last = side.offsets[1:] - 2
    has_piece = side.lengths >= 2
    last_tokens = np.asarray(side.tokens[np.where(has_piece, last, 0)], dtype=np.int64)
    return has_piece & final[last_tokens]


def loss_fifths(losses_path, num_pairs):
    """The bucket names and index per pair of a ``--losses`` file by fifths of its scored pairs (unscored: last)."""
    from fairseq_autoassist.reference.scores import read_scores

    losses = np.asarray(read_scores(losses_path, num_pairs), dtype=np.float64)
    scored = np.isfinite(losses)
    edges = tuple(round(float(edge), 2) for edge in np.quantile(losses[scored], LOSS_QUANTILES))
    bucket = np.where(scored, np.searchsorted(edges, losses, side="left"), len(edges) + 1)
    return bucket_labels(edges, " nats") + ["not scored"], bucket


def restore_selection(checkpoint_path, data):
    """``(policy name, runtime, epoch, num_updates)``: the run's ``AutoAssistRuntime`` rebuilt on ``data`` from
    the checkpoint's configuration and loaded with its AutoAssist state."""
    from fairseq import checkpoint_utils, tasks
    from omegaconf import open_dict

    from fairseq_autoassist.selection.policies import POLICIES
    # Registers the plugin's task with fairseq and lets fairseq's checkpoints load.
    from fairseq_autoassist.tasks import autoassist_translation  # noqa: F401

    if not os.path.isfile(checkpoint_path):
        raise PreparationError(f"--checkpoints {checkpoint_path} does not exist")
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint_path)
    cfg = state["cfg"]
    policy = cfg.task.get("autoassist_policy")
    if policy not in POLICIES or POLICIES[policy].keep is None:
        raise PreparationError(f"{checkpoint_path} trained without selection (--task {cfg.task._name}, "
                               f"--autoassist-policy {policy}); pass checkpoints of selecting runs")
    epoch = state["extra_state"]["train_iterator"]["epoch"]
    with open_dict(cfg):
        # The selection only: on this folder, in this thread, without the run's diagnostics files.
        cfg.task.data = data
        cfg.task.autoassist_sync = True
        cfg.task.autoassist_loss_log = None
        cfg.task.autoassist_digest_file = None
    task = tasks.setup_task(cfg.task)
    trained_vocabulary = state["model"]["encoder.embed_tokens.weight"].shape[0]
    if trained_vocabulary != len(task.source_dictionary):
        raise PreparationError(f"{checkpoint_path} trained with a dictionary of {trained_vocabulary} entries, --data "
                               f"{data} has {len(task.source_dictionary)}; pass the --data it trained on")
    task.load_dataset(cfg.dataset.train_subset)
    task.get_batch_iterator(
        task.dataset(cfg.dataset.train_subset), max_tokens=cfg.dataset.max_tokens,
        max_sentences=cfg.dataset.batch_size, max_positions=task.max_positions(), ignore_invalid_inputs=True,
        required_batch_size_multiple=cfg.dataset.required_batch_size_multiple, seed=cfg.common.seed, epoch=epoch)
    try:
        task.set_checkpoint_dict(state["extra_state"].get(type(task).__name__, {}))
    except AutoAssistConfigError as error:
        raise PreparationError(f"{checkpoint_path}: {error}; pass the --data it trained on") from error
    return policy, task.runtime, epoch, state["optimizer_history"][-1]["num_updates"]


def rule_keep_probabilities(checkpoint_path, data, num_pairs):
    """The checkpoint's ``policy`` and ``updates``; per pair, the rule's ``keep`` probability and the ``side`` of
    a loss band's skip (0 learned, 1 unlearnable, nan neither); the share of pairs the band has not seen
    (``not_seen``, None without a band)."""
    from fairseq_autoassist.selection.loss_table import LossBand

    policy, runtime, epoch, num_updates = restore_selection(checkpoint_path, data)
    selector = runtime.selector
    selector.num_updates = num_updates
    ids = np.arange(num_pairs)
    keep = selector.rule_keep_probabilities(ids, selector.schedule.progress(epoch, num_updates))
    if keep is None:
        raise PreparationError(f"{checkpoint_path}: --autoassist-policy {policy} keeps every pair at this checkpoint; "
                               "pass checkpoints of selecting runs")
    side = not_seen = None
    table = runtime.loss_table
    if isinstance(table, LossBand):
        labels = table.labels(ids)
        relative = table.losses.astype(np.float64)
        side = np.where(labels == 0, (relative >= table.bounds[1]).astype(np.float64), np.nan)
        not_seen = float(np.mean(np.isnan(labels)))
    if runtime.worker is not None:
        runtime.worker.close()
    return {"policy": policy, "updates": num_updates, "keep": keep, "side": side, "not_seen": not_seen}


def training_pairs(data):
    """The training split's two sides (``fairseq_autoassist.assistant.PairFeatures``, which keeps the memory-mapped
    data open while their lengths are read)."""
    from fairseq_autoassist.data.iterator import load_pair_features

    try:
        info = require_prepared(data)
        return load_pair_features(data, info["source"], info["target"])
    except AutoAssistConfigError as error:
        raise PreparationError(str(error)) from error


def markdown(runs):
    lines = ["# Which pairs the rule skips at each checkpoint", "",
             "Skipped: one minus the rule's keep probability, averaged (the share the next pass would drop); a loss "
             "band's rule also by the side of its band it labels a pair skipped on.", ""]
    for run in runs:
        band = "not_seen" in run
        detail = ""
        if band:
            detail = (f" ({run['skipped_as_learned']:.3f} of the pairs labelled learned, "
                      f"{run['skipped_as_unlearnable']:.3f} unlearnable; not yet seen: {run['not_seen']:.3f})")
        lines += [f"## `{run['checkpoint']}` ({run['policy']}, {run['updates']} updates)", "",
                  f"Skipped: {run['skipped']:.3f} of the training pairs{detail}. Mean target length weighted by the "
                  f"skip {run['mean_target_length_skipped']:.2f} pieces, by the keep "
                  f"{run['mean_target_length_kept']:.2f}.", ""]
        for name, rows in run["by"].items():
            header = f"| {name} | pairs | skipped |" + (" labelled learned | labelled unlearnable |" if band else "")
            lines += [header, "|---" * header.count(" |") + "|"]
            for bucket, row in rows.items():
                cells = [row["pairs"], row["skipped"]]
                if band:
                    cells += [row["skipped_as_learned"], row["skipped_as_unlearnable"]]
                lines.append(f"| {bucket} | " + " | ".join("-" if cell is None else str(cell) for cell in cells) + " |")
            lines.append("")
    return "\n".join(lines)


def pair_groups(data, pairs, length_edges=LENGTH_EDGES, ratio_edges=RATIO_EDGES, losses=None):
    """Name -> (bucket names, bucket index per training pair) of every grouping the report tabulates."""
    from fairseq.data import Dictionary

    target_sizes = pairs.target.lengths
    target_lang = data_languages(data)["target"]
    symbols = Dictionary.load(os.path.join(data, f"dict.{target_lang}.txt")).symbols
    target_hashes = pairs.target.sentence_hashes()
    no_yes = ["none", "at least one"]
    groups = {
        "target length": (bucket_labels(length_edges, " pieces"),
                          np.searchsorted(length_edges, target_sizes, side="left")),
        "source / target length": (bucket_labels(ratio_edges),
                                   np.searchsorted(ratio_edges, pairs.source.lengths / target_sizes, side="left")),
        "another translation of the target sentence": (no_yes, repeated(target_hashes).astype(np.int64)),
        "the same pair again (exact repeat)": (
            no_yes, repeated(pairs.source.sentence_hashes(), target_hashes).astype(np.int64)),
        "the target ends a sentence": (["no (a fragment)", "yes"],
                                       ends_a_sentence(pairs.target, symbols).astype(np.int64)),
    }
    if losses:
        groups[f"loss under {os.path.basename(losses)}, fifths"] = loss_fifths(losses, len(target_sizes))
    return groups


def report(data, checkpoints, out, length_edges=LENGTH_EDGES, ratio_edges=RATIO_EDGES, losses=None):
    pairs = training_pairs(data)
    target_sizes = pairs.target.lengths
    groups = pair_groups(data, pairs, length_edges, ratio_edges, losses)
    runs = []
    for checkpoint in checkpoints:
        rule = rule_keep_probabilities(checkpoint, data, len(target_sizes))
        keep, side = rule["keep"], rule["side"]
        skip = 1 - keep
        run = {"checkpoint": checkpoint, "policy": rule["policy"], "updates": rule["updates"],
               "skipped": float(np.mean(skip)),
               "mean_target_length_skipped": float(np.average(target_sizes, weights=skip)) if skip.any()
               else float("nan"),
               "mean_target_length_kept": float(np.average(target_sizes, weights=keep)),
               "by": skipped_shares(keep, side, groups)}
        if side is not None:
            run.update(skipped_as_learned=float(np.mean(side == 0)), skipped_as_unlearnable=float(np.mean(side == 1)),
                       not_seen=rule["not_seen"])
        runs.append(run)
    record = {"data": os.path.abspath(data), "languages": data_languages(data), "length_edges": list(length_edges),
              "ratio_edges": list(ratio_edges), "losses": losses, "runs": runs}
    logger.info("wrote %s", write_report(out, "skipped_pairs", record, markdown(runs)))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the prepared data-bin folder the runs trained on")
    parser.add_argument("--checkpoints", nargs="+", required=True, help="checkpoints of selecting runs")
    parser.add_argument("--out", required=True, help="folder for skipped_pairs.json and .md")
    parser.add_argument("--length-edges", type=int, nargs="+", default=list(LENGTH_EDGES),
                        help="upper ends of the target-length buckets, in pieces (default: 6 8 12 20)")
    parser.add_argument("--losses", help="an autoassist-score .npy of the same --data: tabulate by fifths of it")
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    args = parse_args(argv)
    return exit_code(lambda: report(args.data, args.checkpoints, args.out, tuple(args.length_edges),
                                    losses=args.losses), logger)


if __name__ == "__main__":
    sys.exit(main())
