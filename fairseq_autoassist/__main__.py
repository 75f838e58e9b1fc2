"""``python -m fairseq_autoassist --help``: every ``--autoassist-*`` option with its default and help, and the
console commands; ``--version`` prints the version, ``--options-page`` docs/options.md.

fairseq 0.12's ``fairseq-train --help`` does not list a task's options.
"""

import argparse
import sys

from .commands import COMMANDS, VERSION
from .option_fields import option_fields
from .options import AutoAssistOptions, flag, options_page


def parser():
    out = argparse.ArgumentParser(
        prog="fairseq-train DATA --user-dir fairseq_autoassist --task autoassist_translation",
        description="AutoAssist options of the autoassist_translation task (all other fairseq-train "
        "options apply as usual).",
        epilog="commands (each with --help):\n" + "\n".join(f"  {name}: {what}" for name, (_, what) in COMMANDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for f in option_fields(AutoAssistOptions):
        kind = f.type if f.type in (int, float, str) else str
        if f.type is bool:
            out.add_argument(flag(f.name), action="store_true", help=f.metadata["help"])
        else:
            out.add_argument(flag(f.name), type=kind, default=f.default,
                             help=f.metadata["help"] + " (default: %(default)s)")
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--options-page"]:
        sys.stdout.write(options_page())
    elif sys.argv[1:] == ["--version"]:
        print(f"fairseq-autoassist {VERSION}")
    else:
        parser().print_help()
    sys.exit(0)
