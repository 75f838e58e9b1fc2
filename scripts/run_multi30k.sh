#!/usr/bin/env bash
# The main job: set up, prepare Multi30K, train with the Assistant, report test BLEU.
#
#   bash scripts/run_multi30k.sh --raw-dir ../shared/data/multi30k
#   MULTI30K_RAW_DIR=../shared/data/multi30k EPOCHS=20 POLICY=assistant bash scripts/run_multi30k.sh
#
# POLICY defaults to learnable with --autoassist-base-prob 0.1: the one rule that uses the Assistant and measured
# no worse than any other on this project's benchmarks (README.md, the table of corpora); the paper's
# rule is POLICY=assistant, the stock task POLICY=none.
# Without --raw-dir (or $MULTI30K_RAW_DIR) the raw files are downloaded into data/multi30k.
# Outputs: data-bin/multi30k.de-en/ (prepared data), checkpoints/multi30k-$POLICY/ (checkpoints,
# train.log, bleu_test.json and the test hypotheses).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

RAW_DIR="${MULTI30K_RAW_DIR:-$ROOT/data/multi30k}"
while [ $# -gt 0 ]; do
    case "$1" in
        --raw-dir) RAW_DIR="$2"; shift 2 ;;
        --raw-dir=*) RAW_DIR="${1#*=}"; shift ;;
        *) echo "unknown argument: $1 (use --raw-dir DIR; other settings are environment variables)" >&2; exit 2 ;;
    esac
done
POLICY="${POLICY:-learnable}"
EPOCHS="${EPOCHS:-10}"
ARCH="${ARCH:-base}"
DATA="$ROOT/data-bin/multi30k.de-en"
SAVE_DIR="${SAVE_DIR:-$ROOT/checkpoints/multi30k-$POLICY}"

bash "$ROOT/scripts/setup_env.sh"
PY="${VENV:-$ROOT/.venv}/bin/python"

if [ ! -f "$DATA/prepare.json" ]; then
    "$PY" scripts/prepare_multi30k.py --raw-dir "$RAW_DIR" --dest "$DATA"
fi
POLICY_FLAGS=()
if [ "$POLICY" = learnable ]; then
    POLICY_FLAGS=(-- --autoassist-base-prob 0.1)
fi
"$PY" scripts/train_multi30k.py --data "$DATA" --policy "$POLICY" --arch "$ARCH" \
    --max-epoch "$EPOCHS" --save-dir "$SAVE_DIR" "${POLICY_FLAGS[@]}"
"$PY" scripts/evaluate_bleu.py --checkpoint "$SAVE_DIR/checkpoint_best.pt" --data "$DATA" --split test --beam 5
"$PY" scripts/summarize_run.py --save-dir "$SAVE_DIR"
