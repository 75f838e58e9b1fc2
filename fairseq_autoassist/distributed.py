"""Keeping AutoAssist identical on every rank of a data-parallel run (torch.distributed only).

fairseq gives rank r the global batches r, r + N, ... of one global list, so every rank must
build the same list. The first rank decides each chunk's selection and broadcasts it; every
rank's losses are gathered each step (without waiting, see ``loss_handoff``) so that the Assistant
learns from the whole global batch. Traffic is proportional to a chunk or a batch, never to the corpus.

Calling contract: every function is a collective; all ranks call it at the same point of their
(identical) sequence of training steps and chunk selections.
"""

import numpy as np
import torch
import torch.distributed as dist


def world_size():
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank():
    return dist.get_rank() if world_size() > 1 else 0


def _device():
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast_from_first_rank(values, dtype):
    """The first rank's 1-D array on every rank (``values`` is ignored elsewhere)."""
    device = _device()
    length = torch.tensor([len(values) if rank() == 0 else 0], dtype=torch.long, device=device)
    dist.broadcast(length, src=0)
    if rank() == 0:
        buffer = torch.as_tensor(np.ascontiguousarray(values, dtype=dtype)).to(device)
    else:
        buffer = torch.empty(int(length.item()), dtype=torch.from_numpy(np.zeros(0, dtype)).dtype, device=device)
    dist.broadcast(buffer, src=0)
    return buffer.cpu().numpy()


def all_gather_rows(rows, rows_per_rank):
    """Every rank's ``rows`` (a 2-D float tensor of at most ``rows_per_rank`` rows), padded with NaN rows to
    ``rows_per_rank`` each and stacked rank by rank, gathered by a collective started without waiting: returns the
    gathered tensor (on the collective's device) and the work to wait for before reading it."""
    if len(rows) > rows_per_rank:
        raise ValueError(f"a batch of {len(rows)} pairs is more than the {rows_per_rank} a rank may send")
    padded = torch.full((rows_per_rank, rows.shape[1]), float("nan"), dtype=rows.dtype, device=_device())
    # A blocking copy where the rows live elsewhere (gloo gathers host memory, the losses are on a GPU): gloo reads
    # ``padded`` when the collective starts, and a non-blocking device-to-host copy might not have landed by then.
    # The host then waits for each step's losses; NCCL, which gathers on the GPU, never does.
    padded[: len(rows)] = rows.to(padded.device, non_blocking=rows.device == padded.device)
    gathered = torch.empty((world_size() * rows_per_rank, rows.shape[1]), dtype=rows.dtype, device=padded.device)
    work = dist.all_gather(list(gathered.split(rows_per_rank)), padded, async_op=True)
    return gathered, work
