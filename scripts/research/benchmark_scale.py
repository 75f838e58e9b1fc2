#!/usr/bin/env python
"""AutoAssist against stock translation at WMT14's scale, on a synthetic corpus shaped like it.

    python scripts/research/benchmark_scale.py --pairs 1000000 2000000 4500000 --out docs/results/scale-wmt14
    python scripts/research/benchmark_scale.py --data data-bin/tvsub.zh-en --out OUT

With ``--data`` it measures that prepared folder (a real corpus, one size; its languages from its prepare.json
unless ``--src``/``--tgt`` say) instead. Otherwise, for each size it
writes a synthetic data-bin (``--work``, default /tmp/autoassist-scale) by writing fairseq's memory-mapped indexed
dataset directly: about 30 pieces per side (lengths 1-250, a clipped normal around ``--mean-length``),
Zipf-distributed token ids over a ``--vocab-size`` (32,000) joint dictionary. Then, each in a fresh process on
one core (``OMP_NUM_THREADS=1``, one torch thread), it measures fairseq's ``translation`` task and
``autoassist_translation`` (``--autoassist-policy``, default ``assistant``) at ``--max-tokens`` 4,096:

* start-up: task set-up, loading the training split, the training iterator (fairseq's order, size
  filter and ``batch_by_size``; for AutoAssist also the features, the IDF, the Assistant and the
  stream) and the first epoch's plan;
* memory after start-up: anonymous resident memory once freed heap is handed back (the process' own
  arrays; the per-pair goal),
  file-backed resident memory (pages of the memory-mapped corpus that were read: the kernel's page
  cache, shared and reclaimable, not a copy) and the peak resident set;
* with ``--pair-features``, AutoAssist's start-up and memory once more with ``--autoassist-pair-features``
  (the bilingual features of ``assistant/bilingual.py``), the difference being their own cost;
* AutoAssist only: the selection of one chunk (scoring, drawing, batching), the plan of a selecting
  epoch (every chunk's selection), one Assistant update on a batch's pairs and the Assistant's scoring of every
  training pair (best of three); and fairseq's own ``batch_by_size`` over the whole split, the yardstick of the
  planning goal.

Goals (the WMT issue): start-up at most 10 s per million pairs beyond stock fairseq, at most 64 bytes
per pair beyond it, selection and planning per epoch at most twice ``batch_by_size``. Writes
OUT/scale.json and OUT/scale.md with each figure per size and a linear extrapolation to 100M pairs.
Timings need a machine that is otherwise idle.
"""

import argparse
import ctypes
import json
import logging
import os
import resource
import subprocess
import sys
import time

import numpy as np

logger = logging.getLogger("benchmark_scale")

SRC, TGT = "en", "de"
GOALS = {"startup_seconds_per_million": 10.0, "bytes_per_pair": 64.0, "planning_to_batch_by_size": 2.0}


def write_side(prefix, lengths, vocab_size, rng):
    """One side of a split as fairseq's mmap indexed dataset: Zipf token ids, EOS (2) last."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    dtype = np.uint16 if vocab_size < 65500 else np.int32
    with open(prefix + ".bin", "wb") as out:
        for start in range(0, len(lengths), 1_000_000):
            chunk = lengths[start:start + 1_000_000]
            tokens = (4 + (rng.zipf(1.2, int(chunk.sum())) - 1) % (vocab_size - 4)).astype(dtype)
            tokens[np.cumsum(chunk) - 1] = 2
            tokens.tofile(out)
    with MMapIndexedDataset.Index.writer(prefix + ".idx", dtype) as index:
        index.write(lengths.astype(np.int32))


def write_corpus(dest, pairs, vocab_size, mean_length, seed=1):
    """A WMT14-shaped data-bin in ``dest`` (train of ``pairs`` pairs, valid of 3,000); kept when it exists."""
    marker = os.path.join(dest, "corpus.json")
    settings = {"pairs": pairs, "vocab_size": vocab_size, "mean_length": mean_length, "seed": seed}
    if os.path.isfile(marker) and json.load(open(marker)) == settings:
        return dest
    os.makedirs(dest, exist_ok=True)
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    for split, size in (("train", pairs), ("valid", 3000)):
        source = np.clip(np.rint(rng.normal(mean_length, 0.45 * mean_length, size)), 1, 250).astype(np.int64)
        target = np.clip(np.rint(source * rng.normal(1.0, 0.15, size)), 1, 250).astype(np.int64)
        for lang, lengths in ((SRC, source), (TGT, target)):
            write_side(os.path.join(dest, f"{split}.{SRC}-{TGT}.{lang}"), lengths, vocab_size, rng)
    for lang in (SRC, TGT):
        with open(os.path.join(dest, f"dict.{lang}.txt"), "w") as f:
            f.writelines(f"piece{i} {vocab_size - i}\n" for i in range(4, vocab_size))
    with open(marker, "w") as f:
        json.dump(settings, f)
    logger.info("wrote %s (%d pairs) in %.0f s", dest, pairs, time.perf_counter() - started)
    return dest


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def resident_bytes():
    """This process' resident memory now: ``(anonymous, file-backed)`` bytes (Linux /proc), after glibc has handed
    back the heap pages freed temporaries left (``malloc_trim``): without it the figure counts the allocator's pool
    for reuse, which varies with the order of allocations (the pair features' start-up left 20-30 bytes a pair of
    it, where their arrays hold 12)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except AttributeError:  # not glibc: nothing to hand back
        pass
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("RssAnon", "RssFile"):
                fields[name] = int(value.split()[0]) * 1024
    return fields["RssAnon"], fields["RssFile"]


