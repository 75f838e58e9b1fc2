"""Every ``--autoassist-*`` option, gathered from where it is declared (no fairseq import).

Each option is a field of one core dataclass, declared there once with its default, help text and
valid values (``option_fields.option``): the selection policy and its rules in
``selection.SelectionOptions``, when selection runs in ``selection.SelectionSchedule``, the
Assistant's learning in ``assistant.AssistantConfig``, and the machinery (chunks, worker,
diagnostics, resume) in ``RuntimeOptions`` below. ``AutoAssistOptions`` prefixes them with
``autoassist_`` for fairseq (``--autoassist-base-prob`` and so on); ``build`` turns a parsed config
back into the core dataclass by field name; ``validate`` checks every value with one loop.

``python -m fairseq_autoassist --help`` lists them all (fairseq's ``--help`` omits task options).
"""

from dataclasses import dataclass, field, make_dataclass
from typing import Optional

from .assistant import AssistantConfig
from .data.packing import PACKINGS
from .errors import AutoAssistConfigError
from .option_fields import option, option_fields, value_problem
from .selection import POLICIES, SelectionOptions, SelectionSchedule
from .selection.policies import BATCHINGS

PREFIX = "autoassist_"


@dataclass
class RuntimeOptions:
    """How the selection is run: chunking, the Assistant's worker, diagnostics and resume."""

    refresh_updates: int = option(
        50, "rescore and reselect pairs every this many updates (of --update-freq full-size batches on every "
        "rank), so no pair is selected with Assistant parameters older than about this many updates; 0 selects "
        "once per pass. A chunk's partly filled last batch is carried into the next chunk, so every batch is full "
        "but one per pass",
        minimum=0)
    packing: str = option(
        "padded-length", "how a chunk's kept pairs are sorted before fairseq's batch_by_size cuts them into batches: "
        "padded-length (by max(source, target) length; each batch holds pairs of one padded size), "
        "padded-length-shuffled (the same, ties in a seeded random order) or source-target (fairseq's own order, by "
        "source and then target length, as the stock task batches); see fairseq_autoassist/data/packing.py",
        choices=lambda: PACKINGS)
    batching: str = option(
        "by-policy", "how the stream cuts batches: sorted (each chunk's kept pairs sorted by --autoassist-packing, "
        "batches shuffled within the chunk), as-released (the authors' code: the first pass in fairseq's length "
        "order, short to long, later passes in their shuffled order, batches cut and trained in visiting order, "
        "lengths mixed; --autoassist-packing does not apply) or by-policy (as-released for the released policy, "
        "sorted for the others)", choices=lambda: ("by-policy",) + BATCHINGS)
    sync: bool = option(
        False, "update the Assistant in the training thread instead of a background worker (for debugging: it "
        "selects exactly as the worker does, see --autoassist-assistant-lag)")
    assistant_lag: int = option(
        8, "a selection scores with the Assistant as it was after learning from the training steps up to the last "
        "multiple of this many steps that lies at least this many steps back (so between N and 2N - 1 steps old), "
        "whatever the background worker's speed: two runs of one seed, and a resumed run, select the same pairs; "
        "training waits only while the worker is further behind (aa_waits)",
        minimum=1)
    queue_size: int = option(
        64, "training steps' losses the background worker holds before it has learned from them; when full, "
        "training waits for it (aa_waits) instead of dropping any",
        minimum=1)
    digest_file: Optional[str] = option(
        None, "diagnostic: append 'epoch, batches, SHA-1 of the epoch's global batches' to FILE.rankR after each "
        "epoch, to check that distributed ranks select alike, and the same of the batches the rank trained on to "
        "FILE.trained.rankR (carried through checkpoints), to check that a resumed run trains an uninterrupted one's")
    loss_log: Optional[str] = option(
        None, "diagnostic: append every training step's pair ids, per-token losses and keep probabilities "
        "to FILE (first rank only), for scripts/research/replay_assistant.py")
    noise_ids: Optional[str] = option(
        None, "diagnostic: FILE listing the corrupted training pairs (noise.tsv of "
        "scripts/research/make_noisy_corpus.py: "
        "0-based line, tab, kind); the logs then show each epoch's kept share of corrupted pairs (aa_kept_noisy) "
        "and of clean ones (aa_kept_clean)")
    reset_state: bool = option(
        False, "ignore AutoAssist state found in the checkpoint and start the Assistant and the selection afresh")


