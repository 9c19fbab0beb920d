#!/usr/bin/env bash
# Download, here (with network), the wheels that scripts/gpu_run.sh installs on
# a GPU machine that has no network: the packages kernelwatch needs beyond what
# a CUDA image with PyTorch, Triton and CuPy already holds.
#
# Usage:
#   scripts/gpu_wheels.sh [DEST] [--python-version X.Y]
#     DEST               folder for the wheels (default: .whl in the repository root,
#                        added to .git/info/exclude so it is never committed)
#     --python-version   the GPU machine's Python (default 3.12, the lent H200's)
#
# Also writes DEST/history.bundle (git bundle of HEAD) for gpu_run.sh --bundle.
#
# Then on the GPU machine: scripts/gpu_run.sh --wheels DEST --bundle DEST/history.bundle OUTDIR
# (with the device tool, name DEST in `carry`: see docs/gpu.md).
#
# Exact pins, no dependencies resolved (--no-deps): each wheel's own needs are
# either in this list or already on the lent H200's image (packaging, pyyaml,
# tabulate, build, zipp, numpy, scipy, jinja2, rich, pytest). asv's optional
# virtualenv and pympler are not needed: kernelwatch's asv environment plugin
# builds no environments, and the suite has no memory benchmarks.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYVER="3.12"
DEST=""
while (($#)); do
  case "$1" in
    --python-version) (($# >= 2)) || { echo "gpu_wheels: error: --python-version needs a value" >&2; exit 2; }; PYVER="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_wheels: error: unknown option $1" >&2; exit 2 ;;
    *) [[ -z "$DEST" ]] || { echo "gpu_wheels: error: more than one folder given" >&2; exit 2; }; DEST="$1" ;;
  esac
  shift
done
[[ "$PYVER" =~ ^3\.[0-9]+$ ]] || { echo "gpu_wheels: error: --python-version must look like 3.12, got '$PYVER'" >&2; exit 2; }

if [[ -z "$DEST" ]]; then
  DEST="$ROOT/.whl"
  exclude="$ROOT/.git/info/exclude"
  if [[ -d "$ROOT/.git/info" ]] && ! grep -qxF '/.whl/' "$exclude" 2>/dev/null; then
    echo '/.whl/' >>"$exclude"
  fi
fi
mkdir -p "$DEST"

# Keep in step with pyproject.toml (asv and asv_runner are pinned there).
WHEELS=(
  asv==0.6.6
  asv_runner==0.3.2
  GitPython==3.2.1
  gitdb==4.0.12
  smmap==5.0.3
  json5==0.17.3
  importlib_metadata==8.7.0
  ruptures==1.1.10
)

# A stale wheel of another version would make pip see two candidates.
for spec in "${WHEELS[@]}"; do
  name="${spec%%==*}"
  norm="$(printf '%s' "$name" | tr 'A-Z-' 'a-z_')"
  find "$DEST" -maxdepth 1 -iname "${norm}-*.whl" ! -iname "${norm}-${spec##*==}-*" -print -delete
done

python3 -m pip download --no-deps --only-binary=:all: \
  --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$DEST" "${WHEELS[@]}"

total=$(du -cb "$DEST"/*.whl | tail -n 1 | cut -f 1)
echo "gpu_wheels: $(ls "$DEST"/*.whl | wc -l) wheels, $((total / 1024)) KiB in $DEST (the device tool carries 64 MiB in all, working tree included)"
if ((total > 32 * 1024 * 1024)); then
  echo "gpu_wheels: warning: over 32 MiB of wheels leaves little room for the working tree" >&2
fi

# The history, for a device whose working tree arrives without .git (the
# device tool's README does not promise it travels): gpu_run.sh --bundle
# restores it in the first seconds (issue 26 finding 5).
if git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  git -C "$ROOT" bundle create "$DEST/history.bundle" HEAD 2>/dev/null
  echo "gpu_wheels: $DEST/history.bundle: the history at $(git -C "$ROOT" rev-parse --short HEAD), $(( $(stat -c %s "$DEST/history.bundle") / 1024 )) KiB (gpu_run.sh --bundle)"
fi
