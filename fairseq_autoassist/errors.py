"""Bad input and a failed Assistant, each reported in one line (no fairseq import)."""

import re
import sys


class AutoAssistConfigError(ValueError):
    """Bad input (an option, a data folder, a checkpoint); the message names what to change."""


class AssistantFailedError(RuntimeError):
    """The Assistant's worker failed or stalled; training stops rather than go on without the policy."""

    def __init__(self, failure):
        super().__init__(f"{failure}; training stopped (its last checkpoint is intact). Fix the cause and resume, "
                         "or train without an Assistant with --autoassist-policy keep-all")


ONE_LINE_ERRORS = (AutoAssistConfigError, AssistantFailedError)


def report_config_errors_in_one_line():
    """Show an error of ``ONE_LINE_ERRORS`` that ends the process as one ``error:`` line instead of a
    traceback through fairseq. Installed when training or generation sets up the task, never on import."""
    previous = sys.excepthook
    if getattr(previous, "autoassist_one_line", False):
        return

    def excepthook(kind, value, traceback):
        line = str(value) if isinstance(value, ONE_LINE_ERRORS) else _one_line_error_of_a_spawned_rank(value)
        if line is not None:
            sys.stderr.write(f"error: {line}\n")
        else:
            previous(kind, value, traceback)

    excepthook.autoassist_one_line = True
    sys.excepthook = excepthook


def _one_line_error_of_a_spawned_rank(value):
    """The one-line error that a rank started by fairseq's spawn stopped with, or None: spawn hands its first process
    the rank's traceback as text (``torch.multiprocessing.ProcessRaisedException``), whose last line names it."""
    if type(value).__name__ != "ProcessRaisedException":
        return None
    match = re.fullmatch(r"fairseq_autoassist\.errors\.(\w+): (.*)", str(value).strip().splitlines()[-1])
    if match is None or match.group(1) not in {kind.__name__ for kind in ONE_LINE_ERRORS}:
        return None
    return f"{match.group(2)} (rank {value.error_index})"
