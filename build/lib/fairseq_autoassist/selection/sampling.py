"""Drawing the kept pairs: all randomness from (seed, pass, chunk, purpose) on a local generator.

The same inputs give the same draws on every rank and after every resume; global random state
(numpy's, torch's, fairseq's) is never touched. ``purpose`` keeps the streams of different uses
apart: without it a pass's permutation and its chunk 0's keep mask came from one key.
"""

import numpy as np

KEEP_MASK = 0
PASS_ORDER = 1
BATCH_ORDER = 2


def local_generator(seed, pass_index, chunk=0, purpose=KEEP_MASK):
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(pass_index), int(chunk), int(purpose)])


def draw_keep_mask(keep_prob, seed, pass_index, chunk=0):
    """Bernoulli(keep_prob) per pair."""
    keep_prob = np.asarray(keep_prob, dtype=np.float64)
    uniforms = local_generator(seed, pass_index, chunk, purpose=KEEP_MASK).random(keep_prob.shape[0])
    return uniforms < keep_prob


def importance_weights(keep_prob):
    """``1 / p_keep``: with these weights the expected loss over a draw equals the full-data loss."""
    return (1.0 / np.asarray(keep_prob, dtype=np.float64)).astype(np.float32)


def selection_corrected_mean(values, keep_prob=None):
    """The mean of ``values`` over every candidate, estimated from the kept ones: each weighted by
    ``1 / p_keep`` (the Hajek estimate; ``keep_prob`` None: every candidate was kept)."""
    values = np.asarray(values, dtype=np.float64)
    if keep_prob is None:
        return float(values.mean())
    inverse_keep = 1.0 / np.maximum(np.asarray(keep_prob, dtype=np.float64), 1e-6)
    return float(np.sum(values * inverse_keep) / np.sum(inverse_keep))


def selection_corrected_quantile(values, quantile, keep_prob=None):
    """The ``quantile`` of ``values`` over every candidate, estimated from the kept ones each weighted by
    ``1 / p_keep`` (the weighted empirical quantile; ``keep_prob`` None: every candidate was kept)."""
    values = np.asarray(values, dtype=np.float64)
    weights = np.ones(len(values)) if keep_prob is None else 1.0 / np.maximum(
        np.asarray(keep_prob, dtype=np.float64), 1e-6)
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    position = np.searchsorted(cumulative, quantile * cumulative[-1], side="left")
    return float(values[order][min(position, len(values) - 1)])


def batch_importance_weights(keep_prob, target_tokens):
    """Importance weights of one batch's pairs, scaled to a mean of 1 per target token.

    The loss is normalized by the batch's own token count (fairseq's ``sample_size``), so raw
    ``1 / p`` weights would scale the gradient by about ``1 / (kept token share)``: Adam mostly
    cancels a constant factor, but not its jumps where weighting switches on and off, nor gradient
    clipping or SGD, and the logged loss and gradient norm would be inflated. Scaling the weights
    gives ``sum(w * loss) / sum(w * tokens)``: the self-normalized (ratio) importance estimate,
    whose relative weights within the batch are still ``1 / p``.
    """
    weights = importance_weights(keep_prob).astype(np.float64)
    target_tokens = np.asarray(target_tokens, dtype=np.float64)
    weighted_tokens = np.sum(weights * target_tokens)
    if weighted_tokens <= 0:
        return np.ones(len(weights), dtype=np.float32)
    return (weights * (np.sum(target_tokens) / weighted_tokens)).astype(np.float32)
