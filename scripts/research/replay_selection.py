#!/usr/bin/env python
"""Replay a keep-all run's recorded losses through selection rules and report which pairs each keeps.

    python scripts/train_multi30k.py --data data-bin/multi30k-noisy30.de-en --policy keep-all \
        --save-dir runs/noisy-losslog --arch small --max-epoch 8 --max-tokens 2048 --lr 2e-3 \
        --warmup-updates 300 --no-eval-bleu -- --autoassist-loss-log runs/noisy-losslog/losses.npy
    python scripts/research/replay_selection.py --data data-bin/multi30k-noisy30.de-en \
        --loss-log runs/noisy-losslog/losses.npy --noise-ids data/multi30k-noisy30/noise.tsv \
        --rule assistant --rule progress:base_prob=0.1 --out docs/results/benchmark-multi30k-noisy/replay

A screen for rules before they cost training runs. Each rule (``POLICY`` or ``POLICY:option=value,...``
with any ``SelectionOptions`` or ``AssistantConfig`` field, e.g. ``learnable:base_prob=0.1,pair_features=true``) runs the
real selector, Assistant (synchronous) and loss table over the logged steps in order: before a step
its rule gives each of the step's pairs a keep probability, a seeded draw keeps some, and only the
kept pairs' losses reach the rule's Assistant and loss table, as in a shrinking run (``--warmup-epochs``
passes keep every pair first). The Boss is not simulated: every loss comes from the logged run, which
trained on every pair, so the figures say how well a rule *separates* pairs, not what it does to BLEU.

Reported per pass: for each noise kind of ``--noise-ids`` (a ``noise.tsv``; every other pair is
``clean``), or each fifth of the pairs by logged loss in one pass (``--difficulty-groups-at``), the
mean per-token loss and learning progress (and its spread over the pairs) of the logged run and the
share of its pairs labelled informative by the paper's label and by the learning-progress label;
and, per rule, the kept share of each kind. With ``--auc POSITIVE:NEGATIVE[+NEGATIVE...]`` (kinds; repeat
for several), also the ROC AUC with which each rule's keep probability in the last pass ranks the first kind's
pairs above the others' (e.g. ``--auc paracrawl-V:paracrawl-A+paracrawl-L`` on the ParaCrawl mixture of
``scripts/research/paracrawl_report.py --mixed-corpus``). Outputs OUT/replay_selection.json and OUT/replay_selection.md.
"""

import argparse
import dataclasses
import logging
import sys

import numpy as np

from fairseq_autoassist.assistant import Assistant, AssistantConfig
from fairseq_autoassist.data.iterator import load_replay_features
from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.loss_log import read_loss_log
from fairseq_autoassist.options import RuntimeOptions
from fairseq_autoassist.corpus.raw_corpus import read_noise
from fairseq_autoassist.runtime import feed_back
from fairseq_autoassist.selection import (
    POLICIES,
    LossHistory,
    SelectionOptions,
    SelectionSchedule,
    Selector,
)
from fairseq_autoassist.recipes import data_languages, write_report
from fairseq_autoassist.worker import SyncAssistantWorker

logger = logging.getLogger("replay_selection")

CLEAN = "clean"


def parse_rule(text):
    """``POLICY[:field=value,...]`` -> ``(text, SelectionOptions, AssistantConfig)``; a field of either."""
    name, _, settings = text.partition(":")
    if name not in POLICIES or POLICIES[name].keep is None:
        raise argparse.ArgumentTypeError(f"--rule {text}: the policy must be one of "
                                         f"{', '.join(n for n, p in POLICIES.items() if p.keep)}")
    groups = (SelectionOptions, AssistantConfig)
    fields = {field.name: (group, field.type) for group in groups for field in dataclasses.fields(group)}
    values = {SelectionOptions: {"policy": name}, AssistantConfig: {}}
    for item in filter(None, settings.split(",")):
        key, _, value = item.partition("=")
        if key not in fields or not value:
            raise argparse.ArgumentTypeError(f"--rule {text}: {item!r} is not FIELD=VALUE with a field of "
                                             f"SelectionOptions or AssistantConfig ({', '.join(fields)})")
        group, kind = fields[key]
        values[group][key] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
    return text, SelectionOptions(**values[SelectionOptions]), AssistantConfig(**values[AssistantConfig])


