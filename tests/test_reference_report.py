"""The reference scores' report (scripts/research/reference_report.py): the dual cross-entropy threshold chosen on a
development copy, and the kept shares by kind under it."""

import numpy as np

from scripts.research.reference_report import kept_share_by_kind, youden_threshold


def test_the_chosen_threshold_removes_what_separates_corrupted_from_clean_pairs_best():
    # Clean pairs score 1-4, corrupted ones 3-8: the best cut removes every score above 4 (all corrupted pairs but
    # the one at 3, no clean pair); a cut at 3.5 would also remove the clean pair at 4.
    score = np.array([1.0, 2.0, 3.5, 4.0, 3.0, 5.0, 6.0, 8.0])
    corrupted = np.array([False, False, False, False, True, True, True, True])
    threshold, j = youden_threshold(score, corrupted)
    assert 4.0 < threshold < 5.0 and j == 0.75
    kinds = np.array(["clean"] * 4 + ["misaligned"] * 4)
    assert kept_share_by_kind(kinds, ~(score > threshold)) == {"clean": 1.0, "misaligned": 0.25}
