"""End to end through the real fairseq-preprocess / fairseq-train / fairseq-generate on tiny data."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from fairseq_autoassist.recipes import recipe
from fairseq_autoassist.selection.policies import POLICIES

from .conftest import ROOT, run_script


pytestmark = pytest.mark.slow

SYNC_ASSISTANT = ["--autoassist-sync", "--autoassist-refresh-updates", "2", "--autoassist-base-prob", "0"]


def tiny_recipe(data, save_dir, policy="assistant", max_epoch=2, max_update=0, max_tokens=400):
    """The project's training recipe with a tiny model, logging every update, on the CPU."""
    return recipe(
        data, str(save_dir), policy, arch="tiny", max_epoch=max_epoch, max_update=max_update,
        max_tokens=max_tokens, lr=1e-3, warmup_updates=10, cpu=True, eval_bleu=False, log_interval=1,
    ) + ["--no-progress-bar"]


def train_args(data, save_dir, *extra, policy="assistant", max_epoch=2, max_update=0, default_workers=False,
               max_tokens=400):
    """The tiny recipe's fairseq-train arguments; ``default_workers``: without the recipe's --num-workers 0, so with
    fairseq's default data loader worker, as a user's command runs."""
    args = tiny_recipe(data, save_dir, policy, max_epoch, max_update, max_tokens)
    if default_workers:
        at = args.index("--num-workers")
        del args[at : at + 2]
    return [*args, *extra]


def fairseq_train(data, save_dir, *extra, check=True, **kwargs):
    """fairseq-train with ``train_args``."""
    return run_script("-m", "fairseq_cli.train", *train_args(data, save_dir, *extra, **kwargs), check=check)


def losses_by_update(log):
    """{num_updates: training loss} from the train_inner lines."""
    found = {}
    for line in log.splitlines():
        if "train_inner" in line:
            update = int(re.search(r"num_updates=(\d+)", line).group(1))
            found[update] = float(re.search(r"\bloss=([\d.]+)", line).group(1))
    return found


def updates_per_epoch(log):
    totals = [int(m.group(2)) for m in re.finditer(r"\| train \| epoch (\d+) \|.*?num_updates (\d+)", log)]
    return [b - a for a, b in zip([0] + totals, totals)]


def test_prepare_keeps_references_and_sentencepiece_beside_the_data(prepared_data):
    for name in ("dict.de.txt", "dict.en.txt", "spm.model", "raw/test.en", "raw/valid.de", "train.de-en.de.bin"):
        assert os.path.exists(os.path.join(prepared_data, name)), name
    with open(os.path.join(prepared_data, "prepare.json")) as f:
        info = json.load(f)
    assert info["pairs"] == {"train": 400, "valid": 40, "test": 40, "test1": 30}
    assert info["test_sets"] == {"test": "test_2016_flickr", "test1": "test_2017_flickr"}
    assert os.path.exists(os.path.join(prepared_data, "test1.de-en.en.bin"))


def test_policy_none_trains_exactly_like_the_translation_task(prepared_data, tmp_path):
    plugin = fairseq_train(prepared_data, tmp_path / "none", policy="none").stdout
    stock_args = tiny_recipe(prepared_data, tmp_path / "stock", policy=None)
    assert stock_args[stock_args.index("--task") + 1] == "translation" and "--autoassist-policy" not in stock_args
    stock = run_script("-m", "fairseq_cli.train", *stock_args).stdout
    plugin_losses, stock_losses = losses_by_update(plugin), losses_by_update(stock)
    assert len(stock_losses) > 4
    assert plugin_losses == stock_losses


