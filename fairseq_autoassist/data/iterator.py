"""fairseq glue for the shrinking batch stream: corpus access, the training order and batching, and
the epoch batch iterator."""

import logging
import math
import os

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, Dictionary, data_utils, iterators
from fairseq.data.indexed_dataset import MMapIndexedDataset

from ..assistant import CorpusSide, PairFeatures
from ..errors import AutoAssistConfigError
from .packing import packing_key

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
        return CorpusSide(tokens, offsets, owner=indexed_dataset, lengths=index.sizes)
    logger.warning(
        "AutoAssist: %s is not memory-mapped (--dataset-impl mmap); copying its tokens for the Assistant",
        type(indexed_dataset).__name__,
    )
    sentences = [np.asarray(indexed_dataset[i], dtype=np.int64) for i in range(len(indexed_dataset))]
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sentences])
    return CorpusSide(np.concatenate(sentences) if sentences else np.zeros(0, np.int64), offsets)


def load_replay_features(data, loss_log, source_lang, target_lang):
    """The training split's features for replaying ``loss_log`` (``--autoassist-loss-log``) offline, or an
    error naming what is missing (the replay scripts share it)."""
    if not os.path.isfile(loss_log):
        raise AutoAssistConfigError(f"{loss_log} does not exist; record one with --autoassist-loss-log FILE")
    return load_pair_features(data, source_lang, target_lang)


def load_pair_features(data, source_lang, target_lang, split="train"):
    """The Assistant's features of a prepared data-bin split."""
    dictionary = Dictionary.load(os.path.join(data, f"dict.{source_lang}.txt"))
    sides = []
    for lang in (source_lang, target_lang):
        prefix = os.path.join(data, f"{split}.{source_lang}-{target_lang}.{lang}")
        dataset = data_utils.load_indexed_dataset(prefix, dictionary)
        if dataset is None:
            raise AutoAssistConfigError(f"{prefix}.idx is missing; pass a prepared data-bin folder with --data")
        sides.append(corpus_side(dataset))
    return PairFeatures(*sides, vocab_size=len(dictionary))


def training_order(task, dataset, seed, epoch, max_positions, ignore_invalid_inputs):
    """The training pairs in fairseq's order (as the stock task would batch them), after its size
    filter; refuses a split that keeps none."""
    dataset.set_epoch(epoch)
    with data_utils.numpy_seed(seed + 1):
        ordered = dataset.ordered_indices()
    if max_positions is not None:
        ordered = task.filter_indices_by_size(ordered, dataset, max_positions, ignore_invalid_inputs)
    ordered = np.asarray(ordered, dtype=np.int64)
    if len(ordered) == 0:
        raise AutoAssistConfigError(
            f"the training split '{task.cfg.train_subset}' has no pairs within "
            "--max-source-positions/--max-target-positions"
        )
    return ordered


def packing_order(dataset, ordered, packing, seed):
    """Every dataset index's sort key under ``packing`` (``data.packing``), ``ordered`` being fairseq's order."""
    rank = np.empty(len(dataset), dtype=np.int64)
    rank[ordered] = np.arange(len(ordered))
    return packing_key(packing, dataset.src_sizes, dataset.tgt_sizes, rank, seed)


def token_budget_batcher(dataset, max_tokens, max_sentences, required_batch_size_multiple, batching_key):
    """``make_batches(indices) -> list of index arrays``: fairseq's ``batch_by_size`` (same token budget
    and bucketing as the stock task) over ``indices`` sorted by ``batching_key`` (``packing_order``; None: in the
    order given, as the authors' released code cuts its batches).

    With ``padded-length`` a chunk, which holds only a sample of each length, packs as full as the stock
    task's whole-corpus batches; with ``source-target`` over the whole pass (``--autoassist-refresh-updates 0``)
    the batches are exactly the stock task's.
    """
    def make_batches(indices):
        indices = np.asarray(indices, dtype=np.int64)
        by_length = indices if batching_key is None else indices[np.argsort(batching_key[indices], kind="stable")]
        batches = dataset.batch_by_size(
            by_length, max_tokens=max_tokens, max_sentences=max_sentences,
            required_batch_size_multiple=required_batch_size_multiple,
        )
        # fairseq drops a final batch whose size is not a multiple of --required-batch-size-multiple
        # (fairseq issue 5036); once per chunk that would lose many pairs, so the remainder becomes
        # the last batch, which the stream carries into the next chunk.
        batched = sum(len(batch) for batch in batches)
        if batched < len(by_length):
            batches.append(by_length[batched:])
        return batches

    return make_batches


