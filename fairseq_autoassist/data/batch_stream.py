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

from ..selection import local_generator

logger = logging.getLogger(__name__)


class ShrinkingBatchStream:
    """
    Args:
        candidates: dataset indices eligible for training (after size filtering).
        target_sizes: target length of every dataset index (for the kept-token statistics).
        chunk_pairs: candidates per chunk; ``len(candidates)`` for one selection per pass.
        seed: the training seed.
        make_batches: ``f(kept_indices) -> list of index arrays`` under the token budget.
        select: ``f(indices, epoch, pass_index, chunk) -> (kept_indices, weights_of_kept or None)``,
            drawing the keep mask from ``(seed, pass_index, chunk)`` so that planning and
            generation of a chunk use the same random numbers.
        min_batches_per_epoch: never plan fewer batches (the number of ranks, so that every
            rank trains on at least one real batch however little is kept).
        on_epoch_complete: optional ``f(epoch, num_batches, digest)`` called as the last batch of
            an epoch is handed out; ``digest`` is a SHA-1 of the epoch's batches in order (a
            check that distributed ranks built the same epoch).
    """

    def __init__(self, candidates, target_sizes, chunk_pairs, seed, make_batches, select, on_epoch_complete=None,
                 min_batches_per_epoch=1):
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
        self.pair_weights = np.ones(int(self.candidates.max()) + 1, dtype=np.float32)
        self._scratch_weights = np.ones_like(self.pair_weights)
        self.epoch_stats = EpochSelectionStats()
        self.previous_epoch_stats = self.epoch_stats
        self.on_epoch_complete = on_epoch_complete
        self.min_batches_per_epoch = max(1, int(min_batches_per_epoch))
        self._epoch_digest = hashlib.sha1()
        self._permutations = {}

    # ------------------------------------------------------------------ chunks
    @property
    def chunks_per_pass(self):
        return -(-len(self.candidates) // self.chunk_pairs)

    def _pass_order(self, pass_index):
        if pass_index not in self._permutations:
            # At most two passes are live at once: the current one and, at its end, the next.
            for stale in [p for p in self._permutations if p < pass_index - 1]:
                del self._permutations[stale]
            self._permutations[pass_index] = local_generator(self.seed, pass_index, 0).permutation(
                len(self.candidates)
            )
        return self._permutations[pass_index]

    def _chunk_indices(self, pass_index, chunk):
        order = self._pass_order(pass_index)
        start = chunk * self.chunk_pairs
        return self.candidates[order[start : start + self.chunk_pairs]]

    def generate_chunk(self, epoch, pass_index, chunk, select=True):
        """The chunk's candidates, kept pairs and shuffled ``(batch, weights)`` list."""
        indices = self._chunk_indices(pass_index, chunk)
        kept, weights = self.select(indices, epoch, pass_index, chunk) if select else (indices, None)
        batches = self.make_batches(kept) if len(kept) else []
        self._scratch_weights[kept] = 1.0 if weights is None else weights
        shuffled = local_generator(self.seed, pass_index, chunk + 1).permutation(len(batches))
        out = []
        for position in shuffled:
            batch = np.asarray(batches[position], dtype=np.int64)
            out.append((batch, self._scratch_weights[batch].copy()))
        return indices, kept, out

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
        self._epoch_digest = hashlib.sha1()
        self.previous_epoch_stats = self.epoch_stats
        self.epoch_stats = EpochSelectionStats()
        total = len(self.pending)
        for chunk in range(self.next_chunk, self.chunks_per_pass):
            total += len(self.generate_chunk(epoch, self.pass_index, chunk)[2])
        # Never starve: however little the policy keeps, plan enough batches for every rank;
        # iterate_epoch then falls back to unfiltered chunks if selection keeps nothing.
        self.planned = max(total, self.min_batches_per_epoch)
        return self.planned

    def iterate_epoch(self, epoch, start=0):
        """Yields ``(indices, weights)`` for batches ``start .. planned - 1`` of ``epoch``."""
        planned = self.plan_epoch(epoch)
        for position in range(start, planned):
            empty_chunks = 0
            while not self.pending:
                # Never starve: after a whole pass of chunks that kept nothing, take one unfiltered.
                select = empty_chunks < self.chunks_per_pass
                indices, kept, batches = self.generate_chunk(
                    epoch, self.pass_index, self.next_chunk, select=select
                )
                self.epoch_stats.add_chunk(self.target_sizes[indices], self.target_sizes[kept])
                self._advance_cursor()
                self.pending.extend(batches)
                empty_chunks += 1
            batch, weights = self.pending.popleft()
            self.pair_weights[batch] = weights
            self._yielded_this_epoch.append((batch, weights))
            self._epoch_digest.update(batch.tobytes())
            if self.on_epoch_complete is not None and position == planned - 1:
                self.on_epoch_complete(epoch, planned, self._epoch_digest.hexdigest())
            yield batch

    # ------------------------------------------------------------------ state
    @property
    def latest_stats(self):
        """This epoch's selection statistics, or the previous epoch's before its first chunk."""
        return self.epoch_stats if self.epoch_stats.candidate_pairs else self.previous_epoch_stats

    def state_dict(self, consumed_in_epoch):
        """The stream at the point where ``consumed_in_epoch`` batches were trained on."""
        unconsumed = self._yielded_this_epoch[consumed_in_epoch - self._yielded_before_list :]
        pending = list(unconsumed) + list(self.pending)
        return {
            "epoch": self.epoch,
            "planned": self.planned,
            "pass_index": self.pass_index,
            "next_chunk": self.next_chunk,
            "pending_batches": [b.tolist() for b, _ in pending],
            "pending_weights": [w.tolist() for _, w in pending],
            "chunk_pairs": self.chunk_pairs,
            "consumed_in_epoch": consumed_in_epoch,
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
        else:
            self.pass_index = int(state["pass_index"])
            self.next_chunk = int(state["next_chunk"])
        self.epoch = state["epoch"]
        self.planned = state["planned"]
        self.pending = collections.deque(
            (np.asarray(b, dtype=np.int64), np.asarray(w, dtype=np.float32))
            for b, w in zip(state["pending_batches"], state["pending_weights"])
        )
        self._yielded_this_epoch = []
        # Batches yielded after the restore are listed from this position of the epoch on.
        self._yielded_before_list = int(state.get("consumed_in_epoch", 0))
        self.epoch_stats = EpochSelectionStats(**(state.get("epoch_stats") or {}))


class EpochSelectionStats:
    """Candidate and kept pairs and target tokens of the chunks generated in the current epoch."""

    def __init__(self, candidate_pairs=0, kept_pairs=0, candidate_tokens=0, kept_tokens=0):
        self.candidate_pairs = int(candidate_pairs)
        self.kept_pairs = int(kept_pairs)
        self.candidate_tokens = int(candidate_tokens)
        self.kept_tokens = int(kept_tokens)

    def add_chunk(self, candidate_target_sizes, kept_target_sizes):
        self.candidate_pairs += len(candidate_target_sizes)
        self.kept_pairs += len(kept_target_sizes)
        self.candidate_tokens += int(np.sum(candidate_target_sizes))
        self.kept_tokens += int(np.sum(kept_target_sizes))

    def state_dict(self):
        return dict(vars(self))
