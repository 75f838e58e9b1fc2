"""Every option declared once, checked by one loop, documented from the code; data folder checks."""

import os
import re
from dataclasses import fields, replace

import numpy as np
import pytest

from fairseq_autoassist.assistant import AssistantConfig
from fairseq_autoassist.data.folders import check_data_folders, check_split, check_token_budget
from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.option_fields import option_fields
from fairseq_autoassist.options import GROUPS, AutoAssistOptions, RuntimeOptions, build, options_page, validate
from fairseq_autoassist.selection import POLICIES, SelectionOptions, SelectionSchedule

from .conftest import ROOT


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("autoassist_base_prob", 1.5, "--autoassist-base-prob=1.5 is outside [0, 1]"),
        ("autoassist_min_keep_prob", 0.0, "--autoassist-min-keep-prob=0.0 is outside (0, 1]"),
        ("autoassist_grad_decay", 0.0, "--autoassist-grad-decay=0.0 is outside (0, 1]"),
        ("autoassist_refresh_updates", -1, "--autoassist-refresh-updates=-1 must be >= 0"),
        ("autoassist_queue_size", 0, "--autoassist-queue-size=0 must be >= 1"),
        ("autoassist_policy", "bogus", "--autoassist-policy=bogus is unknown; choose one of assistant, released, progress, learnable"),
    ],
)
def test_a_bad_value_is_refused_naming_the_flag(name, value, message):
    with pytest.raises(AutoAssistConfigError, match=re.escape(message)):
        validate(replace(AutoAssistOptions(), **{name: value}))


def test_a_learned_quantile_at_or_above_the_unlearnable_one_is_refused():
    with pytest.raises(AutoAssistConfigError, match="--autoassist-learned-quantile=0.8 is not below "
                                                    "--autoassist-unlearnable-quantile=0.8"):
        validate(replace(AutoAssistOptions(), autoassist_learned_quantile=0.8))


@pytest.mark.parametrize("policy", ["learnable", "progress", "near-duplicates"])
def test_pair_features_that_a_pairs_own_loss_would_overrule_are_refused_naming_the_policy_that_uses_them(policy):
    with pytest.raises(AutoAssistConfigError, match=f"--autoassist-pair-features would change nothing under "
                                                    f"--autoassist-policy {policy}.*predicted-learnable"):
        validate(replace(AutoAssistOptions(), autoassist_policy=policy, autoassist_pair_features=True))
    validate(replace(AutoAssistOptions(), autoassist_policy=policy, autoassist_pair_features=True,
                     autoassist_warmup_epochs=0))  # the features then act on the first pass' unseen pairs
    for deciding in ("predicted-learnable", "assistant"):
        validate(replace(AutoAssistOptions(), autoassist_policy=deciding, autoassist_pair_features=True))


def test_the_defaults_are_valid_and_every_option_has_help():
    validate(AutoAssistOptions())
    for f in option_fields(AutoAssistOptions):
        assert f.name.startswith("autoassist_") and len(f.metadata["help"]) > 20


def test_every_option_is_declared_once_and_builds_its_core_dataclass():
    names = [f.name for group in GROUPS for f in option_fields(group)]
    assert len(names) == len(set(names))
    assert [f.name for f in option_fields(AutoAssistOptions)] == ["autoassist_" + n for n in names]
    cfg = replace(AutoAssistOptions(), autoassist_grad_decay=0.5, autoassist_policy="uniform",
                  autoassist_warmup_epochs=3, autoassist_queue_size=7)
    assert build(AssistantConfig, cfg).grad_decay == 0.5
    assert build(SelectionOptions, cfg).policy == "uniform"
    assert build(SelectionSchedule, cfg, max_update=10) == SelectionSchedule(warmup_epochs=3, max_update=10)
    assert build(RuntimeOptions, cfg).queue_size == 7
    # Defaults come from the core dataclasses themselves.
    assert AutoAssistOptions().autoassist_lr == AssistantConfig().lr
    assert {f.name for f in fields(SelectionSchedule)} - {f.name for f in option_fields(SelectionSchedule)} == {
        "max_epoch", "max_update"}


def _parsed_task_config(data, *flags):
    """The task config fairseq-train builds from ``flags``: fairseq's own parser and conversion."""
    from fairseq import options as fairseq_options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    # fairseq-train imports --user-dir before it builds its parser; here the package is already imported.
    from fairseq_autoassist.tasks import autoassist_translation  # noqa: F401

    args = fairseq_options.parse_args_and_arch(fairseq_options.get_training_parser(), [
        str(data), "--user-dir", os.path.join(ROOT, "fairseq_autoassist"), "--task", "autoassist_translation",
        "--arch", "transformer", *flags])
    return convert_namespace_to_omegaconf(args).task


def test_the_command_line_selects_every_registered_policy_and_refuses_an_unknown_one(tmp_path):
    """Through fairseq's parser, not the registry: fairseq checks no choices of a plain str option, so each
    name must survive its parsing and conversion, and ``validate`` (run by the task's setup) must refuse the
    rest; the refusal lists the names as the documentation of errors shows them."""
    for name in POLICIES:
        cfg = _parsed_task_config(tmp_path, "--autoassist-policy", name)
        assert cfg.autoassist_policy == name
        validate(cfg)
    with pytest.raises(AutoAssistConfigError) as refused:
        validate(_parsed_task_config(tmp_path, "--autoassist-policy", "bogus"))
    with open(os.path.join(ROOT, "docs", "how-it-works.md"), encoding="utf-8") as f:
        documented = re.search(r"\| `--autoassist-policy bogus` \| `error: (.*)` \|", f.read()).group(1)
    assert str(refused.value) == documented


def test_the_options_page_lists_every_option_as_the_code_declares_it():
    with open(os.path.join(ROOT, "docs", "options.md"), encoding="utf-8") as f:
        assert f.read() == options_page()


def test_data_folder_problems_name_the_fix(tmp_path):
    with pytest.raises(AutoAssistConfigError, match="does not exist; pass a prepared data-bin folder"):
        check_data_folders(str(tmp_path / "nowhere"), "de", "en")
    with pytest.raises(AutoAssistConfigError, match=r"dict\.de\.txt is missing; binarize with fairseq-preprocess"):
        check_data_folders(str(tmp_path), "de", "en")
    for lang in ("de", "en"):
        (tmp_path / f"dict.{lang}.txt").write_text("a 1\n")
    check_data_folders(str(tmp_path), "de", "en")
    with pytest.raises(AutoAssistConfigError, match="split 'nosuchsplit' is missing from"):
        check_split(str(tmp_path), "nosuchsplit", "de", "en")
    (tmp_path / "train.de-en.de.idx").write_bytes(b"x")
    (tmp_path / "train.de-en.de.bin").write_bytes(b"")
    with pytest.raises(AutoAssistConfigError, match="the split 'train' in .* has no sentence pairs"):
        check_split(str(tmp_path), "train", "de", "en")


def test_a_token_budget_below_the_longest_pair_names_the_flag_and_the_length():
    src_sizes, tgt_sizes = np.array([5, 30, 9, 2000]), np.array([6, 12, 40, 7])
    check_token_budget("train", src_sizes, tgt_sizes, 40, (1024, 1024), "--max-tokens")
    with pytest.raises(AutoAssistConfigError, match=re.escape(
            "a budget of 39 tokens per batch is below the longest pair of split 'train' (pair 2: 40 tokens on its "
            "longer side, 1 pairs over the budget); raise --max-tokens to at least 40")):
        check_token_budget("train", src_sizes, tgt_sizes, 39, (1024, 1024), "--max-tokens")
