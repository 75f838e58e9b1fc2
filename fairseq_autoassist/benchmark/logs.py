"""The records of a fairseq-train log: its epochs and every validation (no fairseq import)."""

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


def parse_epochs(log_text):
    """Per-epoch records from a fairseq-train log (the last occurrence of each epoch wins)."""
    epochs = {}
    for line in log_text.splitlines():
        summary = re.search(r"\| train \| epoch (\d+) \|(.*)", line)
        valid = re.search(r"\| valid \| epoch (\d+) \| valid on '\w+' subset \|(.*)", line)
        match = summary or valid
        if not match:
            continue
        fields = _fields(match.group(2))
        record = epochs.setdefault(int(match.group(1)), {})
        if summary:
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
