#!/usr/bin/env python
"""Is a long run's memory flat? Host memory and checkpoint size over many updates, AutoAssist beside the stock task.

    python scripts/research/soak.py --out docs/results/soak                       # 10,000 updates, 40k vocabulary
    python scripts/research/soak.py --out /tmp/soak --updates 300 --pairs 3000 --ranks 2 --arms assistant \
        --sample-every 50 --max-tokens 512 -- --autoassist-refresh-updates 0        # the test suite's short version

A synthetic corpus over ``--vocab`` words (every word in the training set, so the dictionary has that many entries
and the Assistant that many weights per row) is binarized with fairseq-preprocess; the tiny Transformer then trains
``--updates`` updates on it, for each arm (``stock``: ``--task translation``; ``assistant``: the plugin with the
paper's rule and default settings, the background worker included) on one rank and on two gloo ranks, 16 wide and
64 tokens a batch (the number of updates and the vocabulary are what could grow the memory, not the model's width
or the batch's size: this keeps 10,000 updates at 40k words within minutes). Every ``--sample-every`` updates after
the first epoch the resident memory (VmRSS) of every rank is read, and at every checkpoint (saved as often) its size
and the number of Assistant snapshots it holds. Writes OUT/soak.json,
OUT/soak.md and OUT/soak.png; the growth of each figure from its first reading after the first epoch to its last is
what the verdict reads (at most ``GROWTH_LIMIT``; at most ``MAX_SNAPSHOTS`` snapshots; memory from after the first
checkpoint that follows the first epoch, see ``verdict``).
"""

import argparse
import json
import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from fairseq_autoassist.recipes import recipe, training_environment, write_atomically  # noqa: E402

logger = logging.getLogger("soak")

GROWTH_LIMIT = 0.05
MAX_SNAPSHOTS = 3
ARMS = {"assistant": "assistant", "stock": None}


def write_corpus(raw_dir, vocab, pairs, seed=0):
    """Training and validation text over ``vocab`` words ``w0 ...``: the first sentences cover every word once, the
    rest draw from a Zipf-like mixture; a target is its source reversed with every word shifted by one (learnable,
    so the losses vary and fall as in a real run)."""
    rng = np.random.default_rng(seed)
    covering = rng.permutation(vocab)
    lengths = rng.integers(5, 25, size=pairs)
    weights = 1.0 / np.arange(1, vocab + 1)
    weights /= weights.sum()
    sentences, start = [], 0
    for length in lengths:
        if start < vocab:
            words = covering[start : start + length]
            start += length
        else:
            words = rng.choice(vocab, size=length, p=weights)
        sentences.append(words)
    os.makedirs(raw_dir, exist_ok=True)
    splits = {"train": sentences[: pairs - 200], "valid": sentences[pairs - 200 :]}
    for split, chosen in splits.items():
        with open(os.path.join(raw_dir, f"{split}.src"), "w") as src, \
                open(os.path.join(raw_dir, f"{split}.tgt"), "w") as tgt:
            for words in chosen:
                src.write(" ".join(f"w{w}" for w in words) + "\n")
                tgt.write(" ".join(f"w{(w + 1) % vocab}" for w in words[::-1]) + "\n")


