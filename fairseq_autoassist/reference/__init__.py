"""Reference models (RHO-LOSS's reducible loss, dual conditional cross-entropy): every pair's loss under a trained
checkpoint (``scores``, the ``autoassist-score`` command), the reference recipes (``models``, ``autoassist-reference``)
and filtering by dual cross-entropy (``filter_pairs``, ``autoassist-filter``). Beside ``benchmark/``; built on the
core and on ``corpus``."""
