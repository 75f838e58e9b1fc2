"""``autoassist-score``: every pair's per-token loss under a trained fairseq checkpoint, stored beside the data.

    autoassist-score --checkpoint checkpoints/reference/checkpoint_best.pt --data data-bin/multi30k.de-en
    autoassist-score --checkpoint checkpoints/en-de/checkpoint_best.pt --data data-bin/multi30k.de-en \\
        --output data-bin/multi30k.de-en/scores/en-de.npy        # the other direction, same pair order

A reference model's loss on a pair (RHO-LOSS's irreducible loss, one direction of dual conditional cross-entropy)
is the mean negative log-likelihood of the pair's target tokens, end of sentence included, in nats: what the
criterion's ``nll_loss`` sums, divided by the target's tokens, with the model in evaluation mode (no dropout) and
no beam search (one teacher-forced forward pass per batch). The direction is the checkpoint's: a model trained
``en -> de`` scores the pairs of a ``de-en`` folder from their English side (a joined data folder serves both).

Scores are a float32 ``.npy`` file (4 bytes a pair) indexed by the split's dataset index, written through a memory
map as batches finish; a pair not scored yet is NaN, so a killed run resumes where it stopped with the same
command (``--restart`` scores everything again). Pairs longer than the model's positions stay NaN and are counted.
Progress (pairs, pairs per second, time left) is logged every ``--log-seconds``; ``OUTPUT.json`` records the
checkpoint, the direction, the counts and the seconds, from which ``seconds_per_million_pairs``.
"""

import argparse
import json
import logging
import os
import sys
import time

import numpy as np

from ..commands import command_parser
from ..compat import allow_fairseq_checkpoints
from ..corpus.raw_corpus import SCORES_FOLDER, PreparationError, exit_code
from ..recipes import PLUGIN_DIR, require_prepared, write_atomically

logger = logging.getLogger("autoassist-score")


class ScoringError(PreparationError):
    """Bad input; the message names the file or flag to fix."""


def load_reference(checkpoint, data, device):
    """``(model, task)`` of ``checkpoint`` on the data folder ``data``: the model in evaluation mode on ``device``,
    a stock translation task in the checkpoint's direction (an AutoAssist checkpoint's selection state is not
    needed to score)."""
    import torch
    from fairseq import checkpoint_utils
    from fairseq import utils as fairseq_utils
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    # The plugin's task may be the checkpoint's; imported before fairseq, the plugin registered nothing yet.
    fairseq_utils.import_user_module(argparse.Namespace(user_dir=PLUGIN_DIR))
    allow_fairseq_checkpoints()
    if not os.path.isfile(checkpoint):
        raise ScoringError(f"--checkpoint {checkpoint} does not exist")
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    cfg = state["cfg"]
    trained = cfg.task
    task_cfg = TranslationConfig(data=data, source_lang=trained.source_lang, target_lang=trained.target_lang,
                                 max_source_positions=trained.max_source_positions,
                                 max_target_positions=trained.max_target_positions,
                                 left_pad_source=trained.left_pad_source, left_pad_target=trained.left_pad_target,
                                 # Set where the dataclass would interpolate fairseq's other config groups.
                                 dataset_impl=None, required_seq_len_multiple=1, train_subset="train")
    task = TranslationTask.setup_task(task_cfg)
    model = task.build_model(cfg.model)
    try:
        model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    except RuntimeError as error:
        raise ScoringError(f"--checkpoint {checkpoint} does not fit the dictionaries of --data {data} "
                           f"({str(error).splitlines()[0]}); score with the data folder it was trained on") from None
    model.eval()
    return model.to(torch.device(device)), task


def pair_losses(model, sample, pad):
    """Per pair of ``sample`` (a collated fairseq batch), the mean negative log-likelihood of its target tokens
    (float32, on the host)."""
    import torch

    with torch.no_grad():
        net_output = model(**sample["net_input"])
        lprobs = model.get_normalized_probs(net_output, log_probs=True)
        target = sample["target"]
        token_nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1).float()
        mask = target.ne(pad)
        token_nll = token_nll.masked_fill(~mask, 0.0)
        return (token_nll.sum(1) / mask.sum(1).clamp(min=1)).cpu().numpy()


def open_scores(path, num_pairs, restart):
    """The score file's memory map (created with every pair NaN, or reopened to resume)."""
    if os.path.isfile(path) and not restart:
        scores = np.load(path, mmap_mode="r+")
        if scores.shape != (num_pairs,) or scores.dtype != np.float32:
            raise ScoringError(f"{path} holds {scores.shape[0]} {scores.dtype} scores, not {num_pairs} float32 "
                               "for this split; pass --restart to score it again, or another --output")
        return scores
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    scores = np.lib.format.open_memmap(path + ".part", mode="w+", dtype=np.float32, shape=(num_pairs,))
    scores[:] = np.nan
    scores.flush()
    del scores
    os.replace(path + ".part", path)
    return np.load(path, mmap_mode="r+")


