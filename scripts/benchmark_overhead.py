#!/usr/bin/env python
"""Time per update with AutoAssist off and with each selection policy on, on the same batches of the
Multi30K recipe.

    python scripts/benchmark_overhead.py --data data-bin/multi30k.de-en --arch base
    python scripts/benchmark_overhead.py ... --policies assistant learnable progress infobatch

Every arm runs fairseq's Trainer with the same model recipe on the same pre-collated batches,
interleaved in blocks (off, policy 1, policy 2, ..., off, ...) so that machine noise hits all alike:

* off: ``--task autoassist_translation --autoassist-policy none`` (the stock translation step);
* each of ``--policies`` (default ``assistant``) with the background worker where it has one:
  per-sentence losses from the Boss's forward pass, feedback to the Assistant and the loss tables,
  and every ``--autoassist-refresh-updates`` updates the selection of one chunk (scoring, drawing,
  batching), which the real iterator does at that rate.

Prints the median time per update of each arm and its ratio to off (the overhead). Blocks vary by
about 10% on a 2-core machine, so ratios within a few percent of 1 are below what this resolves; the
logs' CPU seconds (``aa_cpu_select``, ``aa_cpu_assistant``) are the finer measure.
"""

import argparse
import json
import logging
import os
import statistics
import sys
import time

from fairseq_autoassist.recipes import ROOT, recipe

logger = logging.getLogger("benchmark_overhead")


def build_trainer(data, arch, policy, max_tokens, refresh_updates, seed):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    argv = recipe(data, "/tmp/benchmark_overhead_unused", policy, arch=arch, max_tokens=max_tokens,
                         seed=seed, cpu=True, eval_bleu=False)
    argv += ["--autoassist-refresh-updates", str(refresh_updates)]
    parser = options.get_training_parser()
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(parser, argv))
    task = tasks.setup_task(cfg.task)
    task.load_dataset(cfg.dataset.train_subset)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    iterator = trainer.get_train_iterator(epoch=1, load_dataset=False)
    return cfg, task, trainer, iterator


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(ROOT, "data-bin", "multi30k.de-en"))
    parser.add_argument("--arch", default="base")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--block-updates", type=int, default=20, help="updates per timed block")
    parser.add_argument("--blocks", type=int, default=4, help="timed blocks per arm")
    parser.add_argument("--refresh-updates", type=int, default=50)
    parser.add_argument("--policies", nargs="+", default=["assistant"], help="the --autoassist-policy arms to time")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", default=None, help="optional JSON with every block time")
    args = parser.parse_args(argv)

    import fairseq  # noqa: F401  (registers before the plugin import below)
    import fairseq_autoassist.tasks.autoassist_translation  # noqa: F401

    arms = {}
    for policy in ["none"] + [p for p in args.policies if p != "none"]:
        arms[policy] = build_trainer(args.data, args.arch, policy, args.max_tokens, args.refresh_updates, args.seed)

    # The same batches for every arm: the baseline's first batches, collated once.
    _, _, _, baseline_iterator = arms["none"]
    batches_needed = args.block_updates * (args.blocks + 1)
    samples = []
    for sample in baseline_iterator.next_epoch_itr(shuffle=True):
        samples.append(sample)
        if len(samples) == batches_needed:
            break

    def run_block(policy, block):
        _, task, trainer, _ = arms[policy]
        started = time.perf_counter()
        for step in range(args.block_updates):
            sample = samples[(block * args.block_updates + step) % len(samples)]
            trainer.train_step([sample])
            if policy != "none" and trainer.get_num_updates() % args.refresh_updates == 0:
                stream = task.runtime.stream
                stream.generate_chunk(2, 2, trainer.get_num_updates() // args.refresh_updates % stream.chunks_per_pass,
                                      stream.carry)
        return (time.perf_counter() - started) / args.block_updates

    for policy in arms:  # warm-up block, not timed
        run_block(policy, 0)
    times = {policy: [] for policy in arms}
    for block in range(1, args.blocks + 1):
        for policy in arms:
            times[policy].append(run_block(policy, block))
            logger.info("block %d %-9s %.3f s/update", block, policy, times[policy][-1])
    off = statistics.median(times["none"])
    result = {"arch": args.arch, "max_tokens": args.max_tokens, "block_updates": args.block_updates,
              "blocks": args.blocks, "seconds_per_update": times, "median_off": off, "arms": {}}
    for policy in arms:
        if policy == "none":
            continue
        runtime = arms[policy][1].runtime
        on = statistics.median(times[policy])
        figures = {"median": on, "ratio_to_off": on / off, "cpu_select_seconds": runtime.selection_cpu_seconds}
        if runtime.worker is not None:
            runtime.worker.drain()
            stats = runtime.worker.stats()
            figures.update(assistant_updates=stats["updates"], dropped_feedback=stats["dropped"],
                           cpu_assistant_seconds=stats["cpu_seconds"])
            runtime.worker.close()
        result["arms"][policy] = figures
        logger.info("median time per update: off %.3f s, %s %.3f s, ratio %.3f (overhead %+.1f%%); %s",
                    off, policy, on, on / off, 100 * (on / off - 1),
                    ", ".join(f"{k} {v:.3g}" for k, v in figures.items() if k not in ("median", "ratio_to_off")))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
