"""Docs-only and 4x-slower heads through ``kernelwatch check`` with one busy neighbour (issue 24).

Copies this repository's tracked files into ``--dst`` (a fresh folder), makes
a ``docs`` branch (a NOTES.md only) and a ``slow`` branch (torch vector_add
computes the sum four times), and runs ``kernelwatch check --bench vector_add
--quick`` ``--n`` times for each with a busy-loop neighbour pinned to CPU 0.
Prints per check: exit code, seconds, per series (status, same compiled code,
sequential looks) and the problems. Result: ``docs/performance.md``,
"Sequential gate".

Usage: ``python experiments/sequential-gate/end_to_end.py --n 3 --dst /tmp/kw-e2e``
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "experiments" / "cpu-noise"))
from _repo import copy_tracked, git  # noqa: E402
from busy_neighbour import neighbours  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--n", type=int, default=3, help="checks per head (default: 3)")
ap.add_argument("--dst", required=True, help="an empty folder for the repository copy and the reports")
a = ap.parse_args()
out = Path(a.dst)
r = copy_tracked(out / "repo")
git(r, "checkout", "-q", "-b", "slow", "main")
va = r / "kernels" / "vector_add.py"
t = va.read_text()
va.write_text(
    t.replace(
        "def torch_vector_add(x, y):\n    return torch.add(x, y)",
        "def torch_vector_add(x, y):\n    torch.add(x, y)\n    torch.add(x, y)\n    torch.add(x, y)\n    return torch.add(x, y)",
    )
)
git(r, "commit", "-qam", "slow")
git(r, "checkout", "-q", "-b", "docs", "main")
(r / "NOTES.md").write_text("docs only\n")
git(r, "add", "-A")
git(r, "commit", "-qm", "docs")
git(r, "checkout", "-q", "main")
with neighbours(1, cpu=0):
    for i in range(a.n):
        for head in ("docs", "slow"):
            t0 = time.time()
            p = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "harness.cli",
                    "check",
                    "--base",
                    "main",
                    "--head",
                    head,
                    "--bench",
                    "vector_add",
                    "--quick",
                    "--json",
                    str(out / f"rep-{head}-{i}.json"),
                ],
                cwd=r,
                capture_output=True,
                text=True,
            )
            rep = json.loads((out / f"rep-{head}-{i}.json").read_text())
            rows = [
                (s["label"][:60], s["status"], s["same_code"], len(rep["looks"].get(s["label"], [])))
                for s in rep["series"]
            ]
            print(head, i, "exit", p.returncode, f"{time.time() - t0:.0f}s", rows, rep["problems"], flush=True)
