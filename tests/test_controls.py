"""The control kernels (kernels/control.py): correct, frozen torch-only code, part
of every suite, recognised by name; their move marks the machine."""

from __future__ import annotations

import pytest

import kernels
from harness.core.model import is_control
from kernels import _check
from kernels.control import CONTROL_OPS


@pytest.mark.parametrize("name", sorted(CONTROL_OPS))
def test_controls_match_their_reference_and_reject_a_wrong_result(name):
    op = kernels.get_op(name)
    assert op is CONTROL_OPS[name] and list(op.providers) == ["torch"]
    for shape in op.test_shapes:
        inputs = op.make_inputs(shape, "fp32", "cpu")
        out = op.providers["torch"].fn(*inputs)
        _check.compare(op, out, op.reference(*inputs), "fp32", f"{name}{shape}")
        with pytest.raises(_check.WrongResult):  # negative control: a 1% error is caught
            _check.compare(op, out * 1.01 + 0.1, op.reference(*inputs), "fp32", f"{name}{shape} wrong")


def test_controls_are_in_the_suite_but_not_ops_under_test():
    import benchmarks.suite as suite

    assert {"control_copy", "control_matmul"} <= set(vars(suite))
    assert not set(CONTROL_OPS) & set(kernels.OP_MODULES)
    assert all(is_control(f"suite.{n}.track_time") for n in CONTROL_OPS)
    assert not is_control("suite.vector_add.track_time")
    with pytest.raises(KeyError):
        kernels.get_op("control_nothing")


@pytest.mark.parametrize("controls_move", [True, False])
def test_a_machine_slow_phase_is_one_event_with_the_controls_as_evidence(controls_move):
    """A synthetic history: 10 suite series and the 2 controls of one machine, all
    10% slower for 3 commits. One machine event; the controls' move is its evidence.
    Negative control: controls that did not move are not named as evidence."""
    import numpy as np
    from test_analysis import mk, noisy

    import harness.analysis as A

    rng = np.random.default_rng(5)
    names = [f"suite.op{j}.track_time" for j in range(10)] + [
        "suite.control_copy.track_time",
        "suite.control_matmul.track_time",
    ]
    series = []
    for j, name in enumerate(names):
        levels = np.ones(60) * rng.uniform(0.5, 2.0)
        if controls_move or not is_control(name):
            levels[30:33] *= 1.10
        series.append(mk(noisy(levels, 0.02, 40 + j), name=name))
    r = A.analyze(series)
    (ev,) = r.machine_events
    if controls_move:
        assert sorted(c["benchmark"] for c in ev["controls"]) == names[-2:]
        assert all(c["ratio"] == pytest.approx(1.10, rel=0.05) and c["moved"] for c in ev["controls"])
        assert "control kernels moved with them" in ev["reason"]
    else:
        assert all(c["ratio"] == pytest.approx(1.0, abs=0.04) and not c["moved"] for c in ev["controls"])
        assert "control kernels did not move" in ev["reason"]


def _machine_page(tmp_path, bench) -> str:
    from test_site_data import sha, write_results

    from harness.report import site

    root = write_results(tmp_path / "results", {"m": {"cpu": "x"}}, [sha(i) for i in range(3)], bench, lambda *a: 1e-3)
    site.publish(root, tmp_path / "site", analysis="off")
    (page,) = (tmp_path / "site" / "machine").glob("*.html")
    return page.read_text()


def test_the_machine_page_shows_the_controls(tmp_path):
    """The controls get their own table on the machine page; results without a
    control show none (negative control)."""
    va = {"suite.vector_add.track_time": {"param_names": ["shape"], "params": [["'4096'"]]}}
    cc = {"suite.control_copy.track_time": {"param_names": ["shape"], "params": [["'1048576'"]]}}
    html = _machine_page(tmp_path / "a", {**va, **cc})
    table = html.split('id="controls"', 1)[1].split("</table>", 1)[0]
    assert "Control kernels" in html and "suite.control_copy.track_time" in table
    assert "suite.vector_add" not in table
    assert "Control kernels" not in _machine_page(tmp_path / "b", va)
