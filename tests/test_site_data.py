"""Builders of small asv results directories for the site tests, and tests of
:func:`harness.results.load_columns` on the awkward values asv files hold.

The builders write exactly what ``asv run`` writes (format 2: ``benchmarks.json``,
``<machine>/machine.json``, ``<machine>/<sha8>-<env>.json`` with
``result_columns``) plus kernelwatch records, so the site is tested on the same
input as real runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.store import results as R

ENV = "kernelwatch-py3.11"
COLUMNS = [
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
]
HOSTILE = "<img src=x onerror=\"window.__xss=1\"> & 'quotes' <script>window.__xss=2</script>"


def git_repo(path: Path, subjects: list[str]) -> list[str]:
    """A git repository with one empty commit per subject; returns full hashes, oldest first."""
    path.mkdir(parents=True, exist_ok=True)
    env = {
        "GIT_AUTHOR_NAME": "Ada <dev>",
        "GIT_AUTHOR_EMAIL": "a@example.com",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "a@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(path),
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    hashes = []
    for i, subj in enumerate(subjects):
        e = dict(
            env,
            GIT_AUTHOR_DATE=f"2024-01-{1 + i % 28:02d}T12:{i % 60:02d}:00Z",
            GIT_COMMITTER_DATE=f"2024-01-{1 + i % 28:02d}T12:{i % 60:02d}:00Z",
        )
        subprocess.run(["git", "-C", str(path), "commit", "-q", "--allow-empty", "-m", subj], check=True, env=e)
        hashes.append(
            subprocess.run(
                ["git", "-C", str(path), "rev-parse", "HEAD"], check=True, env=e, capture_output=True, text=True
            ).stdout.strip()
        )
    return hashes


def sha(i) -> str:
    """A made-up full commit hash (distinct first 8 digits, as asv file names need)."""
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def write_results(
    root: Path, machines: dict, commits: list[str], benchmarks: dict, value, version=None, samples: bool = False
) -> Path:
    """Write an asv results directory.

    ``machines``: name -> machine.json fields; ``benchmarks``: name ->
    ``{"param_names": [...], "params": [[repr strings]], "unit": ...}``;
    ``value(machine, i, bench, combo)`` -> float, ``None`` (failed) or NaN
    (skipped) for commit ``i``; ``version(bench, i)`` -> benchmark version.
    """
    root.mkdir(parents=True, exist_ok=True)
    bj = {"version": 2}
    for name, b in benchmarks.items():
        bj[name] = {
            "name": name,
            "type": "track",
            "unit": b.get("unit", "seconds"),
            "version": "1",
            "param_names": b["param_names"],
            "params": b["params"],
            "code": "",
        }
    (root / "benchmarks.json").write_text(json.dumps(bj, indent=1, sort_keys=True))
    for m, info in machines.items():
        d = root / m
        d.mkdir(parents=True, exist_ok=True)
        (d / "machine.json").write_text(json.dumps({"machine": m, "version": 1, **info}))
        for i, h in enumerate(commits):
            res = {}
            for name, b in benchmarks.items():
                combos = list(itertools.product(*b["params"]))
                vals = [value(m, i, name, c) for c in combos]
                fin = [v if isinstance(v, float) and math.isfinite(v) else None for v in vals]
                lo = [None if v is None else v * 0.99 for v in fin]
                hi = [None if v is None else v * 1.01 for v in fin]
                smp = [None if v is None else [v * 0.995, v, v * 1.005] for v in fin] if samples else None
                res[name] = [
                    vals,
                    b["params"],
                    version(name, i) if version else "1",
                    1_700_000_000_000 + i,
                    1.0,
                    lo,
                    hi,
                    lo,
                    hi,
                    [1] * len(combos),
                    [3] * len(combos),
                    smp,
                ]
            doc = {
                "commit_hash": h,
                "env_name": ENV,
                "date": 1_700_000_000_000 + i * 3_600_000,
                "params": {"machine": m, "python": "3.11", **{k: v for k, v in info.items() if k != "version"}},
                "python": "3.11",
                "requirements": {},
                "env_vars": {},
                "result_columns": COLUMNS,
                "results": res,
                "durations": {},
                "version": 2,
            }
            (d / f"{h[:8]}-{ENV}.json").write_text(json.dumps(doc))
    return root


def write_record(
    root: Path,
    machine: str,
    commit: str,
    bench: str,
    params: dict,
    time_s: float,
    *,
    flops: int,
    nbytes: int,
    peak_tflops: float,
    peak_gbps: float,
    dtype: str = "fp32",
    status: str = "ok",
    clocks: dict | None = None,
    device: dict | None = None,
) -> None:
    """One kernelwatch record with hand-computed metrics (roofline: Williams et al. 2009).

    The figures are derived again when read, from the time, cost and ``device``
    (its datasheet on a known GPU) and the machine's calibration."""
    tf, gb = flops / time_s / 1e12, nbytes / time_s / 1e9
    floor = max(flops / (peak_tflops * 1e12), nbytes / (peak_gbps * 1e9))
    metrics = {
        "status": status,
        "reason": None if status == "ok" else "implied throughput above peak",
        "time_s": time_s,
        "tflops": tf,
        "gbps": gb,
        "mfu": tf / peak_tflops,
        "bw_util": gb / peak_gbps,
        "sol": floor / time_s,
        "arithmetic_intensity": flops / nbytes,
        "floor_ms": floor * 1e3,
        "bound": "compute" if flops / nbytes >= peak_tflops * 1e3 / peak_gbps else "memory",
    }
    rec = {
        "schema": 1,
        "machine": machine,
        "commit": commit,
        "benchmark": bench,
        "params": params,
        "dtype": dtype,
        "uses_tensor_cores": False,
        "cost": {"flops": flops, "bytes_read": nbytes, "bytes_written": 0},
        "metrics": metrics,
        "device": device or {"kind": "cpu", "name": "test cpu"},
        "timing": {"method": params.get("timing"), "clocks": clocks or {"available": False, "reason": "cpu"}},
    }
    d = root / machine / "kernelwatch"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"{commit}.jsonl", "a") as fh:
        fh.write(json.dumps(rec) + "\n")


