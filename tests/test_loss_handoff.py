"""LossHandOff: a step's losses reach the runtime at the next step, on every device and any number of ranks."""

import os
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fairseq_autoassist.loss_handoff import LossHandOff, to_device_without_waiting


def recorder():
    delivered = []
    return delivered, lambda ids, keep_prob, losses: delivered.append((ids.tolist(), keep_prob.tolist(),
                                                                        losses.tolist()))


def test_a_steps_losses_arrive_at_the_next_step_without_the_non_finite_ones():
    delivered, deliver = recorder()
    handoff = LossHandOff(deliver)
    first = torch.tensor([1.5, float("nan"), 2.0])
    handoff.send(np.array([4, 7, 9]), np.array([1.0, 0.5, 0.25]), first)
    assert delivered == []
    first.fill_(9.0)  # the step's tensor is reused: the handed-over copy is the step's value
    handoff.send(np.array([3]), np.array([0.5]), torch.tensor([0.5]))
    assert delivered == [([4, 9], [1.0, 0.25], [1.5, 2.0])]
    # A dummy batch's empty step is handed over like any other.
    handoff.send(np.zeros(0, dtype=np.int64), np.zeros(0), torch.zeros(0))
    assert delivered[-1] == ([3], [0.5], [0.5])
    handoff.flush()  # the end of training
    assert delivered[-1] == ([], [], []) and len(delivered) == 3
    handoff.flush()
    assert len(delivered) == 3


def test_a_checkpoint_keeps_the_pending_step_pending_and_a_resumed_run_delivers_it_at_its_first_step():
    delivered, deliver = recorder()
    handoff = LossHandOff(deliver)
    handoff.send(np.array([2**40 + 1, 5]), np.array([0.125, 1.0]), torch.tensor([0.75, 3.0]))
    state = handoff.pending_state()
    assert delivered == []  # saving delivers nothing: a run that does not save delivers at the same step
    resumed_delivered, resumed_deliver = recorder()
    resumed = LossHandOff(resumed_deliver)
    resumed.load_pending_state(state)
    for run in (handoff, resumed):
        run.send(np.array([8]), np.array([1.0]), torch.tensor([1.0]))
    # Ids stay exact beyond float32's range.
    assert delivered == resumed_delivered == [([2**40 + 1, 5], [0.125, 1.0], [0.75, 3.0])]
    assert LossHandOff(deliver).pending_state() is None


def test_host_arrays_reach_a_cpu_device_as_float32():
    weights = to_device_without_waiting(np.array([0.5, 2.0], dtype=np.float64), torch.zeros(1))
    assert weights.dtype == torch.float32 and weights.tolist() == [0.5, 2.0]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_ranks(rank, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        delivered, deliver = recorder()
        handoff = LossHandOff(deliver, rows_per_rank=4)
        # Rank 1 has one pair fewer in the first step and only a dummy batch in the second.
        steps = [(np.array([10 + rank, 20, 30][: 3 - rank]), torch.tensor([1.0, 2.0, 3.0][: 3 - rank]) + rank),
                 (np.array([40]), torch.tensor([4.0])) if rank == 0 else (np.zeros(0, np.int64), torch.zeros(0))]
        for ids, losses in steps:
            handoff.send(ids, np.full(len(ids), 0.5), losses)
        handoff.flush()
        results[rank] = delivered
    finally:
        dist.destroy_process_group()


def test_two_ranks_deliver_every_ranks_pairs_alike_one_step_later():
    results = mp.Manager().dict()
    mp.spawn(_two_ranks, args=(_free_port(), results), nprocs=2, join=True)
    expected = [([10, 20, 30, 11, 20], [0.5] * 5, [1.0, 2.0, 3.0, 2.0, 3.0]), ([40], [0.5], [4.0])]
    assert results[0] == results[1] == expected


def test_a_batch_larger_than_a_ranks_rows_is_refused():
    from fairseq_autoassist.distributed import all_gather_rows

    with pytest.raises(ValueError, match="a batch of 5 pairs is more than the 4"):
        all_gather_rows(torch.zeros(5, 3, dtype=torch.float64), 4)
