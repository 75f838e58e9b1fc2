"""The Assistant and its features: model-free, milliseconds."""

import io

import numpy as np
import pytest
import torch

from fairseq_autoassist.assistant import Assistant, AssistantConfig, CorpusSide, PairFeatures
from fairseq_autoassist.assistant.model import balanced_accuracy
from fairseq_autoassist.assistant.quality import PredictionQuality

from .synthetic import planted_losses, random_features, random_side


def naive_logit(assistant, i):
    """The score of pair i computed token by token, the way the features are defined."""
    f = assistant.features
    w = assistant.token_weights
    z = float(assistant.bias[0]) + float(f.length_features(np.array([i]))[0] @ assistant.length_weights)
    for side_index, (side, idf) in enumerate(zip(f.sides, f.idf)):
        sentence = side.tokens[side.offsets[i] : side.offsets[i + 1]].astype(np.int64)
        for token in np.unique(sentence):
            tf = np.count_nonzero(sentence == token) / len(sentence)
            z += tf * w[2 * side_index, token] + tf * idf[token] * w[2 * side_index + 1, token]
    return z


def test_vectorized_scores_match_the_feature_definition():
    features = random_features(num_pairs=50, vocab_size=30)
    assistant = Assistant(features)
    rng = np.random.default_rng(1)
    assistant.token_weights = rng.normal(size=assistant.token_weights.shape).astype(np.float32)
    assistant.length_weights = rng.normal(size=2).astype(np.float32)
    assistant.bias[:] = 0.3
    expected = 1 / (1 + np.exp(-np.array([naive_logit(assistant, i) for i in range(50)])))
    np.testing.assert_allclose(assistant.predict(), expected, rtol=1e-4)
    np.testing.assert_allclose(assistant.predict([7, 3]), expected[[7, 3]], rtol=1e-4)


def test_idf_counts_each_sentence_once():
    # token 5 is in sentences 0 and 1 (twice in 0); token 6 only in sentence 2.
    side = CorpusSide(np.array([5, 5, 2, 5, 2, 6, 2]), np.array([0, 3, 5, 7]))
    features = PairFeatures(side, side, vocab_size=8)
    np.testing.assert_allclose(features.idf[0][5], np.log(3 / 2), rtol=1e-6)
    np.testing.assert_allclose(features.idf[0][6], np.log(3 / 1), rtol=1e-6)


def test_document_frequency_matches_a_sentence_by_sentence_count_across_chunks(monkeypatch):
    monkeypatch.setattr("fairseq_autoassist.assistant.features.SCORING_CHUNK_PAIRS", 7)
    side = random_side(num_sentences=40, vocab_size=12, rng=np.random.default_rng(3))
    expected = np.zeros(12, dtype=np.int64)
    for i in range(len(side)):
        expected[np.unique(side.tokens[side.offsets[i] : side.offsets[i + 1]])] += 1
    np.testing.assert_array_equal(side.document_frequency(12), expected)


def test_source_rarity_sums_the_source_idf_of_every_token_across_chunks(monkeypatch):
    monkeypatch.setattr("fairseq_autoassist.assistant.features.SCORING_CHUNK_PAIRS", 7)
    features = random_features(num_pairs=40, vocab_size=12)
    source, idf = features.source, features.idf[0]
    expected = [idf[source.tokens[source.offsets[i] : source.offsets[i + 1]]].sum() for i in range(40)]
    np.testing.assert_allclose(features.source_rarity(), expected, rtol=1e-5)


def test_a_repeated_token_contributes_by_its_frequency_once():
    side = CorpusSide(np.array([5, 5, 5, 2]), np.array([0, 4]))
    features = PairFeatures(side, side, vocab_size=8)
    grad_tokens, _, _, grad_bias = Assistant(features).gradients(np.array([0]), np.array([-0.5]))
    # TF of token 5 is count / length = 3 / 4; the original code added its full weight 3 times.
    assert grad_tokens[0, 5] == pytest.approx(-0.5 * 3 / 4)
    assert grad_tokens[0, 2] == pytest.approx(-0.5 * 1 / 4)
    assert grad_tokens[1, 5] == pytest.approx(-0.5 * 3 / 4 * features.idf[0][5])
    assert grad_bias[0] == pytest.approx(-0.5)


