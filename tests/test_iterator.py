"""The fairseq iterator glue: each batch reaches the training step with the keep probability its own pass drew for
each of its pairs, through fairseq's collater and a data loader worker that runs ahead."""

import functools

import numpy as np
import pytest
import torch

from .synthetic import padded_token_budget_batches

NUM_PAIRS = 120


def expected_keep_prob(ids, pass_index):
    return ((np.asarray(ids) % 7 + 1) / 8 / pass_index).astype(np.float32)


def keep_every_pair(indices, epoch, pass_index, chunk):
    """Keeps every pair but reports a probability of its own per pair and pass (as importance weights would use)."""
    return indices, expected_keep_prob(indices, pass_index)


@pytest.mark.parametrize("num_workers", [0, 1])
def test_each_batch_carries_the_keep_probabilities_of_its_own_pass(num_workers):
    from fairseq.data import Dictionary, LanguagePairDataset

    from fairseq_autoassist.data.batch_stream import ShrinkingBatchStream
    from fairseq_autoassist.data.iterator import (HOST_SIDE, KeptPairsDataset, ShrinkingEpochBatchIterator,
                                                  collate_with_host_side)

    dictionary = Dictionary()
    for word in "abcdefgh":
        dictionary.add_symbol(word)
    rng = np.random.default_rng(0)
    source = [torch.randint(4, len(dictionary), (int(n),)) for n in rng.integers(2, 12, NUM_PAIRS)]
    target = [torch.randint(4, len(dictionary), (int(n),)) for n in rng.integers(2, 12, NUM_PAIRS)]
    dataset = LanguagePairDataset(source, np.array([len(s) for s in source]), dictionary, target,
                                  np.array([len(t) for t in target]), dictionary, shuffle=False)
    sizes = np.maximum(dataset.src_sizes, dataset.tgt_sizes)
    stream = ShrinkingBatchStream(np.arange(NUM_PAIRS), dataset.tgt_sizes, 40, 1,
                                  functools.partial(padded_token_budget_batches, sizes=sizes, max_tokens=60),
                                  keep_every_pair)
    iterator = ShrinkingEpochBatchIterator(
        dataset=KeptPairsDataset(dataset), stream=stream, dummy_batch=[(0, 1.0)], seed=1,
        collate_fn=functools.partial(collate_with_host_side, dataset.collater, dictionary.pad()),
        num_shards=1, shard_id=0, num_workers=num_workers, epoch=1)
    for epoch in (1, 2):  # keeping every pair, epoch e is pass e
        seen = []
        for batch in iterator.next_epoch_itr(shuffle=True):
            host = batch[HOST_SIDE]
            np.testing.assert_array_equal(host["ids"], batch["id"].numpy())  # the collater's order
            np.testing.assert_allclose(host["keep_prob"], expected_keep_prob(host["ids"], epoch))
            seen.extend(host["ids"].tolist())
        assert sorted(seen) == list(range(NUM_PAIRS))
