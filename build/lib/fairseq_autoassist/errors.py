"""Bad input, reported in one line (no fairseq import)."""

import sys


class AutoAssistConfigError(ValueError):
    """Bad input (an option, a data folder, a checkpoint); the message names what to change."""


def report_config_errors_in_one_line():
    """Show an ``AutoAssistConfigError`` that ends the process as one ``error:`` line instead of a
    traceback through fairseq. Installed when training or generation sets up the task, never on import."""
    previous = sys.excepthook
    if getattr(previous, "autoassist_one_line", False):
        return

    def excepthook(kind, value, traceback):
        if isinstance(value, AutoAssistConfigError):
            sys.stderr.write(f"error: {value}\n")
        else:
            previous(kind, value, traceback)

    excepthook.autoassist_one_line = True
    sys.excepthook = excepthook