def write_calibration(root: Path, machine: str, gbps: float, tflops: float) -> None:
    d = root / machine / "kernelwatch"
    d.mkdir(parents=True, exist_ok=True)
    cal = {
        "schema": 1,
        "machine": machine,
        "date": "2024-01-01T00:00:00+00:00",
        "copy": {"gbps": gbps},
        "matmul": {"fp32": {"tflops": tflops}},
        "skipped": {},
    }
    (d / "calibration.jsonl").write_text(json.dumps(cal) + "\n")


# --------------------------------------------------------------------------- load_columns


def _awkward(tmp_path: Path) -> Path:
    """Values asv really writes, and some it should not: NaN (skipped), null
    (failed), 0, negative, inf, a string; a parameter grid that grows."""
    commits = [sha(i) for i in range(1, 6)]
    bench = {"suite.a.track_time": {"param_names": ["n"], "params": [["1", "2"]]}}
    table = {0: [1.0, float("nan")], 1: [None, 2.0], 2: [0.0, -1.0], 3: [float("inf"), 3.0], 4: [4.0, 5.0]}
    root = write_results(tmp_path / "results", {"m": {}}, commits, bench, lambda m, i, b, c: table[i][int(c[0]) - 1])
    # commit 5's file gets a third parameter value: the grid changed over time
    p = next((root / "m").glob(f"{commits[4][:8]}-*.json"))
    doc = json.loads(p.read_text())
    row = doc["results"]["suite.a.track_time"]
    row[0], row[1] = [4.0, 5.0, 6.0], [["1", "2", "3"]]
    for k in range(5, 11):
        row[k] = (row[k] or []) + [row[k][0]] if isinstance(row[k], list) else row[k]
    p.write_text(json.dumps(doc))
    return root


