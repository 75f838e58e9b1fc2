"""The Assistant: an online logistic model that predicts whether a pair is still informative.

``p(x, y) = sigmoid(bias + TF/TF-IDF bag-of-words terms + length terms)``, trained online on
the log loss with L2 from the Boss's per-token losses. The paper uses plain SGD; here each step
has a per-weight step size, because token features are sparse: a rare but telling token gets a
useful step instead of one scaled down by how seldom it appears.

The step is Adagrad with forgetting: each weight's accumulator of squared gradients decays by
``grad_decay`` per update before the new square is added (``grad_decay = 1`` is plain Adagrad).
Plain Adagrad's steps shrink like ``1 / sqrt(t)`` for the bias, the lengths and frequent tokens
while the Boss, and with it the label, keeps changing; with forgetting a steadily updated weight
keeps a step of about ``lr * sqrt(1 - grad_decay)``. Unlike RMSprop's
``(1 - decay) * g^2``, the new square enters at full weight, so a first step is never larger
than Adagrad's.

L2 is lazy: it acts only on the weights of tokens present in the batch (and on the dense length
weights). Applied to every weight at every step, it divided ``l2 * w`` by the tiny accumulator of
a rare token and shrank the token's weight by about a full step per batch: a token seen three
times lost its weight within 10 batches, long before its pair was scored again.

The label of a pair is "its per-token loss is above the running mean per-token loss" (the
paper's label); the running mean is an exponential moving average over the losses the Boss
reports. Those are the losses of the pairs the selector *kept*, which are the harder ones; each
batch's mean therefore weights every pair by ``1 / p_keep`` (the Hajek estimate of the mean over
all candidates), or the selector's own choices would raise the threshold and label ever more
pairs trivial. The paper switches to the previous pass's mean after
the first pass; in a shrinking stream that mean lags behind the Boss by a whole pass and makes
the labels lopsided, so the moving average is used throughout.

The running mean decays fast (0.9 per batch by default): while the Boss's loss falls quickly a
slow average lags above every fresh loss and almost all labels become "trivial".

Confidence is an exponential moving average (decay 0.95 by default) of the Assistant's
*balanced* accuracy on fresh losses (the mean of its accuracy on informative and on trivial
pairs), measured before it trains on them. The paper averages plain accuracy; with lopsided
labels that rewards an Assistant that predicts the majority label everywhere, and a confident
but useless Assistant would filter hard. Balanced accuracy is 0.5 for any constant predictor.
"""

from dataclasses import dataclass

import numpy as np
import torch

from ..compat import checkpointed_array
from ..option_fields import option
from ..selection.sampling import selection_corrected_mean
from .features import SCORING_CHUNK_PAIRS, PairFeatures
from .quality import PredictionQuality

STATE_VERSION = 2


@dataclass
class AssistantConfig:
    """How the Assistant learns (each field is an ``--autoassist-*`` option)."""

    lr: float = option(0.5, "the Assistant's per-weight (Adagrad-style) step size", minimum=0)
    l2: float = option(1e-4, "the Assistant's L2 regularization, applied to the weights of the tokens present "
                       "in each batch (and to the length weights)", minimum=0)
    grad_decay: float = option(
        0.999, "the Assistant's forgetting: its per-weight sums of squared gradients decay by this factor per "
        "update, so steps stay large enough to follow the Boss; 1 is plain Adagrad",
        minimum=0, maximum=1, exclude_minimum=True)
    loss_mean_decay: float = option(
        0.9, "decay of the running mean per-token loss that labels pairs as informative (above it) or trivial",
        minimum=0, maximum=1)
    confidence_decay: float = option(
        0.95, "decay of the moving average of the Assistant's balanced accuracy (its confidence)",
        minimum=0, maximum=1)
    pair_features: bool = option(
        False, "give the Assistant features of how each pair's sides relate (length ratio, copied share, how typical "
        "each side is of its language, a lexical translation score from the corpus' co-occurrences, near-duplicate "
        "count; computed at start-up, 12 bytes per pair; fairseq_autoassist/assistant/bilingual.py)")


def balanced_accuracy(predicted, actual):
    """Mean of the per-class accuracies; a class absent from ``actual`` is left out."""
    per_class = [np.mean(predicted[actual == label] == label) for label in (True, False) if np.any(actual == label)]
    return float(np.mean(per_class))


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


