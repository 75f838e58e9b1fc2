"""The ``autoassist_translation`` task: translation whose training pairs are chosen by a policy.

With ``--autoassist-policy none`` every call goes to fairseq's translation task unchanged (same
batches, same losses). Any other policy replaces the training batch iterator with the shrinking
batch stream (``data.iterator``) driven by an ``AutoAssistRuntime`` (``runtime``), and computes
per-sentence losses from the Boss's single forward pass, which feed the Assistant and carry the
optional importance weights. The options are declared in the core (``options``).
"""

import atexit
import functools
import logging
import math
from dataclasses import dataclass
from typing import List

import numpy as np
import torch
from fairseq.logging import metrics
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from omegaconf import II

from ..assistant import PairFeatures
from ..compat import allow_fairseq_checkpoints, copy_checkpoints_atomically, explain_unreadable_checkpoints
from ..data.folders import check_data_folders, check_split, check_token_budget
from ..data.iterator import (HOST_SIDE, KeptPairsDataset, ShrinkingEpochBatchIterator, collate_with_host_side,
                             corpus_side, packing_order, pairs_per_chunk, token_budget_batcher, training_order)
from ..errors import AutoAssistConfigError, report_config_errors_in_one_line
from ..loss_handoff import LossHandOff, to_device_without_waiting
from ..options import AutoAssistOptions, batching, validate
from ..runtime import AutoAssistRuntime
from ..selection.policies import POLICIES

logger = logging.getLogger(__name__)

# The host side of a dummy batch: no pair to weigh or report.
_NO_PAIRS = {"ids": np.zeros(0, dtype=np.int64), "keep_prob": np.zeros(0, dtype=np.float32)}


def log_runtime_metrics(values):
    """Logs the runtime's scalars to fairseq's meters. An undefined one (NaN: an AUC while its kind of pair is rare)
    weighs nothing, so that an epoch's mean is that of the steps where it was defined (one NaN would make the whole
    mean NaN), and shows NaN only where it was never defined."""
    for key, value in values.items():
        metrics.log_scalar(key, value, weight=0 if math.isnan(value) else 1, priority=900, round=3)


def accuracy_without_waiting(criterion, model, net_output, sample):
    """``criterion.compute_accuracy``'s counts, as tensors the criterion's reduce_metrics reads after the step: its
    ``masked_select`` (an output of data-dependent size) and ``.item()`` would make the host wait for the device."""
    with torch.no_grad():
        lprobs, target = criterion.get_lprobs_and_target(model, net_output, sample)
        mask = target.ne(criterion.padding_idx)
        return (lprobs.argmax(1).eq(target) & mask).sum(), mask.sum()


@dataclass
class AutoAssistTranslationConfig(TranslationConfig, AutoAssistOptions):
    seed: int = II("common.seed")
    max_epoch: int = II("optimization.max_epoch")
    max_update: int = II("optimization.max_update")
    update_freq: List[int] = II("optimization.update_freq")


