"""LossHandOff: a step's losses reach the runtime at once on the CPU, one step later when deferred (as on a GPU)."""

import numpy as np
import torch

from fairseq_autoassist.loss_handoff import LossHandOff, to_device_without_waiting


def recorder():
    delivered = []
    return delivered, lambda ids, losses: delivered.append((ids.tolist(), losses.tolist()))


def test_on_the_cpu_a_steps_losses_are_delivered_at_once_without_the_non_finite_ones():
    delivered, deliver = recorder()
    handoff = LossHandOff(deliver, defer=False)
    handoff.send(np.array([4, 7, 9]), torch.tensor([1.5, float("nan"), 2.0]))
    assert delivered == [([4, 9], [1.5, 2.0])]
    handoff.flush()
    assert len(delivered) == 1


def test_deferred_losses_arrive_at_the_next_step_or_at_a_flush_in_step_order():
    delivered, deliver = recorder()
    handoff = LossHandOff(deliver, defer=True)
    first = torch.tensor([1.0, float("inf")])
    handoff.send(np.array([1, 2]), first)
    assert delivered == []
    first.fill_(9.0)  # the step's tensor is reused: the handed-over copy is the step's value
    handoff.send(np.array([3]), torch.tensor([0.5]))
    assert delivered == [([1], [1.0])]
    handoff.flush()  # before a checkpoint: every step's losses delivered
    assert delivered == [([1], [1.0]), ([3], [0.5])]
    handoff.flush()
    # A dummy batch's empty step is handed over like any other.
    handoff.send(np.zeros(0, dtype=np.int64), torch.zeros(0))
    handoff.flush()
    assert delivered[-1] == ([], [])


def test_host_arrays_reach_a_cpu_device_as_float32():
    weights = to_device_without_waiting(np.array([0.5, 2.0], dtype=np.float64), torch.zeros(1))
    assert weights.dtype == torch.float32 and weights.tolist() == [0.5, 2.0]