def test_autoassist_shrinks_epochs_resumes_and_generates(prepared_data, tmp_path):
    save_dir = tmp_path / "assistant"
    first = fairseq_train(prepared_data, save_dir, *SYNC_ASSISTANT, max_epoch=2).stdout
    epochs = updates_per_epoch(first)
    assert len(epochs) == 2 and epochs[1] < epochs[0], epochs
    kept = [float(v) for v in re.findall(r"aa_kept ([\d.]+)", first)]
    assert kept[0] == 1.0 and kept[1] < 1.0

    resumed = fairseq_train(prepared_data, save_dir, *SYNC_ASSISTANT, max_epoch=3).stdout
    assert "restored Assistant and selection state" in resumed
    assert len(updates_per_epoch(resumed)) == 1

    generated = run_script(
        "-m", "fairseq_cli.generate", prepared_data, "--user-dir", os.path.join(ROOT, "fairseq_autoassist"),
        "--task", "autoassist_translation", "--path", str(save_dir / "checkpoint_last.pt"),
        "--gen-subset", "test", "--beam", "2", "--cpu", "--required-batch-size-multiple", "1",
    ).stdout
    assert len(re.findall(r"^H-\d+\t", generated, flags=re.M)) == 40

    # The README's translation of raw text: sentencepiece in and out, through fairseq's own fairseq-interactive.
    with open(os.path.join(prepared_data, "raw", "test.de"), encoding="utf-8") as f:
        raw = "".join(f.readlines()[:3])
    translated = subprocess.run(
        [sys.executable, "-m", "fairseq_cli.interactive", prepared_data, "--user-dir",
         os.path.join(ROOT, "fairseq_autoassist"), "--task", "autoassist_translation",
         "--path", str(save_dir / "checkpoint_last.pt"), "--source-lang", "de", "--target-lang", "en", "--beam", "2",
         "--bpe", "sentencepiece", "--sentencepiece-model", os.path.join(prepared_data, "spm.model"), "--cpu"],
        input=raw, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    sources = re.findall(r"^S-\d+\t(.*)$", translated, flags=re.M)
    hypotheses = re.findall(r"^D-\d+\t\S+\t(.*)$", translated, flags=re.M)
    assert len(hypotheses) == 3 and all(hypothesis and "\u2581" not in hypothesis for hypothesis in hypotheses)
    assert sources and all("\u2581" in source for source in sources)  # the raw input was encoded on the way in

    report = tmp_path / "bleu.json"
    printed = run_script(
        "-m", "fairseq_autoassist.evaluate", "--checkpoint", str(save_dir / "checkpoint_last.pt"),
        "--data", prepared_data, "--split", "test", "--beam", "2", "--device", "cpu", "--output", str(report),
    ).stdout
    assert "BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in printed
    with open(report) as f:
        result = json.load(f)
    assert result["sentences"] == 40
    import sacrebleu

    with open(result["hypotheses"], encoding="utf-8") as f:
        hypotheses = f.read().rstrip("\n").split("\n")
    with open(os.path.join(prepared_data, "raw", "test.en"), encoding="utf-8") as f:
        references = f.read().rstrip("\n").split("\n")
    assert len(hypotheses) == len(references) == 40
    assert result["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)

    # A later Multi30K test set by its Multi30K name.
    later = run_script(
        "-m", "fairseq_autoassist.evaluate", "--checkpoint", str(save_dir / "checkpoint_last.pt"), "--data", prepared_data,
        "--split", "test_2017_flickr", "--beam", "2", "--device", "cpu", "--output", str(tmp_path / "bleu1.json"),
    ).stdout
    assert "test_2017_flickr BLEU = " in later
    with open(tmp_path / "bleu1.json") as f:
        assert json.load(f)["test_set"] == "test_2017_flickr"


@pytest.mark.parametrize("policy, logged", [("released", "loss"), ("assistant", "nll_loss")])
def test_the_released_assistant_learns_from_the_label_smoothed_loss(prepared_data, tmp_path, policy, logged):
    """The per-token losses the Assistant receives (the loss log's), weighted by target length, are the step's logged
    label-smoothed training loss under ``released`` (as released), its negative log-likelihood under the others."""
    from fairseq_autoassist.data.iterator import load_pair_features
    from fairseq_autoassist.loss_log import read_loss_log

    log = tmp_path / "losses.npy"
    output = fairseq_train(prepared_data, tmp_path / policy, "--autoassist-loss-log", str(log), policy=policy,
                           max_epoch=1, max_update=6).stdout
    features = load_pair_features(prepared_data, "de", "en")  # alive while its memory-mapped lengths are read
    lengths = np.array(features.target.lengths, dtype=np.float64)
    per_update = {int(re.search(r"num_updates=(\d+)", line).group(1)): float(re.search(rf"\b{logged}=([\d.]+)", line).group(1))
                  for line in output.splitlines() if "train_inner" in line}
    for update, (ids, losses, _) in enumerate(read_loss_log(log), start=1):
        weighted = np.sum(losses * lengths[ids]) / np.sum(lengths[ids]) / np.log(2)
        assert weighted == pytest.approx(per_update[update], abs=2e-3), (update, per_update)


def assert_selecting_epochs(log, epochs):
    """The log's ``epochs`` epochs: the first keeps every pair, each later one drops some (counted in pairs: the
    released batches mix lengths, so a pass of fewer pairs may still take more batches)."""
    kept = [float(share) for share in re.findall(r"\| train \| epoch \d+ \|.*?aa_kept ([\d.]+)", log)]
    assert len(kept) == epochs and kept[0] == 1.0 and max(kept[1:]) < 1.0, kept


def trained_digests(digest_file, rank=0):
    """The lines of ``--autoassist-digest-file``'s record of the batches a rank trained on: epoch, batches, SHA-1."""
    with open(f"{digest_file}.trained.rank{rank}") as f:
        return [tuple(line.split("\t")) for line in f.read().splitlines()]


def train_and_kill_in_a_selecting_epoch(args, ranks=1, epoch=3):
    """Runs fairseq-train ``args`` (on ``ranks`` gloo ranks) and kills it (SIGKILL, every rank) at the first update of
    ``epoch`` or later that follows a checkpoint saved in the same epoch; returns the update of that checkpoint."""
    commands = [[sys.executable, "-m", "fairseq_cli.train", *args]]
    if ranks > 1:
        commands = [commands[0] + distributed_flags(ranks, rank) for rank in range(ranks)]
    processes = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                                  stderr=subprocess.STDOUT, text=True) for rank, command in enumerate(commands)]
    process = processes[0]
    saved, killed_at = None, None
    try:
        for line in process.stdout:
            match = re.search(r"Saved checkpoint \S+checkpoint_(\d+)_(\d+)\.pt", line)
            if match and int(match.group(1)) >= epoch:
                saved = (int(match.group(1)), int(match.group(2)))
            match = re.search(r"train_inner \| epoch (\d+):.*num_updates=(\d+)", line)
            if saved and match and (int(match.group(1)), int(match.group(2))) > saved and int(match.group(1)) == saved[0]:
                for rank_process in processes:
                    rank_process.send_signal(signal.SIGKILL)
                killed_at = int(match.group(2))
                break
    finally:
        for rank_process in processes:
            rank_process.kill()
            rank_process.wait(timeout=60)
    assert killed_at is not None and process.returncode == -signal.SIGKILL, f"the run ended before a kill in epoch {epoch}"
    return saved[1]