@register_task("autoassist_translation", dataclass=AutoAssistTranslationConfig)
class AutoAssistTranslationTask(TranslationTask):
    cfg: AutoAssistTranslationConfig

    def __init__(self, cfg, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.runtime = None
        self.train_iterator = None
        self.loss_handoff = None
        self._state_restored = False
        self._announced_start = False

    @classmethod
    def add_args(cls, parser):
        # Parsing runs in fairseq-train's first process too, which spawns the ranks and reports how they stopped.
        report_config_errors_in_one_line()
        super().add_args(parser)

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        report_config_errors_in_one_line()
        validate(cfg)
        check_data_folders(cfg.data, cfg.source_lang, cfg.target_lang)
        return super().setup_task(cfg, **kwargs)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        check_split(self.cfg.data, split, self.cfg.source_lang, self.cfg.target_lang)
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)

    @property
    def selection_enabled(self):
        return POLICIES[self.cfg.autoassist_policy].keep is not None

    # ------------------------------------------------------------ the training iterator
    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None, max_positions=None,
                           ignore_invalid_inputs=False, required_batch_size_multiple=1, seed=1,
                           num_shards=1, shard_id=0, num_workers=0, epoch=1, data_buffer_size=0,
                           disable_iterator_cache=False, skip_remainder_batch=False,
                           grouped_shuffling=False, update_epoch_batch_itr=False):
        """The stock iterator, except for the training set under a selection policy: there one
        ``ShrinkingEpochBatchIterator`` for the whole run, built on the first call and returned
        again at every epoch end (fairseq asks each time; per-pair state must survive)."""
        if self.train_iterator is not None and self.train_iterator.dataset.dataset is dataset:  # KeptPairsDataset
            return self.train_iterator
        is_train = dataset is self.datasets.get(self.cfg.train_subset)
        split = next((name for name, loaded in self.datasets.items() if loaded is dataset), "?")
        check_token_budget(split, dataset.src_sizes, dataset.tgt_sizes, max_tokens, self.max_positions(),
                           "--max-tokens" if is_train else "--max-tokens-valid (fairseq-generate: --max-tokens)")
        if not (self.selection_enabled and is_train):
            return super().get_batch_iterator(
                dataset, max_tokens=max_tokens, max_sentences=max_sentences,
                max_positions=max_positions, ignore_invalid_inputs=ignore_invalid_inputs,
                required_batch_size_multiple=required_batch_size_multiple, seed=seed,
                num_shards=num_shards, shard_id=shard_id, num_workers=num_workers, epoch=epoch,
                data_buffer_size=data_buffer_size, disable_iterator_cache=disable_iterator_cache,
                skip_remainder_batch=skip_remainder_batch, grouped_shuffling=grouped_shuffling,
                update_epoch_batch_itr=update_epoch_batch_itr,
            )
        if self.train_iterator is not None:
            raise AutoAssistConfigError(
                "the training set changed between epochs (sharded data paths separated by ':'); "
                "AutoAssist needs one data-bin folder, or use --autoassist-policy none"
            )
        candidates = training_order(self, dataset, seed, epoch, max_positions, ignore_invalid_inputs)
        batching_key = None if batching(self.cfg) == "as-released" else packing_order(
            dataset, candidates, self.cfg.autoassist_packing, seed)
        make_batches = token_budget_batcher(dataset, max_tokens, max_sentences, required_batch_size_multiple,
                                            batching_key)
        full_batches = make_batches(candidates)
        dummy_batch = [(index, 1.0) for index in full_batches[0].tolist()]
        self.runtime = AutoAssistRuntime(
            self.cfg, candidates, dataset.tgt_sizes,
            pairs_per_chunk(self.batches_per_refresh(num_shards), len(candidates), len(full_batches)),
            seed, self.cfg.max_epoch, self.cfg.max_update, make_batches,
            pair_features=lambda: self._pair_features(dataset), steps_per_pass=len(full_batches) / num_shards,
            min_batches_per_epoch=num_shards,
        )
        if self.runtime.wants_losses:
            # A batch holds at most one pair per budgeted token (or --batch-size pairs).
            self.loss_handoff = LossHandOff(self.runtime.report_losses, rows_per_rank=max_sentences or max_tokens)
        atexit.register(self._finish_training)
        stream = self.runtime.stream
        logger.info(
            "AutoAssist: policy=%s, %d training pairs, %d full batches per pass, "
            "selection refreshed every %d pairs (%d chunks per pass)",
            self.cfg.autoassist_policy, len(candidates), len(full_batches), stream.chunk_pairs,
            stream.chunks_per_pass,
        )
        self.train_iterator = ShrinkingEpochBatchIterator(
            dataset=KeptPairsDataset(dataset), stream=stream, dummy_batch=dummy_batch, seed=seed,
            collate_fn=functools.partial(collate_with_host_side, dataset.collater, self.tgt_dict.pad()),
            num_shards=num_shards, shard_id=shard_id, num_workers=num_workers, epoch=epoch,
        )
        return self.train_iterator

    def batches_per_refresh(self, num_shards):
        """Global batches between two selections: ``--autoassist-refresh-updates`` updates, each of
        ``--update-freq`` batches on every rank."""
        return self.cfg.autoassist_refresh_updates * self.cfg.update_freq[0] * num_shards

    def _pair_features(self, dataset):
        if dataset.tgt is None:
            raise AutoAssistConfigError("AutoAssist needs a target side in the training data")
        return PairFeatures(corpus_side(dataset.src), corpus_side(dataset.tgt),
                            vocab_size=max(len(self.src_dict), len(self.tgt_dict)))

    # ------------------------------------------------------------ the Boss's step
    def build_criterion(self, cfg, from_checkpoint=False):
        criterion = super().build_criterion(cfg, from_checkpoint)
        if self.selection_enabled and not hasattr(criterion, "compute_loss"):
            raise AutoAssistConfigError(
                f"--autoassist-policy {self.cfg.autoassist_policy} needs per-sentence losses; "
                "use --criterion label_smoothed_cross_entropy or cross_entropy"
            )
        return criterion

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """One forward pass gives the (optionally weighted) training loss and every sentence's loss, which goes to
        the runtime after the backward pass has been queued (``loss_handoff``, delivered at the next step); the ids,
        lengths and keep probabilities come from the host side of the batch, so nothing in the step waits for the
        device. A dummy batch (``ignore_grad``: fairseq's stand-in where a rank has no batch of its own, perhaps a
        validation batch without a host side) trains with zero weight and reports no pair. A failed Assistant stops
        every rank at the end of the same update (``reduce_metrics``), after the step's gather."""
        if not self.selection_enabled:
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        model.train()
        model.set_num_updates(update_num)
        self.runtime.begin_step(update_num)
        target = sample["target"]
        host = _NO_PAIRS if ignore_grad else sample[HOST_SIDE]
        if not ignore_grad:
            self.runtime.record_trained_batch(self.train_iterator.epoch, host["ids"])
        try:
            loss, sample_size, logging_output, reported = self._forward_backward(
                sample, model, criterion, optimizer, host, ignore_grad)
        except Exception:
            if self.loss_handoff is not None:
                # fairseq may recover from an out-of-memory error and go on: this rank's gather must still join the
                # other ranks' of this step, or every later one would pair different steps.
                self.loss_handoff.send(_NO_PAIRS["ids"], _NO_PAIRS["keep_prob"], target.new_zeros(0, dtype=torch.float))
            raise
        if self.loss_handoff is not None:
            per_token = reported.new_zeros(0) if ignore_grad else (
                reported.detach() / target.ne(self.tgt_dict.pad()).sum(1).clamp(min=1))
            self.loss_handoff.send(host["ids"], host["keep_prob"], per_token)
        # After the send, which delivers the previous step's losses: a failure it met stops every rank at this update.
        logging_output["autoassist_failed_steps"] = self.runtime.failed_steps
        return loss, sample_size, logging_output

    def _forward_backward(self, sample, model, criterion, optimizer, host, ignore_grad):
        """The step's loss, sample size and logging output, and every sentence's loss that the policy learns from."""
        target = sample["target"]
        batch_size = target.size(0)
        weights = None
        if self.runtime.weighted and not ignore_grad:
            weights = to_device_without_waiting(
                self.runtime.loss_weights(host["keep_prob"], host["target_lengths"]), target)
        with torch.autograd.profiler.record_function("forward"):
            with torch.amp.autocast(target.device.type, enabled=isinstance(optimizer, AMPOptimizer)):
                net_output = model(**sample["net_input"])
                token_loss, token_nll = criterion.compute_loss(model, net_output, sample, reduce=False)
                sentence_loss = token_loss.view(batch_size, -1).sum(1)
                sentence_nll = token_nll.view(batch_size, -1).sum(1)
                if weights is not None:
                    loss = (sentence_loss * weights.to(sentence_loss.dtype)).sum()
                else:
                    loss = sentence_loss.sum()
        sample_size = batch_size if criterion.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": sentence_loss.sum().data,
            "nll_loss": sentence_nll.sum().data,
            "ntokens": sample["ntokens"],
            "nsentences": batch_size,
            "sample_size": sample_size,
            "autoassist_steps": 1,
        }
        if getattr(criterion, "report_accuracy", False):
            n_correct, total = accuracy_without_waiting(criterion, model, net_output, sample)
            logging_output.update(n_correct=n_correct, total=total)
        if ignore_grad:
            loss *= 0
        with torch.autograd.profiler.record_function("backward"):
            optimizer.backward(loss)
        reported = sentence_loss if self.runtime.policy.smoothed_loss else sentence_nll
        return loss, sample_size, logging_output, reported

    def _finish_training(self):
        """At exit: the last step's losses, which no next step delivers (the loss log would miss them), and the
        last epoch's trained-batch digest."""
        try:
            if self.loss_handoff is not None and self.runtime.failure is None:
                self.loss_handoff.flush()
        except RuntimeError as error:  # another rank is gone: its error line says why
            logger.warning("AutoAssist: the last step's losses were not delivered (%s)", str(error).splitlines()[0])
        self.runtime.write_trained_digest()

    # ------------------------------------------------------------ logs
    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if self.cfg.eval_bleu and any("_bleu_totals_0" in log for log in logging_outputs) and not sum(
                log.get("_bleu_totals_0", 0) for log in logging_outputs):
            # Every hypothesis empty (an untrained model): fairseq logs no BLEU and its best-checkpoint
            # bookkeeping stops with a KeyError; an empty translation scores 0.
            metrics.log_derived("bleu", lambda meters: 0.0)
        if self.runtime is None or not any("autoassist_steps" in log for log in logging_outputs):
            return
        self.runtime.raise_if_any_rank_failed(sum(log.get("autoassist_failed_steps", 0) for log in logging_outputs))
        log_runtime_metrics(self.runtime.metrics())

    # ------------------------------------------------------------ checkpoints
    def get_checkpoint_dict(self):
        if self.runtime is None:
            return {}
        state = self.runtime.state_dict(self.train_iterator.consumed_global_batches())
        if self.loss_handoff is not None:
            state["pending_losses"] = self.loss_handoff.pending_state()
        return {type(self).__name__: state}

    def set_checkpoint_dict(self, state):
        if self.runtime is None or not state:
            return
        if self.cfg.autoassist_reset_state:
            logger.info("AutoAssist: --autoassist-reset-state given; starting AutoAssist afresh")
            return
        self.runtime.load_state_dict(state)
        if self.loss_handoff is not None:
            self.loss_handoff.load_pending_state(state.get("pending_losses"))
        self._state_restored = True
        logger.info("AutoAssist: restored Assistant and selection state from the checkpoint")

    def begin_epoch(self, epoch, model):
        super().begin_epoch(epoch, model)
        if self.runtime is None or self._announced_start:
            return
        self._announced_start = True
        resumed = epoch > 1 or self.train_iterator.iterations_in_epoch > 0
        if resumed and not self._state_restored:
            logger.info(
                "AutoAssist: the checkpoint holds no AutoAssist state (a run without AutoAssist "
                "or --autoassist-reset-state); starting AutoAssist fresh at epoch %d", epoch
            )


# fairseq imports --user-dir modules before it loads any checkpoint.
allow_fairseq_checkpoints()
explain_unreadable_checkpoints()
copy_checkpoints_atomically()
