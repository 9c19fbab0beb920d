#!/usr/bin/env bash
# kernelwatch on a real GPU, in one go, results stored first: calibration, the
# timing self-check, the asv suite on the current commit (a headline cut sized
# from per-case costs probed on the machine, filling at most 70% of the phase:
# asv stores nothing for a cut-off commit), then the two commits before HEAD
# (re-planned from the time left), correctness on CUDA at the bench dtypes, and
# the other tests if time is left; all written into one output folder.
#
# Usage:
#   scripts/gpu_run.sh [OPTIONS] [OUTDIR]          (OUTDIR defaults to $OUT)
#
# Options (each also has the default shown):
#   --allow-cpu      run the same phases on the CPU with --quick sizes (tests the
#                    pipeline; the numbers are NOT GPU results). Default: off.
#   --dry-run        print the plan (phases, time caps, commands) and run nothing.
#                    Same as KERNELWATCH_GPU_RUN_PLAN=1.
#   --budget S       wall-clock budget for the whole run, in seconds.
#                    Default: $KERNELWATCH_GPU_BUDGET_S or 460 (7 min 40 s, under 8 min).
#   --archive FILE   on exit, however it ends (a phase failing, the budget, SIGTERM
#                    from an outer `timeout`), write the summary and tar.gz OUTDIR
#                    into FILE (e.g. "$OUT/gpu-run.tar.gz"). Default: none.
#   --bundle FILE    a `git bundle` of the history, used when the checkout has no
#                    .git (the device tool may not carry it): the history is
#                    restored from it in the first seconds. Default: none.
#   --wheels DIR     local wheel folder for missing packages (asv, asv_runner,
#                    GitPython, gitdb, smmap, json5, importlib_metadata, ruptures);
#                    installed with pip --no-index --target into a private folder
#                    (works on an externally managed Python, PEP 668; the folder
#                    reaches asv's benchmark processes). Default: $KERNELWATCH_WHEELS.
#   --host NAME      the host part of the machine name (KERNELWATCH_HOST), so a
#                    lent machine with a new hostname each time keeps one history.
#                    Default: $KERNELWATCH_HOST, else the hostname.
#   --quick          GPU only: quick shapes and timing for calibrate, selfcheck and
#                    the suite (always on with --allow-cpu).
#   --bench REGEX    asv --bench selection. Default: the "headline" cases (each
#                    op's largest CUDA shape in bf16, else its first CUDA dtype,
#                    every provider; on the CPU the quick CPU grid), cut to what
#                    fits bench-head's limit by scripts/lease_plan.py (per-case
#                    costs: asv durations of earlier runs in --plan-results,
#                    else estimated; --dry-run prints the table).
#   --plan-results DIR  earlier asv results whose durations size the cut.
#                    Default: examples/results when it exists.
#   --full           the whole GPU grid (every shape and dtype): several minutes
#                    a commit, so usually only HEAD fits the budget.
#   --range SPEC     commits to benchmark after HEAD: A..B (its first-parent
#                    commits, one `kernelwatch run` each) or one ref.
#                    Default: HEAD~3..HEAD (A..B excludes A: HEAD~2, HEAD~1, HEAD).
#   -k EXPR          pass -k EXPR to both pytest phases.
#   --skip LIST      comma-separated phases not to run (see the plan).
#   -h, --help       this text.
#
# Environment: PYTHON (interpreter holding torch; default python3), OUT,
# KERNELWATCH_WHEELS, KERNELWATCH_GPU_BUDGET_S, KERNELWATCH_GPU_RUN_PLAN, KERNELWATCH_HOST.
#
# Exit codes:
#   0  every phase ran and passed (phases skipped on purpose count as passed)
#   1  a phase failed, timed out, or found no time left (see summary.txt)
#   2  bad usage, or the interpreter cannot import torch
#   3  no CUDA device visible to PyTorch (and no --allow-cpu): nothing measured
#
# It never installs from the network (pip only with --no-index and a local
# folder, into .kernelwatch/deps-py<X.Y> of the checkout, never into the
# interpreter's environment) and never changes a GPU setting: nvidia-smi is only queried.
# See docs/gpu.md.
set -euo pipefail

readonly EXIT_OK=0 EXIT_FAILED=1 EXIT_USAGE=2 EXIT_NO_CUDA=3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
PY="${PYTHON:-python3}"

# Per-phase ceilings in seconds. A phase gets min(cap, time left before the
# deadline); time a phase does not use flows to the later ones, so bench-range
# (the two earlier commits) and then the other tests get whatever is left
# (100000 = "the rest"). asv saves a commit's results only when that commit
# finishes, so bench-head's cases are cut to fit its cap (scripts/lease_plan.py).
declare -A CAP=(
  [deps]=60 [providers]=30 [calibrate]=40 [selfcheck]=45 [bench-head]=170
  [bench-range]=100000 [correctness]=60 [tests]=100000
)
# calibrate's own time cap inside its phase (the rest: interpreter start, torch import).
readonly CALIBRATE_START_S=12
# Kept for correctness when bench-range is planned from the time left.
readonly CORRECTNESS_RESERVE_S=40
# pytest phases get SIGINT this long before their limit, and SIGKILL at it, so the
# junit xml of the tests that ran is written (it was lost past a 10 s grace).
readonly PYTEST_GRACE_S=20
# Seconds of bench-head's limit kept for asv's own start (benchmark discovery,
# one import of the suite) and the site build after the cases: the plan cut
# sizes the cases to the rest.
readonly BENCH_HEAD_MARGIN_S=25
# A phase that would get less than this is not started ("no-time").
declare -A MIN_S=(
  [deps]=10 [providers]=10 [correctness]=20 [calibrate]=10 [selfcheck]=10
  [bench-head]=30 [bench-range]=30 [tests]=15
)
readonly SUMMARY_RESERVE_S=10
readonly KILL_AFTER_S=10
PHASES="detect environment deps providers calibrate selfcheck bench-head bench-range correctness tests"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die_usage() { echo "gpu_run: error: $*" >&2; echo "gpu_run: see scripts/gpu_run.sh --help" >&2; exit "$EXIT_USAGE"; }

