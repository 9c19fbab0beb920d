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

Usage: ``python scripts/check_layout.py [ROOT]`` (default: this checkout's
``harness/``) prints one line per offender and exits 1 when there is any, 0
otherwise. ``tests/test_layout.py`` runs the same check with the list of files
that are exempt for now.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: A docstring line that explains a length over the limit.
WHY_LONG = re.compile(r"^\s*why long:", re.IGNORECASE | re.MULTILINE)


def _says_why(node) -> bool:
    doc = ast.get_docstring(node, clean=False)
    return bool(doc and WHY_LONG.search(doc))


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
        n = len(text.splitlines())
        if n > MAX_MODULE_LINES and not _says_why(tree):
            out.append(f"{path}:1: module has {n} lines (limit {MAX_MODULE_LINES}; or a 'Why long:' docstring line)")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and not _says_why(node):
                    out.append(f"{path}:{node.lineno}: function {node.name} has {length} lines "
                               f"(limit {MAX_FUNCTION_LINES}; or a 'Why long:' docstring line)")
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "harness"
    if not root.is_dir():
        print(f"check_layout: {root} is not a folder", file=sys.stderr)
        return 2
    found = offenders(root)
    for line in found:
        print(line)
    print(f"{len(found)} over the limits (modules {MAX_MODULE_LINES} lines, functions {MAX_FUNCTION_LINES})",
          file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