def _reachable_arrays(value, depth=0):
    """Every numpy array reachable from ``value`` through attributes, lists and tuples."""
    if isinstance(value, np.ndarray):
        yield value
    elif depth < 4 and isinstance(value, (list, tuple)):
        for item in value:
            yield from _reachable_arrays(item, depth + 1)
    elif depth < 4 and hasattr(value, "__dict__"):
        for item in vars(value).values():
            yield from _reachable_arrays(item, depth + 1)


def test_features_do_not_copy_the_corpus():
    rng = np.random.default_rng(0)
    generated = [random_side(rng, 500, 200) for _ in range(2)]
    corpus = [side.tokens.copy() for side in generated]  # the corpus as a memory map would hand it over
    source, target = (CorpusSide(tokens, side.offsets) for tokens, side in zip(corpus, generated))
    features = PairFeatures(source, target, vocab_size=200)
    assert features.source.tokens is corpus[0] and features.target.tokens is corpus[1]
    for array in _reachable_arrays(features):
        if not any(array is tokens for tokens in corpus):
            assert not any(np.shares_memory(array, tokens) for tokens in corpus)
            # Per-pair and per-vocabulary arrays only: far below the size of a side's tokens.
            assert array.size <= 2 * max(len(source) + 1, 200) < corpus[0].size


def test_learns_a_planted_signal():
    features = random_features(num_pairs=3000, vocab_size=200, seed=3)
    losses, informative = planted_losses(features, marker_tokens=[10, 11, 12, 13, 14])
    assistant = Assistant(features)
    rng = np.random.default_rng(0)
    train, test = np.arange(2000), np.arange(2000, 3000)
    for _ in range(10):
        for batch in np.array_split(rng.permutation(train), 20):
            assistant.update(batch, losses[batch])
    predicted = assistant.predict(test) > 0.5
    assert balanced_accuracy(predicted, informative[test]) > 0.9
    assert assistant.confidence > 0.8


def test_an_uninformative_signal_gives_chance_confidence():
    features = random_features(num_pairs=2000, seed=4)
    losses = np.random.default_rng(5).normal(2.0, 0.5, size=2000)
    assistant = Assistant(features)
    for batch in np.array_split(np.arange(2000), 40):
        assistant.update(batch, losses[batch])
    assert 0.35 < assistant.confidence < 0.65


def test_non_finite_losses_are_ignored():
    features = random_features(num_pairs=10)
    assistant = Assistant(features)
    assert assistant.update([0, 1], [np.nan, np.inf]) is None
    assert assistant.num_updates == 0
    assistant.update([0, 1, 2], [1.0, np.nan, 3.0])
    assert assistant.num_pairs_seen == 2
    assert np.isfinite(assistant.token_weights).all()


def test_state_round_trips_through_a_weights_only_torch_checkpoint():
    features = random_features(num_pairs=200)
    assistant = Assistant(features)
    losses = np.random.default_rng(0).random(200)
    assistant.update(np.arange(100), losses[:100])
    buffer = io.BytesIO()
    torch.save({"assistant": assistant.state_dict()}, buffer)
    buffer.seek(0)
    restored = Assistant(features)
    restored.load_state_dict(torch.load(buffer, weights_only=True)["assistant"])
    np.testing.assert_array_equal(restored.predict(), assistant.predict())
    assert restored.confidence == assistant.confidence
    assert restored.loss_mean == assistant.loss_mean


def test_rejects_state_of_another_vocabulary_or_version():
    assistant = Assistant(random_features(num_pairs=20, vocab_size=50))
    other = Assistant(random_features(num_pairs=20, vocab_size=60)).state_dict()
    with pytest.raises(ValueError, match="vocabulary size 60"):
        assistant.load_state_dict(other)
    with pytest.raises(ValueError, match="version"):
        assistant.load_state_dict({**assistant.state_dict(), "version": 99})