GROUPS = (SelectionOptions, SelectionSchedule, AssistantConfig, RuntimeOptions)

AutoAssistOptions = make_dataclass(
    "AutoAssistOptions",
    [(PREFIX + f.name, f.type, field(default=f.default, metadata=f.metadata))
     for group in GROUPS for f in option_fields(group)],
)
AutoAssistOptions.__module__ = __name__
AutoAssistOptions.__doc__ = "Every AutoAssist option with its ``autoassist_`` prefix (see the module docstring)."


def flag(name):
    return "--" + name.replace("_", "-")


def validate(cfg):
    """Refuse option values that cannot work, naming the flag, before any data is loaded."""
    for f in option_fields(AutoAssistOptions):
        value = getattr(cfg, f.name)
        problem = value_problem(value, f.metadata)
        if problem:
            raise AutoAssistConfigError(f"{flag(f.name)}={value} {problem}")
    learned, unlearnable = cfg.autoassist_learned_quantile, cfg.autoassist_unlearnable_quantile
    if learned >= unlearnable:
        raise AutoAssistConfigError(
            f"--autoassist-learned-quantile={learned} is not below --autoassist-unlearnable-quantile={unlearnable}, "
            "so the learnable policy would call every pair learned or unlearnable; lower the first or raise the second")
    policy = cfg.autoassist_policy
    if cfg.autoassist_pair_features and POLICIES[policy].assistant == "released":
        raise AutoAssistConfigError(
            "--autoassist-pair-features would change nothing under --autoassist-policy released: the released "
            "Assistant has the authors' features only; use --autoassist-policy predicted-learnable or assistant")
    if cfg.autoassist_pair_features and POLICIES[policy].own_loss_decides_once_seen and cfg.autoassist_warmup_epochs:
        raise AutoAssistConfigError(
            f"--autoassist-pair-features would change nothing under --autoassist-policy {policy}: every pair has a "
            "loss of its own after the warm-up epoch, and that loss decides, not the Assistant that sees the pair "
            "features; use --autoassist-policy predicted-learnable (the Assistant decides for every pair), or "
            "--autoassist-warmup-epochs 0 to let the features act on pairs not yet seen")


def batching(cfg):
    """The batching a run uses (``--autoassist-batching``, ``by-policy`` resolved)."""
    if cfg.autoassist_batching == "by-policy":
        return POLICIES[cfg.autoassist_policy].batching
    return cfg.autoassist_batching


def build(group, cfg, **fixed):
    """An instance of the core dataclass ``group`` whose options are read from ``cfg`` by field name;
    ``fixed`` sets its non-option fields."""
    return group(**{f.name: getattr(cfg, PREFIX + f.name) for f in option_fields(group)}, **fixed)


def options_page():
    """docs/options.md: every option, its default and its help (``python -m fairseq_autoassist --options-page``)."""
    return ("# Options\n\n"
            "Every `--autoassist-*` option of the `autoassist_translation` task, declared once in the core dataclass it\n"
            "configures (`fairseq_autoassist/options.py` gathers them). This page is generated from those declarations\n"
            "(`python -m fairseq_autoassist --options-page > docs/options.md`) and a test keeps it equal;\n"
            "`python -m fairseq_autoassist --help` lists the same (fairseq's `--help` omits task options).\n\n"
            + option_table())


def option_table():
    """The Markdown table of every option, its default and its help."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for f in option_fields(AutoAssistOptions):
        default = "off" if f.default is False else "none" if f.default is None else f"`{f.default}`"
        rows.append(f"| `{flag(f.name)}` | {default} | {f.metadata['help']} |")
    return "\n".join(rows) + "\n"
