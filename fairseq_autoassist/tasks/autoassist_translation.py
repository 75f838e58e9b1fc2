"""The ``autoassist_translation`` task: translation whose training pairs are chosen by a policy.

With ``--autoassist-policy none`` every call goes to fairseq's translation task unchanged (same
batches, same losses). Any other policy replaces the training batch iterator with the shrinking
batch stream and computes per-sentence losses from the Boss's single forward pass, which feed
the Assistant and carry the optional importance weights.
"""

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
from fairseq.data import data_utils
from fairseq.logging import metrics
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from omegaconf import II

from .. import distributed
from ..assistant import Assistant, AssistantConfig, PairFeatures
from ..compat import allow_fairseq_checkpoints
from ..data import ShrinkingBatchStream
from ..data.iterator import ShrinkingEpochBatchIterator, corpus_side
from ..loss_log import LossLog
from ..selection import (
    POLICIES,
    LatestLossTable,
    SelectionOptions,
    SelectionSchedule,
    Selector,
    batch_importance_weights,
)
from ..worker import AsyncAssistantWorker, SyncAssistantWorker

logger = logging.getLogger(__name__)

STATE_VERSION = 2



class AutoAssistConfigError(ValueError):
    """Bad input (an option, a data folder, a checkpoint); the message names what to change."""


def _report_config_errors_in_one_line(hook=sys.excepthook):
    """Show AutoAssistConfigError as one ``error:`` line instead of a traceback through fairseq."""

    def excepthook(kind, value, traceback):
        if isinstance(value, AutoAssistConfigError):
            sys.stderr.write(f"error: {value}\n")
        else:
            hook(kind, value, traceback)

    sys.excepthook = excepthook


