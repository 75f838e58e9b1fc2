"""Handing each training step's per-pair losses from the device to the host without stalling it (no fairseq import).

A GPU runs a step's kernels after the host has queued them; a host read of a device tensor (``.cpu()``,
``.item()``) waits until the device has computed it. Read between the forward and the backward pass, the losses
make the host wait for the whole forward pass before it can queue the backward, and the device then idles while it
does. ``LossHandOff`` reads them only after the backward pass has been queued:

* on the CPU (``defer`` False) at once, in the same step, which changes nothing for selection (the next chunk is
  selected when the next batch is fetched, after the step);
* on one GPU (``defer`` True) the losses are copied, without waiting, into pinned host memory behind the step's own
  work, and delivered at the next step's ``send`` (after that step's backward pass has been queued, when the device
  has long finished the copy) or at ``flush``: the Assistant sees a step's losses one step later than on the CPU.

Calling contract: ``send(ids, per_token_losses)`` once per training step, after the backward pass has been queued
(empty arrays for a dummy batch); ``flush()`` before the selection state is saved, so that a checkpoint holds every
step's losses and a resumed run continues as the uninterrupted one does.
"""

import numpy as np
import torch


class LossHandOff:
    """``deliver(ids, per_token_losses)`` (host arrays, non-finite losses dropped) for every step's losses."""

    def __init__(self, deliver, defer):
        self.deliver = deliver
        self.defer = defer
        self.pending = None

    def send(self, ids, per_token_losses):
        """``ids``: the step's pair ids (host array); ``per_token_losses``: their losses (a tensor on any device)."""
        self.flush()
        if not self.defer:
            self._deliver(ids, per_token_losses.detach().float().cpu().numpy())
            return
        on_gpu = per_token_losses.is_cuda
        host = torch.empty(per_token_losses.shape, dtype=torch.float32, pin_memory=on_gpu)
        host.copy_(per_token_losses.detach(), non_blocking=True)
        copied = None
        if on_gpu:
            copied = torch.cuda.Event()
            copied.record()
        self.pending = (ids, host, copied)

    def flush(self):
        """Deliver the pending step's losses, waiting for their copy if it has not finished."""
        if self.pending is None:
            return
        ids, host, copied = self.pending
        self.pending = None
        if copied is not None:
            copied.synchronize()
        self._deliver(ids, host.numpy())

    def _deliver(self, ids, per_token_losses):
        finite = np.isfinite(per_token_losses)
        self.deliver(np.asarray(ids)[finite], per_token_losses[finite])


def to_device_without_waiting(array, like):
    """``array`` (host) as a float32 tensor on ``like``'s device: from pinned memory without waiting on a GPU."""
    tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    if not like.is_cuda:
        return tensor
    return tensor.pin_memory().to(like.device, non_blocking=True)