@pytest.mark.parametrize("policy, default_workers", [("assistant", True), ("learnable", True), ("assistant", False),
                                                     ("released", True)],
                         ids=["papers-rule", "learnable", "papers-rule-no-workers", "released"])
def test_selection_never_depends_on_timing_and_a_kill_in_a_selecting_epoch_resumes_exactly(
        prepared_data, tmp_path, policy, default_workers):
    """Default worker thread and, unless named, fairseq's default data loader worker: an uninterrupted run, the same
    run with an Assistant slower than the training step, and a run killed in a selecting epoch and resumed train
    exactly the same batches. Selection at every update, by the Assistant's probability alone (base 0), so that any
    other Assistant parameters would change which pairs are drawn."""
    def args(name):
        return train_args(prepared_data, tmp_path / name, "--save-interval-updates", "3", "--autoassist-refresh-updates",
                          "1", "--autoassist-base-prob", "0", "--autoassist-digest-file", str(tmp_path / f"{name}.digest"),
                          policy=policy, max_epoch=4, default_workers=default_workers)

    reference_log = run_script("-m", "fairseq_cli.train", *args("reference")).stdout
    reference = trained_digests(tmp_path / "reference.digest")
    assert [epoch for epoch, _, _ in reference] == ["1", "2", "3", "4"], reference
    assert_selecting_epochs(reference_log, 4)

    slowed = run_script("-m", "tests.patched_assistant_train", "slow", *args("slowed")).stdout
    assert max(float(waits) for waits in re.findall(r"aa_waits ([\d.]+)", slowed)) > 0  # the slowness did bite
    assert trained_digests(tmp_path / "slowed.digest") == reference

    saved_at = train_and_kill_in_a_selecting_epoch(args("killed"))
    resumed = run_script("-m", "fairseq_cli.train", *args("killed")).stdout
    assert "restored Assistant and selection state" in resumed
    assert min(losses_by_update(resumed)) == saved_at + 1
    assert trained_digests(tmp_path / "killed.digest") == reference


