"""The shrinking batch stream: selection refreshed every chunk, exact epoch lengths.

fairseq needs to know an epoch's number of batches when the epoch starts (progress bars,
``CountingIterator``), but AutoAssist wants each pair's keep decision made with the Assistant's
*current* parameters, at most about ``refresh_updates`` updates old, also when one pass over the
corpus is thousands of updates. The stream reconciles the two:

* Pass ``p`` visits every candidate pair once, in a permutation drawn from ``(seed, p)``, cut
  into chunks of ``chunk_pairs`` pairs (about ``refresh_updates`` full batches each).
* When the training loop reaches a chunk, the chunk is scored with the current parameters, its
  keep mask is drawn from ``(seed, p, chunk)`` and its kept pairs are batched with fairseq's
  length bucketing and token budget (``make_batches``), then shuffled within the chunk.
* The last batch of a chunk's length-sorted batches is the partly filled remainder (its longest
  sentences). It is carried into the next chunk and batched with its pairs, so every batch is full
  except at most one per pass (the last chunk's remainder), as in the stock task. A remainder
  trained as a batch of its own is one Adam step on a few long sentences normalized by their own
  few tokens; on Multi30K at 2,048 tokens it was about 3% of all updates, most of them 2-16% full.
* At each epoch start, the epoch's length is *planned*: the batches already generated but not
  yet trained on, plus the batches the rest of the current pass would give with the current
  parameters and the same random draws. The epoch then yields exactly that many batches from
  the stream. Because fresher parameters keep slightly more or fewer pairs, an epoch may end a
  few batches before or after its pass does; the stream simply continues in the next epoch, so
  no kept pair is lost and none is visited twice within a pass.

Calling contract: ``plan_epoch(epoch)`` once per epoch before ``iterate_epoch(epoch)``; the
stream is not thread-safe (fairseq pulls batches from the main process). ``state_dict`` takes
the number of batches the trainer has *consumed* in the current epoch, so a checkpoint written
while a data loader prefetches still resumes at the right batch.
"""

import collections
import hashlib
import logging

import numpy as np

from ..selection.sampling import BATCH_ORDER, PASS_ORDER, local_generator

logger = logging.getLogger(__name__)

_EMPTY_CARRY = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))


def chain_digest(digest, batch):
    """``digest`` (a hex SHA-1, "" to begin) chained with one more batch's pair ids: a chain saved in a checkpoint
    continues exactly where it stopped."""
    return hashlib.sha1(digest.encode() + np.ascontiguousarray(batch, dtype=np.int64).tobytes()).hexdigest()