def pair_kinds(num_pairs, noise_ids):
    """Kind name per pair: the noise kind from ``noise.tsv``, or ``clean``."""
    kinds = np.full(num_pairs, CLEAN, dtype=object)
    if noise_ids:
        for line, kind in read_noise(noise_ids).items():
            kinds[line] = kind or "noisy"
    return kinds


def difficulty_kinds(num_pairs, loss_log, at_pass, groups=5):
    """Kind name per pair: its fifth (``groups``) by logged loss in pass ``at_pass``, ``loss-q1`` the lowest;
    ``unseen`` for a pair that pass did not train on."""
    loss = np.full(num_pairs, np.nan)
    for pass_index, ids, losses in logged_passes(loss_log):
        if pass_index > at_pass:
            break
        if pass_index == at_pass:
            loss[ids] = losses
    seen = np.flatnonzero(np.isfinite(loss))
    if not len(seen):
        raise AutoAssistConfigError(f"--difficulty-groups-at {at_pass}: {loss_log} holds fewer passes")
    kinds = np.full(num_pairs, "unseen", dtype=object)
    for group, members in enumerate(np.array_split(seen[np.argsort(loss[seen], kind="stable")], groups), start=1):
        kinds[members] = f"loss-q{group}"
    return kinds


def logged_passes(loss_log):
    """Yields ``(pass_index, ids, per_token_losses)`` per logged step; a pass ends where a pair comes back."""
    pass_index, seen = 1, set()
    for ids, losses, _ in read_loss_log(loss_log):
        finite = np.isfinite(losses)
        ids, losses = ids[finite], losses[finite]
        if seen.intersection(ids.tolist()):
            pass_index, seen = pass_index + 1, set()
        seen.update(ids.tolist())
        yield pass_index, ids, losses


class KindCounter:
    """Sums per pass and pair kind."""

    def __init__(self, kinds):
        self.kinds = kinds
        self.sums = {}

    def add(self, pass_index, name, ids, values):
        for kind in np.unique(self.kinds[ids]):
            of_kind = self.kinds[ids] == kind
            total, count = self.sums.get((pass_index, name, kind), (0.0, 0))
            self.sums[(pass_index, name, kind)] = (total + float(np.sum(values[of_kind])), count + int(of_kind.sum()))

    def means(self, name):
        """``{pass: {kind: mean}}`` of one quantity."""
        out = {}
        for (pass_index, quantity, kind), (total, count) in sorted(self.sums.items()):
            if quantity == name and count:
                out.setdefault(pass_index, {})[kind] = total / count
        return out


def describe_run(loss_log, kinds, loss_mean_decay, steps_per_pass):
    """Per pass and kind: the logged loss, learning progress, and both labels' informative shares."""
    history = LossHistory(len(kinds), mean_decay=loss_mean_decay, steps_per_pass=steps_per_pass)
    counter = KindCounter(kinds)
    loss_mean = None
    for pass_index, ids, losses in logged_passes(loss_log):
        batch_mean = float(losses.mean())
        paper_label = (losses > (batch_mean if loss_mean is None else loss_mean)).astype(np.float64)
        loss_mean = batch_mean if loss_mean is None else loss_mean_decay * loss_mean + (1 - loss_mean_decay) * batch_mean
        history.submit(ids, losses)
        counter.add(pass_index, "loss", ids, losses)
        counter.add(pass_index, "paper_label", ids, paper_label)
        progress, progress_label = history.progress(ids), history.labels(ids)
        known = np.isfinite(progress_label)
        counter.add(pass_index, "progress", ids[known], progress[known])
        counter.add(pass_index, "progress_squared", ids[known], progress[known] ** 2)
        counter.add(pass_index, "progress_label", ids[known], progress_label[known])
    run = {name: counter.means(name) for name in ("loss", "progress", "paper_label", "progress_label")}
    # The spread of one visit's progress against its mean says whether a single pair's progress is measurable.
    run["progress_spread"] = {
        pass_index: {kind: float(np.sqrt(max(square - run["progress"][pass_index][kind] ** 2, 0.0)))
                     for kind, square in squares.items()}
        for pass_index, squares in counter.means("progress_squared").items()}
    return run


