#!/usr/bin/env python
"""``kernelwatch publish`` against ``asv publish`` on one synthetic history, in one run (issue 28).

The history comes from ``../shared/tools/synth_asv.py`` (a git repository,
asv results format 2, an ``asv.conf.json``); it is generated once into
``--data`` and reused. Both commands run in turn as child processes, each under
a small wrapper process that reports the child's resource usage, so each
figure is that command's own:

- CPU time: user + system of the command and all its processes (seconds);
- peak memory: the largest resident set of any one of its processes
  (``getrusage(RUSAGE_CHILDREN).ru_maxrss``, KiB on Linux; a command whose
  workers run side by side may hold more than that in total);
- wall time, the size of ``index.html`` and of the whole site.

It prints kernelwatch's CPU time and peak memory as ratios to asv's. Goals
(issue 28, at 1,000 commits x 2 machines x 504 series): CPU <= 0.2x asv's,
peak memory <= asv's, ``index.html`` <= 300 KB. ``--asv-timeout`` stops asv
after that many seconds (at 10,000 commits it runs for tens of minutes); its
figures are then those at the kill, marked so.

Usage::

    python experiments/scale/vs_asv.py --data /tmp/kw-1k --commits 1000 --machines 2 --benchmarks 84
    python experiments/scale/vs_asv.py --data /tmp/kw-10k --commits 10000 --machines 4 --benchmarks 84 \\
        --kw-arg=--analysis --kw-arg=off --asv-timeout 900

Exits 0 when every goal is met, 1 when one is missed, 2 when the tools are missing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SYNTH = ROOT.parent / "shared" / "tools" / "synth_asv.py"
if not SYNTH.exists():
    SYNTH = Path("/work/shared/tools/synth_asv.py")


def _child(argv: list[str]) -> int:
    """Wrapper mode: run ``argv`` (with an optional timeout), print its rusage as JSON on the last line."""
    timeout = float(argv[0]) or None
    cmd = argv[1:]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    killed = False
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        _, err = proc.communicate()
        killed = True
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(err[-2000:], file=sys.stderr)
    print(
        json.dumps(
            {
                "rc": proc.returncode,
                "killed": killed,
                "wall_s": wall,
                "cpu_s": ru.ru_utime + ru.ru_stime,
                "peak_mib": ru.ru_maxrss / 1024,
            }
        )
    )
    return 0


def _measure(cmd: list[str], cwd: Path, timeout: float = 0.0, env: dict | None = None) -> dict:
    wrap = [sys.executable, __file__, "--child", str(timeout), *cmd]
    proc = subprocess.run(wrap, cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SystemExit(f"measuring {cmd[:4]} failed: {proc.stderr[-2000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    r["stderr"] = proc.stderr.strip()
    return r


def _site_size(path: Path) -> tuple[int, float]:
    n = size = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            n += 1
            size += os.path.getsize(os.path.join(root, f))
    return n, size / 2**20


def generate(data: Path, commits: int, machines: int, benchmarks: int, seed: int) -> None:
    """Write the synthetic history into ``data`` unless a matching one is there."""
    stamp = {"commits": commits, "machines": machines, "benchmarks": benchmarks, "seed": seed}
    marker = data / "vs_asv.json"
    if marker.exists() and json.loads(marker.read_text()) == stamp:
        return
    if data.exists():
        shutil.rmtree(data)
    cmd = [sys.executable, str(SYNTH), str(data), "--commits", str(commits), "--machines", str(machines)]
    subprocess.run([*cmd, "--benchmarks", str(benchmarks), "--seed", str(seed)], check=True)
    marker.write_text(json.dumps(stamp))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help="folder of the synthetic history (generated once, reused)")
    p.add_argument("--commits", type=int, default=1000, help="commits (default 1000)")
    p.add_argument("--machines", type=int, default=2, help="machines (default 2)")
    p.add_argument("--benchmarks", type=int, default=84, help="benchmarks, 6 series each (default 84: 504 series)")
    p.add_argument("--seed", type=int, default=7, help="synth_asv.py seed (default 7)")
    p.add_argument("--kw-arg", action="append", default=[], help="extra argument to kernelwatch publish (repeatable)")
    p.add_argument("--asv-timeout", type=float, default=0.0, help="kill asv publish after this many seconds (0: none)")
    p.add_argument("--skip-asv", action="store_true", help="measure kernelwatch only")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    a = p.parse_args(argv)
    if not SYNTH.exists() or shutil.which("git") is None:
        print(f"skipped: needs {SYNTH} and git", file=sys.stderr)
        return 2
    generate(a.data, a.commits, a.machines, a.benchmarks, a.seed)
    kw_out, asv_html = a.data / "kw-site", a.data / "html"
    env = dict(os.environ, KERNELWATCH_PUBLISH_TIMES="1", PYTHONPATH=str(ROOT))
    kw_cmd = [sys.executable, "-m", "harness.cli", "publish", "--results", str(a.data / "results")]
    kw_cmd += ["--repo", str(a.data / "repo"), "--out", str(kw_out), *a.kw_arg]
    load0 = os.getloadavg()[0]
    kw = _measure(kw_cmd, ROOT, env=env)
    kw["files"], kw["site_mib"] = _site_size(kw_out)
    kw["index_kb"] = (kw_out / "index.html").stat().st_size / 1024 if (kw_out / "index.html").exists() else None
    out = {"size": vars(a) | {"data": str(a.data), "json": None}, "kernelwatch": kw, "load": [load0]}
    out["size"].pop("json")
    print(
        f"kernelwatch publish: rc {kw['rc']}, {kw['wall_s']:.1f} s wall, {kw['cpu_s']:.1f} s CPU, "
        f"peak {kw['peak_mib']:.0f} MiB, index.html {kw['index_kb'] or 0:.1f} KB, "
        f"site {kw['site_mib']:.0f} MiB in {kw['files']} files"
    )
    for line in kw["stderr"].splitlines():
        if line.startswith("kernelwatch publish: "):
            print("  " + line[len("kernelwatch publish: ") :])
    ok = kw["rc"] == 0 and (kw["index_kb"] or 1e9) <= 300
    if not a.skip_asv:
        asv_bin = Path(sys.executable).with_name("asv")
        if asv_html.exists():
            shutil.rmtree(asv_html)
        asv = _measure([str(asv_bin), "publish", "--config", "asv.conf.json"], a.data, timeout=a.asv_timeout)
        out["asv"] = asv
        state = "killed at the timeout" if asv["killed"] else f"rc {asv['rc']}"
        print(
            f"asv publish: {state}, {asv['wall_s']:.1f} s wall, {asv['cpu_s']:.1f} s CPU, peak {asv['peak_mib']:.0f} MiB"
        )
        cpu_r, mem_r = kw["cpu_s"] / asv["cpu_s"], kw["peak_mib"] / asv["peak_mib"]
        out["ratios"] = {"cpu": cpu_r, "peak_memory": mem_r}
        print(f"ratio kernelwatch / asv: CPU {cpu_r:.3f}x [goal <= 0.2], peak memory {mem_r:.2f}x [goal <= 1]")
        ok = ok and cpu_r <= 0.2 and mem_r <= 1.0
    out["load"].append(os.getloadavg()[0])
    print(f"load average (1 min) before / after: {out['load'][0]:.2f} / {out['load'][1]:.2f}")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
