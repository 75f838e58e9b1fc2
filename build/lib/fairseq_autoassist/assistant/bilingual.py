"""Features of how a pair's two sides relate, for an Assistant that sees the pair (no fairseq import).

Token features describe each side alone, so they cannot tell that a fluent target does not translate its
source. These describe the pair, computed once at start-up from the corpus itself (like the IDF), standardized
and stored as float16, ``len(NAMES) * 2`` bytes per pair:

* ``length_ratio``: log(target length / source length);
* ``copied_share``: share of the target's tokens that also occur in the source (a copied source is near 1);
* ``source_language`` / ``target_language``: the mean over a side's tokens of log(document frequency on that
  side / on the other side), high for text typical of its side, low for the other language on the wrong side;
* ``lexical_translation``: for each of the target's ``CONTENT_TOKENS`` rarest distinct tokens the best pointwise
  mutual information with one of the source's, over co-occurrence counts of these tokens in the corpus' pairs (an
  IBM-Model-1-like alignment score, 0 without evidence; counts hashed into ``TABLE_BUCKETS`` buckets and estimated
  on at most ``sample_pairs`` pairs, so memory stays bounded; each count less one, so that words met together in a
  single pair count for nothing), averaged; a misaligned pair, whose sides are unrelated sentences, scores low.
  Only the rarest tokens of each side take part: frequent ones (punctuation, articles, ``</s>``) co-occur with
  everything and carry no evidence, and visiting every combination of a WMT-sized pair (about 730) cost 90 s per
  million pairs at start-up where at most ``CONTENT_TOKENS ** 2`` cost a tenth (docs/results/cleaning/README.md);
* ``duplicates``: log of the size of the pair's near-duplicate group (``PairFeatures.near_duplicate_groups``).
"""

import numpy as np

from .counts import distinct_counts

NAMES = ("length_ratio", "copied_share", "source_language", "target_language", "lexical_translation", "duplicates")
TABLE_BUCKETS = 1 << 24
CHUNK_PAIRS = 4096
CONTENT_TOKENS = 8


def _pair_index(lengths):
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def _rarest(tokens, lengths, document_frequency):
    """Each sentence's up to ``CONTENT_TOKENS`` distinct tokens of lowest ``document_frequency`` (ties by token
    id), concatenated, and how many each sentence has."""
    vocab, most = len(document_frequency), int(document_frequency.max()) + 1
    # One sort of (sentence, document frequency, token) keys; sentence indices are chunk-local, so no overflow.
    keys = distinct_counts((_pair_index(lengths) * most + document_frequency[tokens]) * vocab + tokens)[0]
    sentence = keys // (most * vocab)
    counts = np.bincount(sentence, minlength=len(lengths))
    rank = np.arange(len(keys)) - np.repeat(np.cumsum(counts) - counts, counts)
    kept = rank < CONTENT_TOKENS
    return keys[kept] % vocab, np.minimum(counts, CONTENT_TOKENS)


def _content_sides(features, gathered):
    """The rarest tokens (``_rarest``) of the gathered ``[(source tokens, lengths), (target tokens, lengths)]``."""
    return [_rarest(tokens, lengths, df) for (tokens, lengths), df in zip(gathered, features.document_frequencies)]


def _bucket(source_tokens, target_tokens, vocab_size):
    return (source_tokens * vocab_size + target_tokens) % TABLE_BUCKETS


def _combinations(src_tokens, src_lengths, tgt_tokens, tgt_lengths):
    """Every (source occurrence, target occurrence) of each pair, grouped by target occurrence: the source tokens,
    the target tokens, and where each target occurrence's group starts."""
    src_starts = np.cumsum(src_lengths) - src_lengths
    # For each target occurrence, all source occurrences of its pair.
    per_target = src_lengths[_pair_index(tgt_lengths)]
    group_starts = np.cumsum(per_target) - per_target
    first = np.repeat(src_starts[_pair_index(tgt_lengths)], per_target)
    offsets = np.arange(per_target.sum(), dtype=np.int64) - np.repeat(group_starts, per_target)
    return src_tokens[first + offsets], np.repeat(tgt_tokens, per_target), group_starts


