"""The one-way imports of harness/ (docs/architecture.md), read from the source with ast.

cli -> gate / report / analysis / store / measure -> core. Nothing imports
harness.cli; analysis imports nothing of measure (nor store, report, gate) and no
file or process I/O module; report imports neither measure nor gate; store and
core import no stage above them. Lazy imports inside functions count the same.

Also the size rule (scripts/check_layout.py): no module over 600 lines, no
function over 80, unless its docstring has a ``Why long:`` line; the files
other work is changing today are listed in :data:`SIZE_EXEMPT`.
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
IO_MODULES = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "subprocess",
    "glob",
    "tempfile",
    "json",
    "csv",
    "pickle",
    "sqlite3",
    "open",
    "fileinput",
    "socket",
    "urllib",
    "git",
    "asv.results",
}


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


# ----------------------------------------------------------------------------- one vocabulary (issue 25)

#: Names defined once, in harness/core/model.py; every stage imports them.
VOCABULARY = {"SeriesKey", "Point", "Series", "Status", "Direction", "EventStatus", "RowStatus", "GateStatus"}
VOCAB_HOME = HARNESS / "core" / "model.py"


def _redefinitions(path: Path) -> list[str]:
    """Classes (or functions) named like the vocabulary outside its home, and
    kernelwatch status values spelled as string literals (outside docstrings
    and f-strings) in report, cli, gate and store."""
    from harness.core.model import EventStatus, GateStatus, RowStatus, Status

    values = {m.value for E in (Status, EventStatus, RowStatus) for m in E} | {m.value for m in GateStatus}
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in VOCABULARY:
            out.append(f"{path}:{node.lineno}: defines {node.name} (defined once in harness/core/model.py)")
    stage = path.relative_to(HARNESS).parts[0] if path.is_relative_to(HARNESS) else None
    if stage in ("report", "cli", "gate", "store") or path.parent.name == "report":
        skip = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                skip.update(id(c) for c in ast.walk(node))
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
                skip.add(id(body[0].value))  # docstring
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in values and id(node) not in skip:
                out.append(f"{path}:{node.lineno}: status {node.value!r} spelled as a literal (use the enum)")
    return out


def test_one_vocabulary_defined_once_and_never_spelled_out():
    bad = [v for p in _modules() if p != VOCAB_HOME for v in _redefinitions(p)]
    assert bad == []


def test_the_vocabulary_rule_catches_a_redefinition(tmp_path):
    """Negative control: a second Point and a report comparing against "regression"."""
    (tmp_path / "report").mkdir()
    fake = tmp_path / "report" / "x.py"
    fake.write_text('class Point:\n    pass\n\n\ndef f(s):\n    return s == "regression"\n')
    text = "\n".join(_redefinitions(fake))
    assert "defines Point" in text and "'regression' spelled as a literal" in text


def test_core_imports_nothing_of_kernels():
    """harness/core is the bottom layer: the cost and device vocabulary live there
    and kernels/ import them, never the other way round."""
    bad = [
        f"{p}:{line}: imports {name}"
        for p in sorted((HARNESS / "core").glob("*.py"))
        for line, name in _imports(p)
        if name.split(".")[0] in ("kernels", "benchmarks")
    ]
    assert bad == []


# ----------------------------------------------------------------------------- sizes (issue 11)


def _check_layout():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_layout", HARNESS.parent / "scripts" / "check_layout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: Files other work is changing today: exempt from the size rule until that work
#: lands; the lead removes them. Empty: the rule holds everywhere (issue 11).
SIZE_EXEMPT: tuple[str, ...] = ()


def test_no_module_over_600_lines_nor_function_over_80():
    """Issue 11: no module of harness/ over 600 lines, no function over 80, unless
    its docstring has a ``Why long:`` line (``python scripts/check_layout.py`` lists them)."""
    found = _check_layout().offenders(HARNESS, SIZE_EXEMPT)
    assert found == [], "\n".join(found)


def test_the_size_rule_catches_a_long_module_and_function(tmp_path):
    """Negative control: a 601-line module and an 81-line function are reported;
    a long function whose docstring says why, and an exempt file, are not."""
    cl = _check_layout()
    fake = tmp_path / "harness"
    (fake / "gate").mkdir(parents=True)
    (fake / "analysis").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    (fake / "gate" / "long_fn.py").write_text(f'def f():\n    """Doc."""\n{body}')  # 81 lines
    (fake / "gate" / "why.py").write_text(f'def g():\n    """Doc.\n\n    Why long: one table.\n    """\n{body}')
    (fake / "gate" / "ok.py").write_text(f"def h():\n{body}")  # 80 lines: at the limit
    (fake / "gate" / "big.py").write_text("".join(f"y{i} = {i}\n" for i in range(601)))
    (fake / "analysis" / "exempt.py").write_text("".join(f"y{i} = {i}\n" for i in range(700)))
    found = "\n".join(cl.offenders(fake, ("analysis/",)))
    assert "long_fn.py:1: function f has 81 lines" in found
    assert "big.py:1: module has 601 lines" in found
    assert "why.py" not in found and "ok.py" not in found and "exempt.py" not in found
    assert len(cl.offenders(fake)) == 3  # without the exemption the 700-line module counts too


def test_every_status_has_its_site_class_and_place():
    """Adding a finding kind: the enum in harness/core/model.py, then the site's
    colour and order; this fails until both know it (no silent unstyled rows)."""
    from harness.core.model import EventStatus, RowStatus, Status
    from harness.report.attention import EVENT_CLASS, TRIAGE_ORDER
    from harness.report.model import STATUS_CLASS

    assert set(Status) - set(STATUS_CLASS) == set()
    assert [s for s in list(Status) + list(RowStatus) if s not in TRIAGE_ORDER] == []
    assert [s for s in EventStatus if s not in EVENT_CLASS] == []
