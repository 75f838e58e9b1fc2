"""The shared training recipe: configs/multi30k.yaml states the same settings as recipe()."""

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.recipes import (ARCHITECTURES, TRAINING_MALLOC_ENV, recipe, require_prepared, run_logged,
                                        reported_test_set_name, split_named)

from .conftest import ROOT

# configs/multi30k.yaml key path -> fairseq-train flag of recipe()
YAML_TO_FLAG = {
    ("common", "log_interval"): "--log-interval",
    ("common", "seed"): "--seed",
    ("task", "_name"): "--task",
    ("task", "autoassist_policy"): "--autoassist-policy",
    ("task", "eval_bleu_args"): "--eval-bleu-args",
    ("task", "eval_bleu_remove_bpe"): "--eval-bleu-remove-bpe",
    ("model", "_name"): "--arch",
    ("model", "dropout"): "--dropout",
    ("model", "encoder", "layers"): "--encoder-layers",
    ("model", "encoder", "embed_dim"): "--encoder-embed-dim",
    ("model", "encoder", "ffn_embed_dim"): "--encoder-ffn-embed-dim",
    ("model", "encoder", "attention_heads"): "--encoder-attention-heads",
    ("model", "decoder", "layers"): "--decoder-layers",
    ("model", "decoder", "embed_dim"): "--decoder-embed-dim",
    ("model", "decoder", "ffn_embed_dim"): "--decoder-ffn-embed-dim",
    ("model", "decoder", "attention_heads"): "--decoder-attention-heads",
    ("criterion", "_name"): "--criterion",
    ("criterion", "label_smoothing"): "--label-smoothing",
    ("optimizer", "_name"): "--optimizer",
    ("optimizer", "adam_betas"): "--adam-betas",
    ("optimizer", "weight_decay"): "--weight-decay",
    ("lr_scheduler", "_name"): "--lr-scheduler",
    ("lr_scheduler", "warmup_updates"): "--warmup-updates",
    ("optimization", "lr"): "--lr",
    ("optimization", "max_epoch"): "--max-epoch",
    ("optimization", "clip_norm"): "--clip-norm",
    ("dataset", "max_tokens"): "--max-tokens",
    ("dataset", "num_workers"): "--num-workers",
    ("checkpoint", "best_checkpoint_metric"): "--best-checkpoint-metric",
}
YAML_SWITCHES = {
    ("model", "share_all_embeddings"): "--share-all-embeddings",
    ("task", "eval_bleu"): "--eval-bleu",
    ("checkpoint", "no_epoch_checkpoints"): "--no-epoch-checkpoints",
    ("checkpoint", "maximize_best_checkpoint_metric"): "--maximize-best-checkpoint-metric",
}


def _lookup(config, path):
    for key in path:
        config = config[key]
    return config


def _flag_values(args):
    values = {}
    for position, arg in enumerate(args):
        if arg.startswith("--"):
            following = args[position + 1] if position + 1 < len(args) else None
            values[arg] = None if following is None or following.startswith("--") else following
    return values


def _same(yaml_value, flag_value):
    if isinstance(yaml_value, list):
        yaml_value = yaml_value[0]
    if isinstance(yaml_value, (int, float)) and not isinstance(yaml_value, bool):
        return float(yaml_value) == float(flag_value)
    return str(yaml_value) == flag_value


def test_the_hydra_config_is_the_recipe():
    with open(os.path.join(ROOT, "configs", "multi30k.yaml")) as f:
        config = yaml.safe_load(f)
    flags = _flag_values(recipe("DATA", "SAVE", "assistant"))
    for path, flag in YAML_TO_FLAG.items():
        assert _same(_lookup(config, path), flags[flag]), (path, _lookup(config, path), flags[flag])
    for path, flag in YAML_SWITCHES.items():
        assert _lookup(config, path) is True and flag in flags, path
    assert ARCHITECTURES["base"]["layers"] == config["model"]["encoder"]["layers"]


def test_a_folder_without_prepare_json_is_not_prepared(tmp_path):
    with pytest.raises(AutoAssistConfigError, match=r"is not a prepared data-bin folder \(no prepare.json\); run scripts/prepare_multi30k.py"):
        require_prepared(str(tmp_path))
    (tmp_path / "prepare.json").write_text('{"source": "de", "target": "en"}')
    assert require_prepared(str(tmp_path))["target"] == "en"