def replay_rule(options, features, loss_log, kinds, warmup_epochs, seed, steps_per_pass, config=AssistantConfig()):
    """``({pass: {kind: kept share}}, each pair's latest keep probability)`` of one rule (``options``, its
    Assistant's ``config``) over the logged steps (NaN for a pair never scored)."""
    policy = POLICIES[options.policy]
    lag = RuntimeOptions.assistant_lag
    worker = SyncAssistantWorker(Assistant(features, config), lag) if policy.needs_assistant else None
    loss_table = policy.build_loss_table(len(kinds), options, steps_per_pass, config.loss_mean_decay,
                                         groups=features.near_duplicate_groups() if policy.needs_groups else None)
    selector = Selector(options, SelectionSchedule(warmup_epochs=warmup_epochs), seed, worker, loss_table,
                        difficulty=policy.difficulty_shares(features.target.lengths, lambda: features))
    rng = np.random.default_rng(seed)
    counter = KindCounter(kinds)
    latest = np.full(len(kinds), np.nan)
    for step, (pass_index, ids, losses) in enumerate(logged_passes(loss_log)):
        selector.steps = step
        keep_prob = selector.keep_probabilities(ids, pass_index)
        keep_prob = np.ones(len(ids)) if keep_prob is None else keep_prob
        latest[ids] = keep_prob
        kept = rng.random(len(ids)) < keep_prob
        counter.add(pass_index, "kept", ids, kept.astype(np.float64))
        feed_back(policy, ids[kept], losses[kept], keep_prob[kept].astype(np.float32), loss_table, worker)
    return counter.means("kept"), latest


def comparison(text):
    """argparse type of ``--auc``: ``POSITIVE:NEGATIVE[+NEGATIVE...]`` -> ``(text, positive, [negatives])``."""
    positive, _, negatives = text.partition(":")
    if not positive or not negatives:
        raise argparse.ArgumentTypeError(f"--auc {text}: write POSITIVE:NEGATIVE[+NEGATIVE...], kinds of --noise-ids")
    return text, positive, negatives.split("+")


def keep_auc(keep_prob, kinds, positive, negatives):
    """ROC AUC of ``keep_prob`` ranking the pairs of kind ``positive`` above those of ``negatives`` (scored pairs
    only); None when either side has none."""
    from sklearn.metrics import roc_auc_score

    chosen = np.isin(kinds, [positive, *negatives]) & ~np.isnan(keep_prob)
    labels = kinds[chosen] == positive
    if labels.all() or not labels.any():
        return None
    return float(roc_auc_score(labels, keep_prob[chosen]))