def test_load_columns_classifies_like_asv(tmp_path):
    root = _awkward(tmp_path)
    rs, cols = R.load_columns(root)
    by_n = {dict(k.params)["n"]: c for k, c in cols.items()}
    assert sorted(by_n) == ["1", "2", "3"] and not rs.errors
    one, two = by_n["1"], by_n["2"]
    # n=1: 1.0, failed, invalid 0.0, invalid inf, 4.0
    assert one.reason == [
        None,
        "failed",
        "invalid: impossible value 0.0 (a result is a finite number > 0)",
        "invalid: impossible value inf (a result is a finite number > 0)",
        None,
    ]
    assert np.isnan(one.value[1:4]).all() and one.value[0] == 1.0 and one.value[4] == 4.0
    # n=2: the NaN of commit 1 is asv's "skipped": not a point at all
    assert len(two) == 4 and two.commits[0] == sha(2)
    assert two.reason == [None, "invalid: impossible value -1.0 (a result is a finite number > 0)", None, None]
    assert by_n["3"].commits == [sha(5)] and by_n["3"].value.tolist() == [6.0]
    assert not np.isnan(one.ci_lo[0]) and np.isnan(one.ci_lo[1])  # no CI for a failed point


def test_load_builds_points_from_the_same_columns(tmp_path):
    root = _awkward(tmp_path)
    rs = R.load(root)
    _, cols = R.load_columns(root)
    for key, c in cols.items():
        pts = rs.series[key].points
        assert [p.commit for p in pts] == c.commits
        assert [p.reason for p in pts] == c.reason
        assert all((p.value is None) == bool(np.isnan(v)) for p, v in zip(pts, c.value))
        assert all(p.value != 0 for p in pts)  # a missing value is None, never 0


def test_record_with_bad_status_invalidates_its_point(tmp_path):
    commits = [sha(i) for i in range(1, 3)]
    bench = {"suite.a.track_time": {"param_names": ["n", "timing"], "params": [["'1'"], ["'cpu'"]]}}
    root = write_results(tmp_path / "r", {"m": {}}, commits, bench, lambda m, i, b, c: 1e-3)
    for i, h in enumerate(commits):
        write_record(
            root,
            "m",
            h,
            "suite.a.track_time",
            {"n": "1", "timing": "cpu"},
            1e-3,
            flops=10**9,
            nbytes=10**6,
            peak_tflops=1.0,
            peak_gbps=100.0,
            status="ok" if i == 0 else "timing_bug",
        )
    _, cols = R.load_columns(root)
    (c,) = cols.values()
    assert c.reason[0] is None and c.reason[1].startswith("timing_bug")
    assert np.isnan(c.value[1]) and c.records[1]["metrics"]["status"] == "timing_bug"


def test_machines_filter(tmp_path):
    commits = [sha(i) for i in range(1, 3)]
    bench = {"suite.a.track_time": {"param_names": ["n"], "params": [["1"]]}}
    root = write_results(tmp_path / "r", {"a": {}, "b": {}}, commits, bench, lambda m, i, b, c: 1.0)
    rs, cols = R.load_columns(root, machines=["b"])
    assert sorted(rs.machines) == ["b"] and {k.machine for k in cols} == {"b"}


@pytest.mark.parametrize("n_commits", [1, 7])
def test_columns_are_in_commit_order(tmp_path, n_commits):
    # file names (sha8) sort differently from commit dates: order must come from the dates
    commits = [sha(100 + i) for i in range(n_commits)]
    assert n_commits == 1 or sorted(commits) != commits
    bench = {"suite.a.track_time": {"param_names": ["n"], "params": [["1"]]}}
    root = write_results(tmp_path / "r", {"m": {}}, commits, bench, lambda m, i, b, c: float(i + 1))
    _, cols = R.load_columns(root)
    (c,) = cols.values()
    assert c.commits == commits and c.value.tolist() == [float(i + 1) for i in range(n_commits)]
