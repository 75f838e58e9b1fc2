#!/usr/bin/env bash
# Creates (or reuses) a virtual environment with torch, fairseq and this package.
#
#   bash scripts/setup_env.sh            # venv in .venv
#   VENV=/path/to/venv bash scripts/setup_env.sh
#
# Order matters: torch is installed first and pinned, so that nothing later pulls a
# multi-GB CUDA build on a CPU-only machine; fairseq is built against that torch with
# --no-build-isolation and installed with --no-deps so torchaudio never comes in.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"

log() { echo "[setup_env] $*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtual environment in $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --disable-pip-version-check -q)

# A second run only checks that everything imports and reinstalls this package (editable, fast).
if "$PY" -c "import torch, fairseq, sacrebleu, sentencepiece, pytest, hypothesis" 2>/dev/null; then
    log "torch and fairseq already installed in $VENV; refreshing this package only"
else
    "${PIP[@]}" --upgrade pip setuptools wheel
    log "installing $TORCH_SPEC"
    "${PIP[@]}" "$TORCH_SPEC"
    log "installing fairseq build and runtime dependencies"
    "${PIP[@]}" numpy cython "hydra-core==1.3.2" "omegaconf==2.3.0" regex "sacrebleu>=2.0" tqdm \
        bitarray cffi packaging scikit-learn sentencepiece pytest hypothesis matplotlib pyyaml
    if "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
        FAIRSEQ_SPEC="fairseq-fixed==0.12.3.1"
    else
        FAIRSEQ_SPEC="fairseq==0.12.2"
    fi
    log "building $FAIRSEQ_SPEC (about 5 minutes the first time; pip caches the wheel)"
    "${PIP[@]}" --no-build-isolation --no-deps "$FAIRSEQ_SPEC"
fi

# The cleaning engine (autoassist-prepare --clean): OpusFilter's filters and the models they run (eflomal, VariKN,
# heliport's language model inside its wheel). Added after the first releases: an environment from before gets it
# without a rebuild.
CLEAN_SPEC=("opusfilter[eflomal,varikn,heliport]==3.3.1" "eflomal==2.0.0" "varikn==1.2.1" "heliport==1.0.1")
"$PY" -c "import opusfilter, eflomal, varikn, heliport" 2>/dev/null || "${PIP[@]}" "${CLEAN_SPEC[@]}"
"${PIP[@]}" --no-build-isolation --no-deps -e "$ROOT"
"$PY" -c "import fairseq, fairseq_autoassist, torch; print('fairseq', fairseq.__version__, 'torch', torch.__version__)"
log "ready: $VENV"
