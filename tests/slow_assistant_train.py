"""fairseq-train with the Assistant's update slowed on purpose (``python -m tests.slow_assistant_train ARGS``):
the end-to-end tests check that selection does not depend on how fast the background worker learns."""

import time

from fairseq_cli.train import cli_main

from fairseq_autoassist.assistant import Assistant

SECONDS_PER_UPDATE = 0.1
_update = Assistant.update


def _slow_update(self, *feedback):
    time.sleep(SECONDS_PER_UPDATE)
    return _update(self, *feedback)


if __name__ == "__main__":
    Assistant.update = _slow_update
    cli_main()