def _cooccurrence_table(features, sample):
    """Hashed counts of (source token, target token) pairs among the content tokens (``_rarest``) of the pairs
    ``sample``, each combination once per pair (the tokens of a side are distinct)."""
    table = np.zeros(TABLE_BUCKETS, dtype=np.float32)
    for start in range(0, len(sample), CHUNK_PAIRS):
        ids = sample[start:start + CHUNK_PAIRS]
        (src, src_len), (tgt, tgt_len) = _content_sides(features, [side.gather(ids) for side in features.sides])
        s, t, _ = _combinations(src, src_len, tgt, tgt_len)
        buckets, counts = distinct_counts(_bucket(s, t, features.vocab_size))
        table[buckets] += counts
    return table


def compute(features, groups, sample_pairs=1_000_000, seed=0):
    """The ``(len(features), len(NAMES))`` float16 array of standardized bilingual features."""
    num_pairs, vocab = len(features), features.vocab_size
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.permutation(num_pairs)[:sample_pairs]) if num_pairs > sample_pairs else np.arange(num_pairs)
    table = _cooccurrence_table(features, sample)
    src_df, tgt_df = (df.astype(np.float64) for df in features.document_frequencies)
    # Smoothed document frequencies over the sample's scale (all pairs were counted for them).
    scale = len(sample) / num_pairs
    src_p, tgt_p = (src_df * scale + 1.0) / (len(sample) + 1.0), (tgt_df * scale + 1.0) / (len(sample) + 1.0)
    typical = [np.log((src_df + 1.0) / (tgt_df + 1.0)), np.log((tgt_df + 1.0) / (src_df + 1.0))]
    group_sizes = np.bincount(groups, minlength=num_pairs)[groups]
    out = np.empty((num_pairs, len(NAMES)), dtype=np.float64)
    for start in range(0, num_pairs, CHUNK_PAIRS):
        ids = np.arange(start, min(start + CHUNK_PAIRS, num_pairs))
        (src, src_len), (tgt, tgt_len) = features.source.gather(ids), features.target.gather(ids)
        src_pair, tgt_pair = _pair_index(src_len), _pair_index(tgt_len)
        src_starts, tgt_starts = np.cumsum(src_len) - src_len, np.cumsum(tgt_len) - tgt_len
        # A sorted search, not ``np.isin``: its hash-based ``np.unique`` was half of this function's time.
        source_keys, target_keys = np.sort(src_pair * vocab + src), tgt_pair * vocab + tgt
        in_source = source_keys[np.minimum(np.searchsorted(source_keys, target_keys), len(src) - 1)] == target_keys
        (src_content, src_content_len), (tgt_content, tgt_content_len) = _content_sides(
            features, [(src, src_len), (tgt, tgt_len)])
        s, t, group_starts = _combinations(src_content, src_content_len, tgt_content, tgt_content_len)
        # Absolute discounting: a combination seen in one pair only (any two rare words of one sentence pair,
        # aligned or not) carries no evidence, where raw PMI would rate it highest.
        joint = np.maximum(table[_bucket(s, t, vocab)] - 1.0, 0.0) / len(sample)
        # No evidence is neutral (0), not the very negative PMI of an unseen combination: a pair of domain words
        # the corpus never shows together must not look worse than a misaligned pair of common ones.
        pmi = np.log(np.maximum(joint, 1e-12) / (src_p[s] * tgt_p[t]))
        best = np.maximum.reduceat(np.where(joint > 0, pmi, 0.0), group_starts)
        out[ids, 0] = np.log(tgt_len / src_len)
        out[ids, 1] = np.add.reduceat(in_source.astype(np.float64), tgt_starts) / tgt_len
        out[ids, 2] = np.add.reduceat(typical[0][src], src_starts) / src_len
        out[ids, 3] = np.add.reduceat(typical[1][tgt], tgt_starts) / tgt_len
        out[ids, 4] = np.add.reduceat(best, np.cumsum(tgt_content_len) - tgt_content_len) / tgt_content_len
        out[ids, 5] = np.log(group_sizes[ids])
    std = out.std(axis=0)
    return ((out - out.mean(axis=0)) / np.where(std > 0, std, 1.0)).astype(np.float16)
