"""The training step's promises on a GPU: run where CUDA is available (scripts/gpu_check.sh), skipped elsewhere.

On the CPU, ``test_end_to_end.py::test_the_plugins_training_step_never_waits_for_the_device`` spies on host reads
in the plugin's code; here CUDA itself says whether anything in the plugin's step synchronizes."""

import numpy as np
import pytest
import torch

from fairseq_autoassist.loss_handoff import LossHandOff, to_device_without_waiting

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/gpu_check.sh)")


def _slow_on_the_device(values):
    """``values`` after about a second of device work, so that a host read that did not wait would see stale memory."""
    x = torch.randn(4096, 4096, device="cuda")
    for _ in range(200):
        x = torch.tanh(x @ x / 64.0)
    return values.cuda() + 0.0 * x.sum()


def test_the_pinned_hand_off_reads_the_steps_losses_not_what_was_there_before_the_copy_finished():
    delivered = []
    handoff = LossHandOff(lambda ids, keep_prob, losses: delivered.append(losses.tolist()))
    expected = torch.arange(1.0, 257.0)
    torch.cuda.set_sync_debug_mode("error")
    try:
        handoff.send(np.arange(256), np.ones(256), _slow_on_the_device(expected))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    handoff.flush()  # at once: the copy is still queued behind a second of work
    assert delivered == [expected.tolist()]


def test_the_plugins_step_makes_no_synchronizing_call(prepared_data, tmp_path):
    """fairseq's Transformer forward synchronizes by itself (``if has_pads``), as in the stock task; the test lets
    it, and fails on any synchronizing call of the plugin's own step (weights, accuracy, hand-off, records)."""
    from fairseq import utils

    from fairseq_autoassist.recipes import build_trainer, recipe

    argv = recipe(prepared_data, str(tmp_path), "assistant", arch="tiny", max_epoch=2, eval_bleu=False) + [
        "--report-accuracy", "--autoassist-importance-weighting", "--autoassist-digest-file", str(tmp_path / "d")]
    task, trainer, iterator = build_trainer(argv)
    model, criterion, optimizer = trainer.model, trainer.criterion, trainer.optimizer
    forward = model.forward

    def forward_as_fairseq_does(*args, **kwargs):
        torch.cuda.set_sync_debug_mode(0)
        try:
            return forward(*args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode("error")

    model.forward = forward_as_fairseq_does
    batches = iterator.next_epoch_itr(shuffle=True)
    for update in range(4):
        sample = utils.move_to_cuda(next(batches))
        torch.cuda.set_sync_debug_mode("error")
        try:
            task.train_step(sample, model, criterion, optimizer, update, ignore_grad=update == 3)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    assert task.runtime.steps == 4


def test_host_arrays_reach_the_gpu_from_pinned_memory_without_waiting():
    torch.cuda.set_sync_debug_mode("error")
    try:
        weights = to_device_without_waiting(np.array([0.5, 2.0]), torch.zeros(1, device="cuda"))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert weights.is_cuda and weights.tolist() == [0.5, 2.0]


def _gloo_ranks_gather_gpu_rows(rank, port, results):
    import os

    import torch.distributed as dist

    from fairseq_autoassist.distributed import all_gather_rows

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        rows = _slow_on_the_device(torch.arange(12.0, dtype=torch.float64).reshape(4, 3) + 100 * rank)
        gathered, work = all_gather_rows(rows, 4)
        work.wait()
        results[rank] = gathered.tolist()
    finally:
        dist.destroy_process_group()


def test_gloo_gathers_a_gpus_rows_after_their_copy_to_the_host_has_landed():
    """gloo gathers host memory: a non-blocking copy from the GPU could still be in flight when it reads it."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_gloo_ranks_gather_gpu_rows, args=(port, results), nprocs=2, join=True)
    expected = torch.cat([torch.arange(12.0).reshape(4, 3) + 100 * rank for rank in range(2)]).tolist()
    assert results[0] == results[1] == expected


def test_the_host_waits_once_a_step_while_the_device_is_behind_and_never_once_it_is_done():
    """``set_sync_debug_mode`` does not report event synchronisation: the hand-off counts its own waits."""
    handoff = LossHandOff(lambda ids, keep_prob, losses: None)
    for _ in range(3):
        handoff.send(np.arange(256), np.ones(256), _slow_on_the_device(torch.ones(256)))
    assert handoff.host_waits == 2  # each later send found the previous copy queued behind a second of work
    torch.cuda.synchronize()
    handoff.send(np.arange(256), np.ones(256), torch.ones(256, device="cuda"))
    assert handoff.host_waits == 2
