#!/usr/bin/env bash
# One set-up command for a fresh machine: a virtual environment in .venv with
# kernelwatch installed (editable) and the CPU build of PyTorch pinned.
#
#   bash scripts/setup.sh            # CPU machine / CI: pins torch==2.13.0 (CPU build)
#   KERNELWATCH_KEEP_TORCH=1 bash scripts/setup.sh
#                                    # GPU runner: reuse the interpreter's own torch
#                                    # (venv with --system-site-packages, no torch install)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# KERNELWATCH_KEEP_TORCH as kernelwatch reads every yes/no variable (harness.core.env.flag):
# 1/true/yes/on or 0/false/no/off (any case, blank = off); anything else is an error,
# never a silent CPU torch on a GPU runner.
case "$(printf '%s' "${KERNELWATCH_KEEP_TORCH:-}" | tr '[:upper:]' '[:lower:]' | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//')" in
    1|true|yes|on) KEEP_TORCH=1 ;;
    ''|0|false|no|off) KEEP_TORCH=0 ;;
    *) echo "KERNELWATCH_KEEP_TORCH='$KERNELWATCH_KEEP_TORCH': expected one of 1/true/yes/on (on) or 0/false/no/off (off)" >&2
       exit 2 ;;
esac
if [ "$KEEP_TORCH" = 1 ]; then
    "$PY" -c 'import torch' || { echo "KERNELWATCH_KEEP_TORCH=1 but $PY has no torch" >&2; exit 2; }
    "$PY" -m venv --system-site-packages .venv
    .venv/bin/python -m pip install -q --upgrade pip
else
    "$PY" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    # An unpinned torch would pull a multi-GB CUDA build; 2.13.0 is the CPU build.
    .venv/bin/python -m pip install -q torch==2.13.0
fi
if [ "$KEEP_TORCH" = 1 ]; then
    # Never replace the runner's torch: pin whatever version it already has.
    constraints=$(mktemp)
    .venv/bin/python -c 'import torch; print(f"torch=={torch.__version__}")' > "$constraints"
    .venv/bin/python -m pip install -q -c "$constraints" -e '.[test]'
    rm -f "$constraints"
else
    .venv/bin/python -m pip install -q -e '.[test]'
fi
echo "kernelwatch installed in .venv: run '.venv/bin/kernelwatch run' (main job) or '.venv/bin/python -m pytest' (tests)"
