"""fairseq-autoassist: AutoAssist (Zhang, Yu, Dhillon, NeurIPS 2019) as a fairseq plugin.

Load it with ``--user-dir fairseq_autoassist`` and train with ``--task autoassist_translation``.

Layout, by job. The training plugin is the package's core: ``assistant/`` (features and the Assistant),
``selection/`` (the policy registry, keep rules, schedule, seeded draws), ``data/batch_stream.py`` (the shrinking
batch stream), ``runtime.py`` (one run's parts), ``options.py`` (every option, gathered from the dataclass that
declares it), ``worker.py``, ``loss_handoff.py``, ``distributed.py``, ``loss_log.py``, ``errors.py`` and
``recipes.py`` (what the scripts share) are plain numpy/torch without fairseq; ``tasks/`` and ``data/iterator.py``
are the fairseq glue, and ``compat.py`` lets torch >= 2.6 load fairseq checkpoints. Beside it, importing it and
never imported by it: ``corpus/`` (preparation and cleaning), ``reference/`` (reference models) and ``benchmark/``.

The fairseq glue is imported only when fairseq itself is already loaded (as it is under
``--user-dir``), so the core imports in milliseconds. From Python, import fairseq first or
import ``fairseq_autoassist.tasks.autoassist_translation`` directly.
"""

import sys

if "fairseq" in sys.modules:
    from .tasks import autoassist_translation  # noqa: F401  (registers the task)