@dataclass
class AutoAssistTranslationConfig(TranslationConfig):
    # A plain str, not ChoiceEnum: fairseq pickles the config into checkpoints and the dynamic
    # enum class does not pickle. validate_config checks the value.
    autoassist_policy: str = field(
        default="assistant",
        metadata={
            "help": "which training pairs the Boss sees: 'assistant' (AutoAssist), 'uniform' "
            "(keep each pair with --autoassist-uniform-keep-prob, a control), 'infobatch' "
            "(InfoBatch: prune below-mean-loss pairs), 'spl' (self-paced learning: easiest "
            "pairs first) or 'none' (every pair, exactly like --task translation)"
        },
    )
    autoassist_base_prob: float = field(
        default=0.5,
        metadata={"help": "lowest keep probability of the paper's rule b + (1 - b) p, "
                  "b = max(base_prob, 1 - confidence)"},
    )
    autoassist_min_keep_prob: float = field(
        default=0.05,
        metadata={"help": "floor on every pair's keep probability (> 0), which also bounds "
                  "importance weights by 1 / min_keep_prob"},
    )
    autoassist_uniform_keep_prob: float = field(
        default=0.7, metadata={"help": "keep probability of the 'uniform' policy"}
    )
    autoassist_infobatch_prune_ratio: float = field(
        default=0.5,
        metadata={"help": "infobatch: share r of the below-mean-loss pairs dropped each pass; the "
                  "kept ones among them are weighted 1 / (1 - r)"},
    )
    autoassist_infobatch_delta: float = field(
        default=0.875,
        metadata={"help": "infobatch: prune during this first fraction of --max-update (or "
                  "--max-epoch), then train on every pair"},
    )
    autoassist_spl_start_fraction: float = field(
        default=0.5,
        metadata={"help": "spl: share of the easiest seen pairs kept at the start; it grows "
                  "linearly to 1 over --max-update (or --max-epoch)"},
    )
    autoassist_warmup_epochs: int = field(
        default=1, metadata={"help": "epochs at the start that train on every pair"}
    )
    autoassist_importance_weighting: bool = field(
        default=False,
        metadata={"help": "weight each kept pair's loss by 1 / p_keep so that the expected "
                  "gradient equals the full-data gradient (weights scaled to a mean of 1 per "
                  "target token within each batch, so the gradient keeps its scale)"},
    )
    autoassist_anneal_fraction: float = field(
        default=0.0,
        metadata={"help": "train on every pair for this final fraction of --max-update "
                  "(or of --max-epoch when --max-update is not set)"},
    )
    autoassist_refresh_updates: int = field(
        default=50,
        metadata={"help": "rescore and reselect pairs every this many (full-size) batches, so "
                  "no pair is selected with Assistant parameters older than about this many "
                  "updates; 0 selects once per pass. A chunk's partly filled last batch is "
                  "carried into the next chunk, so every batch is full but one per pass"},
    )
    autoassist_sync: bool = field(
        default=False,
        metadata={"help": "update the Assistant in the training thread (deterministic, for "
                  "tests and debugging) instead of a background worker"},
    )
    autoassist_queue_size: int = field(
        default=64,
        metadata={"help": "pending loss batches the background worker holds; when full the "
                  "oldest is dropped (and counted)"},
    )
    autoassist_lr: float = field(
        default=0.5, metadata={"help": "the Assistant's Adagrad step size"}
    )
    autoassist_l2: float = field(
        default=1e-4,
        metadata={"help": "the Assistant's L2 regularization, applied to the weights of the tokens "
                  "present in each batch (and to the length weights)"},
    )
    autoassist_grad_decay: float = field(
        default=0.99,
        metadata={"help": "the Assistant's forgetting: its per-weight sums of squared gradients "
                  "decay by this factor per update, so steps stay large enough to follow the "
                  "Boss; 1 is plain Adagrad"},
    )
    autoassist_loss_mean_decay: float = field(
        default=0.9,
        metadata={"help": "decay of the running mean per-token loss that labels pairs as "
                  "informative (above it) or trivial"},
    )
    autoassist_confidence_decay: float = field(
        default=0.95,
        metadata={"help": "decay of the moving average of the Assistant's accuracy (its confidence)"},
    )
    autoassist_digest_file: Optional[str] = field(
        default=None,
        metadata={"help": "diagnostic: append 'epoch, batches, SHA-1 of the epoch's batches' to "
                  "FILE.rankR after each epoch, to check that distributed ranks select alike"},
    )
    autoassist_loss_log: Optional[str] = field(
        default=None,
        metadata={"help": "diagnostic: append every training step's pair ids, per-token losses and "
                  "keep probabilities to FILE (first rank only), for scripts/replay_assistant.py"},
    )
    autoassist_reset_state: bool = field(
        default=False,
        metadata={"help": "ignore AutoAssist state found in the checkpoint and start the "
                  "Assistant and the selection afresh"},
    )
    seed: int = II("common.seed")
    max_epoch: int = II("optimization.max_epoch")
    max_update: int = II("optimization.max_update")


def _flag(name):
    return "--" + name.replace("_", "-")


def validate_config(cfg):
    """Refuse option values that cannot work, naming the flag, before any data is loaded."""
    if cfg.autoassist_policy not in POLICIES:
        raise AutoAssistConfigError(
            f"{_flag('autoassist_policy')} {cfg.autoassist_policy!r} is unknown; choose one of {', '.join(POLICIES)}"
        )
    probabilities = {
        "autoassist_base_prob": False,
        "autoassist_min_keep_prob": True,
        "autoassist_uniform_keep_prob": True,
        "autoassist_anneal_fraction": False,
        "autoassist_infobatch_prune_ratio": False,
        "autoassist_infobatch_delta": False,
        "autoassist_spl_start_fraction": False,
        "autoassist_loss_mean_decay": False,
        "autoassist_confidence_decay": False,
        "autoassist_grad_decay": True,
    }
    for name, zero_excluded in probabilities.items():
        value = getattr(cfg, name)
        if not ((0.0 < value) if zero_excluded else (0.0 <= value)) or value > 1.0:
            raise AutoAssistConfigError(f"{_flag(name)}={value} is outside {'(0, 1]' if zero_excluded else '[0, 1]'}")
    minimums = {
        "autoassist_warmup_epochs": 0,
        "autoassist_refresh_updates": 0,
        "autoassist_queue_size": 1,
        "autoassist_lr": 0,
        "autoassist_l2": 0,
    }
    for name, minimum in minimums.items():
        if getattr(cfg, name) < minimum:
            raise AutoAssistConfigError(f"{_flag(name)}={getattr(cfg, name)} must be >= {minimum}")


