"""Drawing the kept pairs: all randomness from (seed, epoch, chunk) on a local generator.

The same inputs give the same mask on every rank and after every resume; global random state
(numpy's, torch's, fairseq's) is never touched.
"""

import numpy as np


def local_generator(seed, epoch, chunk=0):
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch), int(chunk)])


def draw_keep_mask(keep_prob, seed, epoch, chunk=0):
    """Bernoulli(keep_prob) per pair."""
    keep_prob = np.asarray(keep_prob, dtype=np.float64)
    uniforms = local_generator(seed, epoch, chunk).random(keep_prob.shape[0])
    return uniforms < keep_prob


def importance_weights(keep_prob):
    """``1 / p_keep``: with these weights the expected loss over a draw equals the full-data loss."""
    return (1.0 / np.asarray(keep_prob, dtype=np.float64)).astype(np.float32)
