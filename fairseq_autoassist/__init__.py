"""fairseq-autoassist: AutoAssist (Zhang, Yu, Dhillon, NeurIPS 2019) as a fairseq plugin.

Load it with ``--user-dir fairseq_autoassist`` and train with ``--task autoassist_translation``.

Layout: ``assistant/`` (features and the Assistant), ``selection/`` (keep rules, schedule, seeded
draws), ``data/batch_stream.py`` (the shrinking batch stream) and ``worker.py`` are plain
numpy/torch without fairseq; ``tasks/`` and ``data/iterator.py`` are the fairseq glue, and
``compat.py`` lets torch >= 2.6 load fairseq checkpoints.

The fairseq glue is imported only when fairseq itself is already loaded (as it is under
``--user-dir``), so the core imports in milliseconds. From Python, import fairseq first or
import ``fairseq_autoassist.tasks.autoassist_translation`` directly.
"""

import sys

if "fairseq" in sys.modules:
    from .tasks import autoassist_translation  # noqa: F401  (registers the task)
