"""One run's AutoAssist parts (runtime.py): wiring by policy, losses in, weights out, checkpoint state."""

import functools
import math
from dataclasses import replace

import numpy as np
import pytest

from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.loss_log import read_loss_log
from fairseq_autoassist.options import AutoAssistOptions
from fairseq_autoassist.runtime import AutoAssistRuntime

from .synthetic import padded_token_budget_batches, random_features

NUM_PAIRS = 300


def make_runtime(policy="assistant", max_update=0, **options):
    features = random_features(num_pairs=NUM_PAIRS, seed=5)
    sizes = features.target.lengths
    cfg = replace(AutoAssistOptions(), autoassist_policy=policy, autoassist_sync=True, **options)
    return AutoAssistRuntime(cfg, np.arange(NUM_PAIRS), sizes, chunk_pairs=60, seed=1, max_epoch=0,
                             max_update=max_update,
                             make_batches=functools.partial(padded_token_budget_batches, sizes=sizes, max_tokens=200),
                             pair_features=lambda: features)


def train_step(runtime, batch, keep_prob, losses):
    """One training step as the task's train_step takes it (without the hand-off's delay of one step)."""
    runtime.begin_step(num_updates=runtime.steps)
    runtime.report_losses(batch, keep_prob, losses)


def train_epoch(runtime, epoch, rng):
    """Every batch of an epoch reports random losses, as the task's train_step does."""
    for batch, keep_prob in runtime.stream.iterate_epoch(epoch):
        train_step(runtime, batch, keep_prob, rng.gamma(2.0, 1.0, size=len(batch)))


def test_each_policy_gets_the_parts_it_needs():
    assistant, infobatch, uniform = make_runtime("assistant"), make_runtime("infobatch"), make_runtime("uniform")
    assert assistant.worker is not None and assistant.loss_table is None
    assert infobatch.worker is None and infobatch.loss_table is not None
    assert uniform.worker is None and uniform.loss_table is None and not uniform.wants_losses


def test_a_paced_policy_without_a_training_length_names_the_flags():
    with pytest.raises(AutoAssistConfigError, match="set --max-update or --max-epoch"):
        make_runtime("competence")


def test_the_competence_policy_ranks_every_pair_by_its_source_rarity():
    runtime = make_runtime("competence", max_update=100)
    rarest = int(np.argmax(random_features(num_pairs=NUM_PAIRS, seed=5).source_rarity()))
    assert runtime.worker is None and runtime.selector.difficulty[rarest] == 1.0


def test_the_skip_longest_policy_ranks_every_pair_by_its_target_length():
    runtime = make_runtime("skip-longest")
    sizes = random_features(num_pairs=NUM_PAIRS, seed=5).target.lengths
    shares = runtime.selector.difficulty
    assert runtime.worker is None and shares.max() == 1.0 and len(np.unique(sizes)) > 1
    assert np.all(np.diff(sizes[np.argsort(shares)]) >= 0)  # longer targets, higher shares


def test_weights_only_for_a_weighting_policy_and_scaled_per_batch():
    rng = np.random.default_rng(0)
    plain, weighted = make_runtime("uniform"), make_runtime("uniform", autoassist_importance_weighting=True)
    for runtime in (plain, weighted):
        train_epoch(runtime, 1, rng)
        batch, keep_prob = next(iter(runtime.stream.iterate_epoch(2)))
    assert not plain.weighted and weighted.weighted
    tokens = rng.integers(3, 20, size=len(batch))
    weights = weighted.loss_weights(keep_prob, tokens)
    assert np.sum(weights * tokens) == pytest.approx(tokens.sum(), rel=1e-5)


def test_reported_losses_reach_every_consumer_with_their_keep_probabilities(tmp_path):
    log = tmp_path / "losses.npy"
    runtime = make_runtime("assistant", autoassist_base_prob=0.0, autoassist_loss_log=str(log))
    rng = np.random.default_rng(1)
    train_epoch(runtime, 1, rng)
    train_epoch(runtime, 2, rng)
    assert runtime.worker.stats()["updates"] > 0
    records = list(read_loss_log(str(log)))
    assert sum(len(ids) for ids, _, _ in records) >= NUM_PAIRS
    _, _, keep_prob = records[-1]
    assert np.all(keep_prob < 1.0)
    metrics = runtime.metrics()
    assert 0 < metrics["aa_cpu_select"] < metrics["aa_cpu_process"]
    assert 0 < metrics["aa_cpu_assistant"] < metrics["aa_cpu_process"]