@register_task("autoassist_translation", dataclass=AutoAssistTranslationConfig)
class AutoAssistTranslationTask(TranslationTask):
    cfg: AutoAssistTranslationConfig

    def __init__(self, cfg, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.train_iterator = None
        self.worker = None
        self.loss_table = None
        self.loss_log = None
        self.selector = None
        self._corpus_mean_target_length = None
        self._state_restored = False
        self._announced_start = False

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        validate_config(cfg)
        for path in cfg.data.split(os.pathsep) if cfg.data else [""]:
            if not os.path.isdir(path):
                raise AutoAssistConfigError(
                    f"data folder {path!r} does not exist; pass a prepared data-bin folder "
                    "(scripts/prepare_multi30k.py writes one) as the first argument"
                )
            for lang in (cfg.source_lang, cfg.target_lang):
                dictionary = os.path.join(path, f"dict.{lang}.txt")
                if lang is not None and not os.path.isfile(dictionary):
                    raise AutoAssistConfigError(
                        f"{dictionary} is missing; binarize with fairseq-preprocess "
                        "(scripts/prepare_multi30k.py) or check --source-lang/--target-lang"
                    )
        return super().setup_task(cfg, **kwargs)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        path = self.cfg.data.split(os.pathsep)[0]
        prefix = os.path.join(path, f"{split}.{self.cfg.source_lang}-{self.cfg.target_lang}.")
        reverse = os.path.join(path, f"{split}.{self.cfg.target_lang}-{self.cfg.source_lang}.")
        found = [p for p in (prefix, reverse) if os.path.isfile(p + self.cfg.source_lang + ".idx")]
        if not found:
            raise AutoAssistConfigError(
                f"split '{split}' is missing from {path} (no {prefix}{self.cfg.source_lang}.idx); "
                "prepare it or choose another with --train-subset/--valid-subset/--gen-subset"
            )
        # fairseq cannot memory-map an empty .bin file and fails deep inside; say what is wrong.
        data_file = found[0] + self.cfg.source_lang + ".bin"
        if os.path.isfile(data_file) and os.path.getsize(data_file) == 0:
            raise AutoAssistConfigError(
                f"the split '{split}' in {path} has no sentence pairs ({data_file} is empty); "
                "re-run the preparation on non-empty files"
            )
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)

    @property
    def selection_enabled(self):
        return self.cfg.autoassist_policy != "none"

    # ------------------------------------------------------------ the training iterator
    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None, max_positions=None,
                           ignore_invalid_inputs=False, required_batch_size_multiple=1, seed=1,
                           num_shards=1, shard_id=0, num_workers=0, epoch=1, data_buffer_size=0,
                           disable_iterator_cache=False, skip_remainder_batch=False,
                           grouped_shuffling=False, update_epoch_batch_itr=False):
        is_train = dataset is self.datasets.get(self.cfg.train_subset)
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
        # fairseq asks again at every epoch end: per-pair state must survive, so reuse.
        if self.train_iterator is not None and self.train_iterator.dataset is dataset:
            return self.train_iterator
        if self.train_iterator is not None:
            raise AutoAssistConfigError(
                "the training set changed between epochs (sharded data paths separated by ':'); "
                "AutoAssist needs one data-bin folder, or use --autoassist-policy none"
            )

        dataset.set_epoch(epoch)
        with data_utils.numpy_seed(seed + 1):
            ordered = dataset.ordered_indices()
        if max_positions is not None:
            ordered = self.filter_indices_by_size(ordered, dataset, max_positions, ignore_invalid_inputs)
        ordered = np.asarray(ordered, dtype=np.int64)
        if len(ordered) == 0:
            raise AutoAssistConfigError(
                f"the training split '{self.cfg.train_subset}' has no pairs within "
                "--max-source-positions/--max-target-positions"
            )
        # A chunk holds only a sample of each length, so sorting it by fairseq's order (source
        # length, then target length) would mix target lengths within a batch and pad a lot;
        # sorting by the padded size max(source, target) first keeps chunk batches as full as
        # the baseline's (measured on Multi30K: 135 batches per pass either way).
        rank = np.empty(len(dataset), dtype=np.int64)
        rank[ordered] = np.arange(len(ordered))
        padded_size = np.maximum(dataset.src_sizes, dataset.tgt_sizes).astype(np.int64)
        batching_key = padded_size * len(dataset) + rank

        def make_batches(kept):
            kept = np.asarray(kept, dtype=np.int64)
            by_length = kept[np.argsort(batching_key[kept], kind="stable")]
            batches = dataset.batch_by_size(
                by_length, max_tokens=max_tokens, max_sentences=max_sentences,
                required_batch_size_multiple=required_batch_size_multiple,
            )
            # fairseq drops a final batch whose size is not a multiple of
            # --required-batch-size-multiple (fairseq issue 5036); once per pass that loses a few
            # pairs, once per chunk it would lose many, so the remainder becomes its own batch.
            batched = sum(len(batch) for batch in batches)
            if batched < len(by_length):
                batches.append(by_length[batched:])
            return batches

        full_batches = make_batches(ordered)
        pairs_per_batch = len(ordered) / max(len(full_batches), 1)
        refresh = self.cfg.autoassist_refresh_updates * num_shards
        chunk_pairs = len(ordered) if refresh == 0 else min(len(ordered), max(1, round(refresh * pairs_per_batch)))

        self.worker = self._build_worker(dataset)
        if self.cfg.autoassist_policy in ("infobatch", "spl"):
            self.loss_table = LatestLossTable(len(dataset))
        if self.cfg.autoassist_loss_log and distributed.rank() == 0:
            self.loss_log = LossLog(self.cfg.autoassist_loss_log)
        self.selector = Selector(
            SelectionOptions(
                policy=self.cfg.autoassist_policy,
                base_prob=self.cfg.autoassist_base_prob,
                min_keep_prob=self.cfg.autoassist_min_keep_prob,
                uniform_keep_prob=self.cfg.autoassist_uniform_keep_prob,
                importance_weighting=self.cfg.autoassist_importance_weighting,
                infobatch_prune_ratio=self.cfg.autoassist_infobatch_prune_ratio,
                infobatch_delta=self.cfg.autoassist_infobatch_delta,
                spl_start_fraction=self.cfg.autoassist_spl_start_fraction,
            ),
            SelectionSchedule(
                warmup_epochs=self.cfg.autoassist_warmup_epochs,
                anneal_fraction=self.cfg.autoassist_anneal_fraction,
                max_epoch=self.cfg.max_epoch or 0,
                max_update=self.cfg.max_update or 0,
            ),
            seed=seed,
            worker=self.worker,
            loss_table=self.loss_table,
        )
        target_sizes = np.asarray(dataset.tgt_sizes, dtype=np.int64)
        self._corpus_mean_target_length = float(target_sizes[ordered].mean())
        stream = ShrinkingBatchStream(
            ordered, target_sizes, chunk_pairs, seed, make_batches, self._select_on_every_rank,
            on_epoch_complete=self._record_epoch_digest, min_batches_per_epoch=num_shards,
        )
        logger.info(
            "AutoAssist: policy=%s, %d training pairs, %d full batches per pass, "
            "selection refreshed every %d pairs (%d chunks per pass)",
            self.cfg.autoassist_policy, len(ordered), len(full_batches), stream.chunk_pairs,
            stream.chunks_per_pass,
        )
        self.train_iterator = ShrinkingEpochBatchIterator(
            dataset=dataset, collate_fn=dataset.collater, stream=stream,
            dummy_batch=full_batches[0], seed=seed, num_shards=num_shards, shard_id=shard_id,
            num_workers=num_workers, epoch=epoch,
            # No --data-buffer-size prefetch thread: chunk selection must run in the training
            # thread, where its broadcasts stay in step with the other ranks' collectives and
            # --autoassist-sync runs are reproducible.
            buffer_size=0,
        )
        return self.train_iterator

    def _select_on_every_rank(self, indices, epoch, pass_index, chunk):
        """The selector's choice; under distributed training the first rank's, broadcast."""
        if distributed.world_size() == 1:
            return self.selector.select(indices, epoch, pass_index, chunk)
        kept, keep_prob = (None, None)
        if distributed.rank() == 0:
            kept, keep_prob = self.selector.select(indices, epoch, pass_index, chunk)
        kept = distributed.broadcast_from_first_rank(kept, np.int64)
        keep_prob = distributed.broadcast_from_first_rank(
            np.zeros(0, np.float32) if keep_prob is None else keep_prob, np.float32
        )
        return kept, (keep_prob if len(keep_prob) == len(kept) and len(kept) else None)

    def _record_epoch_digest(self, epoch, num_batches, digest):
        logger.info("AutoAssist: epoch %d has %d global batches, selection digest %s", epoch, num_batches, digest)
        if self.cfg.autoassist_digest_file:
            with open(f"{self.cfg.autoassist_digest_file}.rank{distributed.rank()}", "a") as f:
                f.write(f"{epoch}\t{num_batches}\t{digest}\n")

    def _build_worker(self, dataset):
        if self.cfg.autoassist_policy != "assistant":
            return None
        if dataset.tgt is None:
            raise AutoAssistConfigError("AutoAssist needs a target side in the training data")
        features = PairFeatures(corpus_side(dataset.src), corpus_side(dataset.tgt),
                                vocab_size=max(len(self.src_dict), len(self.tgt_dict)))
        assistant = Assistant(features, AssistantConfig(
            learning_rate=self.cfg.autoassist_lr,
            l2=self.cfg.autoassist_l2,
            grad_decay=self.cfg.autoassist_grad_decay,
            loss_mean_decay=self.cfg.autoassist_loss_mean_decay,
            confidence_decay=self.cfg.autoassist_confidence_decay,
        ))
        if self.cfg.autoassist_sync:
            return SyncAssistantWorker(assistant)
        return AsyncAssistantWorker(assistant, queue_size=self.cfg.autoassist_queue_size)

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
        if not self.selection_enabled:
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        model.train()
        model.set_num_updates(update_num)
        self.selector.num_updates = update_num
        target = sample["target"]
        batch_size = target.size(0)
        ids = sample["id"].cpu().numpy()
        target_lengths = target.ne(self.tgt_dict.pad()).sum(1)
        with torch.autograd.profiler.record_function("forward"):
            with torch.amp.autocast(target.device.type, enabled=isinstance(optimizer, AMPOptimizer)):
                net_output = model(**sample["net_input"])
                token_loss, token_nll = criterion.compute_loss(model, net_output, sample, reduce=False)
                sentence_loss = token_loss.view(batch_size, -1).sum(1)
                sentence_nll = token_nll.view(batch_size, -1).sum(1)
                if self.selector.options.weighted:
                    weights = batch_importance_weights(self.train_iterator.stream.pair_keep_prob[ids],
                                                       target_lengths.cpu().numpy())
                    loss = (sentence_loss * torch.as_tensor(weights, device=sentence_loss.device,
                                                            dtype=sentence_loss.dtype)).sum()
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
        if ignore_grad:
            loss *= 0
        if self._loss_consumers:
            self._report_losses(ids, sentence_nll, target_lengths, ignore_grad)
        with torch.autograd.profiler.record_function("backward"):
            optimizer.backward(loss)
        return loss, sample_size, logging_output

    def _report_losses(self, ids, sentence_nll, target_lengths, ignore_grad):
        """Per-token losses of this step (of every rank's step when distributed) to the consumers,
        with the probability each pair was kept with.

        A dummy batch (``ignore_grad``) reports nothing but still joins the gather, which every
        rank calls once per step.
        """
        if ignore_grad:
            ids, per_token = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        else:
            per_token = (sentence_nll.detach() / target_lengths.clamp(min=1)).float().cpu().numpy()
            finite = np.isfinite(per_token)
            ids, per_token = ids[finite], per_token[finite]
        if distributed.world_size() > 1:
            ids, per_token = distributed.all_gather_pairs(ids, per_token)
        if len(ids):
            # Every rank iterates the whole global batch list, so each holds every pair's probability.
            keep_prob = self.train_iterator.stream.pair_keep_prob[ids]
            for consumer in self._loss_consumers:
                consumer.submit(ids, per_token, keep_prob)

    @property
    def _loss_consumers(self):
        return [c for c in (self.worker, self.loss_table, self.loss_log) if c is not None]

    # ------------------------------------------------------------ logs
    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if not self.selection_enabled or not any("autoassist_steps" in log for log in logging_outputs):
            return
        for key, value in self.autoassist_metrics().items():
            metrics.log_scalar(key, value, weight=1, priority=900, round=3)

    def autoassist_metrics(self):
        stats = self.train_iterator.stream.latest_stats
        out = {
            "aa_kept": stats.kept_pairs / max(stats.candidate_pairs, 1),
            "aa_kept_tok": stats.kept_tokens / max(stats.candidate_tokens, 1),
            "aa_kept_len": stats.kept_tokens / max(stats.kept_pairs, 1),
            "aa_corpus_len": self._corpus_mean_target_length,
        }
        if self.worker is not None:
            w = self.worker.stats()
            out.update({
                "aa_acc": w["accuracy"],
                "aa_conf": w["confidence"],
                "aa_pos_rate": w["positive_rate"],
                "aa_loss_mean": w["loss_mean"],
                "aa_dropped": w["dropped"],
                "aa_healthy": float(w["healthy"]),
            })
        return out

    # ------------------------------------------------------------ checkpoints
    def get_checkpoint_dict(self):
        if not self.selection_enabled or self.train_iterator is None:
            return {}
        state = {
            "version": STATE_VERSION,
            "policy": self.cfg.autoassist_policy,
            "stream": self.train_iterator.stream.state_dict(self.train_iterator.consumed_global_batches()),
        }
        if self.worker is not None:
            state["assistant"] = self.worker.state_dict()
        if self.loss_table is not None:
            state["loss_table"] = self.loss_table.state_dict()
        return {type(self).__name__: state}

    def set_checkpoint_dict(self, state):
        if not self.selection_enabled or self.train_iterator is None:
            return
        if self.cfg.autoassist_reset_state:
            logger.info("AutoAssist: --autoassist-reset-state given; starting AutoAssist afresh")
            return
        if not state:
            return
        problem = _state_problem(state, self.cfg.autoassist_policy)
        if problem is None:
            try:
                self.train_iterator.stream.load_state_dict(state["stream"])
                if self.worker is not None:
                    self.worker.load_state_dict(state["assistant"])
                if self.loss_table is not None:
                    self.loss_table.load_state_dict(state["loss_table"])
            except (KeyError, ValueError, TypeError, IndexError) as error:
                problem = f"is corrupt ({type(error).__name__}: {error})"
        if problem:
            raise AutoAssistConfigError(
                f"the checkpoint's AutoAssist state {problem}; restart AutoAssist with "
                "--autoassist-reset-state (the Boss's weights are still loaded)"
            )
        self._state_restored = True
        logger.info("AutoAssist: restored Assistant and selection state from the checkpoint")

    def begin_epoch(self, epoch, model):
        super().begin_epoch(epoch, model)
        if self.loss_log is not None:
            self.loss_log.epoch = epoch
        if not self.selection_enabled or self._announced_start:
            return
        self._announced_start = True
        resumed = epoch > 1 or self.train_iterator.iterations_in_epoch > 0
        if resumed and not self._state_restored:
            logger.info(
                "AutoAssist: the checkpoint holds no AutoAssist state (a run without AutoAssist "
                "or --autoassist-reset-state); starting AutoAssist fresh at epoch %d", epoch
            )


def _state_problem(state, policy):
    if state.get("version") != STATE_VERSION:
        return f"has version {state.get('version')!r}, this release reads version {STATE_VERSION}"
    if state.get("policy") != policy:
        return f"was written with --autoassist-policy {state.get('policy')}, not {policy}"
    if "stream" not in state:
        return "has no selection stream"
    return None


# fairseq imports --user-dir modules before it parses options or loads any checkpoint.
allow_fairseq_checkpoints()
_report_config_errors_in_one_line()