def score_split(checkpoint, data, split="train", output=None, max_tokens=8192, device="cpu", restart=False,
                log_seconds=30.0, only=None):
    """Scores ``split`` of ``data`` with ``checkpoint`` into ``output`` (default ``DATA/scores/SRC-TGT.npy``, the
    checkpoint's direction), resuming a partial file; ``only``: the pairs to score (default every pair). Returns
    what ``OUTPUT.json`` says."""
    import torch
    from fairseq import utils as fairseq_utils
    from fairseq.data import data_utils

    require_prepared(data)
    model, task = load_reference(checkpoint, data, device)
    src, tgt = task.cfg.source_lang, task.cfg.target_lang
    output = output or os.path.join(data, SCORES_FOLDER, f"{src}-{tgt}.npy")
    task.load_dataset(split)
    dataset = task.dataset(split)
    scores = open_scores(output, len(dataset), restart)
    pending = np.flatnonzero(np.isnan(scores))
    if only is not None:
        pending = np.intersect1d(pending, only)
    order = dataset.ordered_indices()
    order = order[np.isin(order, pending)]
    order, too_long = dataset.filter_indices_by_size(order, model.max_positions())
    batches = data_utils.batch_by_size(order, dataset.num_tokens, max_tokens=max_tokens,
                                       required_batch_size_multiple=1)
    total, done, started, last_log = len(order), 0, time.perf_counter(), time.perf_counter()
    logger.info("scoring %d of %d pairs of %s/%s (%s -> %s) with %s in %d batches; %d longer than the model's "
                "positions stay unscored", total, len(dataset), data, split, src, tgt, checkpoint, len(batches),
                len(too_long))
    for batch in batches:
        sample = dataset.collater([dataset[int(i)] for i in batch])
        ids = sample["id"].numpy()
        if device != "cpu":
            sample = fairseq_utils.move_to_cuda(sample, device=torch.device(device))
        scores[ids] = pair_losses(model, sample, task.tgt_dict.pad())
        done += len(ids)
        now = time.perf_counter()
        if now - last_log >= log_seconds:
            rate = done / (now - started)
            logger.info("scored %d of %d pairs (%.0f pairs/s, %.0f s left)", done, total, rate, (total - done) / rate)
            scores.flush()
            last_log = now
    scores.flush()
    seconds = time.perf_counter() - started
    scored = int(np.count_nonzero(~np.isnan(scores)))
    info = {"checkpoint": os.path.abspath(checkpoint), "data": os.path.abspath(data), "split": split,
            "source": src, "target": tgt, "pairs": len(dataset), "scored": scored, "too_long": len(too_long),
            "scored_this_run": done, "seconds_this_run": round(seconds, 2),
            "seconds_per_million_pairs": round(seconds / done * 1e6, 1) if done else None,
            "device": device, "max_tokens": max_tokens, "unit": "mean nll per target token (nats), eval mode"}
    write_atomically(output + ".json", json.dumps(info, indent=2))
    if done:
        logger.info("scored %d pairs in %.1f s (%s s per million pairs): %s", done, seconds,
                    info["seconds_per_million_pairs"], output)
    else:
        logger.info("nothing left to score: every pair asked for has its score from an earlier run (%s)", output)
    return info


def read_scores(path, num_pairs=None):
    """A score file of ``score_split`` as a read-only memory map, refused where it does not fit ``num_pairs``."""
    if not os.path.isfile(path):
        raise ScoringError(f"{path} does not exist; write it with autoassist-score --checkpoint CKPT --data DATA")
    scores = np.load(path, mmap_mode="r")
    if num_pairs is not None and scores.shape != (num_pairs,):
        raise ScoringError(f"{path} holds {scores.shape[0]} scores for {num_pairs} training pairs; score this data "
                           "folder with autoassist-score")
    return scores


def main(argv=None):
    parser = command_parser("autoassist-score", __doc__)
    parser.add_argument("--checkpoint", required=True, help="a fairseq translation checkpoint (.pt), either direction")
    parser.add_argument("--data", required=True, help="the prepared data folder whose pairs to score")
    parser.add_argument("--split", default="train", help="the split to score (default train)")
    parser.add_argument("--output", help="the .npy score file (default DATA/scores/SRC-TGT.npy, the checkpoint's "
                                         "direction)")
    parser.add_argument("--max-tokens", type=int, default=8192, help="tokens per batch (default 8192)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--restart", action="store_true", help="score every pair again instead of resuming")
    parser.add_argument("--log-seconds", type=float, default=30.0, help="seconds between progress lines (default 30)")
    args = parser.parse_args(argv)
    if args.max_tokens < 1:
        parser.error(f"--max-tokens {args.max_tokens}: give a positive number of tokens per batch")
    return exit_code(lambda: score_split(args.checkpoint, args.data, args.split, args.output, args.max_tokens,
                                         args.device, args.restart, args.log_seconds), logger)


if __name__ == "__main__":
    sys.exit(main())
