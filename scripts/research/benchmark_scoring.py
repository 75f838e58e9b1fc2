#!/usr/bin/env python
"""Speed of the Assistant on a synthetic corpus: scoring every pair, and online updates.

    python scripts/research/benchmark_scoring.py                # 1,000,000 pairs, vocabulary 32,000
    python scripts/research/benchmark_scoring.py --pairs 200000

Runs on one core (numpy is single-threaded; torch is limited to one thread) and prints the
scoring rate, the update cost per pair for batches of --batch-pairs pairs, and the Assistant's
memory beyond the corpus' own tokens.
"""

import argparse
import logging
import sys
import time

import numpy as np

from fairseq_autoassist.assistant import Assistant, CorpusSide, PairFeatures

logger = logging.getLogger("benchmark_scoring")


def synthetic_side(rng, pairs, vocab, mean_length):
    lengths = np.clip(rng.poisson(mean_length, size=pairs), 2, 200)
    offsets = np.zeros(pairs + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lengths)
    # Zipf-like token frequencies, as in real text.
    tokens = np.minimum(rng.zipf(1.2, size=offsets[-1]) + 3, vocab - 1).astype(np.uint16)
    return CorpusSide(tokens, offsets)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--mean-length", type=float, default=27.0, help="tokens per sentence (WMT14 en-de ~27 BPE)")
    parser.add_argument("--batch-pairs", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    source = synthetic_side(rng, args.pairs, args.vocab, args.mean_length)
    target = synthetic_side(rng, args.pairs, args.vocab, args.mean_length)
    started = time.perf_counter()
    features = PairFeatures(source, target, args.vocab)
    idf_seconds = time.perf_counter() - started
    assistant = Assistant(features)
    ids = rng.permutation(args.pairs)
    for batch in np.array_split(ids[:30000], 100):  # non-trivial weights before timing
        assistant.update(batch, rng.gamma(2.0, 1.0, size=len(batch)))

    scoring = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        scores = assistant.predict()
        scoring.append(time.perf_counter() - started)
    assert len(scores) == args.pairs

    update_batches = [ids[i : i + args.batch_pairs] for i in range(0, 200 * args.batch_pairs, args.batch_pairs)]
    losses = rng.gamma(2.0, 1.0, size=args.batch_pairs)
    started = time.perf_counter()
    for batch in update_batches:
        assistant.update(batch, losses[: len(batch)])
    update_seconds = (time.perf_counter() - started) / len(update_batches)

    corpus_tokens = source.tokens.nbytes + target.tokens.nbytes
    extra = sum(a.nbytes for a in (source.offsets, target.offsets, source.lengths, target.lengths))
    extra += assistant.token_weights.nbytes + assistant._sq_token_grads.nbytes + sum(i.nbytes for i in features.idf)
    best = min(scoring)
    logger.info("corpus: %d pairs, %.1f tokens per sentence, vocabulary %d", args.pairs, args.mean_length, args.vocab)
    logger.info("IDF (once per training run): %.2f s", idf_seconds)
    logger.info("scoring all pairs: %.3f s (best of %d) = %.2f s per million pairs, %.0f pairs/s",
                best, args.repeats, best * 1e6 / args.pairs, args.pairs / best)
    logger.info("one update on %d pairs: %.2f ms = %.2f us per pair",
                args.batch_pairs, update_seconds * 1e3, update_seconds * 1e6 / args.batch_pairs)
    logger.info("memory beyond the corpus tokens (%.0f MB): %.0f MB = %.1f bytes per pair + vocabulary arrays",
                corpus_tokens / 1e6, extra / 1e6, (extra - assistant.token_weights.nbytes
                - assistant._sq_token_grads.nbytes) / args.pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
