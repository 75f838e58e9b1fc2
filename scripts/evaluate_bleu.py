#!/usr/bin/env python
"""``autoassist-evaluate`` from a checkout, for the commands written before it was a console command (fairseq_autoassist.evaluate)."""

import sys

from fairseq_autoassist.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
