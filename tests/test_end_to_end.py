"""End to end through the real fairseq-preprocess / fairseq-train / fairseq-generate on tiny data."""

import json
import os
import re
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

from fairseq_autoassist.recipes import recipe

from .conftest import ROOT, run_script


pytestmark = pytest.mark.slow

SYNC_ASSISTANT = ["--autoassist-sync", "--autoassist-refresh-updates", "2", "--autoassist-base-prob", "0"]


def tiny_recipe(data, save_dir, policy="assistant", max_epoch=2, max_update=0, max_tokens=400):
    """The project's training recipe with a tiny model, logging every update, on the CPU."""
    return recipe(
        data, str(save_dir), policy, arch="tiny", max_epoch=max_epoch, max_update=max_update,
        max_tokens=max_tokens, lr=1e-3, warmup_updates=10, cpu=True, eval_bleu=False, log_interval=1,
    ) + ["--no-progress-bar"]


def fairseq_train(data, save_dir, *extra, policy="assistant", max_epoch=2, max_update=0, check=True,
                  default_workers=False):
    """fairseq-train with the tiny recipe; ``default_workers``: without the recipe's --num-workers 0, so with
    fairseq's default data loader worker, as a user's command runs."""
    args = tiny_recipe(data, save_dir, policy, max_epoch, max_update)
    if default_workers:
        at = args.index("--num-workers")
        del args[at : at + 2]
    return run_script("-m", "fairseq_cli.train", *args, *extra, check=check)


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


@pytest.mark.parametrize("default_workers", [False, True], ids=["no-workers", "fairseqs-default-worker"])
def test_mid_epoch_resume_continues_exactly_like_an_uninterrupted_run(prepared_data, tmp_path, default_workers):
    def train(save_dir, **kwargs):
        return losses_by_update(fairseq_train(prepared_data, save_dir, *SYNC_ASSISTANT, max_epoch=3,
                                              default_workers=default_workers, **kwargs).stdout)

    reference = train(tmp_path / "a")
    per_epoch = len(reference) // 3
    stop_at = max(update for update in reference if update < 1.5 * per_epoch + 1)  # inside epoch 2
    train(tmp_path / "b", max_update=stop_at)
    # A data loader worker prefetches as soon as it starts: the resumed epoch must not start it before the
    # checkpoint's selection state is back, or it trains the epoch's first batches again.
    resumed = train(tmp_path / "b")
    assert min(resumed) == stop_at + 1
    assert resumed == {u: loss for u, loss in reference.items() if u > stop_at}


# The SHA-1 of every epoch's batches of the run below, recorded with the training step of commit 8e9c237, which
# copied the ids and losses to the host before the backward pass: on the CPU the step that hands them over after
# it must select exactly the same pairs, weights included.
SELECTION_BEFORE_THE_HANDOFF = {
    "assistant": [
        (1, 25, "a99acd0f7282ee84fb14c5efbe2da85d9a3ee570"),
        (2, 12, "baeac864f0673e096009dfb79da1b9897447121e"),
        (3, 9, "b4c17d07cc7e3dd461eeb60f24bd3e6ea0c71d3c"),
        (4, 12, "3a8d5add437ac886524ea8eaf642a70d5efc46c5"),
    ],
    "learnable": [
        (1, 25, "a99acd0f7282ee84fb14c5efbe2da85d9a3ee570"),
        (2, 20, "62142ab87257d4c628c962fc13924c79b8e032bb"),
        (3, 20, "58dd53177f3439a8b3da4d9883d1a0bdcc6ecac0"),
        (4, 22, "226b4e14039ef76f41a48ec05b30075727f6318c"),
    ],
}


@pytest.mark.parametrize("policy", ["assistant", "learnable"])
def test_on_the_cpu_the_training_step_selects_exactly_the_pairs_it_always_did(prepared_data, tmp_path, policy):
    digest = tmp_path / "digest"
    fairseq_train(prepared_data, tmp_path / "run", *SYNC_ASSISTANT, "--autoassist-importance-weighting",
                  "--autoassist-digest-file", str(digest), policy=policy, max_epoch=4)
    fields = (tmp_path / "digest.rank0").read_text().split()
    epochs = [(int(epoch), int(batches), sha) for epoch, batches, sha in zip(fields[::3], fields[1::3], fields[2::3])]
    assert epochs == SELECTION_BEFORE_THE_HANDOFF[policy]


def test_sigkill_mid_epoch_loses_only_the_work_since_the_last_checkpoint(prepared_data, tmp_path):
    save_dir = tmp_path / "killed"
    command = [sys.executable, "-m", "fairseq_cli.train", *tiny_recipe(prepared_data, save_dir, max_epoch=4),
               *SYNC_ASSISTANT, "--save-interval-updates", "2"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    saved_mid_epoch = None
    try:
        for line in process.stdout:
            match = re.search(r"Saved checkpoint \S+checkpoint_2_(\d+)\.pt \(epoch 2 @", line)
            if match:
                saved_mid_epoch = int(match.group(1))
                process.send_signal(signal.SIGKILL)
                break
    finally:
        process.kill()
        process.wait(timeout=60)
    assert saved_mid_epoch is not None and process.returncode == -signal.SIGKILL

    resumed = fairseq_train(prepared_data, save_dir, *SYNC_ASSISTANT, max_epoch=4).stdout
    assert "restored Assistant and selection state" in resumed
    assert min(losses_by_update(resumed)) == saved_mid_epoch + 1
    assert re.search(r"\| train \| epoch 004 \|", resumed)


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


def test_two_cpu_ranks_select_identically_and_resume_on_one(prepared_data, tmp_path):
    save_dir, digest = tmp_path / "ranks", tmp_path / "digest"
    args = tiny_recipe(prepared_data, save_dir, max_epoch=3, max_tokens=200)
    distributed_flags = [
        "--distributed-backend", "gloo", "--distributed-init-method", f"tcp://127.0.0.1:{_free_port()}",
        "--distributed-world-size", "2", "--distributed-no-spawn", "--ddp-backend", "legacy_ddp",
        "--autoassist-refresh-updates", "2", "--autoassist-base-prob", "0",
        "--autoassist-digest-file", str(digest),
    ]
    ranks = [
        subprocess.Popen([sys.executable, "-m", "fairseq_cli.train", *args, *distributed_flags,
                          "--distributed-rank", str(rank)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for rank in (0, 1)
    ]
    outputs = [process.communicate(timeout=600)[0] for process in ranks]
    for process, output in zip(ranks, outputs):
        assert process.returncode == 0, output[-3000:]
    digests = [open(f"{digest}.rank{rank}").read().splitlines() for rank in (0, 1)]
    assert len(digests[0]) == 3 and digests[0] == digests[1]
    batches = [int(line.split("\t")[1]) for line in digests[0]]
    assert batches[1] < batches[0], batches

    resumed = fairseq_train(prepared_data, save_dir, "--autoassist-refresh-updates", "2", "--autoassist-base-prob",
                            "0", max_epoch=4).stdout
    assert "restored Assistant and selection state" in resumed
    assert re.search(r"\| train \| epoch 004 \|", resumed)


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
