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
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN_DIR = os.path.join(ROOT, "fairseq_autoassist")

# Model sizes: "base" is the 3+3-layer, 256-wide Transformer measured in the project's docs;
# "small" (2+2 x 128) trains about twice as fast on CPU; "tiny" is for tests.
ARCHITECTURES = {
    "base": dict(layers=3, dim=256, ffn=1024, heads=4),
    "small": dict(layers=2, dim=128, ffn=512, heads=4),
    "tiny": dict(layers=1, dim=32, ffn=64, heads=2),
}


def recipe(data, save_dir, policy, arch="base", max_epoch=10, max_update=0, max_tokens=4096, lr=5e-4,
           warmup_updates=400, seed=1, cpu=False, eval_bleu=True, log_interval=20):
    """fairseq-train arguments; ``policy=None`` gives fairseq's stock ``translation`` task (the
    baseline), any other value the AutoAssist task with that ``--autoassist-policy``."""
    size = ARCHITECTURES[arch]
    task = ["--task", "translation"] if policy is None else [
        "--task", "autoassist_translation", "--autoassist-policy", policy]
    args = [
        data,
        "--user-dir", PLUGIN_DIR,
        *task,
        "--arch", "transformer", "--share-all-embeddings",
        "--encoder-layers", str(size["layers"]), "--decoder-layers", str(size["layers"]),
        "--encoder-embed-dim", str(size["dim"]), "--decoder-embed-dim", str(size["dim"]),
        "--encoder-ffn-embed-dim", str(size["ffn"]), "--decoder-ffn-embed-dim", str(size["ffn"]),
        "--encoder-attention-heads", str(size["heads"]), "--decoder-attention-heads", str(size["heads"]),
        "--dropout", "0.3", "--weight-decay", "0.0001",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
        "--lr", str(lr), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(warmup_updates),
        "--max-tokens", str(max_tokens), "--seed", str(seed),
        "--max-epoch", str(max_epoch), "--max-update", str(max_update),
        "--save-dir", save_dir, "--no-epoch-checkpoints",
        "--log-format", "simple", "--log-interval", str(log_interval),
        "--num-workers", "0",
    ]
    if eval_bleu:
        args += [
            "--eval-bleu", "--eval-bleu-args", '{"beam": 1}', "--eval-bleu-remove-bpe", "sentencepiece",
            "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric",
        ]
    if cpu:
        args.append("--cpu")
    return args


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(ROOT, "data-bin", "multi30k.de-en"), help="prepared data-bin folder")
    parser.add_argument("--save-dir", required=True, help="checkpoints and train.log go here")
    parser.add_argument("--policy", default="assistant", help="--autoassist-policy: assistant, uniform or none")
    parser.add_argument("--arch", default="base", choices=sorted(ARCHITECTURES), help="model size")
    parser.add_argument("--max-epoch", type=int, default=10)
    parser.add_argument("--max-update", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warmup-updates", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto",
                        help="auto: the GPU when torch sees one, else the CPU")
    parser.add_argument("--no-eval-bleu", action="store_true", help="skip validation BLEU each epoch")
    parser.add_argument("extra", nargs="*", help="more fairseq-train flags, after --")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isfile(os.path.join(args.data, "dict.en.txt")) and not any(
        name.startswith("dict.") for name in (os.listdir(args.data) if os.path.isdir(args.data) else [])
    ):
        sys.exit(f"error: {args.data} is not a prepared data-bin folder (no dict.*.txt); "
                 "run scripts/prepare_multi30k.py or pass --data")
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
    log_path = os.path.join(args.save_dir, "train.log")
    with open(log_path, "a") as log:
        log.write("# " + " ".join(command) + "\n")
        log.flush()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in process.stdout:
            sys.stdout.write(line)
            log.write(line)
            log.flush()
    return process.wait()


if __name__ == "__main__":
    sys.exit(main())
