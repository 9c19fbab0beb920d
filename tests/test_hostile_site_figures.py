"""A hostile trial of the 2026-12-07 site changes (ceilings judged per figure,
divergence moves, providers note, budget wording): each input that crashed the
whole publish or printed a figure we would not defend, with a control."""

from __future__ import annotations

import copy
import json
import re
from types import SimpleNamespace as NS

from test_read_guards import cal_for
from test_site_trial import _publish

from harness.core import guards
from harness.report import ceilings
from harness.report import fmt as F
from harness.report.machine import calibration, providers_note
from harness.report.model import SiteModel, _relative_text, budget_plain, finding_problems


def test_a_stability_text_with_a_huge_or_negative_count_reads_as_disagreement():
    for stab in (
        "5 runs; " + "1" * 5000 + " clean (converged, uncontended) run(s)",
        "5 runs; -1 clean (converged, uncontended) run(s)",
    ):
        ((st, why),) = ceilings.figure_doubts({"gbps": 4.0, "status": "ok", "stable": False, "stability": stab}, "copy")
        assert st == "unstable" and why.startswith("copy: its best runs did not agree"), why[:80]
    # control: a real count below two says no two could be compared
    ((st, why),) = ceilings.figure_doubts(
        {"gbps": 4.0, "status": "ok", "stable": False, "stability": "5 runs; 1 clean (converged, uncontended) run(s)"},
        "copy",
    )
    assert "1 of its runs converged uncontended" in why


def _validated(cal):
    out, problems = guards.validate_calibration(cal, "cal.jsonl:1")
    return out, problems


def test_odd_calibration_shapes_are_named_and_lose_only_themselves(tmp_path):
    odd = cal_for(gbps=4.0)
    odd["matmul"][""] = dict(odd["matmul"]["fp32"])
    odd["matmul"]["x y"] = dict(odd["matmul"]["fp32"], stable=False, stability="3 runs 9% apart")
    odd["matmul"]["bad"] = [1]
    odd["read"] = [2.0]
    odd["under_measured_points"], odd["under_measured"] = 2, "oops"
    out, problems = _validated(odd)
    assert out is not None and out["matmul"]["fp32"]["tflops"] == 0.05  # the sound figures kept
    assert any("matmul bad is not an object" in p for p in problems) and any("read bandwidth" in p for p in problems)
    assert "under_measured" not in out and "under_measured_points" not in out  # derived when read, never stored
    block = calibration(out)  # the machine page's calibration block: no IndexError on the empty key
    assert any(name == "matmul " for name, _t, _b in block["figures"])
    assert ceilings.doubts(out)  # the spaced key's instability is read, no crash
    listed = cal_for(gbps=4.0)
    listed["matmul"] = [1]
    out, problems = _validated(listed)
    assert out is None or out["matmul"] == {}
    assert any("matmul is list" in p for p in problems)
    # end to end: the publish of a calibration with these shapes builds every page
    site, _ = _publish(tmp_path, gbps=[3.0] * 5, contended_at=set(), cal=odd)
    roof = next((site / "roofline").glob("*.html")).read_text()
    data = json.loads(re.search(r'id="kw-data">(.*?)</script>', roof, re.S).group(1))
    (measured,) = [c for c in data["ceilings"] if c["kind"] == "measured"]
    assert measured["line_doubt"] == {"fp32 matmul": False}  # the spaced key's doubt is its own line's


def test_a_withheld_calibration_reaches_every_figure():
    # the calibration's own status "withheld" shares its word with a figure's: filtering the
    # figure statuses out of doubts(cal) dropped it, so a withheld calibration's figures read plain
    own = cal_for(gbps=4.0, status="withheld", reason="could not calibrate under contention")
    assert ceilings.doubts_for(own, ["copy"]) == [("withheld", "could not calibrate under contention")]
    assert ceilings.doubts_for(cal_for(gbps=4.0), ["copy"]) == []  # control


def test_the_spaced_dtype_key_keeps_its_own_doubt():
    cal = cal_for(gbps=4.0)
    cal["matmul"]["x y"] = dict(cal["matmul"]["fp32"], stable=False, stability="3 runs 9% apart")
    # found by its stored name (the roofline's line_doubt keys by it, not by the label split again)
    assert ceilings.doubts_for(cal, ["matmul x y"]) and not ceilings.doubts_for(cal, ["matmul fp32"])


def test_natural_key_takes_any_text():
    assert F.natural_key("1²") and F.natural_key("n=" + "9" * 5000)
    assert sorted(["n=10", "n=9", "n=" + "1" * 5000], key=F.natural_key) == ["n=9", "n=10", "n=" + "1" * 5000]


def test_divergence_moves_are_used_only_when_they_add_up():
    assert _relative_text(0.137, "m2", None, (0.004, -0.117), "m1") == "m1 +0.4% slower, m2 -11.7% faster: 13.7% apart"
    for moves in ((-0.2, 0.3), (1e308, -1e308), (float("inf"), 0.0), (0.5, -1.0), ("x", 0.0)):
        assert _relative_text(0.137, "m2", None, moves, "m1") == "+13.7% against m2", moves
    assert _relative_text(5.0, "m2", None, (5.0, 0.0), "m1") == "m1 x6 slower, m2 +0.0%: x6 apart"  # the factor rule


def test_providers_note_matches_case_and_keeps_inner_quotes():
    def model(provs):
        ser = [NS(params=(("provider", p),), latest={"has_record": True}) for p in provs]
        return NS(kinds={"m": "cpu"}, series_of=lambda m: ser)

    assert providers_note(model(["'torch'", "'Triton'"]), "m") == ""  # a GPU provider seen, in any case
    assert 'Providers timed on this CPU: "q", torch.' in providers_note(model(["'torch'", "'\"q\"'"]), "m")


def test_budget_figures_no_configuration_holds_read_unknown():
    for thr in (7, -1, "x", float("nan")):
        assert SiteModel.budget(NS(report={"false_alarm_budget": {"bh_threshold_p": thr}}))["threshold"] == "n/a"
    words = budget_plain(
        {
            "expected_false_alerts": 0.1,
            "expected_false_alerts_without_fdr": 1.0,
            "fdr_q": 1e308,
            "min_effect": 1e308,
            "hypotheses": 3,
        }
    )
    assert "inf" not in words and "reaches" not in words and "of all alerts" not in words
    assert "-50%" not in budget_plain({"expected_false_alerts": 0.1, "min_effect": -0.5, "hypotheses": 3})
    ok = budget_plain({"expected_false_alerts": 0.1, "fdr_q": 0.05, "min_effect": 0.05, "hypotheses": 3})
    assert "reaches 5%" in ok and "at most 5% of all alerts" in ok  # control


def test_findings_that_are_not_objects_are_named():
    rep = {"findings": [{"status": "regression"}, "junk", 7]}
    assert finding_problems(rep, "r.json") == [
        "r.json: findings[1] is str, not an object: not shown",
        "r.json: findings[2] is int, not an object: not shown",
    ]
    assert finding_problems({"findings": [{}]}, "r.json") == [] and finding_problems(None, "r") == []
    assert copy.deepcopy(rep) == rep
