"""The Assistant as the authors released it for translation (``--autoassist-policy released``; no fairseq import).

Every decision of the released code (repository zhangjiong724/autoassist-exp, machine_translation/fairseq/data/
assistant.py and trainer.py; ../shared/docs/autoassist-method.md, "As released, precisely"), written anew and
vectorised. ``Assistant`` (``model.py``) is this project's improved rule; this one changes none of the released
decisions:

* **Features**, per side: a TF-IDF term ``sum_t count(t) / length * idf(t) * w_tfidf[t]``; a TF term, the plain mean of
  ``w_tf`` over the sentence's distinct token types (not weighted by counts); a length term ``types / 10 * c_len`` (the
  number of distinct types, end of sentence included); a bias. Token weights start as N(0, 1e-4^2) draws, the length
  weights at 1e-4, the bias at 0.
* **Label**: a pair is informative when its per-token loss (the label-smoothed sentence loss over the target length,
  end of sentence included) is above ``loss_bar``. In the first pass ``loss_bar`` is a moving average (0.99 old, 0.01
  new) of batch means starting at 0; from the second pass on it is the previous pass's mean of every loss received,
  fixed for the pass. No correction for the pairs that selection removed.
* **Learning**: each Boss batch is first resampled with replacement (as many draws as pairs), then split into
  ``min(ceil(n / 4), 4)`` sub-batches, each one plain SGD step of size ``0.5 / sub-batch size`` on the log loss, with
  L2 0.1 applied to every weight (bias and length weights included) at every sub-step. The TF-IDF gradient is applied
  once per token occurrence: a token ``k`` times in a sentence moves its weight ``k`` times.
* **Confidence**: a moving average (0.95) of plain accuracy, starting at 0.

Kept from this project where it changes none of those decisions: scoring is vectorised; the resampling draws come
from ``(seed, update)`` and the pass a loss belongs to is the batch stream's (see ``update``), so that a run is
reproducible and resumes exactly; the state is checkpointed.
"""

import math

import numpy as np
import torch

from ..compat import checkpointed_array
from .counts import distinct_counts
from .features import SCORING_CHUNK_PAIRS, PairFeatures
from .quality import PredictionQuality

STATE_VERSION = 1
STEP_SIZE = 0.5
L2 = 0.1
INITIAL_SCALE = 1e-4
LENGTH_SCALE = 10.0
FIRST_PASS_DECAY = 0.99
CONFIDENCE_DECAY = 0.95
MAX_SUB_STEPS = 4
PAIRS_PER_SUB_STEP = 4


def sub_batches(num_pairs):
    """The released split of one batch: ``min(ceil(n / 4), 4)`` sub-steps of ``ceil(n / steps)`` pairs (the last
    one smaller), as ``(start, stop)`` ranges."""
    steps = min(math.ceil(num_pairs / PAIRS_PER_SUB_STEP), MAX_SUB_STEPS)
    size = math.ceil(num_pairs / steps)
    return [(start, min(start + size, num_pairs)) for start in range(0, num_pairs, size)]


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


def _occurrence_counts(sentence, tokens):
    """For token occurrences of several sentences (``sentence`` numbers them): each occurrence's count within its
    sentence, and every distinct ``(sentence, token)``."""
    width = int(tokens.max()) + 1 if len(tokens) else 1
    keys = sentence * width + tokens
    distinct, counts = distinct_counts(keys)
    count = counts[np.searchsorted(distinct, keys)].astype(np.float64)
    return count, distinct // width, distinct % width


def _distinct_types(side):
    """The number of distinct token types of every sentence of ``side`` (a ``CorpusSide``)."""
    types = np.empty(len(side), dtype=np.int32)
    for start in range(0, len(side), SCORING_CHUNK_PAIRS):
        ids = np.arange(start, min(start + SCORING_CHUNK_PAIRS, len(side)))
        tokens, lengths = side.gather(ids)
        _, type_sentence, _ = _occurrence_counts(np.repeat(np.arange(len(ids), dtype=np.int64), lengths), tokens)
        types[ids] = np.bincount(type_sentence, minlength=len(ids))
    return types


