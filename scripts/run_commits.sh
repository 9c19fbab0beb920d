#!/usr/bin/env bash
# Benchmark commits one at a time with `kernelwatch run <commit>`, oldest first,
# continuing past a commit that fails; exit 1 if any failed, 2 on bad usage.
#
#   scripts/run_commits.sh PYTHON COMMIT... -- KERNELWATCH_RUN_ARGS...
#
# gpu_run.sh's bench-range uses it with the first-parent commits of its range:
# `kernelwatch run A..B` hands the range to `git rev-list`, which on a branch
# with merges also lists every commit of each merged branch (a helper's dozens
# of commits), while the history to extend is the mainline (what asv's own
# ranges follow, `rev-list --first-parent`). One commit per call also means a
# run cut off by the time limit has stored every commit finished before it.
set -uo pipefail
(($# >= 2)) || { echo "usage: run_commits.sh PYTHON COMMIT... -- ARGS..." >&2; exit 2; }
py="$1"; shift
commits=()
while (($#)) && [[ "$1" != "--" ]]; do commits+=("$1"); shift; done
(($#)) && shift
((${#commits[@]})) || { echo "run_commits: no commits given" >&2; exit 2; }
rc=0
for c in "${commits[@]}"; do
  echo "run_commits: kernelwatch run $c"
  "$py" -m harness.cli run "$c" "$@" || { echo "run_commits: $c failed (exit $?)"; rc=1; }
done
exit "$rc"
