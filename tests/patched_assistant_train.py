"""fairseq-train with the Assistant's update changed on purpose, for the end-to-end tests:
``python -m tests.patched_assistant_train slow ARGS`` (each update takes 0.1 s longer: selection must not depend on
how fast the background worker learns), ``... broken ARGS`` (the third update raises: the run must stop) or
``... broken-on-first-rank ARGS`` (the same on the first rank only: every rank must stop). Both Assistants (this
project's and the released one) are patched alike.

The change reaches the ranks that fairseq's spawn starts through the environment (they import this module anew); on a
machine without GPUs, where fairseq would spawn no rank at all, ``--distributed-world-size`` ranks are spawned on the
CPU."""

import os
import sys
import time

import torch
from fairseq_cli.train import cli_main

from fairseq_autoassist.assistant import Assistant
from fairseq_autoassist.assistant.released import ReleasedAssistant

CHANGE = "AUTOASSIST_TEST_ASSISTANT_CHANGE"


def patched(update, how):
    def slow(self, *feedback, **named):
        time.sleep(0.1)
        return update(self, *feedback, **named)

    def broken(self, *feedback, **named):
        if self.num_updates == 2:
            raise FloatingPointError("simulated failure of the Assistant's update")
        return update(self, *feedback, **named)

    def broken_on_first_rank(self, *feedback, **named):
        if torch.distributed.get_rank() == 0:
            return broken(self, *feedback, **named)
        return update(self, *feedback, **named)

    return {"slow": slow, "broken": broken, "broken-on-first-rank": broken_on_first_rank}[how]


def change_the_assistant(how):
    for kind in (Assistant, ReleasedAssistant):
        kind.update = patched(kind.update, how)
    if not torch.cuda.is_available() and "--distributed-world-size" in sys.argv:
        world_size = int(sys.argv[sys.argv.index("--distributed-world-size") + 1])
        torch.cuda.device_count = lambda: world_size


if os.environ.get(CHANGE):  # a rank that fairseq's spawn started
    change_the_assistant(os.environ[CHANGE])

if __name__ == "__main__":
    os.environ[CHANGE] = sys.argv.pop(1)
    change_the_assistant(os.environ[CHANGE])
    cli_main()
