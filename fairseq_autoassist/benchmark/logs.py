"""The records of a fairseq-train log: its epochs and every validation (no fairseq import)."""

import math
import re

from ..recipes import PEAK_MEMORY_LINE


def _fields(text):
    """``{name: value}`` of the ``| name value`` fields of a fairseq log line's tail."""
    return {key: float(value) for key, value in re.findall(r"(\w+) ([-\d.]+)(?= \||$)", text)}


def parse_validations(log_text):
    """Every validation of a fairseq-train log by update count (the last one at a count wins):
    ``[{"updates", "valid_loss", "valid_bleu"}]`` in update order."""
    points = {}
    for match in re.finditer(r"\| valid \| epoch \d+ \| valid on '\w+' subset \|(.*)", log_text):
        fields = _fields(match.group(1))
        if "num_updates" in fields:
            points[int(fields["num_updates"])] = {"updates": int(fields["num_updates"]),
                                                  "valid_loss": fields.get("loss"), "valid_bleu": fields.get("bleu")}
    return [points[updates] for updates in sorted(points)]


# The Assistant's figures that are undefined (NaN) in some steps: an AUC while its kind of pair is rare, the share
# decided by their own loss before a rule decides.
SOMETIMES_UNDEFINED = ("aa_auc_new", "aa_auc_seen", "aa_own_share")


def _defined_interval_means(intervals):
    """``{name: mean}`` of the defined values of ``SOMETIMES_UNDEFINED`` over one epoch's logged intervals."""
    means = {}
    for name in SOMETIMES_UNDEFINED:
        values = [fields[name] for fields in intervals.values() if name in fields and not math.isnan(fields[name])]
        if values:
            means[name] = sum(values) / len(values)
    return means


def parse_epochs(log_text):
    """Per-epoch records from a fairseq-train log (the last occurrence of each epoch wins).

    Logs written before 2026-12-05 averaged the steps where an Assistant figure was undefined into its epoch mean,
    which made that mean NaN; there the mean of the epoch's defined ``train_inner`` intervals stands in."""
    epochs, intervals = {}, {}
    for line in log_text.splitlines():
        interval = re.search(r"\| train_inner \| epoch (\d+):.*?num_updates=(\d+),(.*)", line)
        if interval:
            fields = {key: float(value) for key, value in re.findall(r"(\w+)=([-\w.]+)", interval.group(3))
                      if key in SOMETIMES_UNDEFINED}
            intervals.setdefault(int(interval.group(1)), {})[int(interval.group(2))] = fields
            continue
        summary = re.search(r"\| train \| epoch (\d+) \|(.*)", line)
        valid = re.search(r"\| valid \| epoch (\d+) \| valid on '\w+' subset \|(.*)", line)
        match = summary or valid
        if not match:
            continue
        fields = _fields(match.group(2))
        record = epochs.setdefault(int(match.group(1)), {})
        if summary:
            undefined = [name for name in SOMETIMES_UNDEFINED if f"{name} nan" in match.group(2)]
            means = _defined_interval_means(intervals.get(int(match.group(1)), {})) if undefined else {}
            fields.update({name: means[name] for name in undefined if name in means})
            record.update(train_wall=fields.get("train_wall"), num_updates=fields.get("num_updates"),
                          wpb=fields.get("wpb"), kept=fields.get("aa_kept", 1.0),
                          kept_noisy=fields.get("aa_kept_noisy"), kept_clean=fields.get("aa_kept_clean"),
                          assistant_accuracy=fields.get("aa_acc"), auc_new=fields.get("aa_auc_new"),
                          auc_seen=fields.get("aa_auc_seen"), own_share=fields.get("aa_own_share"),
                          cpu_share=selection_cpu_share(fields))
        else:
            record.update(valid_loss=fields.get("loss"), valid_bleu=fields.get("bleu"))
    rows, time, tokens, previous_updates = [], 0.0, 0.0, 0.0
    for epoch in sorted(epochs):
        record = epochs[epoch]
        if record.get("num_updates") is None:
            continue
        updates = record["num_updates"] - previous_updates
        previous_updates = record["num_updates"]
        time += record["train_wall"]
        tokens += updates * record["wpb"]
        rows.append(dict(epoch=epoch, train_seconds=time, target_tokens=tokens,
                         updates=record["num_updates"], valid_loss=record.get("valid_loss"),
                         valid_bleu=record.get("valid_bleu"), kept_share=record["kept"],
                         kept_share_noisy=record["kept_noisy"], kept_share_clean=record["kept_clean"],
                         assistant_accuracy=record["assistant_accuracy"], assistant_auc_new=record["auc_new"],
                         assistant_auc_seen=record["auc_seen"], own_loss_share=record["own_share"],
                         selection_cpu_share=record["cpu_share"]))
    return rows


def selection_cpu_share(fields):
    """The CPU seconds spent choosing pairs (training thread) and in the Assistant's thread, as a share of the
    training process' CPU seconds (validation included), both counted since the process started (a resumed run:
    since its resume); None for an arm without them. Machine noise cannot hide this one, unlike seconds."""
    if not fields.get("aa_cpu_process"):
        return None
    return (fields.get("aa_cpu_select", 0.0) + fields.get("aa_cpu_assistant", 0.0)) / fields["aa_cpu_process"]


def parse_peak_memory(log_text):
    """The largest peak resident memory (MB) that ``recipes.run_logged`` recorded in a log, over every process it
    ran there (a resumed run's several); None for a log written before it recorded any."""
    pattern = re.escape(PEAK_MEMORY_LINE).replace(re.escape("{:.0f}"), r"(\d+)")
    peaks = [int(value) for value in re.findall(pattern, log_text)]
    return max(peaks) if peaks else None
