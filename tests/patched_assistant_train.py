"""fairseq-train with the Assistant's update changed on purpose, for the end-to-end tests:
``python -m tests.patched_assistant_train slow ARGS`` (each update takes 0.1 s longer: selection must not depend on
how fast the background worker learns) or ``... broken ARGS`` (the third update raises: the run must stop)."""

import sys
import time

from fairseq_cli.train import cli_main

from fairseq_autoassist.assistant import Assistant

_update = Assistant.update


def _slow_update(self, *feedback):
    time.sleep(0.1)
    return _update(self, *feedback)


def _broken_update(self, *feedback):
    if self.num_updates == 2:
        raise FloatingPointError("simulated failure of the Assistant's update")
    return _update(self, *feedback)


if __name__ == "__main__":
    Assistant.update = {"slow": _slow_update, "broken": _broken_update}[sys.argv.pop(1)]
    cli_main()
