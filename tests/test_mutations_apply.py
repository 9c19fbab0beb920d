"""Every mutation of ``scripts/mutate.py`` still applies to today's source.

A refactor that moves the mutated line (as the gate's split did) would turn the
mutation into "NOT APPLIED" and the script's table would silently lose a row;
this keeps the list in step with the code without running the mutation tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _mutate():
    spec = importlib.util.spec_from_file_location("kw_mutate", ROOT / "scripts" / "mutate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


M = _mutate()


@pytest.mark.parametrize("m", M.MUTATIONS + M._tolerance_mutations(ROOT), ids=lambda m: m.name)
def test_mutation_edits_match_the_source_once(m):
    text = (ROOT / m.path).read_text()
    for old, new in m.edits:
        assert text.count(old) == 1, f"{m.name}: {old!r} found {text.count(old)} times in {m.path}"
        assert old != new
    for t in m.tests:
        if t.startswith("tests/"):
            assert (ROOT / t.split("::")[0]).is_file(), f"{m.name}: test file {t} does not exist"


def test_apply_rejects_an_edit_that_does_not_match(tmp_path):
    (tmp_path / "f.py").write_text("x = 1\n")
    bad = M.Mutation("negative control", "f.py", (("y = 2", "y = 3"),), ())
    assert M.apply(tmp_path, bad) is None
    assert (tmp_path / "f.py").read_text() == "x = 1\n"