ALLOW_CPU=0
DRY_RUN=0
[[ "${KERNELWATCH_GPU_RUN_PLAN:-0}" != "0" && -n "${KERNELWATCH_GPU_RUN_PLAN:-}" ]] && DRY_RUN=1
BUDGET="${KERNELWATCH_GPU_BUDGET_S:-460}"
WHEELS="${KERNELWATCH_WHEELS:-}"
QUICK=0
FULL=0
BENCH=""
BENCH_SET=0
RANGE="HEAD~3..HEAD"
RANGE_SET=0
PYTEST_K=""
SKIP=","
OUTDIR=""
HOST_NAME="${KERNELWATCH_HOST:-}"
PLAN_RESULTS=""
ARCHIVE=""
BUNDLE=""

while (($#)); do
  case "$1" in
    --allow-cpu) ALLOW_CPU=1 ;;
    --dry-run) DRY_RUN=1 ;;
    --budget) (($# >= 2)) || die_usage "--budget needs a value"; BUDGET="$2"; shift ;;
    --wheels) (($# >= 2)) || die_usage "--wheels needs a value"; WHEELS="$2"; shift ;;
    --host) (($# >= 2)) || die_usage "--host needs a value"; HOST_NAME="$2"; shift ;;
    --plan-results) (($# >= 2)) || die_usage "--plan-results needs a value"; PLAN_RESULTS="$2"; shift ;;
    --archive) (($# >= 2)) || die_usage "--archive needs a value"; ARCHIVE="$2"; shift ;;
    --bundle) (($# >= 2)) || die_usage "--bundle needs a value"; BUNDLE="$2"; shift ;;
    --quick) QUICK=1 ;;
    --full) FULL=1 ;;
    --bench) (($# >= 2)) || die_usage "--bench needs a value"; BENCH="$2"; BENCH_SET=1; shift ;;
    --range) (($# >= 2)) || die_usage "--range needs a value"; RANGE="$2"; RANGE_SET=1; shift ;;
    -k) (($# >= 2)) || die_usage "-k needs a value"; PYTEST_K="$2"; shift ;;
    --skip) (($# >= 2)) || die_usage "--skip needs a value"; SKIP=",$2,"; shift ;;
    -h|--help) usage; exit "$EXIT_OK" ;;
    -*) die_usage "unknown option $1" ;;
    *) [[ -z "$OUTDIR" ]] || die_usage "more than one output folder given ($OUTDIR, $1)"; OUTDIR="$1" ;;
  esac
  shift
done

[[ "$BUDGET" =~ ^[0-9]+$ ]] && ((BUDGET >= 60)) || die_usage "--budget must be a whole number of seconds >= 60, got '$BUDGET'"
((FULL == 0 || BENCH_SET == 0)) || die_usage "--full and --bench exclude each other"
for p in ${SKIP//,/ }; do
  [[ " $PHASES " == *" $p "* ]] || die_usage "--skip: unknown phase '$p' (phases: $PHASES)"
done
[[ "$SKIP" != *,detect,* ]] || die_usage "--skip: the detect phase cannot be skipped"
[[ -z "$HOST_NAME" || "$HOST_NAME" =~ ^[A-Za-z0-9._-]+$ ]] || die_usage "--host must be letters, digits, '.', '_' or '-', got '$HOST_NAME'"
[[ -n "$HOST_NAME" ]] && export KERNELWATCH_HOST="$HOST_NAME"
if [[ -z "$PLAN_RESULTS" && -d "$ROOT/examples/results" ]]; then PLAN_RESULTS="$ROOT/examples/results"; fi
if [[ -z "$OUTDIR" ]]; then OUTDIR="${OUT:-}"; fi
if [[ -z "$OUTDIR" ]]; then
  ((DRY_RUN)) || die_usage "no output folder: pass OUTDIR or set \$OUT"
  OUTDIR="<out>"
fi
# A missing wheel folder is reported by the deps phase (only if something is
# missing), not fatal: the GPU phases that need no extra package still run.
WHEELS_NOTE=""
if [[ -n "$WHEELS" && ! -d "$WHEELS" ]]; then WHEELS_NOTE="--wheels '$WHEELS' is not a folder"; WHEELS=""; fi

# ---------------------------------------------------------------- settings
if ((ALLOW_CPU)); then QUICK=1; fi
QUICK_ARG=()
((QUICK)) && QUICK_ARG=(--quick)

# Correctness phase: the kernel tests plus the test files of the pieces that
# behave differently on CUDA (suite, bench, timing, calibration, devices,
# metrics, selfcheck) where they exist. Everything else runs in the 'tests' phase.
CORRECTNESS_FILES=(tests/test_kernels.py tests/test_cuda_sources.py)
for pat in cuda_device suite bench timing calibrat devices metrics selfcheck; do
  for f in "$ROOT"/tests/test_"$pat"*.py; do
    [[ -e "$f" ]] && CORRECTNESS_FILES+=("tests/${f##*/}")
  done
done
PYTEST_BASE=("$PY" -m pytest -p no:cacheprovider -q -rfE)
[[ -n "$PYTEST_K" ]] && PYTEST_BASE+=(-k "$PYTEST_K")
# test_triton_aot.py: the CPU-side ahead-of-time compile check (a minute of
# compiles that CI runs on every push), not worth lease time.
TESTS_IGNORE=(--ignore=tests/test_gpu_run.py --ignore=tests/test_triton_aot.py)
for f in "${CORRECTNESS_FILES[@]}"; do TESTS_IGNORE+=("--ignore=$f"); done

# Git history for the benchmark phases, checked first: without a git executable
# and the history, only calibration and the self-check can come back.
GIT_OK=0
N_COMMITS=0
HEAD_SHA="(unknown)"
GIT_NOTE=""
if ! command -v git >/dev/null 2>&1; then
  GIT_NOTE="no git executable on PATH: GitPython and asv need it, so bench-head and bench-range cannot run"
elif [[ ! -e "$ROOT/.git" && -n "$BUNDLE" ]] && ((DRY_RUN)); then
  GIT_NOTE="no .git at $ROOT: a run restores the history from the bundle $BUNDLE first"
elif [[ ! -e "$ROOT/.git" && -n "$BUNDLE" ]]; then
  # The working tree came without .git: restore the history from the bundle
  # (`git bundle create FILE HEAD`), keeping the files as they are (a mixed
  # reset touches only the index).
  bundle_head=""
  [[ -f "$BUNDLE" ]] && bundle_head="$(git bundle list-heads "$BUNDLE" 2>/dev/null | awk '{ print $1; exit }')"
  if [[ -n "$bundle_head" ]] && git -C "$ROOT" init -q 2>/dev/null && git -C "$ROOT" fetch -q "$BUNDLE" HEAD 2>/dev/null \
     && git -C "$ROOT" reset -q "$bundle_head" 2>/dev/null; then
    GIT_NOTE="history restored from the bundle $BUNDLE at ${bundle_head:0:12}"
  else
    rm -rf "$ROOT/.git"
    GIT_NOTE="no .git at $ROOT and the bundle $BUNDLE could not be restored: bench-head and bench-range cannot run"
  fi
elif [[ ! -e "$ROOT/.git" ]]; then
  GIT_NOTE="no .git at $ROOT (not carried?) and no --bundle: bench-head and bench-range cannot run"
fi
if command -v git >/dev/null 2>&1 && git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  GIT_OK=1
  N_COMMITS="$(git -C "$ROOT" rev-list --count HEAD)"
  HEAD_SHA="$(git -C "$ROOT" rev-parse HEAD)"
fi
((GIT_OK)) || GIT_NOTE="${GIT_NOTE:-no git history at $ROOT (git rev-parse HEAD fails)}"
# bench-range's commits: the first-parent (mainline) commits of the range,
# oldest first, HEAD excluded (bench-head measured it). `git rev-list A..B`
# alone would add every commit of each branch merged in between.
RANGE_SHAS=()
RANGE_NOTE=""
if ((GIT_OK)); then
  if [[ "$RANGE" == *..* ]]; then
    fp="$(git -C "$ROOT" rev-list --first-parent --reverse "$RANGE" 2>/dev/null)" || die_usage "--range: git cannot resolve '$RANGE'"
    if ((RANGE_SET == 0 && N_COMMITS < 4)); then
      fp="$(git -C "$ROOT" rev-list --first-parent --reverse HEAD)"
      RANGE_NOTE="only $N_COMMITS commits: all of them"
    fi
  else
    fp="$(git -C "$ROOT" rev-parse --verify -q "$RANGE^{commit}")" || die_usage "--range: no commit '$RANGE'"
  fi
  for c in $fp; do [[ "$c" != "$HEAD_SHA" ]] && RANGE_SHAS+=("${c:0:12}"); done
fi

# Private folder for the wheels the interpreter lacks (pip --target): nothing is
# installed into the interpreter's environment, which may be externally managed
# (PEP 668) and refuse it. It goes on PYTHONPATH for every phase and, through
# KERNELWATCH_SITE_DIRS, on asv's ASV_PYTHONPATH (harness/measure/asv_env.py), which
# replaces PYTHONPATH in asv's benchmark processes.
PY_VER="$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null || echo unknown)"
DEPS_DIR="$ROOT/.kernelwatch/deps-py$PY_VER"
if [[ -d "$DEPS_DIR" ]]; then
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$DEPS_DIR"
  export KERNELWATCH_SITE_DIRS="$DEPS_DIR"
fi

# ---------------------------------------------------------------- helpers
log() { # one line to stdout and the main log (once the folder exists)
  printf '%s\n' "$*"
  if [[ -n "${LOG:-}" && -f "$LOG" ]]; then printf '%s\n' "$*" >>"$LOG"; fi
}

cmd_text() { # a command as one shell-quoted line (single quotes where needed)
  local out="" a q="'"
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./=:,+@%~-]+$ ]]; then out+="$a "; else out+="'${a//$q/$q\\$q$q}' "; fi
  done
  printf '%s' "${out% }"
}

record() { # name status rc seconds cap note
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${6//$'\t'/ }" >>"$OUT_ABS/phases.tsv"
}

time_left() { echo $((BUDGET - SECONDS - SUMMARY_RESERVE_S)); }

PLAN_N=0
plan_line() { # name cap command...
  local name="$1" cap="$2"; shift 2
  PLAN_N=$((PLAN_N + 1))
  local skip=""
  [[ "$SKIP" == *",$name,"* ]] && skip="  [skipped: --skip]"
  printf '  %2d. %-12s cap %6s  %s%s\n' "$PLAN_N" "$name" "$cap" "$*" "$skip"
}

# run_phase NAME [--stdout FILE] [--rc5-skip] [--rc2-skip-on-cpu] [--sigint] -- CMD...
# Runs CMD under `timeout` in the repository root, output to logs/NAME.log,
# and records ok / failed / timeout / no-time / skipped in phases.tsv.
# --sigint: stop with SIGINT at the limit (pytest then still writes its junit
# xml for the tests that ran), SIGKILL KILL_AFTER_S later.
run_phase() {
  local name="$1"; shift
  local stdout_file="" rc5_skip=0 rc2_cpu_skip=0 sig=TERM
  while [[ "$1" != "--" ]]; do
    case "$1" in
      --stdout) stdout_file="$2"; shift ;;
      --sigint) sig=INT ;;
      --rc5-skip) rc5_skip=1 ;;
      --rc2-skip-on-cpu) rc2_cpu_skip=1 ;;
    esac
    shift
  done
  shift
  local cap="${CAP[$name]}"
  if ((DRY_RUN)); then
    local shown shown_cap="${cap}s"
    shown="$(cmd_text "$@")"
    [[ -n "$stdout_file" ]] && shown+=" > $stdout_file"
    [[ "$cap" == 100000 ]] && shown_cap="rest"
    plan_line "$name" "$shown_cap" "$shown"
    return 0
  fi
  if [[ "$SKIP" == *",$name,"* ]]; then
    record "$name" skipped "" 0 "$cap" "--skip"
    log "[$name] skipped (--skip)"
    return 0
  fi
  local left; left="$(time_left)"
  local t=$((cap < left ? cap : left))
  if ((t < ${MIN_S[$name]})); then
    record "$name" no-time "" 0 "$cap" "only ${left}s of the ${BUDGET}s budget left"
    log "[$name] NOT RUN: no time left (${left}s of the ${BUDGET}s budget)"
    return 0
  fi
  local plog="$OUT_ABS/logs/$name.log"
  log "[$name] start (limit ${t}s): $(cmd_text "$@")"
  {
    echo "# phase $name, limit ${t}s, started $(date -u +%FT%TZ)"
    echo "# $(cmd_text "$@")"
  } >"$plog"
  local start=$SECONDS rc=0 soft="$t" grace="$KILL_AFTER_S"
  if [[ "$sig" == INT ]] && ((t > 2 * PYTEST_GRACE_S)); then soft=$((t - PYTEST_GRACE_S)); grace=$PYTEST_GRACE_S; fi
  # In the background, and waited for: a signal to this script (an outer
  # `timeout`) then runs its trap at once, which stops the phase gracefully.
  if [[ -n "$stdout_file" ]]; then
    (cd "$ROOT" && exec timeout -s "$sig" -k "$grace" "$soft" "$@") >"$stdout_file" 2>>"$plog" </dev/null &
  else
    (cd "$ROOT" && exec timeout -s "$sig" -k "$grace" "$soft" "$@") >>"$plog" 2>&1 </dev/null &
  fi
  PHASE_PID=$! PHASE_SIG=$sig PHASE_NAME=$name PHASE_START=$start
  wait "$PHASE_PID" || rc=$?
  PHASE_PID=
  local dur=$((SECONDS - start)) status note=""
  if ((rc == 0)); then
    status=ok
  elif ((rc == 124 || rc == 137)); then
    status=timeout; note="stopped at its ${t}s limit"
  elif ((rc == 5 && rc5_skip)); then
    status=skipped; note="pytest collected no tests"
  elif ((rc == 2 && rc2_cpu_skip && CUDA == 0)); then
    status=skipped; note="exit 2 on the CPU: needs a CUDA device"
  else
    status=failed; note="exit $rc"
  fi
  echo "# phase $name: $status rc=$rc after ${dur}s" >>"$plog"
  record "$name" "$status" "$rc" "$dur" "$t" "$note"
  log "[$name] $status after ${dur}s${note:+ ($note)}; log: logs/$name.log"
  if [[ "$status" == failed || "$status" == timeout ]]; then
    tail -n 15 "$plog" | sed "s/^/    [$name] /" | tee -a "$LOG" || true
  fi
  return 0
}

write_summary() {
  "$PY" - "$OUT_ABS" "$MODE" "$BUDGET" "$SECONDS" <<'EOF' || cat "$OUT_ABS/phases.tsv"
import json, os, sys
import xml.etree.ElementTree as ET
from pathlib import Path

out, mode, budget, wall = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lines, data = [], {"mode": mode, "budget_s": budget, "wall_s": wall, "phases": [], "tests": {},
                   "calibration": None, "results": {}, "files": []}
for row in (out / "phases.tsv").read_text().splitlines()[1:]:
    name, status, rc, secs, cap, note = (row.split("\t") + [""] * 6)[:6]
    data["phases"].append({"phase": name, "status": status, "rc": int(rc) if rc else None,
                           "seconds": int(secs or 0), "limit_s": int(cap) if cap.isdigit() else None, "note": note})
lines.append(f"kernelwatch gpu_run: {mode}; {wall}s of a {budget}s budget")
if mode.startswith("CPU"):
    lines.append("  THESE ARE CPU NUMBERS (--allow-cpu): a pipeline test, not GPU results; do not commit them as such.")
lines.append("phases:")
for p in data["phases"]:
    lines.append(f"  {p['phase']:<12} {p['status']:<8} {p['seconds']:>4}s  {p['note']}")
not_ok = [p["phase"] for p in data["phases"] if p["status"] not in ("ok", "skipped")]
lines.append("ran out of time: " + (", ".join(p["phase"] for p in data["phases"] if p["status"] in ("timeout", "no-time")) or "none"))

for xml in sorted(out.glob("junit-*.xml")):
    try:
        root = ET.parse(xml).getroot()
    except (OSError, ET.ParseError) as exc:
        lines.append(f"{xml.name}: unreadable ({exc})")
        continue
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    t = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    bad = [f"{c.get('classname')}::{c.get('name')}" for c in root.iter("testcase")
           if c.find("failure") is not None or c.find("error") is not None]
    t["failed_tests"] = bad
    data["tests"][xml.stem] = t
    lines.append(f"{xml.name}: {t['tests']} tests, {t['tests'] - t['failures'] - t['errors'] - t['skipped']} passed, "
                 f"{t['failures']} failed, {t['errors']} errors, {t['skipped']} skipped")
    for name in bad[:10]:
        lines.append(f"    FAILED {name}")
    if len(bad) > 10:
        lines.append(f"    ... and {len(bad) - 10} more (see the xml)")

cal_path = out / "calibration.json"
if cal_path.is_file():
    try:
        cal = json.loads(cal_path.read_text())
        copy = (cal.get("copy") or {}).get("gbps")
        mm = {dt: m.get("tflops") for dt, m in (cal.get("matmul") or {}).items() if isinstance(m, dict)}
        data["calibration"] = {"machine": cal.get("machine"), "copy_gbps": copy, "matmul_tflops": mm}
        parts = [f"copy {copy:.1f} GB/s" if isinstance(copy, (int, float)) else "copy: none"]
        parts += [f"matmul {dt} {v:.3g} TFLOP/s" for dt, v in mm.items() if isinstance(v, (int, float))]
        lines.append(f"calibration ({cal.get('machine')}): " + ", ".join(parts))
    except (OSError, ValueError, AttributeError) as exc:
        lines.append(f"calibration.json: unreadable ({exc})")

res = out / "results"
if res.is_dir():
    for mdir in sorted(p for p in res.iterdir() if p.is_dir() and not p.name.startswith(".")):
        # .kernelwatch/ holds the run lock, scratch and quarantine folders, not a machine
        commits = []
        for f in sorted(mdir.glob("*.json")):
            if f.name == "machine.json":
                continue
            try:
                d = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(d, dict) and d.get("commit_hash"):
                # asv v2 rows: result first, a list over parameter combinations;
                # None = failed, NaN = skipped.
                n = 0
                for row in (d.get("results") or {}).values():
                    vals = row[0] if isinstance(row, list) and row else None
                    vals = vals if isinstance(vals, list) else [vals]
                    n += sum(1 for v in vals if isinstance(v, (int, float)) and v == v)
                commits.append({"commit": d["commit_hash"], "cases_with_values": n})
        recs = sum(1 for f in (mdir / "kernelwatch").glob("*.jsonl") if f.stem != "calibration")
        data["results"][mdir.name] = {"asv_commits": commits, "record_files": recs}
        lines.append(f"results/{mdir.name}: {len(commits)} commits with asv results "
                     + ", ".join(f"{c['commit'][:8]} ({c['cases_with_values']} cases timed)" for c in commits)
                     + f"; records for {recs} commits")
site = out / "site" / "index.html"
lines.append(f"site: {'site/index.html' if site.is_file() else 'not built'}")

total = 0
for f in sorted(out.rglob("*")):
    if f.is_file() and f.name not in ("summary.txt", "summary.json"):
        total += f.stat().st_size
        data["files"].append({"path": str(f.relative_to(out)), "bytes": f.stat().st_size})
top = sorted({p["path"].split("/")[0] for p in data["files"]})
lines.append(f"output: {out} ({len(data['files'])} files, {total / 1e6:.2f} MB): " + ", ".join(top))
data["not_ok"] = not_ok
if mode.startswith("none"):
    lines.append(f"result: {mode.split(': ', 1)[-1]}: nothing was measured")
else:
    lines.append("result: " + ("every phase passed" if not not_ok else "NOT OK: " + ", ".join(not_ok)))
(out / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
(out / "summary.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
}

collect_asv_logs() { # the per-commit asv logs of this run, tail only
  local f
  [[ -d "$ROOT/.kernelwatch/logs" ]] || return 0
  while IFS= read -r -d '' f; do
    tail -c 262144 "$f" >"$OUT_ABS/logs/asv-${f##*/}"
  done < <(find "$ROOT/.kernelwatch/logs" -name '*.log' -newer "$STAMP" -print0)
}

PHASE_PID=""
PHASE_NAME=""
PHASE_SIG=TERM
PHASE_START=0
ARCHIVED=0
# On SIGTERM / SIGINT (an outer `timeout`, Ctrl-C): stop the running phase the
# way its limit would (SIGTERM: `kernelwatch run` keeps the finished cases'
# records; SIGINT: pytest writes its junit xml), then the summary and the
# archive. Runs at once because every phase is waited for with `wait`.
on_signal() {
  local sig="$1" i
  trap '' INT TERM
  log "gpu_run: got SIG$sig after ${SECONDS}s${PHASE_PID:+: stopping the $PHASE_NAME phase (SIG$PHASE_SIG)}"
  if [[ -n "$PHASE_PID" ]] && kill -0 "$PHASE_PID" 2>/dev/null; then
    kill -s "$PHASE_SIG" "$PHASE_PID" 2>/dev/null || true
    for ((i = 0; i < 2 * KILL_AFTER_S; i++)); do kill -0 "$PHASE_PID" 2>/dev/null || break; sleep 0.5; done
    kill -s KILL "$PHASE_PID" 2>/dev/null || true
    wait "$PHASE_PID" 2>/dev/null || true
    record "$PHASE_NAME" interrupted "" $((SECONDS - PHASE_START)) - "stopped by SIG$sig to gpu_run"
  fi
  record interrupted failed "" "$SECONDS" - "SIG$sig"
  collect_asv_logs || true
  write_summary >/dev/null 2>&1 || true
  exit "$EXIT_FAILED"
}
# However the script ends: the archive (--archive), with summary.txt and
# gpu_run.log beside it, so something comes back even from an overrun.
on_exit() {
  local rc=$?
  rm -f "${STAMP:-}"
  if [[ -n "$ARCHIVE" && $ARCHIVED == 0 && -n "${OUT_ABS:-}" && -d "$OUT_ABS" ]]; then
    ARCHIVED=1
    mkdir -p "$(dirname "$ARCHIVE")" 2>/dev/null || true
    if tar -czf "$ARCHIVE.part" -C "$(dirname "$OUT_ABS")" "$(basename "$OUT_ABS")" 2>/dev/null; then
      mv -f "$ARCHIVE.part" "$ARCHIVE"
      for f in summary.txt gpu_run.log; do [[ -f "$OUT_ABS/$f" ]] && cp "$OUT_ABS/$f" "$(dirname "$ARCHIVE")/" 2>/dev/null; done
      printf 'gpu_run: archived %s into %s\n' "$OUT_ABS" "$ARCHIVE" >&2
    else
      rm -f "$ARCHIVE.part"
      printf 'gpu_run: could not archive %s into %s\n' "$OUT_ABS" "$ARCHIVE" >&2
    fi
  fi
  exit "$rc"
}

# ---------------------------------------------------------------- plan
MODE="GPU"
((ALLOW_CPU)) && MODE="GPU, or CPU with --allow-cpu"

if ((DRY_RUN)); then
  OUT_ABS="$OUTDIR"
  CUDA=1
  echo "kernelwatch gpu_run plan (dry run: nothing is run, nothing is written)"
  echo "  repository: $ROOT (HEAD ${HEAD_SHA:0:12}, $N_COMMITS commits$([[ $GIT_OK == 1 ]] || echo '; no git history: bench phases would fail'))"
  echo "  python:     $PY"
  [[ -n "$GIT_NOTE" ]] && echo "  git:        $GIT_NOTE"
  echo "  output:     $OUTDIR"
  echo "  mode:       $([[ $ALLOW_CPU == 1 ]] && echo 'CUDA if visible, else the CPU with --quick sizes (--allow-cpu)' || echo 'CUDA required: exits 3 without a device')"
  echo "  budget:     ${BUDGET}s in all; each phase gets min(cap, time left), ${SUMMARY_RESERVE_S}s kept for the summary"
  echo "  wheels:     ${WHEELS:-none (missing packages make the deps phase fail)}${WHEELS_NOTE:+ [$WHEELS_NOTE]}"
  echo "  machine:    host part ${KERNELWATCH_HOST:-$(hostname 2>/dev/null || echo unknown) (the hostname: a lent machine gets a new one each time; pass --host)}"
  echo "  phases:"
  plan_line detect 60s "$(cmd_text "$PY" -c 'import torch; print(torch.cuda.is_available())')"
  plan_line environment - "versions, git HEAD, read-only nvidia-smi queries -> environment.txt"
  plan_line deps "${CAP[deps]}s" "import check; if missing: $(cmd_text "$PY" -m pip install --no-index --no-deps --find-links "${WHEELS:-<wheels>}" --target "$DEPS_DIR") <missing>; PYTHONPATH and KERNELWATCH_SITE_DIRS (-> asv's ASV_PYTHONPATH) get $DEPS_DIR"
fi

# ---------------------------------------------------------------- run
if ((DRY_RUN == 0)); then
  mkdir -p "$OUTDIR/logs" || die_usage "cannot create output folder $OUTDIR"
  OUT_ABS="$(cd "$OUTDIR" && pwd)"
  LOG="$OUT_ABS/gpu_run.log"
  STAMP="$(mktemp)"
  trap 'on_exit' EXIT
  trap 'on_signal TERM' TERM
  trap 'on_signal INT' INT
  : >"$LOG"
  printf 'phase\tstatus\trc\tseconds\tlimit_s\tnote\n' >"$OUT_ABS/phases.tsv"
  log "kernelwatch gpu_run: $(date -u +%FT%TZ), repository $ROOT at ${HEAD_SHA:0:12}, output $OUT_ABS, budget ${BUDGET}s"
  if ((GIT_OK)); then
    log "[git] $(git --version 2>/dev/null), $N_COMMITS commits at ${HEAD_SHA:0:12}${GIT_NOTE:+; $GIT_NOTE}"
  else
    log "[git] PROBLEM: $GIT_NOTE; only calibration and the self-check can come back"
  fi
  export PYTHONUNBUFFERED=1
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

  # -- detect
  detect_rc=0
  detect_out="$(cd "$ROOT" && timeout -k 5 60 "$PY" -c 'import torch; print(torch.__version__, torch.version.cuda); print(torch.cuda.is_available())' 2>&1)" || detect_rc=$?
  printf '%s\n' "$detect_out" >"$OUT_ABS/logs/detect.log"
  if ((detect_rc != 0)); then
    record detect failed "$detect_rc" "$SECONDS" 60 "cannot import torch"
    log "gpu_run: error: cannot run PyTorch with $PY (exit $detect_rc): $(printf '%s' "$detect_out" | tail -n 1)"
    echo "gpu_run: error: cannot run PyTorch with $PY; see $LOG" >&2
    MODE="none: torch not importable"
    write_summary >/dev/null || true
    exit "$EXIT_USAGE"
  fi
  torch_line="$(printf '%s\n' "$detect_out" | tail -n 2 | head -n 1)"
  torch_line="torch ${torch_line%% *}, CUDA build ${torch_line#* }"
  if [[ "$(printf '%s\n' "$detect_out" | tail -n 1)" == "True" ]]; then
    CUDA=1
    MODE="GPU"
    record detect ok 0 "$SECONDS" 60 "CUDA device visible ($torch_line)"
    log "[detect] CUDA device visible to PyTorch ($torch_line)"
  else
    CUDA=0
    why="torch.cuda.is_available() is False ($torch_line; CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}; nvidia-smi $(command -v nvidia-smi >/dev/null 2>&1 && echo present || echo absent))"
    if ((ALLOW_CPU == 0)); then
      record detect no-cuda 0 "$SECONDS" 60 "$why"
      log "no CUDA device: $why. Nothing was measured; pass --allow-cpu to exercise the pipeline on the CPU (not GPU results)."
      echo "gpu_run: no CUDA device: nothing was measured (exit $EXIT_NO_CUDA); log: $LOG" >&2
      MODE="none: no CUDA device"
      write_summary >/dev/null || true
      exit "$EXIT_NO_CUDA"
    fi
    MODE="CPU (--allow-cpu, quick sizes)"
    record detect ok 0 "$SECONDS" 60 "no CUDA device; --allow-cpu: running on the CPU"
    log "[detect] no CUDA device: $why; --allow-cpu given, so the phases run on the CPU with --quick sizes. These are NOT GPU results."
  fi

  # -- environment (read-only)
  {
    echo "date_utc: $(date -u +%FT%TZ)"
    echo "host: $(hostname 2>/dev/null || echo unknown); $(uname -srm)"
    echo "cpus: $(nproc 2>/dev/null || echo unknown)"
    echo "repository: $ROOT"
    echo "git_head: $HEAD_SHA ($N_COMMITS commits)"
    [[ $GIT_OK == 1 ]] && git -C "$ROOT" log --oneline -n 4 | sed 's/^/  /'
    [[ $GIT_OK == 1 ]] && echo "git_status_lines: $(git -C "$ROOT" status --porcelain | wc -l)"
    echo "python: $PY -> $(command -v "$PY" || echo "$PY")"
    (cd "$ROOT" && timeout 60 "$PY" - <<'EOF') 2>&1 || echo "versions: could not read"
import importlib.metadata as md, platform
print("python_version:", platform.python_version())
for name in ("torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "numpy", "scipy", "asv", "asv_runner",
             "GitPython", "jinja2", "rich", "ruptures", "pytest", "pytest-xdist", "nvidia-ml-py"):
    try:
        print(f"{name}: {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: not installed")
EOF
    if command -v nvidia-smi >/dev/null 2>&1; then
      # Queries only: this script never changes clocks, power limits or persistence mode.
      timeout 20 nvidia-smi -L 2>&1 || true
      timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,persistence_mode,temperature.gpu --format=csv 2>&1 || true
    else
      echo "nvidia-smi: not found"
    fi
    command -v nvcc >/dev/null 2>&1 && timeout 20 nvcc --version 2>&1 | tail -n 2 || echo "nvcc: not found"
  } >"$OUT_ABS/environment.txt" 2>&1 || true
  record environment ok 0 0 - "environment.txt"
  log "[environment] environment.txt written"

  # -- deps: never from the network
  # module -> distribution, for the wheel folder (scripts/gpu_wheels.sh fetches these).
  declare -A DIST=([asv]=asv [asv_runner]=asv_runner [git]=GitPython [gitdb]=gitdb [smmap]=smmap
                   [json5]=json5 [importlib_metadata]=importlib_metadata [ruptures]=ruptures
                   [jinja2]=jinja2 [rich]=rich [scipy]=scipy [numpy]=numpy [pytest]=pytest [triton]=triton)
  missing_mods() {
    (cd "$ROOT" && timeout 120 "$PY" - "${!DIST[@]}" <<'EOF'
import importlib, sys
for mod in sys.argv[1:]:
    try:
        importlib.import_module(mod)
    except Exception:  # ImportError, or GitPython's error when git is missing
        print(mod)
EOF
    ) 2>/dev/null | sort | tr '\n' ' ' || echo "?"
  }
  if [[ "$SKIP" == *,deps,* ]]; then
    record deps skipped "" 0 "${CAP[deps]}" "--skip"; log "[deps] skipped (--skip)"
  else
    missing="$(missing_mods)"
    command -v git >/dev/null 2>&1 || missing+="(git executable) "
    if [[ -z "${missing// /}" ]]; then
      record deps ok 0 0 "${CAP[deps]}" "all Python packages present"
      log "[deps] asv, asv_runner, GitPython, gitdb, smmap, json5, importlib_metadata, ruptures, jinja2, rich, scipy, pytest, triton: present"
    elif [[ -n "$WHEELS" ]]; then
      dists=()
      for m in $missing; do [[ -n "${DIST[$m]:-}" ]] && dists+=("${DIST[$m]}"); done
      log "[deps] missing: $missing-> installing ${dists[*]} from $WHEELS (--no-index: no network)"
      if ((${#dists[@]})); then
        mkdir -p "$DEPS_DIR"
        run_phase deps -- "$PY" -m pip install --no-index --no-deps --no-cache-dir --find-links "$WHEELS" \
          --target "$DEPS_DIR" "${dists[@]}"
        export PYTHONPATH="$PYTHONPATH:$DEPS_DIR"
        export KERNELWATCH_SITE_DIRS="$DEPS_DIR"
        log "[deps] installed into $DEPS_DIR (PYTHONPATH, and asv's benchmark processes through KERNELWATCH_SITE_DIRS)"
      fi
      still="$(missing_mods)"
      command -v git >/dev/null 2>&1 || still+="(git executable) "
      if [[ -n "${still// /}" ]]; then
        record deps-check failed "" 0 - "still missing after the wheel install: $still"
        log "[deps] still missing: $still(the phases that need them will fail)"
      fi
    else
      record deps failed "" 0 "${CAP[deps]}" "missing: $missing; ${WHEELS_NOTE:-no wheel folder} (--wheels / KERNELWATCH_WHEELS; scripts/gpu_wheels.sh makes one)"
      log "[deps] FAILED: missing $missing; ${WHEELS_NOTE:-no wheel folder}: pass --wheels DIR (scripts/gpu_wheels.sh makes one). Continuing: phases that need them will fail."
    fi
  fi
fi

# Bench selection (computed once; shown in the plan too): the headline cases
# cut to bench-head's limit by scripts/lease_plan.py from per-case costs.
BENCH_ARG=()
PLAN_K=""
if ((DRY_RUN)); then plan_dev=cuda; ((ALLOW_CPU)) && plan_dev=cpu; else plan_dev=cpu; ((CUDA)) && plan_dev=cuda; fi
PLAN_TXT=""
if ((BENCH_SET)); then
  BENCH_ARG=(--bench "$BENCH")
elif ((FULL == 0)); then
  plan_tmp="$(mktemp -d)"
  plan_args=(--budget-s $((CAP[bench-head] - BENCH_HEAD_MARGIN_S)) --device "$plan_dev" --regex-out "$plan_tmp/regex"
             --k-out "$plan_tmp/k" --json "$plan_tmp/plan.json")
  ((QUICK)) && plan_args+=(--quick)
  # Per-case costs probed on this machine (a torch case, a Triton matmul case on CUDA).
  [[ "${KERNELWATCH_PLAN_PROBE:-1}" != 0 ]] && plan_args+=(--probe)
  [[ -n "$PLAN_RESULTS" ]] && plan_args+=(--results "$PLAN_RESULTS")
  plan_start=$SECONDS
  if PLAN_TXT="$(cd "$ROOT" && timeout -k 5 360 "$PY" scripts/lease_plan.py "${plan_args[@]}" 2>&1)" && [[ -s "$plan_tmp/regex" ]]; then
    BENCH_ARG=(--bench "$(cat "$plan_tmp/regex")")
    PLAN_K="$(cat "$plan_tmp/k")"
    ((DRY_RUN)) || { cp "$plan_tmp/plan.json" "$OUT_ABS/bench-plan.json"; printf '%s\n' "$PLAN_TXT" >"$OUT_ABS/logs/bench-plan.log"; }
    ((DRY_RUN)) || log "[plan] $(printf '%s\n' "$PLAN_TXT" | grep -E '^(probe|bench-head plan)' | tr '\n' ';') after $((SECONDS - plan_start))s (logs/bench-plan.log)"
  else
    log "gpu_run: could not compute the headline plan; benchmarking the whole grid: $(printf '%s' "$PLAN_TXT" | tail -n 1)"
    PLAN_TXT=""
  fi
  rm -rf "$plan_tmp"
fi
if ((DRY_RUN)) && [[ -n "$PLAN_TXT" ]]; then
  printf '%s\n' "$PLAN_TXT" | sed 's/^/  /'
fi
# Correctness after bench-head, at the headline dtypes only (the rest of the
# kernel tests run in no lease: they are CPU-checked in CI).
CORR_K=()
if [[ -n "$PLAN_K" ]]; then
  if [[ -n "$PYTEST_K" ]]; then CORR_K=(-k "($PYTEST_K) and ($PLAN_K)"); else CORR_K=(-k "$PLAN_K"); fi
fi
CORR_BASE=("$PY" -m pytest -p no:cacheprovider -q -rfE)
if ((${#CORR_K[@]} == 0)) && [[ -n "$PYTEST_K" ]]; then CORR_BASE+=(-k "$PYTEST_K"); fi

KW=("$PY" -m harness.cli)
XDIST=()
if ((DRY_RUN == 0)) && ((CUDA)) && (cd "$ROOT" && "$PY" -c 'import xdist' >/dev/null 2>&1); then
  jobs="$(nproc 2>/dev/null || echo 2)"; ((jobs > 8)) && jobs=8
  XDIST=(-n "$jobs")
fi

run_phase providers --stdout "$OUT_ABS/providers.json" -- "${KW[@]}" list --json
# Results first: calibrate, selfcheck and bench-head before any long test run.
# calibrate's own time cap: its phase's limit less the interpreter start, so it
# stores what it measured instead of being killed (issue 26 finding 4).
cal_left="$(time_left)"; cal_t=$((CAP[calibrate] < cal_left ? CAP[calibrate] : cal_left))
cal_cap=$((cal_t - CALIBRATE_START_S)); ((cal_cap < 5)) && cal_cap=5
((DRY_RUN)) && cal_cap=$((CAP[calibrate] - CALIBRATE_START_S))
run_phase calibrate -- "${KW[@]}" calibrate --results "$OUT_ABS/results" --out "$OUT_ABS/calibration.json" --time-cap "$cal_cap" "${QUICK_ARG[@]}"
if (cd "$ROOT" && timeout 60 "${KW[@]}" --help 2>/dev/null | grep -qw selfcheck); then
  run_phase selfcheck --rc2-skip-on-cpu -- "${KW[@]}" selfcheck --out "$OUT_ABS/selfcheck.json" "${QUICK_ARG[@]}"
elif ((DRY_RUN)); then
  plan_line selfcheck - "skipped: kernelwatch has no selfcheck subcommand"
else
  record selfcheck skipped "" 0 - "kernelwatch has no selfcheck subcommand"
  log "[selfcheck] skipped: kernelwatch has no selfcheck subcommand"
fi
if ((GIT_OK == 0 && DRY_RUN == 0)); then
  record bench-head failed "" 0 - "$GIT_NOTE"
  log "[bench-head] FAILED: $GIT_NOTE"
else
  # --no-calibrate: the calibrate phase has stored what it could; bench-head never
  # calibrates again inside its own budget.
  run_phase bench-head -- "${KW[@]}" run HEAD --results "$OUT_ABS/results" --out "$OUT_ABS/site" --no-calibrate "${QUICK_ARG[@]}" "${BENCH_ARG[@]}"
  HEAD_WALL="$(awk -F'\t' '$1 == "bench-head" { s = $4 } END { print s }' "$OUT_ABS/phases.tsv" 2>/dev/null || true)"
fi
if ((GIT_OK == 0 && DRY_RUN == 0)); then
  record bench-range failed "" 0 - "$GIT_NOTE"
  log "[bench-range] FAILED: $GIT_NOTE"
else
  if ((${#RANGE_SHAS[@]})); then
    # Re-planned from the time left (issue 26 finding 3): bench-head's cases at the
    # durations it just stored, as many commits as fit 70% of what is left after
    # correctness's reserve, the newest first; or it says it cannot fit one.
    RANGE_RUN=("${RANGE_SHAS[@]}")
    RANGE_BENCH=("${BENCH_ARG[@]}")
    range_fail=""
    if ((DRY_RUN == 0)) && [[ -s "$OUT_ABS/bench-plan.json" ]]; then
      range_left=$(($(time_left) - CORRECTNESS_RESERVE_S))
      if ((range_left < MIN_S[bench-range])); then
        range_fail="only ${range_left}s left after ${CORRECTNESS_RESERVE_S}s kept for correctness"
      else
        rp_tmp="$(mktemp -d)"
        rp_args=(--range --within "$OUT_ABS/bench-plan.json" --results "$OUT_ABS/results" --budget-s "$range_left"
                 --commits "${#RANGE_SHAS[@]}" --regex-out "$rp_tmp/rx" --json "$OUT_ABS/range-plan.json")
        [[ -n "${HEAD_WALL:-}" ]] && rp_args+=(--head-wall-s "$HEAD_WALL")
        rp_rc=0
        RP_TXT="$(cd "$ROOT" && timeout -k 5 120 "$PY" scripts/lease_plan.py "${rp_args[@]}" 2>&1)" || rp_rc=$?
        printf '%s\n' "$RP_TXT" >"$OUT_ABS/logs/range-plan.log"
        k="$(printf '%s\n' "$RP_TXT" | sed -n 's/^bench-range plan ([a-z]*): \([0-9][0-9]*\) of .*/\1/p' | head -n 1)"
        if ((rp_rc == 0)) && [[ -n "$k" && -s "$rp_tmp/rx" ]]; then
          RANGE_RUN=("${RANGE_SHAS[@]: -k}")
          RANGE_BENCH=(--bench "$(cat "$rp_tmp/rx")")
          CAP[bench-range]=$range_left
          log "[plan] $(printf '%s\n' "$RP_TXT" | head -n 1) (logs/range-plan.log)"
        else
          range_fail="$(printf '%s\n' "$RP_TXT" | head -n 1)"
        fi
        rm -rf "$rp_tmp"
      fi
    fi
    if [[ -n "$range_fail" ]]; then
      record bench-range no-time "" 0 - "$range_fail"
      log "[bench-range] NOT RUN: $range_fail"
    else
      run_phase bench-range -- bash scripts/run_commits.sh "$PY" "${RANGE_RUN[@]}" -- --results "$OUT_ABS/results" \
        --out "$OUT_ABS/site" --no-calibrate "${QUICK_ARG[@]}" "${RANGE_BENCH[@]}"
    fi
    ((DRY_RUN)) && echo "                    (a run re-plans bench-range from the time left after bench-head: scripts/lease_plan.py --range)"
  elif ((DRY_RUN)); then
    plan_line bench-range - "skipped: no commit in $RANGE besides HEAD"
  else
    record bench-range skipped "" 0 - "no commit in $RANGE besides HEAD"
    log "[bench-range] skipped: no commit in $RANGE besides HEAD"
  fi
  [[ -n "$RANGE_NOTE" ]] && log "[bench-range] $RANGE_NOTE"
fi
run_phase correctness --rc5-skip --sigint -- "${CORR_BASE[@]}" "${CORR_K[@]}" "${XDIST[@]}" --junitxml="$OUT_ABS/junit-correctness.xml" "${CORRECTNESS_FILES[@]}"
run_phase tests --rc5-skip --sigint -- "${PYTEST_BASE[@]}" -m "not slow and not browser" "${TESTS_IGNORE[@]}" --junitxml="$OUT_ABS/junit-tests.xml" tests

if ((DRY_RUN)); then
  echo "  then: the per-commit asv logs (tail) into logs/, summary.txt and summary.json"
  echo "  writes: gpu_run.log, phases.tsv, environment.txt, providers.json, junit-*.xml, calibration.json,"
  echo "          selfcheck.json, results/ (asv results + kernelwatch records), site/, logs/, summary.{txt,json}"
  echo "  exit codes: 0 all passed, 1 a phase failed or ran out of time, 2 usage / no torch, 3 no CUDA device"
  exit "$EXIT_OK"
fi

collect_asv_logs || true
log ""
write_summary | tee -a "$LOG"
if awk -F'\t' 'NR > 1 && $2 != "ok" && $2 != "skipped" { bad = 1 } END { exit !bad }' "$OUT_ABS/phases.tsv"; then
  exit "$EXIT_FAILED"
fi
exit "$EXIT_OK"
