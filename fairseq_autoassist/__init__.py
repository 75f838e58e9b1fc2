"""fairseq-autoassist: AutoAssist (Zhang, Yu, Dhillon, NeurIPS 2019) as a fairseq plugin.

Load it with ``--user-dir fairseq_autoassist`` (or ``import fairseq_autoassist``) and train with
``--task autoassist_translation``. Importing registers the task and lets torch >= 2.6 load
fairseq checkpoints.
"""

from .compat import allow_fairseq_checkpoints

allow_fairseq_checkpoints()

from .tasks import autoassist_translation  # noqa: E402,F401  (registers the task)
