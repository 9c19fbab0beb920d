"""Measured power of the PR gate (``kernelwatch check``) on this device.

What it measures
----------------
* **A/A false-alarm rate**: how often the gate would block a change that does
  nothing. Two commits with identical code (the second an empty commit) are
  measured with the gate's own machinery: one ``asv run --interleave-rounds``
  over both commits (base, head, head, base, ...), ``--rounds`` rounds each.
  Every round of every series leaves a kernelwatch record with its samples, so
  the rounds can be regrouped into many independent gate decisions: each
  simulated check takes the next ``--group`` rounds per side (the gate's default
  is 2), and a borderline result takes the following group as its
  re-measurement, exactly as ``kernelwatch check`` does (``gate.classify`` then
  ``gate.confirm``).
* **Detection rate** of injected slowdowns of 2%, 5% and 10%: the same A/A
  rounds with head's samples multiplied by ``1 + effect``.

Why scale measured samples rather than run a slowed kernel: the scaled samples
keep everything that makes gating hard on this device (the real per-sample
noise, multiplicative as timing noise is, the real drift between rounds and
processes, the real sample counts), and the injected effect is exactly known.
A kernel variant doing extra work would add a launch and a synchronisation of
its own (several microseconds, i.e. more than 2% of a small kernel), so the
"2%" case would not be 2%. What scaling does not capture is a change that also
changes the noise's shape; that is the limit of these figures.

* **asv continuous's figure beside it**: the same rounds judged by asv's own
  rule for ``asv continuous`` (``asv.commands.compare._is_result_better``: one
  base run against one head run, slower when the head median exceeds the base
  by ``--factor`` and, with samples, asv's Mann-Whitney test says different;
  ``asv.statistics``/``asv._stats``), per pair of rounds, at asv's default
  factor 1.1 and at 1.05.

``--neighbour N`` runs N busy-loop processes (``experiments/cpu-noise/busy_neighbour.py``)
pinned to CPU 0 while measuring; ``--threads 1`` sets the ``cpu`` timing
method's thread count (``KERNELWATCH_CPU_THREADS``, 1 is its default).

Usage::

    python experiments/cpu-noise/gate_power.py                    # CPU: ~10 minutes with the defaults
    python experiments/cpu-noise/gate_power.py --rounds 40 --bench 'vector_add|softmax'
    python experiments/cpu-noise/gate_power.py --json power.json --markdown power.md

It copies the tracked files of this repository into a temporary git repository
(the code as it is in the working tree) and measures there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.gate import decide as gate  # noqa: E402
from harness.gate.decide import GateConfig, SeriesInput, Side, Status  # noqa: E402

EFFECTS = (0.0, 0.02, 0.05, 0.10)


def _git(cwd, *args) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="kw",
        GIT_AUTHOR_EMAIL="kw@example.invalid",
        GIT_COMMITTER_NAME="kw",
        GIT_COMMITTER_EMAIL="kw@example.invalid",
    )
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def make_aa_repo(dst: Path) -> tuple[str, str]:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    for f in filter(None, files):
        src = ROOT / f.decode()
        if src.is_file():
            (dst / f.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f.decode())
    _git(dst, "init", "-q", "-b", "main")
    _git(dst, "add", "-A")
    _git(dst, "commit", "-q", "-m", "A")
    _git(dst, "commit", "-q", "--allow-empty", "-m", "A again (same code)")
    return _git(dst, "rev-parse", "HEAD~1"), _git(dst, "rev-parse", "HEAD")


def measure_aa(repo: Path, a: str, b: str, *, rounds: int, bench: str, quick: bool) -> tuple[dict, dict]:
    """Per-round samples of every series for both commits, from kernelwatch records.

    Returns ``({(benchmark, params): {"base": [[s...] per round], "head": [...]}}, info)``.
    """
    from harness.core import devices, records
    from harness.gate import check
    from harness.measure import runner

    ident = devices.identify()
    machine = ident.machine_name()
    runner.write_machine_entry(devices.asv_machine_info(ident))
    work = repo / ".kernelwatch" / "power"
    work.mkdir(parents=True, exist_ok=True)
    results = work / "results"
    conf = check.write_conf(repo, work, results)
    launch = "forkserver" if ident.kind == "cpu" else "spawn"
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    t0 = time.monotonic()
    run = check.run_asv(
        repo,
        conf,
        machine,
        [a, b],
        rounds=rounds,
        bench=[bench],
        results=results,
        quick=quick,
        launch=launch,
        log_path=work / "asv-aa.log",
        purpose="aa",
    )
    seconds = time.monotonic() - t0
    rounds_by: dict = {}
    for role, sha in (("base", a), ("head", b)):
        path = records.records_dir(results, machine) / f"{sha}.jsonl"
        if not path.exists():
            raise SystemExit(f"gate_power: no records for {role} {sha[:12]}: see {run.log_path}")
        for rec in records.read_jsonl(path):  # file order = the order the rounds ran
            params = tuple(sorted((rec.get("params") or {}).items()))
            smp = (rec.get("timing") or {}).get("samples_s") or []
            rounds_by.setdefault((rec["benchmark"], params), {"base": [], "head": []})[role].append(smp)
    info = {
        "machine": machine,
        "device": ident.name,
        "kind": ident.kind,
        "asv_seconds": round(seconds, 1),
        "asv_exit": run.returncode,
        "log": run.log_path,
        "rounds": rounds,
        "bench": bench,
        "quick": quick,
        "threads": os.environ.get("KERNELWATCH_CPU_THREADS") or f"{devices.cpu_timing_threads()} (cpu method default)",
        "cpu_count": os.cpu_count(),
        "loadavg_1min_before": load_before,
        "loadavg_1min_after": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    return rounds_by, info


def simulate(
    base_rounds: list, head_rounds: list, *, effect: float, group: int, cfg: GateConfig, name: str = "series", params=()
) -> dict:
    """Replay the gate over consecutive groups of rounds; head scaled by ``1 + effect``."""
    n = min(len(base_rounds), len(head_rounds))
    scale = 1.0 + effect

    def side(rs, f=1.0):
        rounds = [[x * f for x in r] for r in rs]
        return Side(present=True, samples=[x for r in rounds for x in r], rounds=rounds)

    i = trials = blocks = uncertain = remeasured = 0
    while i + group <= n:
        b, h = side(base_rounds[i : i + group]), side(head_rounds[i : i + group], scale)
        i += group
        v = gate.classify(SeriesInput(name, params, b, h), cfg)
        if gate.needs_remeasure(v):
            if i + group > n:
                break  # no data left for the re-measurement: the trial is dropped, not guessed
            b2, h2 = side(base_rounds[i : i + group]), side(head_rounds[i : i + group], scale)
            i += group
            remeasured += 1
            v = gate.confirm(
                v,
                SeriesInput(name, params, b2, h2),
                SeriesInput(
                    name,
                    params,
                    Side(True, samples=b.samples + b2.samples, rounds=b.rounds + b2.rounds),
                    Side(True, samples=h.samples + h2.samples, rounds=h.rounds + h2.rounds),
                ),
                cfg,
            )
        trials += 1
        blocks += v.status is Status.SLOWER
        uncertain += v.status is Status.UNCERTAIN
    return {"trials": trials, "blocks": blocks, "uncertain": uncertain, "remeasured": remeasured}


def noise_summary(rounds_by: dict) -> list[dict]:
    import numpy as np

    out = []
    for (name, params), sides in sorted(rounds_by.items()):
        base = [x for r in sides["base"] for x in r]
        if not base:
            continue
        p50 = float(np.median(base))
        round_p50 = [float(np.median(r)) for r in sides["base"] + sides["head"] if r]
        out.append(
            {
                "series": gate.series_label(name, params),
                "p50_s": p50,
                "iqr_rel": float((np.percentile(base, 75) - np.percentile(base, 25)) / p50),
                "round_p50_spread_rel": float((max(round_p50) - min(round_p50)) / p50),
                "samples_per_round": float(np.mean([len(r) for r in sides["base"]])),
            }
        )
    return out


def power_table(rounds_by: dict, *, thresholds, effects, group: int, alpha: float) -> list[dict]:
    rows = []
    for thr in thresholds:
        cfg = GateConfig(threshold=thr, alpha=alpha)
        row = {"threshold": thr}
        for eff in effects:
            tot = {"trials": 0, "blocks": 0, "uncertain": 0, "remeasured": 0}
            for (name, params), sides in rounds_by.items():
                r = simulate(sides["base"], sides["head"], effect=eff, group=group, cfg=cfg, name=name, params=params)
                for k in tot:
                    tot[k] += r[k]
            row[eff] = tot
        rows.append(row)
    return rows


def per_series_table(rounds_by: dict, *, threshold: float, effects, group: int, alpha: float) -> str:
    """Markdown: the gate's A/A false alarms and detection rates per series at one
    threshold (the same :func:`simulate` as :func:`power_table`, not pooled), so a
    series the runner cannot resolve is named instead of hidden in the mean."""
    cfg = GateConfig(threshold=threshold, alpha=alpha)
    head = "| series | A/A false alarms | " + " | ".join(f"{e:.0%} slower caught" for e in effects if e) + " |"
    lines = [
        "",
        f"Per series at the {threshold:.0%} threshold ({group} rounds per side):",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for (name, params), sides in sorted(rounds_by.items()):
        cells = [
            _rate(simulate(sides["base"], sides["head"], effect=e, group=group, cfg=cfg, name=name, params=params))
            for e in effects
        ]
        lines.append(f"| `{gate.series_label(name, params)}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def asv_continuous_table(rounds_by: dict, *, effects, factors=(1.1, 1.05)) -> list[dict]:
    """asv continuous's decision over the same rounds: each trial pairs one base
    round with one head round (scaled by ``1 + effect``) and asks asv whether
    head is slower by ``factor`` (``_is_result_better(base, head, ...)``).
    Returns one row per factor: ``{"factor": f, effect: {"trials", "blocks"}}``."""
    from asv.commands.compare import _is_result_better
    from asv_runner.statistics import compute_stats

    rows = []
    for factor in factors:
        row = {"factor": factor}
        for eff in effects:
            trials = blocks = 0
            for sides in rounds_by.values():
                for b, h in zip(sides["base"], sides["head"]):
                    if len(b) < 2 or len(h) < 2:
                        continue
                    h = [x * (1 + eff) for x in h]
                    b_val, b_st = compute_stats(b, 1)
                    h_val, h_st = compute_stats(h, 1)
                    trials += 1
                    blocks += bool(_is_result_better(b_val, h_val, (b_st, b), (h_st, h), factor))
            row[eff] = {"trials": trials, "blocks": blocks, "uncertain": 0, "remeasured": 0}
        rows.append(row)
    return rows


def render_asv(rows, effects) -> str:
    head = (
        "| asv continuous factor | A/A false alarms | "
        + " | ".join(f"{e:.0%} slower caught" for e in effects if e)
        + " |"
    )
    lines = [
        "",
        "asv continuous's rule on the same rounds (one base round vs one head round per trial):",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for row in rows:
        lines.append(
            "| " + " | ".join([f"{row['factor']:g}", _rate(row[0.0])] + [_rate(row[e]) for e in effects if e]) + " |"
        )
    return "\n".join(lines) + "\n"


def _rate(d: dict) -> str:
    if not d["trials"]:
        return "n/a"
    return f"{d['blocks'] / d['trials']:.1%} ({d['blocks']}/{d['trials']})"


def render(rows, effects, info, noise, group, alpha) -> str:
    lines = [
        f"Device: {info['device']} ({info['kind']}, machine {info['machine']}); "
        f"{info['rounds']} interleaved asv rounds per commit in {info['asv_seconds']:.0f} s, "
        f"--bench {info['bench']!r}{' --quick' if info['quick'] else ''}; "
        f"{len(noise)} series; each simulated check = {group} rounds per side "
        f"(+{group} when re-measured); alpha = {alpha:g}; "
        f"CPU threads per op: {info.get('threads') or 'default'}; "
        f"busy-loop neighbours: {info.get('neighbours', 0)}; 1-minute load average "
        f"{info.get('loadavg_1min_before')} before, {info.get('loadavg_1min_after')} after, "
        f"on {info.get('cpu_count')} CPUs.",
        "",
    ]
    head = (
        "| threshold | A/A false alarms | "
        + " | ".join(f"{e:.0%} slower caught" for e in effects if e)
        + " | A/A UNCERTAIN |"
    )
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        aa = row[0.0]
        cells = [f"{row['threshold']:.0%}", _rate(aa)] + [_rate(row[e]) for e in effects if e]
        unc = f"{aa['uncertain'] / aa['trials']:.1%}" if aa["trials"] else "n/a"
        lines.append("| " + " | ".join(cells + [unc]) + " |")
    lines += [
        "",
        "| series | p50 | IQR / p50 | spread of round medians / p50 | samples per round |",
        "|---|---|---|---|---|",
    ]
    for s in noise:
        lines.append(
            f"| `{s['series']}` | {s['p50_s'] * 1e3:.3f} ms | {s['iqr_rel']:.1%} | "
            f"{s['round_p50_spread_rel']:.1%} | {s['samples_per_round']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=60, help="asv rounds per commit (default: 60)")
    p.add_argument(
        "--group", type=int, default=2, help="rounds per side in one simulated check (default: 2, the gate's default)"
    )
    p.add_argument("--bench", default="vector_add|softmax", help="asv --bench expression (default: vector_add|softmax)")
    p.add_argument("--full", action="store_true", help="full shapes and sampling instead of --quick ones")
    p.add_argument(
        "--thresholds", default="0.01,0.02,0.05", help="practical thresholds to evaluate (default: 0.01,0.02,0.05)"
    )
    p.add_argument("--alpha", type=float, default=0.01, help="significance level (default: 0.01)")
    p.add_argument("--json", default=None, help="write the raw table and per-round samples here")
    p.add_argument("--markdown", default=None, help="write the table as markdown here")
    p.add_argument("--keep", action="store_true", help="keep the temporary repository")
    p.add_argument(
        "--from-json",
        default=None,
        help="re-evaluate the gate on the rounds stored by an earlier --json run instead of measuring",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads per op: KERNELWATCH_CPU_THREADS (the cpu timing method's intra-op threads) and "
        "OMP_NUM_THREADS/MKL_NUM_THREADS for the benchmark processes (default: unset, i.e. the "
        "method's default of 1). On a shared CPU a multi-threaded op waits for its slowest thread",
    )
    p.add_argument(
        "--neighbour",
        type=int,
        default=0,
        help="busy-loop neighbour processes pinned to CPU 0 while measuring (default: 0)",
    )
    a = p.parse_args(argv)
    if a.rounds < 2 * a.group:
        p.error("--rounds must be at least twice --group")
    thresholds = [float(x) for x in a.thresholds.split(",") if x.strip()]
    if a.threads is not None:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(a.threads)
        os.environ["KERNELWATCH_CPU_THREADS"] = str(a.threads)
    if a.from_json:
        data = json.loads(Path(a.from_json).read_text())
        rounds_by = {(s["series"], ()): {"base": s["base"], "head": s["head"]} for s in data["rounds"]}
        rows = power_table(rounds_by, thresholds=thresholds, effects=EFFECTS, group=a.group, alpha=a.alpha)
        md = render(rows, EFFECTS, data["info"], data["noise"], a.group, a.alpha)
        md += per_series_table(rounds_by, threshold=min(thresholds), effects=EFFECTS, group=a.group, alpha=a.alpha)
        md += render_asv(asv_continuous_table(rounds_by, effects=EFFECTS), EFFECTS)
        print(md)
        if a.markdown:
            Path(a.markdown).write_text(md)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="kw-gate-power-"))
    try:
        base, head = make_aa_repo(tmp)
        print(f"measuring A/A: {a.rounds} interleaved rounds per commit of {a.bench!r} in {tmp} ...", file=sys.stderr)
        from busy_neighbour import neighbours

        with neighbours(a.neighbour, cpu=0):
            rounds_by, info = measure_aa(tmp, base, head, rounds=a.rounds, bench=a.bench, quick=not a.full)
        info["neighbours"] = a.neighbour
        if not rounds_by:
            print("gate_power: no series measured", file=sys.stderr)
            return 2
        noise = noise_summary(rounds_by)
        rows = power_table(rounds_by, thresholds=thresholds, effects=EFFECTS, group=a.group, alpha=a.alpha)
        md = render(rows, EFFECTS, info, noise, a.group, a.alpha)
        md += per_series_table(rounds_by, threshold=min(thresholds), effects=EFFECTS, group=a.group, alpha=a.alpha)
        asv_rows = asv_continuous_table(rounds_by, effects=EFFECTS)
        md += render_asv(asv_rows, EFFECTS)
        print(md)
        if a.markdown:
            Path(a.markdown).write_text(md)
        if a.json:
            Path(a.json).write_text(
                json.dumps(
                    {
                        "info": info,
                        "noise": noise,
                        "group": a.group,
                        "alpha": a.alpha,
                        "table": [
                            {"threshold": r["threshold"], **{f"effect_{e:g}": r[e] for e in EFFECTS}} for r in rows
                        ],
                        "asv_continuous": [
                            {"factor": r["factor"], **{f"effect_{e:g}": r[e] for e in EFFECTS}} for r in asv_rows
                        ],
                        "rounds": [{"series": gate.series_label(k[0], k[1]), **v} for k, v in rounds_by.items()],
                    },
                    indent=1,
                )
            )
        return 0
    finally:
        if a.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
