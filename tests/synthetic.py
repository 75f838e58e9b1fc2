"""Small synthetic corpora for the tests (no fairseq import)."""

import numpy as np

from fairseq_autoassist.assistant import CorpusSide, PairFeatures

EOS = 2


def random_side(rng, num_sentences, vocab_size, min_len=3, max_len=20, first_token=4):
    """A corpus side of random token ids in [first_token, vocab_size), each sentence ending in EOS."""
    lengths = rng.integers(min_len, max_len + 1, size=num_sentences)
    offsets = np.zeros(num_sentences + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lengths)
    tokens = rng.integers(first_token, vocab_size, size=offsets[-1]).astype(np.uint16)
    tokens[offsets[1:] - 1] = EOS
    return CorpusSide(tokens, offsets)


def random_features(num_pairs=2000, vocab_size=200, seed=0):
    rng = np.random.default_rng(seed)
    source = random_side(rng, num_pairs, vocab_size)
    target = random_side(rng, num_pairs, vocab_size)
    return PairFeatures(source, target, vocab_size)


def planted_losses(features, marker_tokens, seed=0):
    """Per-token losses that are high exactly for pairs whose source contains a marker token."""
    rng = np.random.default_rng(seed)
    source = features.source
    has_marker = np.zeros(len(features), dtype=bool)
    for i in range(len(features)):
        sentence = source.tokens[source.offsets[i] : source.offsets[i + 1]]
        has_marker[i] = np.isin(sentence, marker_tokens).any()
    losses = np.where(has_marker, 3.0, 1.0) + rng.normal(0, 0.2, size=len(features))
    return losses, has_marker


def padded_token_budget_batches(kept, sizes, max_tokens):
    """Length bucketing under a padded token budget, like fairseq's batch_by_size."""
    kept = kept[np.argsort(sizes[kept], kind="stable")]
    batches, current, longest = [], [], 0
    for index in kept:
        longest_if_added = max(longest, sizes[index])
        if current and longest_if_added * (len(current) + 1) > max_tokens:
            batches.append(np.array(current))
            current, longest_if_added = [], sizes[index]
        current.append(index)
        longest = longest_if_added
    if current:
        batches.append(np.array(current))
    return batches


def synthetic_translations(pairs, seed=0):
    """Pairs of a made-up language pair, word for word with a reordering: ``wortX`` translates as ``wordX``."""
    rng = np.random.default_rng(seed)
    letters = [chr(ord("a") + i // 26) + chr(ord("a") + i % 26) for i in range(120)]
    german = [" ".join(f"wort{letters[w]}" for w in rng.integers(0, 120, size=rng.integers(5, 10)))
              for _ in range(pairs)]
    english = [" ".join(reversed(sentence.replace("wort", "word").split())) for sentence in german]
    return german, english