def test_balanced_accuracy_is_half_for_a_constant_predictor():
    actual = np.array([True] * 10 + [False] * 90)
    assert balanced_accuracy(np.zeros(100, bool), actual) == 0.5
    assert balanced_accuracy(actual.copy(), actual) == 1.0


def _side(sentences):
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sentences])
    return CorpusSide(np.concatenate(sentences).astype(np.int64), offsets)


def test_a_rare_token_keeps_its_weight_through_batches_without_it():
    """L2 acts only on the tokens of the batch: an absent token's learned weight is not decayed."""
    rng = np.random.default_rng(0)
    rare = 99
    sentences = [rng.integers(4, 50, size=8) for _ in range(400)]
    sentences[0] = np.array([rare, 5, 6, 7, 2])
    side = _side(sentences)
    assistant = Assistant(PairFeatures(side, side, vocab_size=100), AssistantConfig(l2=1e-2))
    others = np.arange(1, 400)
    losses = rng.normal(2.0, 0.3, size=400)
    losses[0] = 10.0
    assistant.update(np.r_[0, others[:20]], losses[np.r_[0, others[:20]]])
    learned = assistant.token_weights[0, rare]
    assert learned > 0.1
    for _ in range(200):
        batch = rng.choice(others, size=20, replace=False)
        assistant.update(batch, losses[batch])
    assert assistant.token_weights[0, rare] == pytest.approx(learned, rel=1e-6)


def test_the_assistant_follows_a_label_that_changes():
    """Forgetting accumulators keep the steps large enough to unlearn an old signal."""
    features = random_features(num_pairs=3000, vocab_size=200, seed=3)
    first, _ = planted_losses(features, marker_tokens=[10, 11, 12, 13, 14])
    second, informative_now = planted_losses(features, marker_tokens=[20, 21, 22, 23, 24], seed=1)
    rng = np.random.default_rng(0)

    def balanced_accuracy_after_change(grad_decay):
        assistant = Assistant(features, AssistantConfig(grad_decay=grad_decay))
        for losses, batches in ((first, 1500), (second, 160)):
            for _ in range(batches):
                batch = rng.choice(2000, size=100, replace=False)
                assistant.update(batch, losses[batch])
        test = np.arange(2000, 3000)
        return balanced_accuracy(assistant.predict(test) > 0.5, informative_now[test])

    forgetting, adagrad = balanced_accuracy_after_change(0.99), balanced_accuracy_after_change(1.0)
    assert forgetting > 0.78
    assert forgetting > adagrad + 0.05


def test_the_label_threshold_is_not_raised_by_the_selection():
    """Kept pairs are the hard ones; weighting each by 1 / p_keep keeps the mean over all pairs."""
    rng = np.random.default_rng(0)
    features = random_features(num_pairs=4000, seed=2)
    losses = rng.gamma(4.0, 0.5, size=4000)
    keep_prob = np.where(losses > np.median(losses), 1.0, 0.1)

    def running_mean(report_keep_prob):
        assistant = Assistant(features)
        for _ in range(300):
            batch = rng.choice(4000, size=200, replace=False)
            kept = batch[rng.random(200) < keep_prob[batch]]
            assistant.update(kept, losses[kept], keep_prob[kept] if report_keep_prob else None)
        return assistant.loss_mean

    assert running_mean(True) == pytest.approx(losses.mean(), rel=0.05)
    assert running_mean(False) > 1.2 * losses.mean()