class ShrinkingBatchStream:
    """
    Args:
        candidates: dataset indices eligible for training (after size filtering).
        target_sizes: target length of every dataset index (for the kept-token statistics).
        chunk_pairs: candidates per chunk; ``len(candidates)`` for one selection per pass.
        seed: the training seed.
        make_batches: ``f(kept_indices) -> list of index arrays`` under the token budget.
        select: ``f(indices, epoch, pass_index, chunk) -> (kept_indices, keep_prob_of_kept or None)``
            (None: every candidate was kept with probability 1),
            drawing the keep mask from ``(seed, pass_index, chunk)`` so that planning and
            generation of a chunk use the same random numbers.
        min_batches_per_epoch: never plan fewer batches (the number of ranks, so that every
            rank trains on at least one real batch however little is kept).
        flagged: optional boolean per dataset index (the corrupted pairs of a noisy corpus); the
            epoch statistics then also count the flagged candidates and kept pairs.
        on_epoch_complete: optional ``f(epoch, num_batches, digest)`` called as the last batch of
            an epoch is handed out; ``digest`` is a SHA-1 of the epoch's batches in order (a
            check that distributed ranks built the same epoch).
        visiting_order: the batching of the authors' released code: the first pass visits ``candidates`` in their
            order (fairseq's, short to long), later passes in the seeded shuffle, and a chunk's batches are trained
            in the order ``make_batches`` cut them (which then must not sort: lengths mix), not shuffled.
    """

    def __init__(self, candidates, target_sizes, chunk_pairs, seed, make_batches, select, on_epoch_complete=None,
                 min_batches_per_epoch=1, flagged=None, visiting_order=False):
        self.candidates = np.asarray(candidates, dtype=np.int64)
        self.target_sizes = target_sizes
        if len(self.candidates) == 0:
            raise ValueError("no training pairs are left after size filtering")
        self.chunk_pairs = max(1, int(chunk_pairs))
        self.seed = int(seed)
        self.make_batches = make_batches
        self.select = select
        self.pass_index = 1
        self.next_chunk = 0
        self.pending = collections.deque()
        self.epoch = None
        self.planned = None
        self._yielded_this_epoch = []
        self._yielded_before_list = 0
        self.carry = _EMPTY_CARRY
        # Each pooled pair's keep probability while a chunk is batched (the batches carry their own copies).
        self._scratch_keep_prob = np.ones(int(self.candidates.max()) + 1, dtype=np.float32)
        self.epoch_stats = EpochSelectionStats()
        self.previous_epoch_stats = self.epoch_stats
        self.on_epoch_complete = on_epoch_complete
        self.min_batches_per_epoch = max(1, int(min_batches_per_epoch))
        self.flagged = flagged
        self._epoch_digest = self._digest_before_list = ""
        self._permutations = {}
        self.visiting_order = visiting_order

    # ------------------------------------------------------------------ chunks
    @property
    def chunks_per_pass(self):
        return -(-len(self.candidates) // self.chunk_pairs)

    def _pass_order(self, pass_index):
        if pass_index not in self._permutations:
            # At most two passes are live at once: the current one and, at its end, the next.
            for stale in [p for p in self._permutations if p < pass_index - 1]:
                del self._permutations[stale]
            if self.visiting_order and pass_index == 1:
                self._permutations[pass_index] = np.arange(len(self.candidates))
            else:
                self._permutations[pass_index] = local_generator(
                    self.seed, pass_index, 0, purpose=PASS_ORDER).permutation(len(self.candidates))
        return self._permutations[pass_index]

    def _chunk_indices(self, pass_index, chunk):
        order = self._pass_order(pass_index)
        start = chunk * self.chunk_pairs
        return self.candidates[order[start : start + self.chunk_pairs]]

    def generate_chunk(self, epoch, pass_index, chunk, carry, select=True):
        """The chunk's candidates, its kept pairs, its shuffled ``(batch, keep_prob)`` list and the
        ``(indices, keep_prob)`` remainder carried to the next chunk (empty after a pass's last chunk).

        ``carry`` is the previous chunk's remainder, batched together with this chunk's kept pairs.
        """
        indices = self._chunk_indices(pass_index, chunk)
        kept, keep_prob = self.select(indices, epoch, pass_index, chunk) if select else (indices, None)
        if keep_prob is None:
            keep_prob = np.ones(len(kept), dtype=np.float32)
        carried, carried_keep_prob = carry
        pool = np.concatenate([carried, kept]).astype(np.int64)
        self._scratch_keep_prob[pool] = np.concatenate([carried_keep_prob, keep_prob])
        batches = [np.asarray(batch, dtype=np.int64) for batch in self.make_batches(pool)] if len(pool) else []
        next_carry = _EMPTY_CARRY
        if batches and chunk < self.chunks_per_pass - 1:
            remainder = batches.pop()
            next_carry = (remainder, self._scratch_keep_prob[remainder].copy())
        order = (np.arange(len(batches)) if self.visiting_order
                 else local_generator(self.seed, pass_index, chunk, purpose=BATCH_ORDER).permutation(len(batches)))
        out = [(batches[position], self._scratch_keep_prob[batches[position]].copy()) for position in order]
        return indices, kept, out, next_carry

    def _advance_cursor(self):
        self.next_chunk += 1
        if self.next_chunk >= self.chunks_per_pass:
            self.pass_index += 1
            self.next_chunk = 0

    # ------------------------------------------------------------------ epochs
    def plan_epoch(self, epoch):
        """Number of batches of ``epoch``: pending ones plus the rest of the current pass."""
        if self.epoch == epoch and self.planned is not None:
            return self.planned
        self.epoch = epoch
        self._yielded_this_epoch = []
        self._yielded_before_list = 0
        self._epoch_digest = self._digest_before_list = ""
        self.previous_epoch_stats = self.epoch_stats
        self.epoch_stats = EpochSelectionStats()
        total, carry = len(self.pending), self.carry
        for chunk in range(self.next_chunk, self.chunks_per_pass):
            _, _, batches, carry = self.generate_chunk(epoch, self.pass_index, chunk, carry)
            total += len(batches)
        # Never starve: however little the policy keeps, plan enough batches for every rank;
        # iterate_epoch then falls back to unfiltered chunks if selection keeps nothing.
        self.planned = max(total, self.min_batches_per_epoch)
        return self.planned

    def iterate_epoch(self, epoch, start=0):
        """Yields the batches ``start .. planned - 1`` of ``epoch``, each as ``(pair ids, the probability each pair
        was kept with)``: the probabilities travel with the batch, so that a loader running ahead, or a pair that
        recurs across a pass boundary, never mixes two passes' probabilities."""
        planned = self.plan_epoch(epoch)
        for position in range(start, planned):
            empty_chunks = 0
            while not self.pending:
                # Never starve: after a whole pass of chunks that kept nothing, take one unfiltered.
                select = empty_chunks < self.chunks_per_pass
                indices, kept, batches, self.carry = self.generate_chunk(
                    epoch, self.pass_index, self.next_chunk, self.carry, select=select
                )
                self.epoch_stats.add_chunk(self.target_sizes[indices], self.target_sizes[kept],
                                           *self._flagged_counts(indices, kept))
                self._advance_cursor()
                self.pending.extend(batches)
                empty_chunks += 1
            batch, keep_prob = self.pending.popleft()
            self._epoch_digest = chain_digest(self._epoch_digest, batch)
            self._yielded_this_epoch.append((batch, keep_prob, self._epoch_digest))
            if self.on_epoch_complete is not None and position == planned - 1:
                self.on_epoch_complete(epoch, planned, self._epoch_digest)
            yield batch, keep_prob

    def _flagged_counts(self, indices, kept):
        if self.flagged is None:
            return 0, 0
        return int(np.count_nonzero(self.flagged[indices])), int(np.count_nonzero(self.flagged[kept]))

    def consumed_batches(self, consumed_in_epoch):
        """``(position in the epoch, batch)`` of the batches handed out since the epoch began or the stream was
        restored, up to ``consumed_in_epoch`` batches of the epoch."""
        start = self._yielded_before_list
        consumed = self._yielded_this_epoch[: consumed_in_epoch - start]
        return [(start + i, batch) for i, (batch, _, _) in enumerate(consumed)]

    @property
    def restored_at(self):
        """The position in the epoch where the list of ``consumed_batches`` starts (0 unless restored mid-epoch)."""
        return self._yielded_before_list

    # ------------------------------------------------------------------ state
    @property
    def latest_stats(self):
        """This epoch's selection statistics, or the previous epoch's before its first chunk."""
        return self.epoch_stats if self.epoch_stats.candidate_pairs else self.previous_epoch_stats

    def state_dict(self, consumed_in_epoch):
        """The stream at the point where ``consumed_in_epoch`` batches were trained on."""
        # The last step of an epoch of fewer batches than ranks x steps gave some ranks a dummy batch: no position.
        consumed_since = min(consumed_in_epoch - self._yielded_before_list, len(self._yielded_this_epoch))
        unconsumed = [(batch, keep_prob) for batch, keep_prob, _ in self._yielded_this_epoch[consumed_since:]]
        pending = unconsumed + list(self.pending)
        return {
            "epoch": self.epoch,
            "planned": self.planned,
            "pass_index": self.pass_index,
            "next_chunk": self.next_chunk,
            "pending_batches": [b.tolist() for b, _ in pending],
            "pending_keep_prob": [p.tolist() for _, p in pending],
            "carry": self.carry[0].tolist(),
            "carry_keep_prob": self.carry[1].tolist(),
            "chunk_pairs": self.chunk_pairs,
            "consumed_in_epoch": consumed_in_epoch,
            # The selection digest of the epoch's batches up to that point, which a resumed run continues.
            "epoch_digest": self._yielded_this_epoch[consumed_since - 1][2] if consumed_since > 0
            else self._digest_before_list,
            "epoch_stats": self.epoch_stats.state_dict(),
        }

    def load_state_dict(self, state):
        if int(state["chunk_pairs"]) != self.chunk_pairs:
            logger.warning(
                "AutoAssist: chunk size changed from %d to %d pairs; the stream restarts its pass",
                state["chunk_pairs"],
                self.chunk_pairs,
            )
            self.pass_index, self.next_chunk = int(state["pass_index"]) + 1, 0
            self.carry = _EMPTY_CARRY
        else:
            self.pass_index = int(state["pass_index"])
            self.next_chunk = int(state["next_chunk"])
            self.carry = (np.asarray(state["carry"], dtype=np.int64),
                          np.asarray(state["carry_keep_prob"], dtype=np.float32))
        self.epoch = state["epoch"]
        self.planned = state["planned"]
        self.pending = collections.deque(
            (np.asarray(b, dtype=np.int64), np.asarray(p, dtype=np.float32))
            for b, p in zip(state["pending_batches"], state["pending_keep_prob"])
        )
        self._yielded_this_epoch = []
        # Batches yielded after the restore are listed from this position of the epoch on.
        self._yielded_before_list = int(state.get("consumed_in_epoch", 0))
        self._epoch_digest = self._digest_before_list = state.get("epoch_digest", "")  # absent before 2026-12-07
        self.epoch_stats = EpochSelectionStats(**(state.get("epoch_stats") or {}))


class EpochSelectionStats:
    """Candidate and kept pairs and target tokens of the chunks generated in the current epoch, and
    how many of the candidates and kept pairs are flagged (corrupted pairs of a noisy corpus)."""

    def __init__(self, candidate_pairs=0, kept_pairs=0, candidate_tokens=0, kept_tokens=0, candidate_flagged=0,
                 kept_flagged=0):
        self.candidate_pairs = int(candidate_pairs)
        self.kept_pairs = int(kept_pairs)
        self.candidate_tokens = int(candidate_tokens)
        self.kept_tokens = int(kept_tokens)
        self.candidate_flagged = int(candidate_flagged)
        self.kept_flagged = int(kept_flagged)

    def add_chunk(self, candidate_target_sizes, kept_target_sizes, candidate_flagged=0, kept_flagged=0):
        self.candidate_pairs += len(candidate_target_sizes)
        self.kept_pairs += len(kept_target_sizes)
        self.candidate_tokens += int(np.sum(candidate_target_sizes))
        self.kept_tokens += int(np.sum(kept_target_sizes))
        self.candidate_flagged += candidate_flagged
        self.kept_flagged += kept_flagged

    def state_dict(self):
        return dict(vars(self))
