#!/usr/bin/env python
"""Train the WMT14 recipe (``fairseq_autoassist.recipes.wmt_recipe``) with a chosen selection policy.

    python scripts/prepare_wmt14.py --raw-dir data/wmt14 --dest data-bin/wmt14.en-de --workers 16
    python scripts/train_wmt14.py --data data-bin/wmt14.en-de --policy assistant --save-dir checkpoints/wmt14-aa
    python scripts/evaluate_bleu.py --checkpoint checkpoints/wmt14-aa/checkpoint_best.pt \
        --data data-bin/wmt14.en-de --split test --beam 4 --lenpen 0.6 --compound-split-bleu

On one GPU: Transformer base, 4,096 tokens x --update-freq 8, fp16, 100,000 updates (``--size wmt``);
with N GPUs add ``-- --update-freq $((8 / N))`` to keep the batch. ``--size wmt-tiny`` is the same recipe
with a tiny model on CPU (smoke tests). ``--policy none`` (or ``baseline``: the stock translation task)
for the baseline. Extra fairseq flags after ``--``. The log goes to ``SAVE_DIR/train.log``; running it
again on the same ``--save-dir`` resumes.
"""

import argparse
import os
import sys

from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.recipes import WMT_SIZES, require_prepared, run_logged, wmt_recipe


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="folder written by scripts/prepare_wmt14.py")
    parser.add_argument("--save-dir", required=True)
    parser.add_argument("--policy", default="assistant", help="an --autoassist-policy, or baseline for --task translation")
    parser.add_argument("--size", choices=sorted(WMT_SIZES), default="wmt")
    parser.add_argument("--max-update", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("extra", nargs="*", help="more fairseq-train flags, after --")
    args = parser.parse_args(argv)
    try:
        require_prepared(args.data)
    except AutoAssistConfigError as error:
        sys.exit(f"error: {error}")
    os.makedirs(args.save_dir, exist_ok=True)
    policy = None if args.policy == "baseline" else args.policy
    command = [sys.executable, "-m", "fairseq_cli.train"] + wmt_recipe(
        args.data, args.save_dir, policy, args.size, args.max_update, args.seed) + args.extra
    return run_logged(command, os.path.join(args.save_dir, "train.log"), echo=True)


if __name__ == "__main__":
    sys.exit(main())