def test_prediction_quality_separates_pairs_never_learned_from_and_restores():
    quality = PredictionQuality(6, decay=1.0)
    # First sight of pairs 0-3: scores rank the two positives above the two negatives.
    quality.add([0, 1, 2, 3], np.array([0.9, 0.8, 0.2, 0.1]), np.array([1, 1, 0, 0]))
    # Pairs 0-1 again (seen) with the ranking reversed; pairs 4-5 new, one tie in a bin.
    quality.add([0, 1, 4, 5], np.array([0.1, 0.9, 0.5, 0.5]), np.array([1, 0, 1, 0]))
    assert quality.auc(seen=True) == 0.0
    # New: positives 0.9, 0.8, 0.5 against negatives 0.2, 0.1, 0.5: 8 of 9 pairs ranked right, one tie.
    assert quality.auc(seen=False) == pytest.approx(8.5 / 9)
    restored = PredictionQuality(6)
    restored.load_state_dict(quality.state_dict())
    np.testing.assert_array_equal(restored.seen, [True] * 6)
    assert restored.auc(seen=False) == quality.auc(seen=False)
    assert np.isnan(PredictionQuality(3).auc(seen=True))


def test_a_kind_of_pair_gone_from_the_recent_batches_has_no_auc_instead_of_a_stale_one():
    quality = PredictionQuality(4, decay=0.5)
    quality.add([0, 1], np.array([0.9, 0.1]), np.array([1, 0]))
    assert quality.auc(seen=False) == 1.0
    for _ in range(8):  # a pass that only revisits: new pairs fall to 1/256 of the recent ones
        quality.add([0, 1], np.array([0.9, 0.1]), np.array([1, 0]))
    assert np.isnan(quality.auc(seen=False)) and quality.auc(seen=True) == 1.0


def test_the_assistant_measures_its_predictions_before_learning_from_a_batch():
    features = random_features(num_pairs=500, seed=3)
    losses, informative = planted_losses(features, marker_tokens=np.arange(10, 40))
    assistant = Assistant(features)
    for start in range(0, 500, 50):
        ids = np.arange(start, start + 50)
        assistant.update(ids, losses[ids])
    assert assistant.quality.seen.all() and np.isnan(assistant.quality.auc(seen=True))
    for start in range(0, 500, 50):
        ids = np.arange(start, start + 50)
        assistant.update(ids, losses[ids])
    # Marker tokens decide the loss: after one pass the Assistant ranks pairs it has learned from well.
    assert assistant.quality.auc(seen=True) > 0.8


def test_near_duplicate_groups_link_pairs_through_a_shared_source_or_target():
    def side(sentences):
        tokens = np.concatenate([np.array(s + [2]) for s in sentences]).astype(np.uint16)
        return CorpusSide(tokens, np.r_[0, np.cumsum([len(s) + 1 for s in sentences])])

    # Pairs 0 and 2 share a source, 1 and 3 a target, 0 and 5 a target; 4 stands alone; [5, 6] != [6, 5].
    source = side([[5, 6], [7], [5, 6], [8, 9], [6, 5], [11]])
    target = side([[20], [21], [22], [21], [23], [20]])
    groups = PairFeatures(source, target, vocab_size=30).near_duplicate_groups()
    np.testing.assert_array_equal(groups, [0, 1, 0, 1, 4, 0])
    assert len(set(source.sentence_hashes())) == 5


def translated_corpus(num_pairs=3000, misaligned=300, seed=0):
    """Source words 10-209 translate one to one into target words 210-409; the first ``misaligned`` pairs get
    the target of another pair."""
    rng = np.random.default_rng(seed)
    sentences = [rng.integers(10, 210, size=rng.integers(4, 12)) for _ in range(num_pairs)]
    targets = [s + 200 for s in sentences]
    for i in range(misaligned):
        targets[i] = targets[num_pairs - 1 - i]

    def side(rows):
        tokens = np.concatenate([np.r_[row, 2] for row in rows]).astype(np.uint16)
        return CorpusSide(tokens, np.r_[0, np.cumsum([len(row) + 1 for row in rows])])

    return PairFeatures(side(sentences), side(targets), vocab_size=420)


def test_pair_features_find_misaligned_pairs_without_any_loss():
    from fairseq_autoassist.assistant import bilingual

    features = translated_corpus()
    columns = features.bilingual()
    assert columns.shape == (3000, len(bilingual.NAMES)) and columns.dtype == np.float16
    lexical = columns[:, bilingual.NAMES.index("lexical_translation")].astype(np.float64)
    # Every misaligned pair scores below every aligned one but its 300 donors (which share its target).
    assert lexical[:300].max() < np.sort(lexical[300:])[300]
    duplicates = columns[:, bilingual.NAMES.index("duplicates")]
    assert duplicates[0] == duplicates[2999] > duplicates[1000]


