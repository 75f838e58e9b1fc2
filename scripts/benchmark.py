#!/usr/bin/env python
"""``autoassist-benchmark`` from a checkout, for the commands written before it was a console command (fairseq_autoassist.benchmark.command)."""

import sys

from fairseq_autoassist.benchmark.command import main

if __name__ == "__main__":
    sys.exit(main())