def test_checkpoint_state_round_trips_and_a_wrong_one_names_the_reset_flag():
    rng = np.random.default_rng(2)
    runtime = make_runtime("assistant")
    train_epoch(runtime, 1, rng)
    state = runtime.state_dict(consumed_global_batches=0)
    restored = make_runtime("assistant")
    restored.load_state_dict(state)
    for step in (runtime.steps, runtime.steps + 1):
        np.testing.assert_array_equal(restored.worker.predict(np.arange(20), step),
                                      runtime.worker.predict(np.arange(20), step))
    with pytest.raises(AutoAssistConfigError, match="has version 99, .*--autoassist-reset-state"):
        restored.load_state_dict({**state, "version": 99})
    with pytest.raises(AutoAssistConfigError, match="was written with --autoassist-policy assistant, not uniform"):
        make_runtime("uniform").load_state_dict(state)
    with pytest.raises(AutoAssistConfigError, match=r"is corrupt \(KeyError"):
        make_runtime("assistant").load_state_dict({k: v for k, v in state.items() if k != "assistant"})


def test_a_resumed_run_logs_the_steps_after_its_checkpoint_once(tmp_path):
    log = tmp_path / "losses.npy"
    runtime = make_runtime("keep-all", autoassist_loss_log=str(log))
    rng = np.random.default_rng(4)
    train_epoch(runtime, 1, rng)
    logged_at_checkpoint = len(list(read_loss_log(str(log))))  # one record per batch
    state = runtime.state_dict(consumed_global_batches=logged_at_checkpoint)
    train_epoch(runtime, 2, rng)  # trained past the checkpoint, then killed
    resumed = make_runtime("keep-all", autoassist_loss_log=str(log))
    resumed.load_state_dict(state)
    assert len(list(read_loss_log(str(log)))) == logged_at_checkpoint
    train_epoch(resumed, 2, rng)
    ids = np.concatenate([ids for ids, _, _ in read_loss_log(str(log))])
    assert np.bincount(ids, minlength=NUM_PAIRS).tolist() == [2] * NUM_PAIRS


def test_the_progress_policy_teaches_the_assistant_its_own_label():
    runtime = make_runtime("progress", autoassist_base_prob=0.0)
    assert runtime.selector.loss_table is runtime.loss_table and runtime.loss_table.fresh_steps > 0
    rng = np.random.default_rng(3)
    falling = np.arange(NUM_PAIRS) < NUM_PAIRS // 2
    for epoch in range(1, 4):
        for batch, keep_prob in runtime.stream.iterate_epoch(epoch):
            # Half the pairs keep learning (their loss falls each visit), the other half stay flat.
            losses = np.where(falling[batch], 4.0 * 0.6 ** epoch, 3.0) * rng.normal(1.0, 0.02, size=len(batch))
            train_step(runtime, batch, keep_prob, losses)
    assistant = runtime.worker.assistant
    assert assistant.num_pairs_seen > 0
    assert assistant.positive_rate == pytest.approx(0.5, abs=0.25)
    labels = runtime.loss_table.labels(np.arange(NUM_PAIRS))
    seen = np.isfinite(labels)
    assert labels[seen & falling].mean() > 0.75 and labels[seen & ~falling].mean() < 0.1


def test_noise_ids_give_the_kept_share_of_corrupted_and_clean_pairs(tmp_path):
    noise = tmp_path / "noise.tsv"
    noise.write_text("line\tkind\n" + "".join(f"{i}\tmisaligned\n" for i in range(0, NUM_PAIRS, 3)))
    runtime = make_runtime("uniform", autoassist_uniform_keep_prob=0.5, autoassist_noise_ids=str(noise))
    train_epoch(runtime, 1, np.random.default_rng(4))
    train_epoch(runtime, 2, np.random.default_rng(4))
    stats = runtime.stream.epoch_stats
    assert stats.candidate_flagged == pytest.approx(NUM_PAIRS / 3, abs=1)
    metrics = runtime.metrics()
    assert 0.3 < metrics["aa_kept_noisy"] < 0.7 and 0.3 < metrics["aa_kept_clean"] < 0.7
    assert metrics["aa_kept_noisy"] == stats.kept_flagged / stats.candidate_flagged
    assert "aa_kept_noisy" not in make_runtime("uniform").metrics()
    noise.write_text("line\tkind\n9999\tmisaligned\n")
    with pytest.raises(AutoAssistConfigError, match="lists line 9999, but the training split has 300 pairs"):
        make_runtime("uniform", autoassist_noise_ids=str(noise))
    with pytest.raises(AutoAssistConfigError, match="--autoassist-noise-ids .* is unreadable"):
        make_runtime("uniform", autoassist_noise_ids=str(tmp_path / "missing.tsv"))


