"""fairseq-train with the Assistant's update changed on purpose, for the end-to-end tests:
``python -m tests.patched_assistant_train slow ARGS`` (each update takes 0.1 s longer: selection must not depend on
how fast the background worker learns) or ``... broken ARGS`` (the third update raises: the run must stop). Both
Assistants (this project's and the released one) are patched alike."""

import sys
import time

from fairseq_cli.train import cli_main

from fairseq_autoassist.assistant import Assistant
from fairseq_autoassist.assistant.released import ReleasedAssistant


def patched(update, how):
    def slow(self, *feedback, **named):
        time.sleep(0.1)
        return update(self, *feedback, **named)

    def broken(self, *feedback, **named):
        if self.num_updates == 2:
            raise FloatingPointError("simulated failure of the Assistant's update")
        return update(self, *feedback, **named)

    return {"slow": slow, "broken": broken}[how]


if __name__ == "__main__":
    how = sys.argv.pop(1)
    for kind in (Assistant, ReleasedAssistant):
        kind.update = patched(kind.update, how)
    cli_main()
