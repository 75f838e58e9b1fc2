"""``autoassist-filter``: a prepared data folder without the pairs two reference models find unlikely.

    autoassist-score --checkpoint ref-de-en/checkpoint_best.pt --data data-bin/noisy.de-en      # scores/de-en.npy
    autoassist-score --checkpoint ref-en-de/checkpoint_best.pt --data data-bin/noisy.de-en      # scores/en-de.npy
    autoassist-filter --data data-bin/noisy.de-en --dual-xent data-bin/noisy.de-en/scores/de-en.npy \\
        data-bin/noisy.de-en/scores/en-de.npy --worst-share 0.2 --dest data-bin/noisy-dualx.de-en

The rule is dual conditional cross-entropy (Junczys-Dowmunt 2018; ``cleaning.dual_cross_entropy``), from one
reference model per direction, each pair's per-token loss under it (``autoassist-score``). Pairs whose score lies
``--above`` a threshold, or the ``--worst-share`` of the pairs, leave the training split; the other splits, the
dictionaries and the sentencepiece model stay the folder's, so models trained on the result compare with models
trained on the folder. The rule runs on a prepared folder, a second step of the preparation, because the scores
index its binarized pairs: the reference models need no encoding of the raw text in their own pieces.
``prepare.json`` of the result reports what was removed (by kind of noise where the folder lists its corrupted
pairs in ``noise.tsv``, whose list follows the kept pairs) and the score's quantiles.
"""

import argparse
import collections
import logging
import os
import sys

import numpy as np

from ..corpus.cleaning import dual_cross_entropy
from ..commands import command_parser
from ..corpus.raw_corpus import NOISE_LIST, exit_code, read_noise
from ..recipes import require_prepared
from .scores import read_scores

logger = logging.getLogger("autoassist-filter")


def kept_by_dual_cross_entropy(scores, above=None, worst_share=None):
    """The indices of the pairs the rule keeps: a score at most ``above``, or outside the ``worst_share`` of the
    highest scores (ties broken by index); a pair without a score is kept."""
    scores = np.asarray(scores, dtype=np.float64)
    known = np.isfinite(scores)
    if above is not None:
        return np.flatnonzero(~known | (scores <= above))
    order = np.flatnonzero(known)[np.argsort(-scores[known], kind="stable")]
    removed = order[:int(round(worst_share * len(scores)))]
    keep = np.ones(len(scores), dtype=bool)
    keep[removed] = False
    return np.flatnonzero(keep)


def filter_folder(data, forward, backward, dest, above=None, worst_share=None):
    """Writes ``dest``: ``data`` with the training pairs the rule keeps; returns what its prepare.json says."""
    from .models import write_subset

    info = require_prepared(data)
    pairs = info["pairs"]["train"]
    scores = dual_cross_entropy(read_scores(forward, pairs), read_scores(backward, pairs))
    kept = kept_by_dual_cross_entropy(scores, above, worst_share)
    removed = np.setdiff1d(np.arange(pairs), kept)
    report = {"rule": "dual_cross_entropy", "forward": os.path.abspath(forward), "backward": os.path.abspath(backward),
              "above": above, "worst_share": worst_share, "removed": int(len(removed)), "of": pairs,
              "unscored": int(np.count_nonzero(~np.isfinite(scores))),
              "score_quantiles": {str(q): round(float(np.nanquantile(scores, q)), 4)
                                  for q in (0.1, 0.25, 0.5, 0.75, 0.9)}}
    noise_path = os.path.join(data, NOISE_LIST)
    if os.path.isfile(noise_path):
        noise = read_noise(noise_path)
        report["by_kind"] = dict(sorted(collections.Counter(noise.get(int(i), "clean") for i in removed).items()))
        report["kept_share_by_kind"] = {
            kind: round(1 - report["by_kind"].get(kind, 0) / total, 4)
            for kind, total in sorted(collections.Counter(
                [noise.get(i, "clean") for i in range(pairs)]).items())}
    subset = write_subset(data, kept, dest, extra={"filtered": report})
    logger.info("kept %d of %d training pairs in %s (%s)", len(kept), pairs, dest, report.get("by_kind", ""))
    return subset


def share_argument(text):
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"'{text}': a share between 0 and 1")
    return value


def main(argv=None):
    parser = command_parser("autoassist-filter", __doc__)
    parser.add_argument("--data", required=True, help="the prepared data folder to filter")
    parser.add_argument("--dual-xent", nargs=2, required=True, metavar=("FORWARD", "BACKWARD"),
                        help="the two score files of autoassist-score: the model of the folder's direction, then the "
                             "model of the other")
    threshold = parser.add_mutually_exclusive_group(required=True)
    threshold.add_argument("--above", type=float, help="remove the pairs whose score is above this")
    threshold.add_argument("--worst-share", type=share_argument, help="remove this share of the pairs, worst first")
    parser.add_argument("--dest", required=True, help="the filtered data folder to write")
    args = parser.parse_args(argv)
    if os.path.abspath(args.dest) == os.path.abspath(args.data):
        parser.error("--dest must be a new folder, not --data")
    return exit_code(lambda: filter_folder(args.data, *args.dual_xent, args.dest, args.above, args.worst_share), logger)


if __name__ == "__main__":
    sys.exit(main())
