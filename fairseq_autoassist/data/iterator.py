"""fairseq glue for the shrinking batch stream: corpus access and the epoch batch iterator."""

import logging
import math

import numpy as np
import torch
from fairseq.data import iterators
from fairseq.data.indexed_dataset import MMapIndexedDataset

from ..assistant import CorpusSide

logger = logging.getLogger(__name__)


def corpus_side(indexed_dataset):
    """Flat token ids and offsets of a fairseq indexed dataset, without copying when memory-mapped."""
    if isinstance(indexed_dataset, MMapIndexedDataset):
        index = indexed_dataset._index
        itemsize = np.dtype(index.dtype).itemsize
        tokens = np.frombuffer(indexed_dataset._bin_buffer, dtype=index.dtype)
        offsets = np.empty(len(index) + 1, dtype=np.int64)
        offsets[:-1] = index._pointers // itemsize
        offsets[-1] = offsets[-2] + index.sizes[-1] if len(index) else 0
        return CorpusSide(tokens, offsets, owner=indexed_dataset)
    logger.warning(
        "AutoAssist: %s is not memory-mapped (--dataset-impl mmap); copying its tokens for the Assistant",
        type(indexed_dataset).__name__,
    )
    sentences = [np.asarray(indexed_dataset[i], dtype=np.int64) for i in range(len(indexed_dataset))]
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sentences])
    return CorpusSide(np.concatenate(sentences) if sentences else np.zeros(0, np.int64), offsets)


class _PlannedLengthCountingIterator(iterators.CountingIterator):
    """A CountingIterator whose length is the stream's plan, resolved on first use.

    Resolving lazily matters on resume: fairseq restores the task's checkpointed state only
    after it has rebuilt the iterator, and the plan must come from the restored state.
    """

    def __init__(self, iterable, start, length_fn):
        self._length_fn = length_fn
        super().__init__(iterable, start=start, total=0)

    @property
    def total(self):
        return self._length_fn()

    @total.setter
    def total(self, _value):
        """CountingIterator.__init__ assigns a total; the plan decides it instead."""


class _EpochBatchSampler:
    """The batch sampler the DataLoader pulls from: this rank's share of one epoch of the stream.

    Rank ``shard_id`` of ``num_shards`` takes global batches ``shard_id, shard_id + num_shards, ...``
    of the identical global list, padded with empty batches (fairseq turns them into dummy batches).
    """

    def __init__(self, stream, epoch, offset, num_shards, shard_id):
        self.stream = stream
        self.epoch = epoch
        self.offset = offset
        self.num_shards = num_shards
        self.shard_id = shard_id

    def batches_per_shard(self):
        return math.ceil(self.stream.plan_epoch(self.epoch) / self.num_shards)

    def __len__(self):
        return self.batches_per_shard() - self.offset

    def __iter__(self):
        per_shard = self.batches_per_shard()
        global_batches = self.stream.iterate_epoch(self.epoch, start=self.offset * self.num_shards)
        for _ in range(self.offset, per_shard):
            group = [next(global_batches, None) for _ in range(self.num_shards)]
            batch = group[self.shard_id]
            yield [] if batch is None else batch.tolist()


class ShrinkingEpochBatchIterator(iterators.EpochBatchIterator):
    """An EpochBatchIterator whose batches come from a ``ShrinkingBatchStream``.

    ``dummy_batch`` (any valid batch) serves fairseq's dummy/OOM-recovery batch. Batches are
    pulled lazily, and a chunk's selection may be a collective under distributed training, so
    pass ``buffer_size=0``: a prefetch thread would select chunks outside the training thread.
    """

    def __init__(self, dataset, collate_fn, stream, dummy_batch, seed, num_shards, shard_id,
                 num_workers, epoch, buffer_size):
        super().__init__(
            dataset=dataset,
            collate_fn=collate_fn,
            batch_sampler=[dummy_batch],
            seed=seed,
            num_shards=num_shards,
            shard_id=shard_id,
            num_workers=num_workers,
            epoch=epoch,
            buffer_size=buffer_size,
            reuse_dataloader=False,
            persistent_workers=False,
        )
        self.stream = stream

    def __len__(self):
        return math.ceil(self.stream.plan_epoch(self.epoch) / float(self.num_shards))

    def consumed_global_batches(self):
        return self.iterations_in_epoch * self.num_shards

    def _get_iterator_for_epoch(self, epoch, shuffle, fix_batches_to_gpus=False, offset=0):
        sampler = _EpochBatchSampler(self.stream, epoch, offset, self.num_shards, self.shard_id)
        itr = torch.utils.data.DataLoader(
            self.dataset,
            collate_fn=self.collate_fn,
            batch_sampler=sampler,
            num_workers=self.num_workers,
            timeout=self.timeout,
            pin_memory=True,
        )
        if self.buffer_size > 0:
            itr = iterators.BufferedIterator(self.buffer_size, itr)
        return _PlannedLengthCountingIterator(itr, start=offset, length_fn=sampler.batches_per_shard)
