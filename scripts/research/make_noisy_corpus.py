#!/usr/bin/env python
"""Write a copy of a raw parallel corpus in which a share of the training pairs carry web-mined noise.

    python scripts/research/make_noisy_corpus.py --raw-dir ../shared/data/multi30k --out data/multi30k-noisy30
    python scripts/prepare_multi30k.py --raw-dir data/multi30k-noisy30 --dest data-bin/multi30k-noisy30.de-en

Reads Multi30K's file names (``train.SRC``/``train.TGT``, plain or gzipped) and corrupts ``--share``
(default 0.3) of the training pairs, chosen at random, with the noise of web-mined corpora in these
proportions (``--kinds`` changes them):

* ``misaligned`` (0.30): the target of another pair;
* ``truncated`` (0.20): the target cut to at most half of its words (at least one);
* ``duplicate`` (0.20): an exact copy of another, clean pair (source and target);
* ``untranslated`` (0.15): the source copied as the target;
* ``wrong_language`` (0.15): the target replaced by the source side of another pair;

and, outside the default mix (give them a share with ``--kinds``):

* ``shuffled``: the target's words in random order;
* ``neighbour``: the target of the next line (sentence misalignment, as document alignment makes it).

Every other split found (``val``, ``test_2016_flickr``, ...) is copied byte for byte. The choice is
seeded (``--seed``) and deterministic. Beside the corpus it writes ``noise.tsv`` (``line<TAB>kind`` for
every corrupted training pair, 0-based lines: the pair's dataset index after preparation, which keeps
the order) and ``noise.json`` (settings and counts).
"""

import argparse
import json
import logging
import os
import sys

from fairseq_autoassist.corpus.raw_corpus import EXTRA_KINDS, KINDS, corrupt, exit_code, read_parallel, write_noisy_copy

logger = logging.getLogger("make_noisy_corpus")

def make_noisy_corpus(raw_dir, out, src, tgt, share, seed, proportions=KINDS):
    source, target = read_parallel(raw_dir, "train", src, tgt)
    noisy_source, noisy_target, noise = corrupt(source, target, share, seed, proportions)
    copied = write_noisy_copy(raw_dir, out, src, tgt, noisy_source, noisy_target, noise)
    counts = {kind: sum(1 for k in noise.values() if k == kind) for kind in proportions}
    manifest = {"raw_dir": os.path.abspath(raw_dir), "share": share, "seed": seed, "proportions": proportions,
                "pairs": len(source), "corrupted": len(noise), "counts": counts, "copied": copied}
    with open(os.path.join(out, "noise.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    logger.info("wrote %s: %d of %d training pairs corrupted %s", out, len(noise), len(source), counts)
    return manifest


def parse_kinds(text):
    """``misaligned=0.3,truncated=0.2,...`` -> proportions."""
    proportions = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in (*KINDS, *EXTRA_KINDS) or not value:
            raise argparse.ArgumentTypeError(f"--kinds takes NAME=SHARE,... with NAME among "
                                             f"{', '.join((*KINDS, *EXTRA_KINDS))}")
        proportions[name] = float(value)
    return proportions


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw-dir", required=True, help="folder with the raw corpus (Multi30K's file names)")
    parser.add_argument("--out", required=True, help="folder for the noisy copy, noise.tsv and noise.json")
    parser.add_argument("--src", default="de")
    parser.add_argument("--tgt", default="en")
    parser.add_argument("--share", type=float, default=0.3, help="share of training pairs to corrupt (default 0.3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", type=parse_kinds, default=KINDS,
                        help="proportions of the noise kinds, e.g. misaligned=0.5,untranslated=0.5")
    args = parser.parse_args(argv)
    if not 0.0 <= args.share < 1.0:
        parser.error(f"--share {args.share} must be in [0, 1)")
    return exit_code(lambda: make_noisy_corpus(args.raw_dir, args.out, args.src, args.tgt, args.share, args.seed,
                                               args.kinds), logger)


if __name__ == "__main__":
    sys.exit(main())
