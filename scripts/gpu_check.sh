#!/usr/bin/env bash
# The training step's GPU checks (issue 62), in two steps: here, with network access to the package registry,
#
#   bash scripts/gpu_check.sh fetch        # cp312 wheels of what a bare GPU machine lacks into .whl/, and
#                                          # data-bin/multi30k.de-en prepared (if missing)
#
# then on a machine with one CUDA GPU and PyTorch (python3 3.12), carrying .whl and data-bin/multi30k.de-en:
#
#   bash scripts/gpu_check.sh run [OUT]    # about 6 minutes on an H100
#
# `run` installs the wheels into /tmp/site, runs tests/test_gpu.py (the pinned hand-off against a real copy race;
# no synchronizing call in the plugin's step under torch.cuda.set_sync_debug_mode("error")), then times the stock
# task, keep-all, the paper's rule and learnable on Multi30K with the base model in fp16 (scripts/benchmark_overhead.py:
# three sessions of interleaved blocks) and writes OUT/gpu-tests.log, OUT/gpu.json and OUT/gpu.md (OUT: $OUT or
# docs/results). Commit gpu.md and gpu.json under docs/results/ with the card's name.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# What the GPU image lacks of the training stack (its torch, numpy, sacrebleu, sentencepiece and pytest serve); fairseq
# imports scipy and scikit-learn at start.
WHEELS=(fairseq-fixed==0.12.3.1 hydra-core==1.3.2 omegaconf==2.3.0 bitarray==3.12.3 scipy==1.17.1
        scikit-learn==1.9.1 joblib==1.6.0 threadpoolctl==3.8.0)
# Every module the checks import, checked before any of them runs.
MODULES=(torch numpy scipy sklearn sacrebleu sentencepiece pytest fairseq hydra omegaconf bitarray)

case "${1:-}" in
fetch)
    mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    for wheel in "${WHEELS[@]}"; do
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
            --platform any -d .whl "$wheel"
    done
    # Published as source only; pure Python, so a wheel built here serves there.
    .venv/bin/python -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
    if [ ! -f data-bin/multi30k.de-en/prepare.json ]; then
        .venv/bin/python scripts/prepare_multi30k.py --raw-dir ../shared/data/multi30k --dest data-bin/multi30k.de-en
    fi
    ;;
run)
    out="${2:-${OUT:-docs/results}}"
    mkdir -p "$out"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
    missing=$(python3 -c "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))" "${MODULES[@]}")
    if [ -n "$missing" ]; then
        echo "error: this machine lacks $missing; run 'bash scripts/gpu_check.sh fetch' where the package registry is reachable and carry .whl/ here" >&2
        exit 2
    fi
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu-tests.log"
    python3 -m pytest tests/test_gpu.py -q -p no:cacheprovider 2>&1 | tee -a "$out/gpu-tests.log"
    python3 scripts/benchmark_overhead.py --data data-bin/multi30k.de-en --preset multi30k-full --gpu \
        --arms keep-all assistant learnable --block-updates 40 --blocks 3 --sessions 3 --output "$out/gpu.json"
    ;;
*)
    echo "usage: bash scripts/gpu_check.sh fetch | run [OUT]" >&2
    exit 2
    ;;
esac
