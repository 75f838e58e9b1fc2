"""Token-level features of sentence pairs, read in place from flat token arrays.

A corpus side is a flat array of token ids (typically a read-only view of fairseq's
memory-mapped ``.bin`` file) plus ``offsets`` such that sentence ``i`` is
``tokens[offsets[i]:offsets[i + 1]]``. Nothing here copies the corpus: per-pair memory is the
offsets and lengths; per-call temporaries are bounded by the chunk size.

Feature definitions (one side; the pair concatenates source and target):

* TF part: ``sum_t tf(t) * w_tf[t]`` with ``tf(t) = count(t) / length``.
* TF-IDF part: ``sum_t tf(t) * idf(t) * w_tfidf[t]`` with ``idf(t) = log(N / df(t))``.
* Length part: the standardized log length.

Because ``tf(t)`` is linear in the count, summing ``1 / length`` over token *occurrences*
gives exactly the per-distinct-token value ``count(t) / length``: a token that repeats in a
sentence contributes (to the score and to the gradient) by its frequency, once, never
``count(t)`` times its full weight as in the original implementation.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import bilingual
from .counts import distinct_counts

SCORING_CHUNK_PAIRS = 65536
# Odd 64-bit multipliers of the sentence hash (arithmetic modulo 2**64).
_HASH_BASE = np.uint64(0x9E3779B97F4A7C15)
_HASH_LENGTH = np.uint64(0xBF58476D1CE4E5B9)


@dataclass
class CorpusSide:
    """One side (source or target) of a parallel corpus as flat token ids.

    ``owner``: the object whose memory ``tokens`` views (a memory-mapped dataset), kept alive here;
    reading a view of a closed memory map crashes the process. ``lengths``: the sentence lengths
    where the caller already holds them (fairseq's memory-mapped sizes: no per-pair copy); by default
    the differences of ``offsets``.
    """

    tokens: np.ndarray
    offsets: np.ndarray
    owner: Optional[object] = None
    lengths: Optional[np.ndarray] = None

    def __post_init__(self):
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        if self.offsets.ndim != 1 or len(self.offsets) < 1:
            raise ValueError("offsets must be a 1-D array of length num_sentences + 1")
        if self.lengths is None:
            self.lengths = np.diff(self.offsets)
        elif len(self.lengths) != len(self.offsets) - 1:
            raise ValueError(f"{len(self.lengths)} lengths for {len(self.offsets) - 1} sentences")
        if np.any(self.lengths <= 0):
            raise ValueError("every sentence needs at least one token (fairseq appends </s>)")

    def __len__(self):
        return len(self.offsets) - 1

    def gather(self, ids):
        """Token ids of sentences ``ids`` concatenated, and the length of each."""
        ids = np.asarray(ids, dtype=np.int64)
        lengths = self.lengths[ids].astype(np.int64, copy=False)
        segment_starts = np.cumsum(lengths) - lengths
        positions = np.repeat(self.offsets[ids] - segment_starts, lengths)
        positions += np.arange(positions.shape[0], dtype=np.int64)
        return np.asarray(self.tokens[positions], dtype=np.int64), lengths

    def sentence_hashes(self):
        """A 64-bit hash of each sentence's token ids (equal sentences, equal hashes; a collision of different
        ones is about 1 in 2**64 per pair of sentences)."""
        hashes = np.empty(len(self), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for start in range(0, len(self), SCORING_CHUNK_PAIRS):
                ids = np.arange(start, min(start + SCORING_CHUNK_PAIRS, len(self)))
                tokens, lengths = self.gather(ids)
                starts = np.cumsum(lengths) - lengths
                positions = np.arange(len(tokens)) - np.repeat(starts, lengths)
                powers = _HASH_BASE ** positions.astype(np.uint64)
                mixed = (tokens.astype(np.uint64) + np.uint64(1)) * powers
                hashes[ids] = np.add.reduceat(mixed, starts) ^ (lengths.astype(np.uint64) * _HASH_LENGTH)
        return hashes

    def document_frequency(self, vocab_size):
        """Number of sentences that contain each token (each sentence counts a token once)."""
        df = np.zeros(vocab_size, dtype=np.int64)
        for start in range(0, len(self), SCORING_CHUNK_PAIRS):
            ids = np.arange(start, min(start + SCORING_CHUNK_PAIRS, len(self)))
            tokens, lengths = self.gather(ids)
            sentence = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
            df += np.bincount(distinct_counts(sentence * vocab_size + tokens)[0] % vocab_size, minlength=vocab_size)
        return df


class PairFeatures:
    """The fixed (data-dependent, parameter-free) part of the Assistant's features.

    Computed once from the training set: IDF per side and length standardization. Holds only
    references to the corpus sides plus O(vocabulary) and O(pairs) arrays.
    """

    def __init__(self, source: CorpusSide, target: CorpusSide, vocab_size: int):
        if len(source) != len(target):
            raise ValueError(
                f"source has {len(source)} sentences but target has {len(target)}"
            )
        self.source = source
        self.target = target
        self.vocab_size = int(vocab_size)
        num_pairs = max(len(source), 1)
        # Kept for the pair features (``bilingual``), which compare each token's frequency on the two sides.
        self.document_frequencies = [side.document_frequency(self.vocab_size) for side in (source, target)]
        self.idf = [np.log(num_pairs / np.maximum(df, 1)).astype(np.float32) for df in self.document_frequencies]
        self._bilingual = None
        self._log_length_stats = []
        for side in (source, target):
            log_length = np.log(side.lengths.astype(np.float64))
            self._log_length_stats.append(
                (float(log_length.mean()), float(max(log_length.std(), 1e-6)))
            )

    def __len__(self):
        return len(self.source)

    @property
    def sides(self):
        return (self.source, self.target)

    def source_rarity(self):
        """Per pair, the sum of its source tokens' IDF: the sentence rarity of competence-based curricula
        (Platanios et al., 2019, with IDF standing in for the negative log unigram probability)."""
        rarity = np.empty(len(self), dtype=np.float32)
        for start in range(0, len(self), SCORING_CHUNK_PAIRS):
            ids = np.arange(start, min(start + SCORING_CHUNK_PAIRS, len(self)))
            tokens, lengths = self.source.gather(ids)
            rarity[ids] = np.add.reduceat(self.idf[0][tokens], np.cumsum(lengths) - lengths)
        return rarity

    def near_duplicate_groups(self):
        """Per pair, the smallest index of the pairs linked to it by an identical source or an identical target
        sentence (directly or through other pairs): pairs with one group are near-duplicates, such as one
        sentence with several translations. 8 bytes per pair."""
        groups = np.arange(len(self), dtype=np.int64)
        keys = [np.unique(side.sentence_hashes(), return_inverse=True)[1] for side in self.sides]
        while True:
            before = groups
            for key in keys:
                smallest = np.full(key.max() + 1, len(self), dtype=np.int64)
                np.minimum.at(smallest, key, groups)
                groups = np.minimum(groups, smallest[key])
            if np.array_equal(groups, before):
                return groups

    def bilingual(self):
        """The pair features of ``bilingual.compute`` (computed on the first call, then kept)."""
        if self._bilingual is None:
            self._bilingual = bilingual.compute(self, self.near_duplicate_groups())
        return self._bilingual

    def length_features(self, ids):
        """Standardized log lengths, shape (len(ids), 2): source, target."""
        columns = []
        for side, (mean, std) in zip(self.sides, self._log_length_stats):
            columns.append((np.log(side.lengths[ids].astype(np.float64)) - mean) / std)
        return np.stack(columns, axis=1).astype(np.float32)