def markdown(result):
    kinds = result["kinds"]
    lines = [f"Command: `{result['command']}`", "", "Pairs per kind: " + ", ".join(
        f"{kind} {count}" for kind, count in kinds.items()), ""]
    run = result["run"]
    tables = [("Mean per-token loss of the logged run", run["loss"]),
              ("Mean learning progress (relative loss fall since the previous visit)", run["progress"]),
              ("Standard deviation of the learning progress over the pairs", run["progress_spread"]),
              ("Share labelled informative by the paper's label (loss above the running mean)", run["paper_label"]),
              ("Share labelled informative by the learning-progress label", run["progress_label"])]
    tables += [(f"Kept share under `{rule}`", kept) for rule, kept in result["rules"].items()]
    if result["auc"]:
        comparisons = list(next(iter(result["auc"].values())))
        lines += ["### ROC AUC of each rule's keep probability in the last pass", "",
                  "| rule | " + " | ".join(f"{text.replace(':', ' above ')}" for text in comparisons) + " |",
                  "|---" * (len(comparisons) + 1) + "|"]
        lines += [f"| `{rule}` | " + " | ".join("" if aucs[text] is None else f"{aucs[text]:.3f}" for text in comparisons)
                  + " |" for rule, aucs in result["auc"].items()]
        lines.append("")
    for title, table in tables:
        lines += [f"### {title}", "", "| pass | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
        for pass_index in sorted(table, key=int):
            row = table[pass_index]
            lines.append(f"| {pass_index} | " + " | ".join(
                f"{row[kind]:.3f}" if kind in row else "" for kind in kinds) + " |")
        lines.append("")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the prepared data-bin folder the run trained on")
    parser.add_argument("--loss-log", required=True, help="FILE written by --autoassist-loss-log in a keep-all run")
    kinds = parser.add_mutually_exclusive_group()
    kinds.add_argument("--noise-ids",
                       help="noise.tsv of scripts/research/make_noisy_corpus.py (kinds of the corrupted pairs)")
    kinds.add_argument("--difficulty-groups-at", type=int, metavar="PASS",
                       help="group the pairs into fifths by their logged loss in this pass (loss-q1: the lowest) "
                       "instead of by noise kind")
    parser.add_argument("--source-lang", help="default: the source language of --data's prepare.json")
    parser.add_argument("--target-lang", help="default: the target language of --data's prepare.json")
    parser.add_argument("--rule", dest="rules", action="append", type=parse_rule, required=True,
                        help="POLICY or POLICY:FIELD=VALUE,... (SelectionOptions or AssistantConfig fields); repeat for several")
    parser.add_argument("--warmup-epochs", type=int, default=1, help="--autoassist-warmup-epochs of every rule")
    parser.add_argument("--seed", type=int, default=1, help="seed of the simulated keep draws")
    parser.add_argument("--auc", dest="comparisons", action="append", type=comparison, default=[],
                        metavar="POSITIVE:NEGATIVE[+NEGATIVE...]",
                        help="also report how well each rule's last keep probabilities rank these kinds; repeatable")
    parser.add_argument("--out", required=True, help="folder for replay_selection.json and replay_selection.md")
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    args = parse_args(argv)
    try:
        languages = data_languages(args.data, args.source_lang, args.target_lang)
        features = load_replay_features(args.data, args.loss_log, *languages.values())
        kinds = (difficulty_kinds(len(features), args.loss_log, args.difficulty_groups_at)
                 if args.difficulty_groups_at else pair_kinds(len(features), args.noise_ids))
    except AutoAssistConfigError as error:
        sys.exit(f"error: {error}")
    names, counts = np.unique(kinds, return_counts=True)
    # Before any replaying: a misspelt kind would otherwise stop the script after the run is described.
    unknown = sorted({kind for _, positive, negatives in args.comparisons for kind in [positive, *negatives]}
                     - set(names.tolist()))
    if unknown:
        sys.exit(f"error: --auc names {', '.join(unknown)}, not kinds of these pairs ({', '.join(names.tolist())})")
    steps_per_pass = sum(1 for pass_index, _, _ in logged_passes(args.loss_log) if pass_index == 1)
    logger.info("describing the logged run (%d steps per pass)", steps_per_pass)
    result = {
        "command": "python scripts/research/replay_selection.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "languages": languages,
        "kinds": {str(name): int(count) for name, count in sorted(zip(names, counts), key=lambda x: x[0] != CLEAN)},
        "run": describe_run(args.loss_log, kinds, AssistantConfig().loss_mean_decay, steps_per_pass),
        "rules": {},
        "auc": {},
    }
    for text, options, config in args.rules:
        logger.info("replaying rule %s", text)
        result["rules"][text], latest = replay_rule(options, features, args.loss_log, kinds, args.warmup_epochs,
                                                    args.seed, steps_per_pass, config)
        if args.comparisons:
            result["auc"][text] = {comparison_text: keep_auc(latest, kinds, positive, negatives)
                                   for comparison_text, positive, negatives in args.comparisons}
    logger.info("wrote %s", write_report(args.out, "replay_selection", result, markdown(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
