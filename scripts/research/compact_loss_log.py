#!/usr/bin/env python
"""Store a run's loss log (``--autoassist-loss-log``) small enough to commit beside the replay it feeds.

    python scripts/research/compact_loss_log.py runs/bench/runs/keep-all-seed1/losses.npy \
        docs/results/benchmark-multi30k-long/replay-keep-all/losses.npz

The replays (replay_selection.py, replay_assistant.py) read the compact ``.npz`` like the log itself; its losses
are float16 (``fairseq_autoassist.loss_log.write_compact``), so a committed replay is computed from it.
"""

import argparse
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from fairseq_autoassist.loss_log import COMPACT_SUFFIX, read_loss_log, write_compact  # noqa: E402

logger = logging.getLogger("compact_loss_log")


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("loss_log", help="a run's --autoassist-loss-log file")
    parser.add_argument("out", help=f"the compact log to write (its name ends in {COMPACT_SUFFIX})")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.loss_log):
        parser.error(f"{args.loss_log}: no such loss log (a run writes it with --autoassist-loss-log FILE)")
    if not args.out.endswith(COMPACT_SUFFIX):
        parser.error(f"{args.out}: the compact log's name must end in {COMPACT_SUFFIX}")
    records = list(read_loss_log(args.loss_log))
    write_compact(records, args.out)
    logger.info("%d steps, %d losses: %s (%.1f MB)", len(records), sum(len(ids) for ids, _, _ in records), args.out,
                os.path.getsize(args.out) / 1e6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