def train_and_kill_after_an_epochs_checkpoint(args, epoch):
    """Runs fairseq-train ``args`` and kills it (SIGKILL) as soon as it has saved the checkpoint at the end of
    ``epoch`` (its epoch summary follows that save), before it trains a batch of the next epoch."""
    process = subprocess.Popen([sys.executable, "-m", "fairseq_cli.train", *args], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    killed = False
    try:
        for line in process.stdout:
            if f"| train | epoch {epoch:03d} |" in line:
                process.send_signal(signal.SIGKILL)
                killed = True
                break
    finally:
        process.kill()
        process.wait(timeout=60)
    assert killed, f"the run ended before epoch {epoch} did"


# Every registered policy but "none" (the stock iterator), and an annealed one: the rules that pace by updates
# (competence, spl, infobatch, annealing) read the update count that a checkpoint must carry.
RESUMABLE = [([policy], policy) for policy in POLICIES if policy != "none"] + [
    (["assistant", "--autoassist-anneal-fraction", "0.5"], "assistant-annealed")]


@pytest.mark.parametrize("policy_args", [args for args, _ in RESUMABLE], ids=[name for _, name in RESUMABLE])
def test_every_policy_resumes_exactly_after_a_kill_mid_epoch_and_one_after_an_epochs_checkpoint(
        prepared_data, tmp_path, policy_args):
    """Default settings (background worker, fairseq's data loader worker), selection at every update, paced by
    updates (--max-update 80: the third epoch ends near it, annealing starts in the second): the run is killed in the
    second epoch (the first that selects) after a mid-epoch checkpoint, resumed, killed again right after that epoch's
    checkpoint, and resumed to the end; it must train exactly the uninterrupted run's batches."""
    policy, *extra = policy_args
    if policy == "reducible":  # a reference model's scores, one per training pair of the synthetic corpus
        np.save(tmp_path / "reference.npy", np.random.default_rng(0).gamma(2.0, 1.0, 400).astype(np.float32))
        extra += ["--autoassist-reference-scores", str(tmp_path / "reference.npy")]

    def args(name):
        return train_args(prepared_data, tmp_path / name, "--save-interval-updates", "3", "--autoassist-refresh-updates",
                          "1", "--autoassist-digest-file", str(tmp_path / f"{name}.digest"), *extra, policy=policy,
                          max_epoch=3, max_update=80, default_workers=True)

    run_script("-m", "fairseq_cli.train", *args("reference"))
    reference = trained_digests(tmp_path / "reference.digest")
    assert [epoch for epoch, _, _ in reference] == ["1", "2", "3"], reference
    train_and_kill_in_a_selecting_epoch(args("killed"), epoch=2)
    train_and_kill_after_an_epochs_checkpoint(args("killed"), epoch=2)
    resumed = run_script("-m", "fairseq_cli.train", *args("killed")).stdout
    assert "restored Assistant and selection state" in resumed
    assert trained_digests(tmp_path / "killed.digest") == reference


def test_a_failed_assistant_stops_the_run_with_one_line_instead_of_training_on_under_its_policy(prepared_data,
                                                                                                tmp_path):
    failed = run_script("-m", "tests.patched_assistant_train", "broken",
                        *train_args(prepared_data, tmp_path / "broken", default_workers=True), check=False)
    assert failed.returncode != 0
    assert failed.stdout.rstrip().splitlines()[-1] == (
        "error: the Assistant worker failed after learning 2 steps (FloatingPointError: simulated failure of the "
        "Assistant's update); training stopped (its last checkpoint is intact). Fix the cause and resume, or train "
        "without an Assistant with --autoassist-policy keep-all")
    assert "| train | epoch 001 |" not in failed.stdout


FAILED_ON_FIRST_RANK = ("the Assistant worker failed after learning 2 steps (FloatingPointError: simulated failure of "
                        "the Assistant's update); training stopped")
STOPPED_FOR_ANOTHER_RANK = "another rank's Assistant failed (its error line says how); training stopped"


@pytest.mark.parametrize("launcher", ["no-spawn", "spawn"])
@pytest.mark.parametrize("worker", ["default", "sync"])
def test_an_assistant_failing_on_the_first_rank_stops_every_rank_at_once_with_one_line_each(
        prepared_data, tmp_path, launcher, worker):
    """Without fail-fast the other rank waits in its next collective (gloo: a traceback; NCCL: the process group's
    timeout, minutes). Under fairseq's spawn its first process reports the failing rank's line."""
    args = train_args(prepared_data, tmp_path / "ranks", *(["--autoassist-sync"] if worker == "sync" else []),
                      max_epoch=4, max_tokens=300, default_workers=True)
    command = [sys.executable, "-m", "tests.patched_assistant_train", "broken-on-first-rank", *args]
    if launcher == "no-spawn":
        commands = [command + distributed_flags(2, rank) for rank in (0, 1)]
    else:
        commands = [command + distributed_flags(2)]
    processes = [subprocess.Popen(rank_command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for rank_command in commands]
    started = time.monotonic()
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    assert time.monotonic() - started < 120, "a rank did not stop within a minute of the failure"
    for process, output in zip(processes, outputs):
        assert process.returncode != 0, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        assert "| train | epoch 001 |" not in output
    errors = [[line for line in output.splitlines() if line.startswith("error:")] for output in outputs]
    if launcher == "no-spawn":
        assert errors[0] == [f"error: {FAILED_ON_FIRST_RANK}" + errors[0][0].split("training stopped")[1]]
        assert len(errors[1]) == 1 and errors[1][0].startswith(f"error: {STOPPED_FOR_ANOTHER_RANK}")
    else:
        assert len(errors[0]) == 1 and errors[0][0].startswith(f"error: {FAILED_ON_FIRST_RANK}")
        assert errors[0][0].endswith("(rank 0)")


def test_a_step_that_runs_out_of_memory_still_sends_its_losses_so_that_ranks_gather_in_step(prepared_data, tmp_path,
                                                                                          monkeypatch):
    """fairseq answers an out-of-memory error in a micro-batch by going on with the update; under several ranks each
    step's loss gather must happen on every rank, or every later one pairs different steps. (Not end to end: stock
    fairseq's recovery itself stops two gloo ranks when one of them runs out of memory.)"""
    from fairseq_autoassist.recipes import build_trainer

    task, trainer, iterator = build_trainer(train_args(prepared_data, tmp_path))
    batches = iterator.next_epoch_itr(shuffle=True)
    trainer.train_step([next(batches)])
    sent = []
    monkeypatch.setattr(task.loss_handoff, "send", lambda ids, keep_prob, losses: sent.append(len(ids)))

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory (simulated)")

    monkeypatch.setattr(trainer.criterion, "compute_loss", out_of_memory)
    with pytest.raises(RuntimeError, match="out of memory"):
        task.train_step(next(batches), trainer.model, trainer.criterion, trainer.optimizer, 1)
    assert sent == [0]


def test_the_plugins_training_step_never_waits_for_the_device(prepared_data, tmp_path, monkeypatch):
    """On a GPU each of these reads waits for the device; the plugin's own code makes none within a training step
    (fairseq's model and trainer do, as in the stock task). On a GPU: tests/test_gpu.py's sync-debug check."""
    import torch

    from fairseq_autoassist.recipes import build_trainer

    task, trainer, iterator = build_trainer(train_args(prepared_data, tmp_path, "--report-accuracy",
                                                       "--autoassist-importance-weighting"))
    reads, in_step = [], []
    for name in ("item", "cpu", "tolist", "__bool__", "__int__", "__float__"):
        def spy(self, *args, _original=getattr(torch.Tensor, name), _name=name, **kwargs):
            caller = sys._getframe(1)
            if in_step and "fairseq_autoassist" in caller.f_code.co_filename:
                reads.append(f"{_name} at {caller.f_code.co_filename}:{caller.f_lineno}")
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, spy)
    step = task.train_step

    def watched_step(*args, **kwargs):
        in_step.append(True)
        try:
            return step(*args, **kwargs)
        finally:
            in_step.pop()

    monkeypatch.setattr(task, "train_step", watched_step)
    batches = iterator.next_epoch_itr(shuffle=True)
    for _ in range(3):
        trainer.train_step([next(batches)])
    trainer.train_step([{}])  # a dummy batch, as a rank without a batch of its own trains
    assert task.runtime.steps == 4 and task.runtime.weighted
    assert reads == []
    # The step's accuracy counts are fairseq's, without its masked_select.
    from fairseq_autoassist.tasks.autoassist_translation import accuracy_without_waiting

    sample = next(batches)
    model, criterion = trainer.model, trainer.criterion
    net_output = model(**sample["net_input"])
    counts = accuracy_without_waiting(criterion, model, net_output, sample)
    assert [int(c) for c in counts] == [int(c) for c in criterion.compute_accuracy(model, net_output, sample)]


def test_incompatible_autoassist_state_offers_the_reset_flag(prepared_data, tmp_path):
    import torch

    save_dir = tmp_path / "corrupt"
    fairseq_train(prepared_data, save_dir, *SYNC_ASSISTANT, max_epoch=1)
    checkpoint = save_dir / "checkpoint_last.pt"
    state = torch.load(checkpoint, weights_only=False)
    state["extra_state"]["AutoAssistTranslationTask"]["version"] = 99
    torch.save(state, checkpoint)
    refused = fairseq_train(prepared_data, save_dir, *SYNC_ASSISTANT, max_epoch=2, check=False)
    assert refused.returncode != 0
    assert "error: the checkpoint's AutoAssist state has version 99" in refused.stdout
    assert "--autoassist-reset-state" in refused.stdout and "Traceback" not in refused.stdout
    reset = fairseq_train(prepared_data, save_dir, *SYNC_ASSISTANT, "--autoassist-reset-state", max_epoch=2).stdout
    assert "starting AutoAssist afresh" in reset and re.search(r"\| train \| epoch 002 \|", reset)


def test_empty_training_split_is_refused(prepared_data, tmp_path):
    import shutil

    from fairseq.data.indexed_dataset import MMapIndexedDatasetBuilder

    data = tmp_path / "empty-train"
    shutil.copytree(prepared_data, data)
    for lang in ("de", "en"):
        prefix = str(data / f"train.de-en.{lang}")
        MMapIndexedDatasetBuilder(prefix + ".bin").finalize(prefix + ".idx")
    result = fairseq_train(str(data), tmp_path / "save", check=False)
    assert result.returncode != 0
    assert "error: the split 'train' in" in result.stdout and "has no sentence pairs" in result.stdout


def test_checkpoint_without_autoassist_state_starts_autoassist_fresh(prepared_data, tmp_path):
    fairseq_train(prepared_data, tmp_path / "c", policy="none", max_epoch=1)
    log = fairseq_train(prepared_data, tmp_path / "c", *SYNC_ASSISTANT, max_epoch=2).stdout
    assert "holds no AutoAssist state" in log


def test_bad_input_gets_one_clear_line(prepared_data, tmp_path):
    """The one-line handler in a real fairseq-train (the messages themselves: tests/test_options.py)."""
    result = fairseq_train(prepared_data, tmp_path / "save", "--autoassist-base-prob", "1.5", check=False)
    assert result.returncode != 0
    assert "error: --autoassist-base-prob=1.5 is outside [0, 1]" in result.stdout
    assert "Traceback" not in result.stdout
    # A curriculum paced by the fraction of training done, with no end of training to measure it by.
    unpaced = run_script("-m", "fairseq_cli.train", *tiny_recipe(prepared_data, tmp_path / "unpaced", "competence",
                                                                 max_epoch=0), check=False, timeout=300)
    assert unpaced.returncode != 0 and "Traceback" not in unpaced.stdout
    assert "paces its selection by the fraction of training done; set --max-update or --max-epoch" in unpaced.stdout


def test_fairseqs_copy_onto_the_last_checkpoint_cut_short_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    """fairseq copies each new checkpoint onto checkpoint_last.pt; a kill during that copy must not truncate it."""
    import shutil

    import fairseq_autoassist.tasks.autoassist_translation  # noqa: F401  (installs the copy, as --user-dir does)
    from fairseq import checkpoint_utils

    new, last = tmp_path / "checkpoint_3_30.pt", tmp_path / "checkpoint_last.pt"
    new.write_bytes(b"new" * 1000)
    last.write_bytes(b"old" * 1000)

    def copy_cut_short(src, dst, *args, **kwargs):
        with open(dst, "wb") as f:
            f.write(b"ne")
        raise KeyboardInterrupt  # the kill

    monkeypatch.setattr(shutil, "copyfile", copy_cut_short)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_utils.PathManager.copy(str(new), str(last), overwrite=True)
    assert last.read_bytes() == b"old" * 1000
    monkeypatch.undo()
    assert checkpoint_utils.PathManager.copy(str(new), str(last), overwrite=True)
    assert last.read_bytes() == b"new" * 1000


def test_a_token_budget_below_the_longest_pair_and_a_truncated_checkpoint_end_in_one_line(prepared_data, tmp_path):
    small = run_script("-m", "fairseq_cli.train", *tiny_recipe(prepared_data, tmp_path / "small", max_tokens=8),
                       check=False)
    assert small.returncode != 0 and "Traceback" not in small.stdout
    assert re.search(r"error: a budget of 8 tokens per batch is below the longest pair of split 'train' .*"
                     r"raise --max-tokens to at least \d+", small.stdout)
    save_dir = tmp_path / "truncated"
    fairseq_train(prepared_data, save_dir, policy="uniform", max_epoch=1)
    last = save_dir / "checkpoint_last.pt"
    last.write_bytes(last.read_bytes()[:5000])
    resumed = fairseq_train(prepared_data, save_dir, policy="uniform", max_epoch=2, check=False)
    assert resumed.returncode != 0 and "Traceback" not in resumed.stdout
    assert f"error: checkpoint {last} cannot be read" in resumed.stdout
    assert f"--restore-file {save_dir / 'checkpoint_best.pt'}" in resumed.stdout


@pytest.mark.parametrize("policy", ["uniform", "infobatch", "spl", "progress", "learnable", "loss-percentile",
                                    "competence", "near-duplicates"])
def test_peer_policies_share_the_shrinking_iterator(prepared_data, tmp_path, policy):
    # progress labels a pair from its last two visits, so it can first drop pairs in the third epoch.
    max_epoch = 3 if policy == "progress" else 2
    # competence opens every pair at --autoassist-competence-full-at (0.5 of training: the second epoch of two).
    paced = ["--autoassist-competence-full-at", "1.0"] if policy == "competence" else []
    # --autoassist-noise-ids flags pairs 0-99 as corrupted: the log shows their kept share and the others'.
    noise = tmp_path / "noise.tsv"
    noise.write_text("line\tkind\n" + "".join(f"{i}\tmisaligned\n" for i in range(100)))
    log = fairseq_train(prepared_data, tmp_path / policy, "--autoassist-sync", "--autoassist-refresh-updates", "5",
                        "--autoassist-noise-ids", str(noise), *paced, policy=policy, max_epoch=max_epoch).stdout
    epochs = updates_per_epoch(log)
    assert len(epochs) == max_epoch and epochs[-1] < epochs[0], epochs
    shares = re.findall(r"\| train \| epoch 00\d \|.*aa_kept_noisy ([\d.]+) \| aa_kept_clean ([\d.]+)", log)
    assert len(shares) == max_epoch and float(shares[0][0]) == float(shares[0][1]) == 1.0
    assert float(shares[-1][0]) < 1.0 and float(shares[-1][1]) < 1.0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_RANKS_PORT = {}


def distributed_flags(ranks, rank=None):
    """fairseq-train's flags for rank ``rank`` of ``ranks`` gloo ranks on this machine, one process each (the ranks
    of one launch share a port: ask for rank 0 first); ``rank=None``: one process that spawns them (fairseq's own
    launcher)."""
    if not rank:
        _RANKS_PORT[ranks] = _free_port()
    flags = ["--distributed-backend", "gloo", "--distributed-init-method", f"tcp://127.0.0.1:{_RANKS_PORT[ranks]}",
             "--distributed-world-size", str(ranks), "--ddp-backend", "legacy_ddp"]
    return flags if rank is None else flags + ["--distributed-no-spawn", "--distributed-rank", str(rank)]


def train_on_ranks(args, ranks=2):
    """fairseq-train ``args`` on ``ranks`` gloo ranks; returns each rank's output (every rank must exit 0)."""
    processes = [subprocess.Popen([sys.executable, "-m", "fairseq_cli.train", *args, *distributed_flags(ranks, rank)],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for rank in range(ranks)]
    outputs = [process.communicate(timeout=600)[0] for process in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    return outputs


def test_two_ranks_killed_mid_epoch_resume_exactly_on_every_rank(prepared_data, tmp_path):
    """Only the first rank saves checkpoints; every rank's selection digest and trained batches must still continue
    exactly after a SIGKILL of both in a selecting epoch (before 2026-12-07 the second rank chained its record onto
    the first rank's and the selection digest restarted)."""
    def args(name):
        return train_args(prepared_data, tmp_path / name, "--save-interval-updates", "3", "--autoassist-refresh-updates",
                          "1", "--autoassist-digest-file", str(tmp_path / f"{name}.digest"), max_epoch=4,
                          max_tokens=300, default_workers=True)

    train_on_ranks(args("reference"))
    train_and_kill_in_a_selecting_epoch(args("killed"), ranks=2)
    resumed = train_on_ranks(args("killed"))
    assert "restored Assistant and selection state" in resumed[0]
    for rank in (0, 1):
        reference = trained_digests(tmp_path / "reference.digest", rank)
        assert [epoch for epoch, _, _ in reference] == ["1", "2", "3", "4"]
        assert trained_digests(tmp_path / "killed.digest", rank) == reference
        with open(tmp_path / f"reference.digest.rank{rank}") as f, open(tmp_path / f"killed.digest.rank{rank}") as g:
            # The killed run wrote epochs 1 and 2 before the kill, the resumed one epochs 3 and 4.
            assert g.read() == f.read()


@pytest.mark.parametrize("policy, update_freq", [("assistant", 1), ("assistant", 2), ("released", 1)])
def test_two_cpu_ranks_with_uneven_shards_train_to_the_end_select_identically_and_resume_on_one(
        prepared_data, tmp_path, policy, update_freq):
    """Default settings but the backend: fairseq's data loader worker, the background worker, the paper's rule (and
    the released one). An epoch of an odd number of global batches leaves one rank a dummy batch (fairseq's stand-in,
    from the validation set in the first epoch), at --update-freq 2 in the middle of an update."""
    save_dir, digest = tmp_path / "ranks", tmp_path / "digest"
    args = train_args(prepared_data, save_dir, "--update-freq", str(update_freq), "--autoassist-digest-file",
                      str(digest), policy=policy, max_epoch=4, max_tokens=300, default_workers=True)
    outputs = train_on_ranks(args)
    digests = [open(f"{digest}.rank{rank}").read().splitlines() for rank in (0, 1)]
    assert len(digests[0]) == 4 and digests[0] == digests[1]
    batches = [int(line.split("\t")[1]) for line in digests[0]]
    assert_selecting_epochs(outputs[0], 4)
    # A selecting epoch left a rank short: it trained a dummy batch (also in the middle of an update at 2).
    assert any(count % (2 * update_freq) for count in batches[1:]), batches

    resumed = fairseq_train(prepared_data, save_dir, policy=policy, max_epoch=5, max_tokens=300).stdout
    assert "restored Assistant and selection state" in resumed
    assert re.search(r"\| train \| epoch 005 \|", resumed)


def test_a_corpus_side_keeps_its_memory_map_alive(prepared_data):
    """The Assistant reads tokens in place; the memory map must outlive the dataset object."""
    import gc

    from fairseq.data import Dictionary, data_utils

    from fairseq_autoassist.assistant import PairFeatures
    from fairseq_autoassist.data.iterator import corpus_side

    dictionary = Dictionary.load(os.path.join(prepared_data, "dict.de.txt"))
    sides, expected = [], []
    for lang in ("de", "en"):
        dataset = data_utils.load_indexed_dataset(os.path.join(prepared_data, f"train.de-en.{lang}"), dictionary)
        expected.append(np.concatenate([dataset[i].numpy() for i in range(len(dataset))]))
        sides.append(corpus_side(dataset))
    del dataset
    gc.collect()
    for side, tokens in zip(sides, expected):
        np.testing.assert_array_equal(side.tokens[: side.offsets[-1]], tokens)
        # No per-pair copies beyond the offsets: the tokens and the lengths view the memory map.
        assert not side.tokens.flags.owndata and not side.lengths.flags.owndata
    assert np.isfinite(PairFeatures(*sides, vocab_size=len(dictionary)).idf[1]).all()


def test_selection_is_refreshed_every_so_many_updates_of_update_freq_batches(prepared_data, tmp_path):
    from fairseq_autoassist.recipes import build_trainer

    chunk_pairs = {}
    for update_freq in (1, 2):
        argv = tiny_recipe(prepared_data, tmp_path, "keep-all") + [
            "--update-freq", str(update_freq), "--autoassist-refresh-updates", "2"]
        task, _, _ = build_trainer(argv)
        chunk_pairs[update_freq] = task.runtime.stream.chunk_pairs
    # Two updates of two batches each: twice the pairs of two updates of one batch.
    assert chunk_pairs[2] == pytest.approx(2 * chunk_pairs[1], abs=1)


def test_report_accuracy_reaches_the_logs_under_a_selection_policy(prepared_data, tmp_path):
    log = fairseq_train(prepared_data, tmp_path / "accuracy", "--report-accuracy", policy="keep-all", max_epoch=1).stdout
    assert re.search(r"\| train \| epoch 001 \|.*\| accuracy [\d.]+", log)