class _SideTerms:
    """One side's tokens of a set of pairs, arranged for the released features: every occurrence with its sentence,
    its token's count in the sentence, and every distinct (sentence, token) with the sentence's number of types."""

    def __init__(self, side, idf, types, ids):
        tokens, lengths = side.gather(ids)
        self.sentence = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
        self.count, self.type_sentence, self.type_token = _occurrence_counts(self.sentence, tokens)
        self.tokens = tokens
        self.lengths = lengths.astype(np.float64)
        self.types = types[ids].astype(np.float64)
        # An occurrence's TF-IDF value count / length * idf: the released feature's entry for its token.
        self.tfidf = self.count / self.lengths[self.sentence] * idf[tokens]

    def logit(self, w_tf, w_tfidf, c_len, num_pairs):
        # The TF-IDF term sums each distinct token's value once: over occurrences, each value divided by its count.
        tfidf = np.bincount(self.sentence, weights=self.tfidf / self.count * w_tfidf[self.tokens], minlength=num_pairs)
        tf = np.bincount(self.type_sentence, weights=w_tf[self.type_token], minlength=num_pairs) / self.types
        return tfidf + tf + c_len * self.types / LENGTH_SCALE


class ReleasedAssistant:
    """The released Assistant; the same calling contract as ``model.Assistant`` (``predict``, ``update``,
    ``state_dict``), ``seed`` drawing its initial weights and its resampling."""

    SCORING_ARRAYS = ("token_weights", "length_weights", "bias")

    def __init__(self, features: PairFeatures, seed=1):
        self.features = features
        self.seed = int(seed)
        vocab = features.vocab_size
        # Fixed per-pair data, shared (not copied) by snapshots: kept off the instance's own arrays.
        self.sentence_types = tuple(_distinct_types(side) for side in features.sides)
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, 0x5EED])
        # Rows: source TF, source TF-IDF, target TF, target TF-IDF (float64, as released).
        self.token_weights = INITIAL_SCALE * rng.standard_normal((4, vocab))
        self.length_weights = np.full(2, INITIAL_SCALE)
        self.bias = np.zeros(1)
        self.loss_bar = 0.0
        self.pass_index = 1
        self.pass_loss_sum = 0.0
        self.pass_losses = 0
        self.confidence = 0.0
        self.accuracy = 0.0
        self.positive_rate = 0.5
        self.num_updates = 0
        self.num_pairs_seen = 0
        self.quality = PredictionQuality(len(features))

    @property
    def loss_mean(self):
        """The label's threshold (for the logs, as ``model.Assistant.loss_mean``)."""
        return self.loss_bar

    # ---------------------------------------------------------------- scoring
    def _terms(self, ids):
        return [_SideTerms(side, idf, types, ids)
                for side, idf, types in zip(self.features.sides, self.features.idf, self.sentence_types)]

    def _logits(self, terms, num_pairs):
        w = self.token_weights
        return self.bias[0] + sum(side.logit(w[2 * row], w[2 * row + 1], self.length_weights[row], num_pairs)
                                  for row, side in enumerate(terms))

    def predict(self, ids=None):
        """P(informative) for pairs ``ids`` (all pairs when None), float32."""
        ids = np.arange(len(self.features), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
        out = np.empty(len(ids), dtype=np.float32)
        for start in range(0, len(ids), SCORING_CHUNK_PAIRS):
            chunk = ids[start : start + SCORING_CHUNK_PAIRS]
            out[start : start + len(chunk)] = _sigmoid(self._logits(self._terms(chunk), len(chunk)))
        return out

    # ---------------------------------------------------------------- training
    def _sub_step(self, ids, losses):
        """One released SGD step on a sub-batch; returns its (probabilities before the step, labels)."""
        terms = self._terms(ids)
        probs = _sigmoid(self._logits(terms, len(ids)))
        labels = (losses > self.loss_bar).astype(np.float64)
        residual = probs - labels
        step = STEP_SIZE / len(ids)
        self.bias -= step * (residual.sum() + L2 * self.bias)
        for row, side in enumerate(terms):
            self.length_weights[row] -= step * (residual @ side.types / LENGTH_SCALE + L2 * self.length_weights[row])
        self.token_weights -= step * L2 * self.token_weights
        vocab = self.features.vocab_size
        for row, side in enumerate(terms):
            self.token_weights[2 * row] -= step * np.bincount(
                side.type_token, weights=residual[side.type_sentence] / side.types[side.type_sentence],
                minlength=vocab)
            # Once per occurrence, each time by the token's TF-IDF value in its sentence.
            self.token_weights[2 * row + 1] -= step * np.bincount(
                side.tokens, weights=residual[side.sentence] * side.tfidf, minlength=vocab)
        return probs, labels

    def update(self, ids, per_token_losses, keep_prob=None, labels=None, pass_index=1):
        """One Boss batch's losses, received while the batch stream generates pass ``pass_index``; returns the plain
        accuracy before learning. ``keep_prob`` is ignored (no correction for selection, as released); ``labels`` must
        be None (the released label only).

        The threshold of a pass is the mean of the losses received during the pass before: the first batch received
        in a later pass closes the earlier one (the released generator closes it when it starts the next pass).
        """
        if labels is not None:
            raise ValueError("the released Assistant learns its own label only")
        ids = np.asarray(ids, dtype=np.int64)
        losses = np.asarray(per_token_losses, dtype=np.float64)
        finite = np.isfinite(losses)
        ids, losses = ids[finite], losses[finite]
        if len(ids) == 0:
            return None
        draws = np.random.default_rng([self.seed & 0xFFFFFFFF, self.num_updates]).integers(0, len(ids), len(ids))
        ids, losses = ids[draws], losses[draws]
        if pass_index > self.pass_index:
            if self.pass_losses:
                self.loss_bar = self.pass_loss_sum / self.pass_losses
            self.pass_loss_sum, self.pass_losses, self.pass_index = 0.0, 0, int(pass_index)
        self.pass_loss_sum += float(losses.sum())
        self.pass_losses += len(losses)
        if self.pass_index == 1:
            self.loss_bar = FIRST_PASS_DECAY * self.loss_bar + (1 - FIRST_PASS_DECAY) * float(losses.mean())
        correct, positives = 0.0, 0.0
        for start, stop in sub_batches(len(ids)):
            probs, labels = self._sub_step(ids[start:stop], losses[start:stop])
            self.quality.add(ids[start:stop], probs, labels)
            correct += float(np.sum((probs > 0.5) == (labels > 0.5)))
            positives += float(labels.sum())
        accuracy = correct / len(ids)
        self.accuracy = accuracy
        self.confidence = CONFIDENCE_DECAY * self.confidence + (1 - CONFIDENCE_DECAY) * accuracy
        self.positive_rate = 0.95 * self.positive_rate + 0.05 * positives / len(ids)
        self.num_updates += 1
        self.num_pairs_seen += len(ids)
        return accuracy

    # ---------------------------------------------------------------- state
    def state_dict(self, with_quality=True):
        state = {
            "version": STATE_VERSION,
            "kind": "released",
            "vocab_size": self.features.vocab_size,
            "token_weights": torch.from_numpy(self.token_weights.copy()),
            "length_weights": torch.from_numpy(self.length_weights.copy()),
            "bias": torch.from_numpy(self.bias.copy()),
            "loss_bar": self.loss_bar,
            "pass_index": self.pass_index,
            "pass_loss_sum": self.pass_loss_sum,
            "pass_losses": self.pass_losses,
            "confidence": self.confidence,
            "accuracy": self.accuracy,
            "positive_rate": self.positive_rate,
            "num_updates": self.num_updates,
            "num_pairs_seen": self.num_pairs_seen,
        }
        if with_quality:
            state["quality"] = self.quality.state_dict()
        return state

    def load_state_dict(self, state):
        if state.get("version") != STATE_VERSION or state.get("kind") != "released":
            raise ValueError(f"not a released Assistant's state of version {STATE_VERSION} "
                             f"(kind {state.get('kind')!r}, version {state.get('version')!r})")
        if state["vocab_size"] != self.features.vocab_size:
            raise ValueError(f"Assistant state has vocabulary size {state['vocab_size']}, "
                             f"the data has {self.features.vocab_size}")
        self.token_weights = checkpointed_array(state["token_weights"], np.float64).reshape(4, -1)
        self.length_weights = checkpointed_array(state["length_weights"], np.float64).reshape(2)
        self.bias = checkpointed_array(state["bias"], np.float64).reshape(1)
        self.loss_bar = float(state["loss_bar"])
        self.pass_index = int(state["pass_index"])
        self.pass_loss_sum = float(state["pass_loss_sum"])
        self.pass_losses = int(state["pass_losses"])
        self.confidence = float(state["confidence"])
        self.accuracy = float(state["accuracy"])
        self.positive_rate = float(state["positive_rate"])
        self.num_updates = int(state["num_updates"])
        self.num_pairs_seen = int(state["num_pairs_seen"])
        if "quality" in state:
            self.quality = PredictionQuality(len(self.features))
            self.quality.load_state_dict(state["quality"])