def measure(data, policy, max_tokens, chunks, pair_features=False, src=SRC, tgt=TGT):
    """In this process: the figures of one task (``policy`` None: stock translation); ``pair_features``: with
    ``--autoassist-pair-features``, start-up and memory only."""
    import torch
    from fairseq import options, tasks
    from fairseq.data import data_utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from fairseq_autoassist.recipes import recipe

    torch.set_num_threads(1)
    figures = {}
    started = time.perf_counter()
    argv = recipe(data, "/tmp/benchmark_scale_unused", policy, arch="tiny", max_tokens=max_tokens, cpu=True,
                  eval_bleu=False) + ["--source-lang", src, "--target-lang", tgt]
    if pair_features:
        argv.append("--autoassist-pair-features")
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    dataset = task.dataset("train")
    iterator = task.get_batch_iterator(dataset, max_tokens=max_tokens, max_positions=(1024, 1024), seed=1, epoch=1)
    epoch_batches = len(iterator)  # the first epoch's plan
    figures["startup_seconds"] = time.perf_counter() - started
    figures["anon_after_startup"], figures["file_after_startup"] = resident_bytes()
    figures["rss_peak_after_startup"] = peak_rss_bytes()
    figures["pairs"] = len(dataset)
    figures["epoch_batches"] = epoch_batches

    started = time.perf_counter()
    indices = dataset.ordered_indices()
    data_utils.batch_by_size(indices, dataset.num_tokens, max_tokens=max_tokens)
    figures["batch_by_size_seconds"] = time.perf_counter() - started
    if pair_features:  # what shows that the start-up measured computed them (its extra seconds can be noise)
        figures["pair_feature_columns"] = int(task.runtime.worker.assistant.pair_weights.size)
    if policy is None or pair_features:
        return figures

    stream = task.runtime.stream
    # The first chunk of a pass also draws the pass' order (once per pass, counted in the epoch's plan below).
    stream.generate_chunk(2, 2, 0, stream.carry)
    started = time.perf_counter()
    for chunk in range(1, chunks + 1):
        stream.generate_chunk(2, 2, chunk, stream.carry)
    figures["chunk_selection_seconds"] = (time.perf_counter() - started) / chunks
    figures["chunks_per_pass"] = stream.chunks_per_pass
    started = time.perf_counter()
    figures["selecting_epoch_batches"] = stream.plan_epoch(2)
    figures["selecting_epoch_plan_seconds"] = time.perf_counter() - started
    assistant = task.runtime.worker.assistant
    batch = np.random.default_rng(0).choice(len(dataset), max_tokens // 30, replace=False)
    losses = np.random.default_rng(1).gamma(4.0, 1.0, len(batch))
    assistant.update(batch, losses)  # warm-up, not timed
    started = time.perf_counter()
    for _ in range(20):
        assistant.update(batch, losses)
    figures["assistant_update_seconds"] = (time.perf_counter() - started) / 20
    scoring = []
    for _ in range(3):
        started = time.perf_counter()
        assistant.predict()
        scoring.append(time.perf_counter() - started)
    figures["assistant_scoring_seconds"] = min(scoring)
    figures["rss_peak"] = peak_rss_bytes()
    task.runtime.worker.close()
    return figures


def run_child(data, policy, max_tokens, chunks, pair_features=False, src=SRC, tgt=TGT):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    command = [sys.executable, os.path.abspath(__file__), "--child", data, "--policy", policy or "stock",
               "--max-tokens", str(max_tokens), "--chunks", str(chunks), "--src", src, "--tgt", tgt]
    command += ["--pair-features"] * pair_features
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"measuring {policy or 'stock'} on {data} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def compare(stock, autoassist, with_pair_features=None):
    """AutoAssist's figures beyond stock fairseq, against the goals; ``with_pair_features``: the figures of
    AutoAssist with ``--autoassist-pair-features``, whose cost beyond AutoAssist is added."""
    pairs = stock["pairs"]
    extra_startup = autoassist["startup_seconds"] - stock["startup_seconds"]
    planning = autoassist["selecting_epoch_plan_seconds"]
    extra_bytes = autoassist["anon_after_startup"] - stock["anon_after_startup"]
    row = {
        "pairs": pairs,
        "startup_stock_seconds": stock["startup_seconds"],
        "startup_autoassist_seconds": autoassist["startup_seconds"],
        "startup_extra_seconds": extra_startup,
        "startup_extra_seconds_per_million": extra_startup / pairs * 1e6,
        "extra_bytes": extra_bytes,
        "bytes_per_pair": extra_bytes / pairs,
        "file_bytes_per_pair": (autoassist["file_after_startup"] - stock["file_after_startup"]) / pairs,
        "peak_bytes_per_pair": (autoassist["rss_peak"] - stock["rss_peak_after_startup"]) / pairs,
        "batch_by_size_seconds": autoassist["batch_by_size_seconds"],
        "chunk_selection_seconds": autoassist["chunk_selection_seconds"],
        "selecting_epoch_plan_seconds": planning,
        "planning_to_batch_by_size": planning / autoassist["batch_by_size_seconds"],
        "assistant_update_ms": 1000 * autoassist["assistant_update_seconds"],
        "assistant_scoring_seconds": autoassist["assistant_scoring_seconds"],
    }
    if with_pair_features:
        extra = with_pair_features["startup_seconds"] - autoassist["startup_seconds"]
        row.update(pair_features_startup_seconds=extra, pair_features_seconds_per_million=extra / pairs * 1e6,
                   pair_features_bytes_per_pair=(with_pair_features["anon_after_startup"]
                                                 - autoassist["anon_after_startup"]) / pairs,
                   pair_feature_columns=with_pair_features["pair_feature_columns"])
    return row


def fit(rows, key):
    """Slope and intercept of a least-squares line through (pairs, figure); through 0 for one size."""
    x = np.array([row["pairs"] for row in rows], dtype=np.float64)
    y = np.array([row[key] for row in rows], dtype=np.float64)
    if len(rows) < 2:
        return float(y[0] / x[0]), 0.0
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


# Figures that grow with the corpus, extrapolated along their line; the per-pair and ratio figures are
# judged by the line's slope instead (a fixed cost, such as importing the plugin, is not a per-pair cost).
GROWING = ["startup_stock_seconds", "startup_autoassist_seconds", "batch_by_size_seconds",
           "selecting_epoch_plan_seconds", "chunk_selection_seconds", "assistant_scoring_seconds"]


def extrapolations(rows, pairs=100_000_000):
    out = {}
    for key in GROWING:
        slope, intercept = fit(rows, key)
        out[key] = slope * pairs + intercept
    out["startup_extra_seconds_per_million"] = fit(rows, "startup_extra_seconds")[0] * 1e6
    out["bytes_per_pair"] = fit(rows, "extra_bytes")[0]
    if "pair_features_startup_seconds" in rows[0]:
        out["pair_features_seconds_per_million"] = fit(rows, "pair_features_startup_seconds")[0] * 1e6
    out["planning_to_batch_by_size"] = (out["selecting_epoch_plan_seconds"] / out["batch_by_size_seconds"]
                                        if out["batch_by_size_seconds"] > 0 else None)
    return out


def markdown(rows, command, policy):
    keys = [("startup_stock_seconds", "start-up, stock (s)", "{:.1f}"),
            ("startup_autoassist_seconds", f"start-up, {policy} (s)", "{:.1f}"),
            ("startup_extra_seconds_per_million", "extra start-up per million pairs (s; goal <= 10)", "{:.1f}"),
            ("bytes_per_pair", "extra anonymous memory after start-up (bytes per pair; goal <= 64)", "{:.0f}"),
            ("file_bytes_per_pair", "extra corpus pages in memory after start-up (bytes per pair)", "{:.0f}"),
            ("peak_bytes_per_pair", "extra peak resident memory (bytes per pair)", "{:.0f}"),
            ("batch_by_size_seconds", "fairseq batch_by_size, whole split (s)", "{:.2f}"),
            ("selecting_epoch_plan_seconds", "plan of a selecting epoch (s)", "{:.2f}"),
            ("planning_to_batch_by_size", "planning / batch_by_size (goal <= 2)", "{:.2f}"),
            ("chunk_selection_seconds", "selection of one chunk (s)", "{:.3f}"),
            ("assistant_update_ms", "Assistant update, one batch (ms)", "{:.2f}"),
            ("assistant_scoring_seconds", "Assistant's scoring of every pair (s)", "{:.2f}")]
    if "pair_features_startup_seconds" in rows[0]:
        keys += [("pair_features_seconds_per_million", "pair features' own start-up per million pairs (s; goal <= 10)",
                  "{:.1f}"),
                 ("pair_features_bytes_per_pair", "pair features' own anonymous memory (bytes per pair; with the "
                  "row above, goal <= 64)", "{:.0f}")]
    projected = extrapolations(rows)
    lines = [f"Command: `{command}`", "",
             "Last column: growing figures extrapolated along a line through the sizes; per-pair figures are the "
             "line's slope (the marginal cost of a pair, without fixed costs such as imports).", "",
             "| figure | " + " | ".join(f"{row['pairs']:,} pairs" for row in rows) + " | 100M pairs |",
             "|---" * (len(rows) + 2) + "|"]
    for key, label, fmt in keys:
        last = projected.get(key)
        lines.append(f"| {label} | " + " | ".join(fmt.format(row[key]) for row in rows)
                     + f" | {'' if last is None else fmt.format(last)} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", nargs="+", type=int, default=[1_000_000, 2_000_000, 4_500_000])
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--mean-length", type=float, default=30.0)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--policy", default="assistant", help="the --autoassist-policy measured")
    parser.add_argument("--chunks", type=int, default=5, help="chunk selections timed")
    parser.add_argument("--pair-features", action="store_true",
                        help="also measure start-up and memory with --autoassist-pair-features")
    parser.add_argument("--work", default="/tmp/autoassist-scale", help="where the synthetic data-bins go")
    parser.add_argument("--data", help="measure this prepared folder (its training split) instead of synthetic ones")
    parser.add_argument("--src", help="the source language of --data (default: its prepare.json's)")
    parser.add_argument("--tgt", help="the target language of --data (default: its prepare.json's)")
    parser.add_argument("--out", help="folder for scale.json and scale.md")
    parser.add_argument("--child", metavar="DATA", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        import fairseq  # noqa: F401  (registers before the plugin)

        policy = None if args.policy == "stock" else args.policy
        print(json.dumps(measure(args.child, policy, args.max_tokens, args.chunks, args.pair_features,
                                 args.src or SRC, args.tgt or TGT)))
        return 0
    if not args.out:
        parser.error("--out is required")
    if args.data:
        from fairseq_autoassist.recipes import data_languages  # not in the child: fairseq must load before the plugin

        folders = [args.data]
        languages = data_languages(args.data, args.src, args.tgt)
        src, tgt = languages["source"], languages["target"]
    else:
        src, tgt = SRC, TGT
        folders = [write_corpus(os.path.join(args.work, f"wmt-shaped-{pairs}"), pairs, args.vocab_size,
                                args.mean_length) for pairs in args.pairs]
    rows, raw = [], {}
    for data in folders:
        stock = run_child(data, None, args.max_tokens, args.chunks, False, src, tgt)
        autoassist = run_child(data, args.policy, args.max_tokens, args.chunks, False, src, tgt)
        with_pairs = (run_child(data, args.policy, args.max_tokens, args.chunks, True, src, tgt)
                      if args.pair_features else None)
        pairs = stock["pairs"]
        raw[pairs] = {"stock": stock, args.policy: autoassist, "pair_features": with_pairs}
        rows.append(compare(stock, autoassist, with_pairs))
        logger.info("%d pairs: %s", pairs, json.dumps(rows[-1]))
    command = "python scripts/research/benchmark_scale.py " + " ".join(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scale.json"), "w") as f:
        json.dump({"command": command, "goals": GOALS, "rows": rows, "raw": raw,
                   "extrapolated_100M": extrapolations(rows)}, f, indent=2)
    table = markdown(rows, command, args.policy)
    with open(os.path.join(args.out, "scale.md"), "w") as f:
        f.write(table)
    logger.info("wrote %s\n%s", os.path.join(args.out, "scale.md"), table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
