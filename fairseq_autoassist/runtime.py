"""AutoAssist's moving parts for one training run, owned in one place (no fairseq import).

``AutoAssistRuntime`` builds the parts a policy needs (``selection.policies``): the Assistant and its
worker, the table of each pair's latest loss, the optional loss log, the selector and the shrinking
batch stream. The fairseq task talks only to it: the stream for batches, ``loss_weights`` (when
``weighted``) and ``report_losses`` in each training step, ``metrics`` for the logs, ``state_dict`` /
``load_state_dict`` for checkpoints.

Under distributed training every rank holds a runtime; the first rank's selection of each chunk is
broadcast and every rank's losses are gathered (``distributed``), so all ranks build the same
batches and train the same Assistant.
"""

import functools
import logging
import time

import numpy as np

from . import distributed
from .assistant import Assistant, AssistantConfig
from .assistant.released import ReleasedAssistant
from .data import ShrinkingBatchStream
from .data.batch_stream import chain_digest
from .data.noise_list import read_noise
from .errors import AssistantFailedError, AutoAssistConfigError
from .loss_log import LossLog
from .options import RuntimeOptions, batching, build
from .selection import (
    SelectionOptions,
    SelectionSchedule,
    Selector,
    batch_importance_weights,
)
from .selection.policies import POLICIES
from .worker import AsyncAssistantWorker, SyncAssistantWorker

logger = logging.getLogger(__name__)

CHECKPOINT_VERSION = 4
# What the first rank broadcasts instead of a selection when its Assistant failed (pair ids are never negative).
FAILED_SELECTION = np.array([-1], dtype=np.int64)
# How long a rank whose own Assistant is sound waits before it stops because another rank's failed.
FOLLOWING_RANK_DELAY_SECONDS = 3.0


def read_flagged_pairs(path, num_pairs):
    """The pairs listed in a ``noise.tsv`` (``data.noise_list.read_noise``) as a boolean mask."""
    try:
        ids = np.asarray(list(read_noise(path)), dtype=np.int64)
    except (OSError, ValueError) as error:
        raise AutoAssistConfigError(f"--autoassist-noise-ids {path} is unreadable ({error}); pass the noise.tsv "
                                    "written by scripts/research/make_noisy_corpus.py") from None
    if len(ids) and (ids.min() < 0 or ids.max() >= num_pairs):
        raise AutoAssistConfigError(f"--autoassist-noise-ids {path} lists line {int(ids.max())}, but the training "
                                    f"split has {num_pairs} pairs; pass the noise.tsv of this corpus")
    flagged = np.zeros(num_pairs, dtype=bool)
    flagged[ids] = True
    return flagged


def feed_back(policy, ids, per_token_losses, keep_prob, loss_table=None, worker=None, loss_log=None, pass_index=1):
    """One step's per-token losses of the kept pairs, with the probability each was kept with, to the
    consumers a policy has (``scripts/research/replay_selection.py`` replays a loss log through this too).
    Called once per training step: the worker counts steps by its calls, so an empty step still reaches it.
    ``pass_index``: the pass the batch stream generates as the losses arrive."""
    if len(ids):
        for consumer in (loss_table, loss_log):
            if consumer is not None:
                consumer.submit(ids, per_token_losses, keep_prob)
    if worker is None:
        return
    if policy.learns_table_labels:
        # A label may need two visits (learning progress): the Assistant learns from the pairs that have one.
        labels = loss_table.labels(ids)
        labelled = np.isfinite(labels)
        worker.submit(ids[labelled], per_token_losses[labelled], keep_prob[labelled], labels[labelled], pass_index)
    else:
        worker.submit(ids, per_token_losses, keep_prob, pass_index=pass_index)


