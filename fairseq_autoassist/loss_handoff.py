"""Handing each training step's per-pair losses from the device to the host without stalling it (no fairseq import).

A GPU runs a step's kernels after the host has queued them; a host read of a device tensor (``.cpu()``,
``.item()``) waits until the device has computed it. Read in the step, the losses would make the host wait for the
forward pass (before the backward) or for the backward pass (after it), and the device then idles while the host
queues the next step. ``LossHandOff`` never reads them in their own step: ``send`` queues, behind the step's own
work, the copy of ``(id, keep probability, loss)`` rows into pinned host memory (first gathered from every rank by
an all-gather started without waiting, when distributed), and delivers them at the next step's ``send``, when the
device has long finished. On a GPU the gather and the copy run on a side stream, so the compute stream never waits
for the gather (nor, under NCCL, for the slowest rank); the host waits at most once a step, on the previous step's
copy, and only while the device is behind (``host_waits`` counts those). With gloo and a GPU the host also waits for
each step's losses before gloo gathers them from host memory (``distributed.all_gather_rows``). Every device and
any number of ranks behave alike, so the Assistant and the loss table always see a step's losses one step later, and
a run selects the same pairs on a CPU as the timing of a GPU allows.

Calling contract: ``send(ids, keep_prob, per_token_losses)`` once per training step after the backward pass has been
queued, on every rank in the same step (empty arrays for a dummy batch); ``pending_state()`` for a checkpoint (the
undelivered step, kept pending: a resumed run delivers it at its first step, as the uninterrupted run does);
``flush()`` delivers it when nothing follows (the end of training).
"""

import functools

import numpy as np
import torch

from . import distributed

COLUMNS = 3  # pair id, keep probability, per-token loss: float64 keeps ids exact up to 2 ** 53


class LossHandOff:
    """``deliver(ids, keep_prob, per_token_losses)`` (host arrays, every rank's pairs, non-finite losses dropped).

    ``rows_per_rank``: when distributed, the most pairs one rank's batch can hold (each rank sends that many rows,
    so that the gather needs no step of its own to agree on sizes); unused in a single process.
    """

    def __init__(self, deliver, rows_per_rank=None):
        self.deliver = deliver
        self.rows_per_rank = rows_per_rank
        self.pending = None
        self._side_stream = None
        # Reads that found the previous step's copy unfinished and waited for it (at most one per step).
        self.host_waits = 0

    def send(self, ids, keep_prob, per_token_losses):
        """``ids`` and ``keep_prob``: the step's pairs (host arrays); ``per_token_losses``: a tensor on any device."""
        self.flush()
        rows = _rows_on_device(ids, keep_prob, per_token_losses)
        gather = None
        if distributed.world_size() > 1:
            gather = functools.partial(distributed.all_gather_rows, rows_per_rank=self.rows_per_rank)
        if rows.is_cuda and self._side_stream is None:
            self._side_stream = torch.cuda.Stream(rows.device)
        self.pending = _HostCopy(rows, gather, self._side_stream)

    def flush(self):
        """Delivers the pending step's losses, waiting for their copy if it has not finished."""
        if self.pending is None:
            return
        self.host_waits += not self.pending.landed()
        rows = self.pending.read()
        self.pending = None
        finite = np.isfinite(rows[:, 2])
        rows = rows[finite]
        self.deliver(rows[:, 0].astype(np.int64), rows[:, 1].astype(np.float32), rows[:, 2].astype(np.float32))

    def pending_state(self):
        """The undelivered step's rows (a tensor; None if there is none), left pending."""
        if self.pending is None:
            return None
        rows = self.pending.read()
        self.pending = _HostCopy.of(rows)
        return torch.from_numpy(rows.copy())

    def load_pending_state(self, rows):
        self.pending = None if rows is None else _HostCopy.of(np.asarray(rows, dtype=np.float64))


class _HostCopy:
    """Rows on their way to host memory: the gather and the copy are queued, never waited for here.

    On a GPU both run on ``side_stream``, which waits for the step's losses: the compute stream never waits for the
    gather, so a rank goes on to its next micro-batch while a slower rank is still computing (under NCCL, ``wait`` on
    the collective's work orders only the stream that calls it)."""

    def __init__(self, rows, gather=None, side_stream=None):
        self.work = self.copied = None
        if not rows.is_cuda:
            self.host = rows
            if gather is not None:
                self.host, self.work = gather(rows)
            return
        side_stream.wait_stream(torch.cuda.current_stream(rows.device))
        with torch.cuda.stream(side_stream):
            # Made on the compute stream, read on the side stream: its memory is not reused before the read ends.
            rows.record_stream(side_stream)
            if gather is not None:
                rows, work = gather(rows)
                if not rows.is_cuda:  # gloo gathers into host memory itself
                    self.host, self.work = rows, work
                    return
                work.wait()
            self.host = torch.empty(rows.shape, dtype=rows.dtype, pin_memory=True)
            self.host.copy_(rows, non_blocking=True)
            self.copied = torch.cuda.Event()
            self.copied.record(side_stream)

    @classmethod
    def of(cls, rows):
        return cls(torch.from_numpy(rows))

    def landed(self):
        """Whether ``read`` returns without waiting."""
        return (self.work is None or self.work.is_completed()) and (self.copied is None or self.copied.query())

    def read(self):
        if self.work is not None:
            self.work.wait()
        if self.copied is not None:
            self.copied.synchronize()
        return self.host.numpy().reshape(-1, COLUMNS).copy()


def _rows_on_device(ids, keep_prob, per_token_losses):
    """``(id, keep probability, loss)`` rows as float64 on the losses' device, from host ids without waiting."""
    losses = per_token_losses.detach()
    rows = torch.empty((len(ids), COLUMNS), dtype=torch.float64, device=losses.device)
    rows[:, :2] = to_device_without_waiting(np.stack([np.asarray(ids), np.asarray(keep_prob)], axis=1), losses,
                                            dtype=np.float64)
    rows[:, 2] = losses
    return rows


def to_device_without_waiting(array, like, dtype=np.float32):
    """``array`` (host) as a ``dtype`` tensor on ``like``'s device: from pinned memory without waiting on a GPU."""
    tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=dtype))
    if not like.is_cuda:
        return tensor
    return tensor.pin_memory().to(like.device, non_blocking=True)