def prepare(work, vocab, pairs):
    raw, data = os.path.join(work, "raw"), os.path.join(work, "data")
    write_corpus(raw, vocab, pairs)
    subprocess.run([sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", "src", "--target-lang", "tgt",
                    "--trainpref", os.path.join(raw, "train"), "--validpref", os.path.join(raw, "valid"),
                    "--destdir", data, "--joined-dictionary", "--workers", "1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    return data


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resident_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def snapshots_in(checkpoint):
    """The number of Assistant snapshots a checkpoint holds (0 for the stock task's)."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    task_state = state.get("extra_state", {}).get("AutoAssistTranslationTask") or {}
    return len((task_state.get("assistant") or {}).get("snapshots", {}))


def soak_run(data, save_dir, arm, ranks, updates, sample_every, max_tokens=64, extra=()):
    """Trains ``arm`` for ``updates`` updates on ``ranks`` gloo ranks (``extra``: more fairseq-train arguments) and
    returns its readings."""
    args = recipe(data, save_dir, ARMS[arm], arch="tiny", max_epoch=0, max_update=updates, max_tokens=max_tokens,
                  log_interval=sample_every, eval_bleu=False, cpu=True)
    args += ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
             "--decoder-ffn-embed-dim", "32", "--save-interval-updates", str(sample_every),
             "--keep-interval-updates", "1",
             "--disable-validation", *extra]
    if ranks > 1:
        args += ["--distributed-backend", "gloo", "--distributed-init-method", f"tcp://127.0.0.1:{_free_port()}",
                 "--distributed-world-size", str(ranks), "--distributed-no-spawn", "--ddp-backend", "legacy_ddp"]
    commands = [[sys.executable, "-m", "fairseq_cli.train", *args]
                + (["--distributed-rank", str(rank)] if ranks > 1 else []) for rank in range(ranks)]
    os.makedirs(save_dir, exist_ok=True)
    logs = [open(os.path.join(save_dir, f"rank{rank}.log"), "w") for rank in range(ranks)]
    # Unbuffered: each reading is taken as its log line arrives, not when a block of output fills.
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env={**training_environment(), "PYTHONUNBUFFERED": "1"}) for command in commands]
    drains = [threading.Thread(target=lambda p=p, log=log: [log.write(line) for line in p.stdout])
              for p, log in zip(processes[1:], logs[1:])]
    for drain in drains:
        drain.start()
    readings = {"arm": arm, "ranks": ranks, "memory_updates": [], "resident_mb": [[] for _ in range(ranks)],
                "checkpoint_updates": [], "checkpoint_mb": [], "snapshots": [], "first_epoch_updates": None}
    for line in processes[0].stdout:
        logs[0].write(line)
        first_epoch = re.search(r"\| train \| epoch 001 \|.*\| num_updates (\d+)", line)
        if first_epoch:
            readings["first_epoch_updates"] = int(first_epoch.group(1))
        inner = re.search(r"train_inner \| epoch (\d+):.*num_updates=(\d+)", line)
        if inner:
            epoch, update = int(inner.group(1)), int(inner.group(2))
            if epoch > 1 and update % sample_every == 0:
                readings["memory_updates"].append(update)
                for rank, process in enumerate(processes):
                    readings["resident_mb"][rank].append(resident_mb(process.pid))
        saved = re.search(r"Saved checkpoint (\S+checkpoint_\d+_(\d+)\.pt)", line)
        if saved:
            readings["checkpoint_updates"].append(int(saved.group(2)))
            readings["checkpoint_mb"].append(os.path.getsize(saved.group(1)) / 2**20)
            readings["snapshots"].append(snapshots_in(saved.group(1)))
    for process in processes:
        process.wait()
    for drain in drains:
        drain.join()
    for log in logs:
        log.close()
    if any(process.returncode for process in processes):
        raise SystemExit(f"error: the {arm} run on {ranks} rank(s) failed; its logs are in {save_dir}")
    return readings


def growth(values):
    """The last reading over the first, less one (0 for fewer than two readings)."""
    return values[-1] / values[0] - 1 if len(values) > 1 else 0.0


def verdict(readings):
    """Per run: the growth of each rank's memory and of the checkpoint after the first epoch, the most snapshots a
    checkpoint held, and whether each is within its limit. Memory counts from the first reading after the first
    checkpoint saved after the first epoch: saving once grows the first rank's heap by its buffers, a one-time cost
    (about 6% of a two-rank short run's memory at 40k words), where a leak grows with every update."""
    first_epoch = readings["first_epoch_updates"] or 0
    after = [i for i, update in enumerate(readings["checkpoint_updates"]) if update > first_epoch]
    checkpoint_growth = growth([readings["checkpoint_mb"][i] for i in after])
    saved_once = readings["checkpoint_updates"][after[0]] if after else first_epoch
    readings["memory_from_update"] = next((u for u in readings["memory_updates"] if u > saved_once), None)
    memory_growth = max(growth([mb for u, mb in zip(readings["memory_updates"], rank) if u > saved_once])
                        for rank in readings["resident_mb"])
    most_snapshots = max(readings["snapshots"], default=0)
    return {"memory_growth": memory_growth, "checkpoint_growth": checkpoint_growth, "most_snapshots": most_snapshots,
            "flat": memory_growth <= GROWTH_LIMIT and checkpoint_growth <= GROWTH_LIMIT
            and most_snapshots <= MAX_SNAPSHOTS}


def write_figure(runs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (memory, checkpoint) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        name = f"{run['arm']}, {run['ranks']} rank{'s' if run['ranks'] > 1 else ''}"
        for rank, values in enumerate(run["resident_mb"]):
            memory.plot(run["memory_updates"], values, marker=".", label=f"{name}, rank {rank}")
        checkpoint.plot(run["checkpoint_updates"], run["checkpoint_mb"], marker=".", label=name)
    memory.set(xlabel="updates", ylabel="resident memory (MB)", title="host memory after the first epoch")
    checkpoint.set(xlabel="updates", ylabel="checkpoint size (MB)", title="checkpoint at each save")
    for axis in (memory, checkpoint):
        axis.legend(fontsize=7)
        axis.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _span(values, form):
    """"first -> last" of ``values``, "-" for none (a run too short to read any after its first epoch)."""
    return f"{values[0]:{form}} -> {values[-1]:{form}}" if values else "-"


def write_outputs(args, command, runs):
    """OUT/soak.json, OUT/soak.md and OUT/soak.png of the runs so far."""
    record = {"command": command, "updates": args.updates, "max_tokens": args.max_tokens, "vocab": args.vocab,
              "pairs": args.pairs, "growth_limit": GROWTH_LIMIT, "max_snapshots": MAX_SNAPSHOTS, "runs": runs}
    write_atomically(os.path.join(args.out, "soak.json"), json.dumps(record, indent=1) + "\n")
    rows = ["| arm | ranks | resident memory (MB, rank 0) | from update | growth (largest rank) | checkpoint (MB) | "
            "growth | most snapshots | flat |", "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        memory = [mb for u, mb in zip(run["memory_updates"], run["resident_mb"][0])
                  if run["memory_from_update"] is not None and u >= run["memory_from_update"]]
        checkpoint = [mb for u, mb in zip(run["checkpoint_updates"], run["checkpoint_mb"])
                      if u > (run["first_epoch_updates"] or 0)]
        rows.append(f"| {run['arm']} | {run['ranks']} | {_span(memory, '.0f')} | {run['memory_from_update']} | "
                    f"{100 * run['memory_growth']:+.1f}% | {_span(checkpoint, '.1f')} | "
                    f"{100 * run['checkpoint_growth']:+.1f}% | {run['most_snapshots']} | "
                    f"{'yes' if run['flat'] else 'no'} |")
    write_atomically(os.path.join(args.out, "soak.md"),
                     f"# Soak: {args.updates} updates, {args.vocab}-word vocabulary\n\n`{command}`\n\n"
                     + "\n".join(rows) + "\n\nGrowth: the last reading over the first after the first epoch "
                     "(memory: from the first reading after the first checkpoint saved after it; the largest over "
                     "the ranks).\n")
    write_figure(runs, os.path.join(args.out, "soak.png"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for soak.json, soak.md and soak.png")
    parser.add_argument("--updates", type=int, default=10000)
    parser.add_argument("--vocab", type=int, default=40000, help="dictionary size of the synthetic corpus")
    parser.add_argument("--pairs", type=int, default=8000)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--sample-every", type=int, default=500, help="updates between readings and checkpoints")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens a batch (more: a shorter first epoch)")
    parser.add_argument("--arms", nargs="+", choices=sorted(ARMS), default=list(ARMS))
    parser.add_argument("--work", help="folder for the corpus and the runs (default: a temporary one)")
    parser.add_argument("autoassist_args", nargs="*", help="more fairseq-train arguments for the AutoAssist arm, "
                        "after --")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    os.makedirs(args.out, exist_ok=True)
    work = args.work or tempfile.mkdtemp(prefix="soak-")
    data = prepare(work, args.vocab, args.pairs)
    command = "python scripts/research/soak.py " + " ".join(argv if argv is not None else sys.argv[1:])
    runs = []
    for ranks in args.ranks:
        for arm in args.arms:
            logger.info("training %s on %d rank(s) for %d updates", arm, ranks, args.updates)
            run = soak_run(data, os.path.join(work, f"{arm}-{ranks}"), arm, ranks, args.updates, args.sample_every,
                           args.max_tokens, args.autoassist_args if ARMS[arm] else ())
            run.update(verdict(run))
            runs.append(run)
            logger.info("%s on %d rank(s): memory %+.1f%%, checkpoint %+.1f%%, at most %d snapshots", arm, ranks,
                        100 * run["memory_growth"], 100 * run["checkpoint_growth"], run["most_snapshots"])
            # After every run, so that a soak stopped early keeps the runs it finished.
            write_outputs(args, command, runs)
    return 0 if all(run["flat"] for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