class Assistant:
    # What ``predict`` reads besides the confidence: all a snapshot keeps (see worker._snapshot).
    SCORING_ARRAYS = ("token_weights", "length_weights", "bias", "pair_weights")

    def __init__(self, features: PairFeatures, config: AssistantConfig = AssistantConfig()):
        self.features = features
        self.config = config
        vocab = features.vocab_size
        # Rows: source TF, source TF-IDF, target TF, target TF-IDF.
        self.token_weights = np.zeros((4, vocab), dtype=np.float32)
        self.length_weights = np.zeros(2, dtype=np.float32)
        self.bias = np.zeros(1, dtype=np.float32)
        # Accumulators of squared gradients: token features are sparse and rare tokens need larger steps.
        self._sq_token_grads = np.zeros((4, vocab), dtype=np.float64)
        self._sq_length_grads = np.zeros(2, dtype=np.float64)
        self._sq_bias_grads = np.zeros(1, dtype=np.float64)
        self.loss_mean = None
        self.confidence = 0.0
        self.accuracy = 0.0
        self.positive_rate = 0.5
        self.num_updates = 0
        self.num_pairs_seen = 0
        self.quality = PredictionQuality(len(features))
        # The pair features' columns and weights (None and empty without --autoassist-pair-features).
        self.pair_columns = features.bilingual() if config.pair_features else None
        width = 0 if self.pair_columns is None else self.pair_columns.shape[1]
        self.pair_weights = np.zeros(width, dtype=np.float32)
        self._sq_pair_grads = np.zeros(width, dtype=np.float64)

    # ---------------------------------------------------------------- scoring
    def _effective_token_weights(self):
        """Per-side weight of one token occurrence before dividing by the sentence length."""
        w = self.token_weights
        idf_source, idf_target = self.features.idf
        return (w[0] + idf_source * w[1], w[2] + idf_target * w[3])

    def _gather(self, ids):
        """``(tokens, lengths)`` of pairs ``ids`` on each side, gathered once per call site."""
        return [side.gather(ids) for side in self.features.sides]

    def _logits(self, ids, effective, gathered=None):
        gathered = self._gather(ids) if gathered is None else gathered
        logits = self.bias[0] + self.length_features(ids) @ self.length_weights
        if self.pair_columns is not None:
            logits = logits + self.pair_columns[ids].astype(np.float32) @ self.pair_weights
        for (tokens, lengths), weights in zip(gathered, effective):
            # Each sentence's tokens are contiguous: a segment sum over them, then one division per sentence
            # (2-3 times faster than weighting every occurrence by 1 / length and counting with bincount).
            starts = np.cumsum(lengths) - lengths
            logits = logits + np.add.reduceat(weights[tokens].astype(np.float64), starts) / lengths
        return logits

    def length_features(self, ids):
        return self.features.length_features(ids)

    def predict(self, ids=None):
        """P(informative) for pairs ``ids`` (all pairs when None), float32."""
        if ids is None:
            ids = np.arange(len(self.features), dtype=np.int64)
        ids = np.asarray(ids, dtype=np.int64)
        effective = self._effective_token_weights()
        out = np.empty(len(ids), dtype=np.float32)
        for start in range(0, len(ids), SCORING_CHUNK_PAIRS):
            chunk = ids[start : start + SCORING_CHUNK_PAIRS]
            out[start : start + len(chunk)] = _sigmoid(self._logits(chunk, effective))
        return out

    # ---------------------------------------------------------------- training
    def labels(self, per_token_losses, batch_mean):
        """The paper's label against the running mean (updated afterwards by ``update``); the
        first batch, before any running mean exists, is compared with its own ``batch_mean``."""
        threshold = self.loss_mean if self.loss_mean is not None else batch_mean
        return (per_token_losses > threshold).astype(np.float32)

    def gradients(self, ids, residual, gathered=None):
        """Gradient of the summed log loss given ``residual = prediction - label`` per pair.

        Summing ``residual / length`` over token occurrences gives each distinct token exactly
        ``residual * count / length``: its TF feature times the residual.
        """
        gathered = self._gather(ids) if gathered is None else gathered
        grad_tokens = np.empty(self.token_weights.shape, dtype=np.float64)
        for row, ((tokens, lengths), idf) in enumerate(zip(gathered, self.features.idf)):
            per_occurrence = np.repeat(residual / lengths, lengths)
            grad_tf = np.bincount(tokens, weights=per_occurrence, minlength=self.features.vocab_size)
            grad_tokens[2 * row] = grad_tf
            grad_tokens[2 * row + 1] = grad_tf * idf
        grad_lengths = residual @ self.length_features(ids)
        grad_pairs = np.zeros(0) if self.pair_columns is None else residual @ self.pair_columns[ids].astype(np.float64)
        return grad_tokens, grad_lengths, grad_pairs, np.array([residual.sum()])

    def update(self, ids, per_token_losses, keep_prob=None, labels=None, pass_index=1):
        """One step on a batch of fresh Boss losses; returns the balanced accuracy before it. ``pass_index`` (the
        stream's pass when the losses arrive) plays no part: the running mean follows the losses themselves.

        ``keep_prob``: the probability with which each pair was kept by the selector (None: every
        pair was kept), used to estimate the mean loss over all candidates. ``labels``: 1/0 per pair
        from another definition of "informative" (the learning progress of ``LossHistory``); None
        uses the paper's label.
        """
        ids = np.asarray(ids, dtype=np.int64)
        losses = np.asarray(per_token_losses, dtype=np.float64)
        finite = np.isfinite(losses)
        ids, losses = ids[finite], losses[finite]
        if len(ids) == 0:
            return None
        cfg = self.config
        batch_mean = selection_corrected_mean(losses, None if keep_prob is None else np.asarray(keep_prob)[finite])
        if labels is None:
            labels = self.labels(losses, batch_mean)
        else:
            labels = np.asarray(labels, dtype=np.float32)[finite]
        gathered = self._gather(ids)
        probs = _sigmoid(self._logits(ids, self._effective_token_weights(), gathered))
        accuracy = balanced_accuracy(probs > 0.5, labels > 0.5)
        self.quality.add(ids, probs, labels)

        residual = (probs - labels) / len(ids)
        grad_tokens, grad_lengths, grad_pairs, grad_bias = self.gradients(ids, residual, gathered)
        present = np.zeros(self.token_weights.shape, dtype=bool)
        for row, (tokens, _) in enumerate(gathered):
            present[2 * row : 2 * row + 2, tokens] = True
        for weights, accumulator, grad, l2 in (
            (self.token_weights, self._sq_token_grads, grad_tokens, cfg.l2 * present),
            (self.length_weights, self._sq_length_grads, grad_lengths, cfg.l2),
            (self.pair_weights, self._sq_pair_grads, grad_pairs, cfg.l2),
            (self.bias, self._sq_bias_grads, grad_bias, 0.0),
        ):
            grad = grad + l2 * weights
            accumulator *= cfg.grad_decay
            accumulator += grad * grad
            weights -= (cfg.lr * grad / (np.sqrt(accumulator) + 1e-8)).astype(np.float32)

        if self.loss_mean is None:
            self.loss_mean = batch_mean
        else:
            self.loss_mean = cfg.loss_mean_decay * self.loss_mean + (1 - cfg.loss_mean_decay) * batch_mean
        self.accuracy = accuracy
        self.confidence = cfg.confidence_decay * self.confidence + (1 - cfg.confidence_decay) * accuracy
        self.positive_rate = 0.95 * self.positive_rate + 0.05 * float(labels.mean())
        self.num_updates += 1
        self.num_pairs_seen += len(ids)
        return accuracy

    # ---------------------------------------------------------------- state
    def state_dict(self, with_quality=True):
        """Everything learned; ``with_quality`` adds the per-pair prediction-quality diagnostic (O(pairs))."""
        state = {
            "version": STATE_VERSION,
            "vocab_size": self.features.vocab_size,
            # Tensors, not numpy arrays: torch.load(weights_only=True) accepts them.
            "token_weights": torch.from_numpy(self.token_weights.copy()),
            "length_weights": torch.from_numpy(self.length_weights.copy()),
            "bias": torch.from_numpy(self.bias.copy()),
            "sq_token_grads": torch.from_numpy(self._sq_token_grads.copy()),
            "sq_length_grads": torch.from_numpy(self._sq_length_grads.copy()),
            "sq_bias_grads": torch.from_numpy(self._sq_bias_grads.copy()),
            "loss_mean": self.loss_mean,
            "confidence": self.confidence,
            "accuracy": self.accuracy,
            "positive_rate": self.positive_rate,
            "num_updates": self.num_updates,
            "num_pairs_seen": self.num_pairs_seen,
            "pair_weights": torch.from_numpy(self.pair_weights.copy()),
            "sq_pair_grads": torch.from_numpy(self._sq_pair_grads.copy()),
        }
        if with_quality:
            state["quality"] = self.quality.state_dict()
        return state

    def load_state_dict(self, state):
        if state.get("version") != STATE_VERSION:
            raise ValueError(
                f"Assistant state version {state.get('version')!r} is not {STATE_VERSION}"
            )
        if state["vocab_size"] != self.features.vocab_size:
            raise ValueError(
                f"Assistant state has vocabulary size {state['vocab_size']}, "
                f"the data has {self.features.vocab_size}"
            )
        saved_width = len(state["pair_weights"]) if "pair_weights" in state else 0
        if saved_width != len(self.pair_weights):
            raise ValueError(f"Assistant state has {saved_width} pair-feature weights, this run "
                             f"{len(self.pair_weights)} (--autoassist-pair-features differs)")
        if saved_width:
            self.pair_weights = checkpointed_array(state["pair_weights"], np.float32).reshape(-1)
            self._sq_pair_grads = checkpointed_array(state["sq_pair_grads"], np.float64).reshape(-1)
        self.token_weights = checkpointed_array(state["token_weights"], np.float32).reshape(4, -1)
        self.length_weights = checkpointed_array(state["length_weights"], np.float32).reshape(2)
        self.bias = checkpointed_array(state["bias"], np.float32).reshape(1)
        self._sq_token_grads = checkpointed_array(state["sq_token_grads"], np.float64).reshape(4, -1)
        self._sq_length_grads = checkpointed_array(state["sq_length_grads"], np.float64).reshape(2)
        self._sq_bias_grads = checkpointed_array(state["sq_bias_grads"], np.float64).reshape(1)
        self.loss_mean = state["loss_mean"]
        self.confidence = float(state["confidence"])
        self.accuracy = float(state["accuracy"])
        self.positive_rate = float(state["positive_rate"])
        self.num_updates = int(state["num_updates"])
        self.num_pairs_seen = int(state["num_pairs_seen"])
        # A diagnostic added within state version 2 and left out of snapshots: without it, it stays as it is.
        if "quality" in state:
            self.quality = PredictionQuality(len(self.features))
            self.quality.load_state_dict(state["quality"])