def test_the_lexical_score_reads_only_each_sides_rarest_distinct_tokens():
    from fairseq_autoassist.assistant import bilingual

    document_frequency = np.array([0, 0, 90, 0, 0, 1, 30, 2, 5, 4])
    tokens, lengths = np.array([5, 6, 5, 2, 7, 8, 9, 6, 2, 9, 2]), np.array([5, 3, 3])
    content, counts = bilingual._rarest(tokens, lengths, document_frequency)
    # Repeats once, rarest first, at most CONTENT_TOKENS (8) of each: </s> (2, the most frequent) stays last.
    np.testing.assert_array_equal(counts, [4, 3, 2])
    np.testing.assert_array_equal(content, [5, 7, 6, 2, 9, 8, 6, 9, 2])
    long_sentence = np.arange(3, 10).repeat(2)
    assert bilingual._rarest(np.r_[long_sentence, 2, 4], np.array([16]), document_frequency)[1][0] == 8


def test_pair_features_match_a_pair_by_pair_computation():
    """The vectorized columns against a plain loop over pairs (before standardization)."""
    from fairseq_autoassist.assistant import bilingual

    features = translated_corpus(num_pairs=400, misaligned=40, seed=2)
    sides = [[features.sides[k].gather([i])[0] for i in range(400)] for k in (0, 1)]
    src_df, tgt_df = (df.astype(np.float64) for df in features.document_frequencies)
    rarest = [[sorted(set(sentence), key=lambda t: (df[t], t))[:bilingual.CONTENT_TOKENS] for sentence in side]
              for side, df in zip(sides, features.document_frequencies)]
    counts = {}  # co-occurrences of the content tokens
    for source, target in zip(*rarest):
        for s in source:
            for t in target:
                counts[s, t] = counts.get((s, t), 0) + 1
    expected = np.empty((400, 2))
    for i, (source, target) in enumerate(zip(*sides)):
        expected[i, 0] = np.mean([t in set(source) for t in target])
        best = []
        for t in rarest[1][i]:
            # A combination met in one pair only is no evidence: 0, not its PMI.
            best.append(max(np.log((counts[s, t] - 1) / 400 / ((src_df[s] + 1) / 401 * (tgt_df[t] + 1) / 401))
                            if counts.get((s, t), 0) > 1 else 0.0 for s in rarest[0][i]))
        expected[i, 1] = np.mean(best)
    columns = features.bilingual().astype(np.float64)[:, [bilingual.NAMES.index("copied_share"),
                                                          bilingual.NAMES.index("lexical_translation")]]
    standardized = (expected - expected.mean(axis=0)) / expected.std(axis=0)
    np.testing.assert_allclose(columns, standardized, atol=0.01)


def test_the_assistant_learns_from_pair_features_and_refuses_a_state_without_them():
    features = translated_corpus(seed=1)
    assistant = Assistant(features, AssistantConfig(pair_features=True))
    losses = np.where(np.arange(3000) < 300, 6.0, 2.0)  # misaligned pairs: high loss
    order = np.random.default_rng(0).permutation(3000)
    for start in range(0, 3000, 100):
        ids = order[start:start + 100]
        assistant.update(ids, losses[ids])
    predicted = assistant.predict()
    assert predicted[:300].mean() > 0.6 > predicted[300:].mean()
    assert assistant.quality.auc(seen=False) > 0.9  # predictions before each batch: pairs it never saw
    with pytest.raises(ValueError, match="--autoassist-pair-features differs"):
        Assistant(features).load_state_dict(assistant.state_dict())
    restored = Assistant(features, AssistantConfig(pair_features=True))
    restored.load_state_dict(assistant.state_dict())
    np.testing.assert_array_equal(restored.predict(), predicted)
