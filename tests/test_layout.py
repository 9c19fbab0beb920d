"""The one-way imports of harness/ (docs/architecture.md), read from the source with ast.

cli -> gate / report / analysis / store / measure -> core. Nothing imports
harness.cli; analysis imports nothing of measure (nor store, report, gate) and no
file or process I/O module; report imports neither measure nor gate; store and
core import no stage above them. Lazy imports inside functions count the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
STAGES = ("core", "measure", "store", "analysis", "report", "gate", "cli")

#: stage -> stages of harness it must not import (itself and core always allowed).
FORBIDDEN = {
    "core": {"measure", "store", "analysis", "report", "gate", "cli"},
    # runner (``kernelwatch run``) reads the stored results to skip measured commits
    "measure": {"analysis", "report", "gate", "cli"},
    # the dataset adapts loaded results to analysis's model types (Series, Point)
    "store": {"measure", "report", "gate", "cli"},
    "analysis": {"measure", "store", "report", "gate", "cli"},
    "report": {"measure", "gate", "cli"},
    "gate": {"report", "cli"},
    "cli": set(),
}
#: Standard-library modules that read or write files or processes: analysis is pure.
IO_MODULES = {"os", "io", "pathlib", "shutil", "subprocess", "glob", "tempfile", "json", "csv",
              "pickle", "sqlite3", "open", "fileinput", "socket", "urllib", "git", "asv.results"}


def _modules() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if p.name != "__main__.py" or p.parent.name != "cli")


def _stage(path: Path, root: Path) -> str | None:
    rel = path.relative_to(root).parts
    return rel[0] if len(rel) > 1 and rel[0] in STAGES else None


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every imported module name (absolute; ``from harness import x`` gives ``harness.x``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}:{node.lineno}: relative import; use absolute harness.* names")
            mod = node.module or ""
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if mod == "harness"]
    return out


def _violations(path: Path, root: Path = HARNESS) -> list[str]:
    stage = _stage(path, root)
    bad = []
    for line, name in _imports(path):
        parts = name.split(".")
        if parts[0] == "harness" and len(parts) > 1 and parts[1] == "cli" and stage != "cli":
            bad.append(f"{path}:{line}: imports {name} (nothing imports harness.cli)")
        if stage and parts[0] == "harness" and len(parts) > 1 and parts[1] in FORBIDDEN[stage]:
            bad.append(f"{path}:{line}: {stage} imports {name}")
        if stage == "analysis" and (parts[0] in IO_MODULES or name in IO_MODULES):
            bad.append(f"{path}:{line}: analysis imports {name} (analysis does no I/O)")
    return bad


def test_every_module_is_in_a_stage():
    loose = [p.name for p in HARNESS.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules outside a stage package: {loose} (see docs/architecture.md)"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(HARNESS)))
def test_imports_run_one_way(path):
    assert _violations(path) == []


def test_the_rule_catches_a_violation(tmp_path):
    """Negative control: a report module importing measure, an analysis module
    importing pathlib or store, and a store module importing harness.cli are reported."""
    fake = tmp_path / "harness"
    for stage in ("report", "analysis", "store"):
        (fake / stage).mkdir(parents=True)
    (fake / "report" / "x.py").write_text("def f():\n    from harness.measure import timing\n")
    (fake / "analysis" / "y.py").write_text("from pathlib import Path\nfrom harness import store\n")
    (fake / "store" / "z.py").write_text("import harness.cli\n")
    text = "\n".join(v for p in sorted(fake.rglob("*.py")) for v in _violations(p, fake))
    assert "report imports harness.measure" in text
    assert "analysis imports pathlib" in text
    assert "analysis imports harness.store" in text
    assert "imports harness.cli" in text