class AutoAssistRuntime:
    """
    Args:
        cfg: the task's config (every ``autoassist_*`` option, read by field name).
        candidates: dataset indices eligible for training, in fairseq's order.
        target_sizes: target length of every dataset index.
        chunk_pairs: candidates per selection chunk.
        seed, max_epoch, max_update: fairseq's training settings.
        make_batches: ``f(indices) -> list of index arrays`` under the token budget.
        pair_features: ``f() -> PairFeatures``, called (once) only when the policy needs the features.
        steps_per_pass: training steps of one unfiltered pass (full global batches / ranks).
        min_batches_per_epoch: the number of ranks.
    """

    def __init__(self, cfg, candidates, target_sizes, chunk_pairs, seed, max_epoch, max_update, make_batches,
                 pair_features, steps_per_pass=1, min_batches_per_epoch=1):
        self.policy = POLICIES[cfg.autoassist_policy]
        self.runtime_options = build(RuntimeOptions, cfg)
        selection_options = build(SelectionOptions, cfg)
        if self.policy.paced and not (max_update or max_epoch):
            raise AutoAssistConfigError(
                f"--autoassist-policy {cfg.autoassist_policy} paces its selection by the fraction of training done; "
                "set --max-update or --max-epoch")
        features = functools.cache(pair_features)
        self.worker = self._build_worker(cfg, features(), seed) if self.policy.needs_assistant else None
        self.loss_table = self.policy.build_loss_table(
            len(target_sizes), selection_options, steps_per_pass, cfg.autoassist_loss_mean_decay,
            groups=features().near_duplicate_groups() if self.policy.needs_groups else None)
        self.loss_log = None
        if self.runtime_options.loss_log and distributed.rank() == 0:
            self.loss_log = LossLog(self.runtime_options.loss_log)
        self.selector = Selector(
            selection_options,
            build(SelectionSchedule, cfg, max_epoch=max_epoch or 0, max_update=max_update or 0),
            seed=seed, worker=self.worker, loss_table=self.loss_table,
            difficulty=self.policy.difficulty_shares(target_sizes, features),
        )
        flagged = None
        if self.runtime_options.noise_ids:
            flagged = read_flagged_pairs(self.runtime_options.noise_ids, len(target_sizes))
        self.stream = ShrinkingBatchStream(
            candidates, target_sizes, chunk_pairs, seed, make_batches, self._select_on_every_rank,
            on_epoch_complete=self._record_epoch_digest, min_batches_per_epoch=min_batches_per_epoch,
            flagged=flagged, visiting_order=batching(cfg) == "as-released",
        )
        self.corpus_mean_target_length = float(np.mean(target_sizes[candidates]))
        self.selection_cpu_seconds = 0.0
        # The Assistant's failure on this rank, held until every rank stops together.
        self.failure = None
        self.steps = 0
        # With --autoassist-digest-file: the epoch, count and chained SHA-1 of the batches this rank trained on.
        self.trained = {"epoch": None, "batches": 0, "digest": ""}
        # Every rank's digest at the restored checkpoint (``_trained_by_rank`` continues them in the restored epoch).
        self._restored_trained_by_rank, self._restored_trained_epoch = [], None

    def _build_worker(self, cfg, features, seed):
        if self.policy.assistant == "released":
            assistant = ReleasedAssistant(features, seed)
        else:
            assistant = Assistant(features, build(AssistantConfig, cfg))
        lag = self.runtime_options.assistant_lag
        if self.runtime_options.sync:
            return SyncAssistantWorker(assistant, lag)
        return AsyncAssistantWorker(assistant, lag, queue_size=self.runtime_options.queue_size)

    # ------------------------------------------------------------ selection
    def _select_on_every_rank(self, indices, epoch, pass_index, chunk):
        started = time.thread_time()
        try:
            return self._select(indices, epoch, pass_index, chunk)
        finally:
            self.selection_cpu_seconds += time.thread_time() - started

    def _select(self, indices, epoch, pass_index, chunk):
        """The selector's choice; under distributed training the first rank's, broadcast."""
        if distributed.world_size() == 1:
            return self.selector.select(indices, epoch, pass_index, chunk)
        kept, keep_prob = (None, None)
        if distributed.rank() == 0:
            try:
                kept, keep_prob = self.selector.select(indices, epoch, pass_index, chunk)
            except AssistantFailedError as error:
                # Said to every rank, which would otherwise wait in this broadcast until the process group times out.
                self.failure, kept = error, FAILED_SELECTION
        kept = distributed.broadcast_from_first_rank(kept, np.int64)
        if len(kept) and kept[0] == FAILED_SELECTION[0]:
            raise self.failure or AssistantFailedError("the first rank's Assistant failed (its error line says how)")
        keep_prob = distributed.broadcast_from_first_rank(
            np.zeros(0, np.float32) if keep_prob is None else keep_prob, np.float32
        )
        return kept, (keep_prob if len(keep_prob) == len(kept) and len(kept) else None)

    def _record_epoch_digest(self, epoch, num_batches, digest):
        logger.info("AutoAssist: epoch %d has %d global batches, selection digest %s", epoch, num_batches, digest)
        self._append_digest("", epoch, num_batches, digest)

    def _append_digest(self, kind, epoch, num_batches, digest):
        if self.runtime_options.digest_file:
            with open(f"{self.runtime_options.digest_file}{kind}.rank{distributed.rank()}", "a") as f:
                f.write(f"{epoch}\t{num_batches}\t{digest}\n")

    def record_trained_batch(self, epoch, ids):
        """With --autoassist-digest-file: chains ``ids`` (a batch this rank trains on in ``epoch``) into the epoch's
        digest, kept in checkpoints for every rank, and appends the previous epoch's to ``FILE.trained.rankR`` when an
        epoch starts: a resumed run writes the uninterrupted run's lines exactly when it trains the same batches."""
        if not self.runtime_options.digest_file:
            return
        if epoch != self.trained["epoch"]:
            self.write_trained_digest()
            self.trained = {"epoch": epoch, "batches": 0, "digest": ""}
        self.trained["batches"] += 1
        self.trained["digest"] = chain_digest(self.trained["digest"], np.sort(ids))  # the collater reorders a batch

    def _trained_by_rank(self, consumed):
        """Every rank's trained-batch digest after ``consumed`` global batches of the epoch. Only the first rank saves
        checkpoints, but every rank's batches are in the global list it built: rank r trains batches r, r + N, ...
        (a checkpoint follows whole steps of every rank, and the epoch plans a batch for every rank)."""
        ranks, epoch = distributed.world_size(), self.stream.epoch
        if self.stream.restored_at and self._restored_trained_epoch == epoch:
            by_rank = [dict(state) for state in self._restored_trained_by_rank]
        else:
            by_rank = [{"epoch": epoch, "batches": 0, "digest": ""} for _ in range(ranks)]
        for position, batch in self.stream.consumed_batches(consumed):
            state = by_rank[position % ranks]
            state["batches"] += 1
            state["digest"] = chain_digest(state["digest"], np.sort(batch))
        return by_rank

    def _restore_trained(self, state):
        by_rank = state.get("trained_by_rank")  # absent before 2026-12-07: then only the first rank's
        rank = distributed.rank()
        if by_rank is None:
            by_rank = [state["trained"]]
        self._restored_trained_by_rank = [dict(entry) for entry in by_rank]
        self._restored_trained_epoch = state["stream"]["epoch"]
        # A rank the saving run did not have trained nothing of the record's epoch.
        self.trained = dict(by_rank[rank]) if rank < len(by_rank) else {"epoch": None, "batches": 0, "digest": ""}

    def write_trained_digest(self):
        """Appends the current epoch's trained-batch digest (at an epoch's end, and when training ends)."""
        if self.trained["batches"]:
            self._append_digest(".trained", self.trained["epoch"], self.trained["batches"], self.trained["digest"])
            self.trained["batches"] = 0

    # ------------------------------------------------------------ training steps
    def begin_step(self, num_updates):
        """Called at the start of every training step (each of --update-freq batches, dummy batches too): keeps
        update-based schedules (annealing, InfoBatch's delta, SPL's pace) current and counts the steps by which
        a selection picks the Assistant's snapshot."""
        self.steps += 1
        self.selector.num_updates = num_updates
        self.selector.steps = self.steps

    @property
    def weighted(self):
        """Whether kept pairs' losses carry importance weights (``loss_weights``)."""
        return self.selector.options.weighted

    def loss_weights(self, keep_prob, target_lengths):
        """Per-pair loss weights of a batch: importance weights, see ``batch_importance_weights``."""
        return batch_importance_weights(keep_prob, target_lengths)

    @property
    def wants_losses(self):
        return any(consumer is not None for consumer in (self.worker, self.loss_table, self.loss_log))

    def report_losses(self, ids, keep_prob, per_token_losses):
        """A step's per-token losses (every rank's, when distributed: ``loss_handoff`` gathers them) with the
        probability each pair was kept with, to the Assistant, the loss table and the loss log. Called once per
        step, a dummy batch with empty arrays."""
        try:
            feed_back(self.policy, ids, per_token_losses, keep_prob, self.loss_table, self.worker, self.loss_log,
                      self.stream.pass_index)
        except AssistantFailedError as error:
            # Not raised here, in one rank's step: every rank stops together (``raise_if_any_rank_failed``).
            self.failure = self.failure or error

    def raise_if_any_rank_failed(self, failed_steps):
        """Stops this rank if any rank's Assistant failed: ``failed_steps``, summed over every rank by the update's
        statistics (``failed_steps`` below), is the count of steps that reported a failure."""
        if not failed_steps:
            return
        if self.failure is None:
            # fairseq's spawn reports only the first rank to stop: let it be the one whose line says what failed.
            time.sleep(FOLLOWING_RANK_DELAY_SECONDS)
            raise AssistantFailedError("another rank's Assistant failed (its error line says how)")
        raise self.failure

    @property
    def failed_steps(self):
        """1 once this rank's Assistant failed (for the step's logging output, which fairseq sums over ranks)."""
        return int(self.failure is not None)

    # ------------------------------------------------------------ logs
    def metrics(self):
        """Plain scalars for fairseq's training logs (see docs/how-it-works.md, "What the logs show")."""
        stats = self.stream.latest_stats
        out = {
            "aa_kept": stats.kept_pairs / max(stats.candidate_pairs, 1),
            "aa_kept_tok": stats.kept_tokens / max(stats.candidate_tokens, 1),
            "aa_kept_len": stats.kept_tokens / max(stats.kept_pairs, 1),
            "aa_corpus_len": self.corpus_mean_target_length,
            # CPU seconds so far: choosing pairs (scoring, drawing, batching; training thread), the whole
            # process (every thread), and below the Assistant's updates (its own thread).
            "aa_cpu_select": self.selection_cpu_seconds,
            "aa_cpu_process": time.process_time(),
        }
        if self.stream.flagged is not None:
            out["aa_kept_noisy"] = stats.kept_flagged / max(stats.candidate_flagged, 1)
            out["aa_kept_clean"] = (stats.kept_pairs - stats.kept_flagged) / max(
                stats.candidate_pairs - stats.candidate_flagged, 1)
        if self.worker is not None:
            w = self.worker.stats()
            out.update({
                "aa_acc": w["accuracy"],
                "aa_conf": w["confidence"],
                "aa_pos_rate": w["positive_rate"],
                "aa_auc_new": w["auc_new"],
                "aa_auc_seen": w["auc_seen"],
                "aa_own_share": self.selector.own_loss_share,
                "aa_loss_mean": w["loss_mean"],
                "aa_waits": w["waits"],
                "aa_wait_s": w["wait_seconds"],
                "aa_cpu_assistant": w["cpu_seconds"],
            })
        return out

    # ------------------------------------------------------------ checkpoints
    def state_dict(self, consumed_global_batches):
        state = {
            "version": CHECKPOINT_VERSION,
            "policy": self.policy.name,
            "stream": self.stream.state_dict(consumed_global_batches),
            "steps": self.steps,
            # The update count of update-paced rules (annealing, competence, spl, InfoBatch's delta): a selection made
            # before the resumed run's first step (the next epoch's plan, a prefetched chunk) must see it.
            "num_updates": self.selector.num_updates,
            "trained": dict(self.trained),
            "trained_by_rank": (self._trained_by_rank(consumed_global_batches) if self.runtime_options.digest_file
                                else None),
            "ranks": distributed.world_size(),
        }
        if self.worker is not None:
            state["assistant"] = self.worker.state_dict()
        if self.loss_table is not None:
            state["loss_table"] = self.loss_table.state_dict()
        if self.loss_log is not None:
            state["loss_log_length"] = self.loss_log.length()
        return state

    def load_state_dict(self, state):
        """Restores a checkpoint's state, or raises ``AutoAssistConfigError`` naming the way out."""
        problem = self._state_problem(state)
        if problem is None:
            try:
                self.stream.load_state_dict(state["stream"])
                self.steps = self.selector.steps = int(state["steps"])
                self.selector.num_updates = int(state.get("num_updates", 0))  # absent before 2026-12-07
                self._restore_trained(state)
                if self.worker is not None:
                    self.worker.load_state_dict(state["assistant"])
                if self.loss_table is not None:
                    self.loss_table.load_state_dict(state["loss_table"])
                if self.loss_log is not None and "loss_log_length" in state:
                    self.loss_log.rewind(state["loss_log_length"])
            except (KeyError, ValueError, TypeError, IndexError) as error:
                problem = f"is corrupt ({type(error).__name__}: {error})"
        if problem:
            raise AutoAssistConfigError(
                f"the checkpoint's AutoAssist state {problem}; restart AutoAssist with "
                "--autoassist-reset-state (the Boss's weights are still loaded)"
            )

    def _state_problem(self, state):
        if state.get("version") != CHECKPOINT_VERSION:
            return f"has version {state.get('version')!r}, this release reads version {CHECKPOINT_VERSION}"
        if state.get("policy") != self.policy.name:
            return f"was written with --autoassist-policy {state.get('policy')}, not {self.policy.name}"
        if "stream" not in state:
            return "has no selection stream"
        saved_lag = (state.get("assistant") or {}).get("lag")  # absent before 2026-12-07
        if self.worker is not None and saved_lag not in (None, self.worker.lag):
            return (f"was written with --autoassist-assistant-lag {saved_lag}, not {self.worker.lag} (its snapshots "
                    f"are {saved_lag} steps apart: resume with --autoassist-assistant-lag {saved_lag})")
        saved_ranks = state.get("ranks")  # absent before 2026-12-07
        consumed, planned = state["stream"].get("consumed_in_epoch", 0), state["stream"].get("planned") or 0
        if saved_ranks not in (None, distributed.world_size()) and 0 < consumed < planned:
            return (f"was saved in the middle of an epoch ({consumed} global batches in) by {saved_ranks} ranks, and "
                    f"this run has {distributed.world_size()} (fairseq counts a resumed epoch's batches per rank: "
                    f"resume it on {saved_ranks} ranks, or resume from a checkpoint saved at an epoch's end, "
                    "--restore-file checkpointN.pt, on any number)")
        return None
