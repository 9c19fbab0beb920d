"""List the modules of harness/ over 600 lines and the functions over 80 lines.

The layout rule of issue 11 (docs/architecture.md): no module of ``harness/``
longer than about 600 lines, no function longer than about 80, unless its
docstring says why. "Says why" is a line of the docstring (the module's, or the
function's) starting with ``Why long:``, e.g.::

    def analyze(...):
        \"\"\"...

        Why long: one pass over the series in the order the paper gives; cut
        into steps, each step would need the whole state.
        \"\"\"

A function's length runs from its ``def`` line to its last line (docstring
included, decorators not); nested functions and methods are measured on their
own. Read from the source with ``ast``; nothing is imported.

Lines are counted as written before ``ruff format``: a line that only continues
a bracketed expression (the formatter puts each argument of a long call on its
own line) does not count, so the same code measures the same under either layout;
docstrings, comments and blank lines count.

Usage: ``python scripts/check_layout.py [ROOT]`` (default: this checkout's
``harness/``) prints one line per offender and exits 1 when there is any, 0
otherwise. ``tests/test_layout.py`` runs the same check with the list of files
that are exempt for now.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: A docstring line that explains a length over the limit.
WHY_LONG = re.compile(r"^\s*why long:", re.IGNORECASE | re.MULTILINE)


def _says_why(node) -> bool:
    doc = ast.get_docstring(node, clean=False)
    return bool(doc and WHY_LONG.search(doc))


def _continuation_lines(text: str) -> set[int]:
    """Line numbers (1-based) that start inside an open bracket: the continuation
    lines of one expression, which a formatter spreads over as many lines as it likes."""
    depth, starts_inside, last_row = 0, set(), 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        row = tok.start[0]
        if row != last_row:
            if depth > 0:
                starts_inside.add(row)
            last_row = row
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
    return starts_inside


def offenders(root: Path, exempt: tuple[str, ...] = ()) -> list[str]:
    """One line per module over :data:`MAX_MODULE_LINES` lines and per function over
    :data:`MAX_FUNCTION_LINES` lines under ``root`` whose docstring has no ``Why long:``
    line, as ``path:line: what``.

    ``exempt``: paths relative to ``root`` (``"measure/timing.py"``), or folders
    ending in ``/`` (``"analysis/"``), left out.

    Raises
    ------
    SyntaxError
        If a module does not parse (naming the file).
    """
    root = Path(root)
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(rel == e or (e.endswith("/") and rel.startswith(e)) for e in exempt):
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        skip = _continuation_lines(text)
        n = len(text.splitlines()) - len(skip)
        if n > MAX_MODULE_LINES and not _says_why(tree):
            out.append(f"{path}:1: module has {n} lines (limit {MAX_MODULE_LINES}; or a 'Why long:' docstring line)")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1 - sum(1 for r in skip if node.lineno <= r <= node.end_lineno)
                if length > MAX_FUNCTION_LINES and not _says_why(node):
                    out.append(
                        f"{path}:{node.lineno}: function {node.name} has {length} lines "
                        f"(limit {MAX_FUNCTION_LINES}; or a 'Why long:' docstring line)"
                    )
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "harness"
    if not root.is_dir():
        print(f"check_layout: {root} is not a folder", file=sys.stderr)
        return 2
    found = offenders(root)
    for line in found:
        print(line)
    print(
        f"{len(found)} over the limits (modules {MAX_MODULE_LINES} lines, functions {MAX_FUNCTION_LINES})",
        file=sys.stderr,
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
