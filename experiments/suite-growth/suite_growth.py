"""How much of the default test run's wall time do one issue's tests take?

Usage::

    .venv/bin/python experiments/suite-growth/suite_growth.py --issue 30 \\
        --since 46be109 --out docs/suite-growth.json

Runs the README's test command once (``python -m pytest``, the default
``-m 'not slow'``) with ``--junitxml``, then attributes every test case's time
to the commit that wrote its ``def test_...`` line (``git blame`` on the
line; a parametrised test counts all its cases). A commit belongs to the issue
when its message names it (``issue 30``, case-insensitive) or matches one of
``--grep`` (default: ``mutant``, ``mutation``, ``adversarial``), among the
commits after ``--since`` (the commit the issue was filed at).

The growth is ``issue_s / (wall_s - issue_s)``: the issue's tests' share of
one run, against what that same run would have taken without them. Measured
in one run, so the ratio stands up to a busy machine (both parts slow down
together); module import time at collection is not attributed (it goes to the
"rest", which makes the growth a slight under-estimate for new test files:
the import of a new file costs well under a second here, torch being already
imported).

Why our own script: pytest's ``--durations`` lists times per test but not by
the change that added them; this joins the two.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def issue_commits(since: str, issue: int, greps: list[str]) -> set[str]:
    """Full SHAs after ``since`` whose message names the issue or a grep pattern."""
    pats = [f"issue {issue}\\b", *greps]
    out = subprocess.run(
        ["git", "log", "--format=%H%x00%B%x01", f"{since}..HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = set()
    for chunk in out.split("\x01"):
        if "\x00" not in chunk:
            continue
        sha, body = chunk.strip().split("\x00", 1)
        if any(re.search(p, body, re.IGNORECASE) for p in pats):
            found.add(sha)
    return found


def def_commits(path: Path) -> dict[str, str]:
    """``{qualified test name: SHA that last wrote its def line}`` for one test file."""
    tree = ast.parse(path.read_text())
    lines: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            lines[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name.startswith("test"):
                    lines[f"{node.name}.{sub.name}"] = sub.lineno
    blame = subprocess.run(
        ["git", "blame", "--porcelain", str(path.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_line: dict[int, str] = {}
    for m in re.finditer(r"^([0-9a-f]{40}) \d+ (\d+)", blame, re.MULTILINE):
        by_line[int(m.group(2))] = m.group(1)
    return {name: by_line.get(ln, "") for name, ln in lines.items()}


def case_key(classname: str, name: str) -> tuple[Path | None, str]:
    """Map a junit ``classname`` (``tests.test_x.TestY``) and case name to (file, test)."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        p = ROOT.joinpath(*parts[:cut]).with_suffix(".py")
        if p.is_file():
            cls = ".".join(parts[cut:])
            func = name.split("[", 1)[0]
            return p, f"{cls}.{func}" if cls else func
    return None, name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--issue", type=int, required=True)
    ap.add_argument("--since", required=True, help="the commit the issue was filed at")
    ap.add_argument("--grep", nargs="*", default=["mutant", "mutation", "adversarial"])
    ap.add_argument("--junit", default=None, help="reuse this junit XML instead of running pytest")
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    args = ap.parse_args()

    wall = None
    junit = Path(args.junit) if args.junit else ROOT / ".suite-growth-junit.xml"
    if not args.junit:
        t0 = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
            cwd=ROOT,
        )
        wall = time.perf_counter() - t0
        print(f"pytest exit {run.returncode}, wall {wall:.1f} s")
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    if wall is None:
        wall = sum(float(s.get("time", 0)) for s in suites)

    ours = issue_commits(args.since, args.issue, args.grep)
    blames: dict[Path, dict[str, str]] = {}
    issue_s = other_s = 0.0
    n_issue = n_other = 0
    per_file: dict[str, float] = {}
    for case in root.iter("testcase"):
        path, test = case_key(case.get("classname", ""), case.get("name", ""))
        t = float(case.get("time", 0))
        sha = ""
        if path is not None:
            if path not in blames:
                blames[path] = def_commits(path)
            sha = blames[path].get(test, "")
        if sha in ours:
            issue_s += t
            n_issue += 1
            rel = str(path.relative_to(ROOT))
            per_file[rel] = per_file.get(rel, 0.0) + t
        else:
            other_s += t
            n_other += 1
    rest = wall - issue_s
    result = {
        "issue": args.issue,
        "since": args.since,
        "commits_of_the_issue": len(ours),
        "wall_s": round(wall, 1),
        "issue_tests": n_issue,
        "issue_tests_s": round(issue_s, 1),
        "other_tests": n_other,
        "other_tests_s": round(other_s, 1),
        "growth": round(issue_s / rest, 4) if rest > 0 else None,
        "issue_s_by_file": {k: round(v, 2) for k, v in sorted(per_file.items(), key=lambda kv: -kv[1])},
    }
    print(json.dumps({k: v for k, v in result.items() if k != "issue_s_by_file"}, indent=1))
    for f, s in list(result["issue_s_by_file"].items())[:12]:
        print(f"  {s:7.2f} s  {f}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
