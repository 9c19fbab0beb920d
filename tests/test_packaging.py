"""A non-editable install carries everything ``kernelwatch publish`` needs.

Builds a wheel from a copy of the tracked sources (so the checkout gets no
``build/``), installs it with ``--no-deps`` into a fresh virtual environment
that sees this interpreter's site-packages through a ``.pth`` line (torch,
jinja2, asv... are not reinstalled; the editable install's finder is not
loaded, so ``harness`` comes from the wheel), and publishes the public OpenBLAS
asv results from it, outside the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

from conftest import OPENBLAS_EXAMPLE

ROOT = Path(__file__).resolve().parent.parent
OPENBLAS = OPENBLAS_EXAMPLE / "results"
#: What the wheel is built from (tracked sources; tests, scripts and docs are not packaged).
SOURCES = ("pyproject.toml", "README.md", "harness", "kernels", "site")


def _has_setuptools(major: int) -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= major


def _build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(p, src / name)
    dist = tmp / "dist"
    # Build with this interpreter's setuptools when it satisfies pyproject's
    # build-system (fast, offline); else let pip fetch one into an isolated build.
    isolation = ["--no-build-isolation"] if _has_setuptools(68) else []
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip wheel failed:\n{proc.stdout}{proc.stderr}")
    wheels = sorted(dist.glob("kernelwatch-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in {dist}, found {wheels}")
    return wheels[0]


def _venv(tmp: Path) -> Path:
    env = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    py = env / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # a plain path line: that folder joins sys.path, its own .pth files (the
    # editable install of this checkout) are not run
    (Path(site) / "outer-site-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env


def test_wheel_install_publishes_openblas(tmp_path):
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n for n in zf.namelist() if n.startswith("harness/report/assets/")}
    sources = {
        "harness/report/assets/" + p.relative_to(ROOT / "site").as_posix()
        for p in (ROOT / "site").rglob("*")
        if p.is_file()
    }
    assert sources - shipped == set(), "files of site/ missing from the wheel (pyproject package-data)"
    env = _venv(tmp_path)
    # No inherited PYTHONPATH (scripts/gpu_run.sh exports the checkout on it): pip
    # would find this checkout's kernelwatch there, and the import would load it.
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        env=clean,
    )
    where = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import harness.report.site as s; print(s.SITE_ROOT)"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        env=clean,
    ).stdout.strip()
    assert Path(where).is_relative_to(env), f"templates read from {where}, not from the installed package"
    out = tmp_path / "site"
    proc = subprocess.run(
        [str(env / "bin" / "kernelwatch"), "publish", "--results", str(OPENBLAS), "--repo", "", "--out", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=clean,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = (out / "index.html").read_text()
    for m in ("gha-aws-graviton", "gha-aws-skylake", "gha-ubuntu-noble"):
        assert m in html
    assert (out / "static" / "vendor" / "echarts" / "echarts.min.js").is_file()
    assert any((out / "bench").glob("*.html"))
