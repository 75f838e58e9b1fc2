"""Keeping AutoAssist identical on every rank of a data-parallel run (torch.distributed only).

fairseq gives rank r the global batches r, r + N, ... of one global list, so every rank must
build the same list. The first rank decides each chunk's selection and broadcasts it; every
rank's losses are gathered each step so that the Assistant learns from the whole global batch.
Traffic is proportional to a chunk or a batch, never to the corpus.

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


def all_gather_pairs(ids, values):
    """Concatenate every rank's ``(ids, values)`` (int64, float32 arrays of equal length)."""
    device = _device()
    count = torch.tensor([len(ids)], dtype=torch.long, device=device)
    counts = [torch.zeros_like(count) for _ in range(world_size())]
    dist.all_gather(counts, count)
    counts = [int(c.item()) for c in counts]
    longest = max(max(counts), 1)
    gathered = []
    for array, dtype in ((ids, torch.long), (values, torch.float32)):
        padded = torch.zeros(longest, dtype=dtype, device=device)
        padded[: len(array)] = torch.as_tensor(np.asarray(array)).to(device=device, dtype=dtype)
        parts = [torch.zeros_like(padded) for _ in range(world_size())]
        dist.all_gather(parts, padded)
        gathered.append(torch.cat([part[:n] for part, n in zip(parts, counts)]).cpu().numpy())
    return gathered[0], gathered[1]