def pairs_per_chunk(refresh_batches, num_pairs, num_full_batches):
    """Candidates per selection chunk: about ``refresh_batches`` full global batches' worth (the refresh
    interval in updates times --update-freq times the number of ranks), or the whole pass when it is 0."""
    if refresh_batches == 0:
        return num_pairs
    return min(num_pairs, max(1, round(refresh_batches * (num_pairs / max(num_full_batches, 1)))))


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


# The key of a training batch's host-side copies: its pair ids, target lengths and the probability each pair was kept
# with, as NumPy arrays, which fairseq's move of the batch to the GPU leaves on the host (it moves tensors only), so a
# training step reads them without waiting for the device.
HOST_SIDE = "autoassist_host"
_KEEP_PROB = "autoassist_keep_prob"


class KeptPairsDataset(BaseWrapperDataset):
    """The training set addressed by ``(index, keep probability)``, as the shrinking iterator's batches list their
    pairs; each item carries its probability to ``collate_with_host_side``. A plain index means probability 1."""

    def __getitem__(self, key):
        index, keep_prob = key if isinstance(key, tuple) else (key, 1.0)
        return {**self.dataset[index], _KEEP_PROB: keep_prob}


def collate_with_host_side(collater, pad, samples):
    """``collater(samples)`` with ``HOST_SIDE`` (``add_host_side``), the keep probabilities of ``KeptPairsDataset``
    items."""
    batch = collater(samples)
    if batch:
        add_host_side(batch, pad, {int(sample["id"]): sample[_KEEP_PROB] for sample in samples})
    return batch


def add_host_side(batch, pad, keep_prob_by_id=None):
    """Adds ``HOST_SIDE`` to a collated batch still on the host: its ``ids``, ``target_lengths`` (non-pad tokens) and
    ``keep_prob`` (from ``keep_prob_by_id``; 1 without it), in the collated order."""
    # Copies, not views: a data loader worker moves the batch's tensors to shared memory to hand them over,
    # which would leave a view pointing at freed memory.
    ids = batch["id"].numpy().copy()
    keep_prob = np.ones(len(ids), dtype=np.float32)
    if keep_prob_by_id is not None:
        keep_prob[:] = [keep_prob_by_id[i] for i in ids.tolist()]
    batch[HOST_SIDE] = {"ids": ids, "target_lengths": batch["target"].ne(pad).sum(1).numpy().copy(),
                        "keep_prob": keep_prob}


def _started_at_the_first_batch(data_loader):
    """The batches of ``data_loader``, whose iterator (and with ``--num-workers`` its worker processes, which
    prefetch batch lists from the stream as soon as they start) is created only when the first batch is asked for.

    fairseq builds a resumed epoch's iterator before it restores the task's checkpointed state; started there, the
    workers would prefetch the first batches of a fresh stream and train them again after the restore."""
    yield from data_loader


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
            if group[self.shard_id] is None:
                yield []
            else:
                batch, keep_prob = group[self.shard_id]
                yield list(zip(batch.tolist(), keep_prob.tolist()))


class ShrinkingEpochBatchIterator(iterators.EpochBatchIterator):
    """An EpochBatchIterator whose batches come from a ``ShrinkingBatchStream``.

    ``dataset`` is a ``KeptPairsDataset``; ``dummy_batch`` (any valid batch) serves fairseq's dummy/OOM-recovery
    batch. Batches are
    pulled lazily and never prefetched by a thread (no ``--data-buffer-size``): a chunk's selection
    must run in the training thread, where its broadcasts stay in step with the other ranks'
    collectives and ``--autoassist-sync`` runs are reproducible.
    """

    def __init__(self, dataset, collate_fn, stream, dummy_batch, seed, num_shards, shard_id, num_workers, epoch):
        super().__init__(
            dataset=dataset,
            collate_fn=collate_fn,
            batch_sampler=[dummy_batch],
            seed=seed,
            num_shards=num_shards,
            shard_id=shard_id,
            num_workers=num_workers,
            epoch=epoch,
            buffer_size=0,
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
        return _PlannedLengthCountingIterator(_started_at_the_first_batch(itr), start=offset,
                                              length_fn=sampler.batches_per_shard)
