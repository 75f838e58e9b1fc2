#!/usr/bin/env python
"""Train the Multi30K Transformer recipe with a chosen selection policy.

    python scripts/train_multi30k.py --data data-bin/multi30k.de-en --policy assistant \
        --save-dir checkpoints/assistant --max-epoch 10
    python scripts/train_multi30k.py ... -- --autoassist-importance-weighting   # extra fairseq flags

Runs ``fairseq-train`` with ``--user-dir fairseq_autoassist --task autoassist_translation``,
writes its log to ``SAVE_DIR/train.log`` (and to the terminal) and its checkpoints to
``SAVE_DIR``. Running it again on the same ``--save-dir`` resumes from ``checkpoint_last.pt``.
The same recipe for ``fairseq-hydra-train`` is ``configs/multi30k.yaml``.
"""

import argparse
import os
import sys

from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.recipes import ARCHITECTURES, ROOT, recipe, require_prepared, run_logged
from fairseq_autoassist.selection.policies import policy_names


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(ROOT, "data-bin", "multi30k.de-en"), help="prepared data-bin folder")
    parser.add_argument("--save-dir", required=True, help="checkpoints and train.log go here")
    parser.add_argument("--policy", default="assistant", choices=policy_names(),
                        help="--autoassist-policy (python -m fairseq_autoassist lists what each does)")
    parser.add_argument("--arch", default="base", choices=sorted(ARCHITECTURES), help="model size")
    parser.add_argument("--max-epoch", type=int, default=10)
    parser.add_argument("--max-update", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, help="default: the architecture's (base 4,096, small 2,048)")
    parser.add_argument("--lr", type=float, help="default: the architecture's (base 1e-3, small 2e-3)")
    parser.add_argument("--warmup-updates", type=int, help="default: the architecture's (base 500, small 300)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto",
                        help="auto: the GPU when torch sees one, else the CPU")
    parser.add_argument("--no-eval-bleu", action="store_true", help="skip validation BLEU each epoch")
    parser.add_argument("extra", nargs="*", help="more fairseq-train flags, after --")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        require_prepared(args.data)
    except AutoAssistConfigError as error:
        sys.exit(f"error: {error}")
    if args.device == "auto":
        import torch

        cpu = not torch.cuda.is_available()
    else:
        cpu = args.device == "cpu"
    os.makedirs(args.save_dir, exist_ok=True)
    command = [sys.executable, "-m", "fairseq_cli.train"] + recipe(
        args.data, args.save_dir, args.policy, args.arch, args.max_epoch, args.max_update,
        args.max_tokens, args.lr, args.warmup_updates, args.seed, cpu, not args.no_eval_bleu,
    ) + args.extra
    return run_logged(command, os.path.join(args.save_dir, "train.log"), echo=True)


if __name__ == "__main__":
    sys.exit(main())
