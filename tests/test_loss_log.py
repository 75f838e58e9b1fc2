"""The loss log's compact form (fairseq_autoassist/loss_log.py, scripts/research/compact_loss_log.py)."""

import numpy as np
import pytest

from fairseq_autoassist.loss_log import LossLog, read_loss_log, write_compact
from scripts.research import compact_loss_log


def logged_steps(path, steps=5, pairs=70_000, seed=0):
    rng = np.random.default_rng(seed)
    log = LossLog(str(path))
    for step in range(steps):
        ids = rng.choice(pairs, size=40 + step, replace=False)
        log.submit(ids, rng.uniform(0.2, 9.0, size=len(ids)), np.where(rng.random(len(ids)) < 0.5, 1.0, 0.25))
    return list(read_loss_log(str(path)))


def test_a_compact_log_reads_back_every_step_with_its_ids_exact_and_losses_to_float16(tmp_path):
    original = logged_steps(tmp_path / "losses.npy")
    assert len(list(read_loss_log(tmp_path / "losses.npy"))) == len(original)
    compact_loss_log.main([str(tmp_path / "losses.npy"), str(tmp_path / "losses.npz")])
    compact = list(read_loss_log(tmp_path / "losses.npz"))  # a path object, as the end-to-end tests pass
    assert len(compact) == len(original)
    for (ids, losses, keep), (c_ids, c_losses, c_keep) in zip(original, compact):
        np.testing.assert_array_equal(c_ids, ids)  # ids above 65,535: stored in uint32, not cut to uint16
        np.testing.assert_allclose(c_losses, losses, rtol=1e-3)
        np.testing.assert_array_equal(c_keep, keep)


def test_the_compact_name_and_a_missing_log_are_refused_in_one_line(tmp_path, capsys):
    logged_steps(tmp_path / "losses.npy")
    with pytest.raises(SystemExit):
        compact_loss_log.main([str(tmp_path / "losses.npy"), str(tmp_path / "losses.npy.gz")])
    assert "must end in .npz" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compact_loss_log.main([str(tmp_path / "missing.npy"), str(tmp_path / "out.npz")])
    assert "--autoassist-loss-log" in capsys.readouterr().err
    with pytest.raises(ValueError, match=".npz"):
        write_compact([], str(tmp_path / "out.bin"))
