"""A long run's memory is flat: the short version of scripts/research/soak.py (docs/results/soak/: the long one)."""

import json

import pytest

from scripts.research import soak

pytestmark = pytest.mark.slow


def test_two_ranks_keep_at_most_three_snapshots_and_a_flat_checkpoint_with_a_40k_vocabulary(tmp_path):
    """Two gloo ranks, the paper's rule selecting once an epoch (--autoassist-refresh-updates 0), a 40k-word
    vocabulary: before 2026-12-07 every rank kept an Assistant snapshot every 8 steps between two selections, in memory
    and in each checkpoint (and the second rank for the whole run): 7 snapshots and 11% more checkpoint here.

    Resident memory is read on both ranks but not judged: over 300 updates it moves in one-time steps of up to 10%
    (the heap growing for a new epoch's scoring or a checkpoint's buffers) that the long soak's 10,000 updates
    amortise; there the verdict judges it."""
    soak.main(["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--updates", "300", "--pairs", "3000",
               "--ranks", "2", "--arms", "assistant", "--sample-every", "50", "--max-tokens", "512", "--",
               "--autoassist-refresh-updates", "0"])
    run, = json.loads((tmp_path / "out" / "soak.json").read_text())["runs"]
    assert len(run["memory_updates"]) >= 4 and len(run["resident_mb"]) == 2
    assert len(run["snapshots"]) >= 5 and run["most_snapshots"] <= soak.MAX_SNAPSHOTS
    assert run["checkpoint_growth"] <= soak.GROWTH_LIMIT