def test_logged_commands_run_with_the_allocator_settings_unless_the_environment_has_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_TOP_PAD_", "4096")
    log = tmp_path / "run.log"
    show = "import os; print([os.environ.get(k) for k in sorted(%r)])" % sorted(TRAINING_MALLOC_ENV)
    assert run_logged([sys.executable, "-c", show], str(log)) == 0
    expected = {**TRAINING_MALLOC_ENV, "MALLOC_TOP_PAD_": "4096"}
    # The command's one output line follows the command line; the peak-memory line after it is written only when
    # /proc was read while the process lived, which a process this short may not give on a loaded machine.
    assert log.read_text().splitlines()[1] == str([expected[k] for k in sorted(TRAINING_MALLOC_ENV)])


def test_logged_commands_end_their_log_with_their_own_peak_memory_and_keep_their_exit_code(tmp_path):
    from fairseq_autoassist.benchmark.logs import parse_peak_memory

    log = tmp_path / "run.log"
    # 300 MB written by the child: its own peak, not this test process' (the larger of the two would be ours). The
    # peak is read at each line of output, while the child still runs.
    big = "import time; b = b'x' * (300 << 20); print('done', flush=True); time.sleep(2); raise SystemExit(3)"
    assert run_logged([sys.executable, "-c", big], str(log)) == 3
    assert run_logged([sys.executable, "-c", "import time; print('done', flush=True); time.sleep(2)"], str(log)) == 0
    peaks = [int(line.split()[-2]) for line in log.read_text().splitlines() if line.startswith("# peak resident")]
    assert len(peaks) == 2 and peaks[0] >= 300 > peaks[1]
    assert parse_peak_memory(log.read_text()) == peaks[0]


def test_a_reports_languages_come_from_its_options_or_the_data_folders_manifest(tmp_path):
    import json

    from fairseq_autoassist.recipes import data_languages

    (tmp_path / "prepare.json").write_text(json.dumps({"source": "fr", "target": "en"}))
    assert data_languages(str(tmp_path)) == {"source": "fr", "target": "en"}
    assert data_languages(str(tmp_path), "de", None) == {"source": "de", "target": "en"}
    assert data_languages(str(tmp_path / "elsewhere"), "zh", "en") == {"source": "zh", "target": "en"}


def test_split_named_prefers_the_folders_splits_over_test_set_names():
    # TVsub's preparation: the in-domain split is "test", the corpus' own test and tuning sets are named "test" and
    # "valid" but stored as test1 and test2.
    tvsub = {"test_sets": {"test": "tvsub-zh-en", "test1": "test", "test2": "valid"}}
    assert [split_named(tvsub, name) for name in ("test", "valid", "test1", "test2", "tvsub-zh-en")] == [
        "test", "valid", "test1", "test2", "test"]
    multi30k = {"test_sets": {"test": "test_2016_flickr", "test1": "test_2017_flickr"}}
    assert split_named(multi30k, "test_2017_flickr") == "test1"
    assert split_named({}, "test") == "test"


def test_reports_label_a_test_set_named_like_a_split_by_its_split():
    # A report's column "test BLEU valid" would read as the validation split's.
    tvsub = {"test": "tvsub-zh-en", "test1": "test", "test2": "valid"}
    assert [reported_test_set_name(split, name) for split, name in tvsub.items()] == ["tvsub-zh-en", "test1", "test2"]
    assert reported_test_set_name("test1", "newstest2021") == "newstest2021"


def test_a_logged_command_dies_with_the_process_that_launched_it_when_that_is_killed_alone(tmp_path):
    """A benchmark killed by itself (not its whole process group) must not orphan its trainer."""
    child_pid = tmp_path / "child.pid"
    sleeper = f"import os, time; open({str(child_pid)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import sys; from fairseq_autoassist.recipes import run_logged; "
                               f"run_logged([sys.executable, '-c', {sleeper!r}], {str(tmp_path / 'log')!r})"],
        cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not child_pid.exists() or not child_pid.read_text():
            assert time.monotonic() < deadline and launcher.poll() is None
            time.sleep(0.05)
        pid = int(child_pid.read_text())
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _alive(pid):
            assert time.monotonic() < deadline, "the launched command outlived its launcher"
            time.sleep(0.05)
    finally:
        launcher.kill()
        if child_pid.exists() and child_pid.read_text() and _alive(int(child_pid.read_text())):
            os.kill(int(child_pid.read_text()), signal.SIGKILL)


def _alive(pid):
    """Whether ``pid`` runs (a zombie awaiting its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
