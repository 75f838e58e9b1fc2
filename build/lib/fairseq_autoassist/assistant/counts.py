"""Counting distinct keys fast, for the features and the pair features (no fairseq import)."""

import numpy as np


def distinct_counts(keys):
    """The distinct ``keys`` (sorted) and how often each occurs: a sort and a neighbour comparison, not
    ``np.unique``, whose hash-based path in numpy 2 took 40 times as long on these arrays (45 s per million pairs
    for the document frequencies; docs/results/scale-wmt14.md)."""
    keys = np.sort(keys)
    first = np.ones(len(keys), dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    return keys[starts], np.diff(np.r_[starts, len(keys)])