def test_an_undefined_metric_weighs_nothing_in_fairseqs_epoch_mean():
    from fairseq.logging import metrics

    from fairseq_autoassist.tasks.autoassist_translation import log_runtime_metrics

    with metrics.aggregate(new_root=True) as epoch:
        log_runtime_metrics({"aa_auc_seen": float("nan"), "aa_auc_new": float("nan")})
        log_runtime_metrics({"aa_auc_seen": 0.8, "aa_auc_new": float("nan")})
        log_runtime_metrics({"aa_auc_seen": 0.6, "aa_auc_new": float("nan")})
    values = epoch.get_smoothed_values()
    assert values["aa_auc_seen"] == pytest.approx(0.7)
    assert math.isnan(values["aa_auc_new"])  # never defined: NaN, as docs/how-it-works.md's logs section says


def test_a_restored_runtime_selects_before_its_first_step_as_the_uninterrupted_one():
    """An update-paced rule (competence) reads the update count: a selection made before the resumed run's first step
    (the next epoch's plan) must see the checkpoint's, not 0."""
    runtime = make_runtime("competence", max_update=20)
    for _ in range(12):
        runtime.begin_step(num_updates=runtime.steps)
    restored = make_runtime("competence", max_update=20)
    restored.load_state_dict(runtime.state_dict(consumed_global_batches=0))
    indices = np.arange(NUM_PAIRS)
    np.testing.assert_array_equal(restored.selector.keep_probabilities(indices, epoch=2),
                                  runtime.selector.keep_probabilities(indices, epoch=2))


def test_a_checkpoint_of_another_snapshot_lag_names_the_lag_to_resume_with():
    runtime = make_runtime("assistant", autoassist_assistant_lag=8)
    train_epoch(runtime, 1, np.random.default_rng(3))
    with pytest.raises(AutoAssistConfigError, match="--autoassist-assistant-lag 8, not 4 .*resume with "
                                                    "--autoassist-assistant-lag 8"):
        make_runtime("assistant", autoassist_assistant_lag=4).load_state_dict(runtime.state_dict(0))


def _select_with_a_failing_first_rank(rank, port, results):
    import os

    import torch.distributed as dist

    from fairseq_autoassist.errors import AssistantFailedError

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        runtime = make_runtime()

        def failing_select(*args):
            raise AssistantFailedError("simulated stall")

        if rank == 0:
            runtime.selector.select = failing_select
        try:
            runtime._select(np.arange(10), 2, 2, 0)
            results[rank] = "selected"
        except AssistantFailedError as error:
            results[rank] = str(error)
    finally:
        dist.destroy_process_group()


def test_a_selection_that_fails_on_the_first_rank_stops_every_rank_instead_of_leaving_them_in_its_broadcast():
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_select_with_a_failing_first_rank, args=(port, results), nprocs=2, join=True)
    assert results[0].startswith("simulated stall; training stopped")
    assert results[1].startswith("the first rank's Assistant failed (its error line says how); training stopped")


def test_a_mid_epoch_checkpoint_of_another_rank_count_is_refused_naming_how_to_resume_and_an_epochs_end_is_not():
    """fairseq restores a resumed epoch's position per rank: on another number of ranks a mid-epoch checkpoint would
    skip or retrain batches. An epoch's end has no position and resumes on any number of ranks."""
    saved = make_runtime()
    for batch, keep_prob in saved.stream.iterate_epoch(1):
        break
    mid_epoch = saved.state_dict(consumed_global_batches=1)
    mid_epoch["ranks"] = 2
    with pytest.raises(AutoAssistConfigError, match=r"in the middle of an epoch \(1 global batches in\) by 2 ranks, "
                                                    r"and this run has 1 .*resume it on 2 ranks.*--restore-file"):
        make_runtime().load_state_dict(mid_epoch)
    for consumed in (0, saved.stream.planned, saved.stream.planned + 1):  # an epoch's end, padded with dummy batches
        at_an_epochs_end = saved.state_dict(consumed_global_batches=consumed)
        at_an_epochs_end["ranks"] = 2
        make_runtime().load_state_dict(at_an_epochs_end)
