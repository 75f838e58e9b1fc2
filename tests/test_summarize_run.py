"""scripts/summarize_run.py: the main job's closing lines, from a run's log and its BLEU file."""

import json

from scripts import summarize_run

LOG = """2026-12-01 | INFO | fairseq_autoassist.tasks.autoassist_translation | AutoAssist: policy=learnable, 400 training pairs
2026-12-01 | INFO | train | epoch 001 | loss 6.1 | aa_kept 1 | aa_acc 0.61 | wpb 1700 | train_wall 10 | num_updates 10
2026-12-01 | INFO | train | epoch 002 | loss 5.1 | aa_kept 0.813 | aa_acc 0.742 | wpb 1700 | train_wall 20 | num_updates 18
"""


def test_the_summary_names_the_policy_kept_share_accuracy_bleu_and_where_the_comparison_is(tmp_path):
    (tmp_path / "train.log").write_text(LOG)
    (tmp_path / "bleu_test.json").write_text(json.dumps({"bleu": 31.456, "checkpoint_updates": 18, "beam": 5,
                                                          "bleu_signature": "nrefs:1|tok:13a"}))
    lines = summarize_run.summarize(str(tmp_path))
    assert lines[0] == "policy learnable: 2 epochs, 18 updates"
    assert lines[1] == "pairs kept in the last epoch: 81.3% (every pair in the warm-up epoch)"
    assert "balanced accuracy on fresh losses: 0.742" in lines[2]
    assert lines[3] == "test BLEU 31.46 (checkpoint of update 18, beam 5; nrefs:1|tok:13a)"
    assert "docs/results/" in lines[4]


def test_a_folder_without_a_log_is_one_error_line(tmp_path, caplog):
    assert summarize_run.main(["--save-dir", str(tmp_path)]) == 2
    assert "train.log is missing" in caplog.records[-1].getMessage()
