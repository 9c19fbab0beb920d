"""``matrix.html``: kernel x GPU heatmaps of ``sol`` and of the speed-up since a
chosen baseline commit, with per-suite geometric means per GPU.

The default baseline is the oldest commit the current series have
(:func:`harness.report.attention.current_baseline`); a speed-up cell is coloured
only where the series changed in that interval (:func:`changed`), neutral
otherwise, so noise does not read as a regression or an improvement.
"""

from __future__ import annotations

import math
from typing import Iterator

from harness.report import attention
from harness.report import fmt as F
from harness.report.model import SiteModel
from harness.report.render import Page


def geomean(vals) -> float | None:
    """Geometric mean of the positive finite values; ``None`` when there are none."""
    vals = [v for v in vals if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def changed(model: SiteModel, s, base: tuple, points: dict | None) -> bool:
    """Whether series ``s`` changed between its baseline value and its newest one.

    With an analysis report: a tested change (regression, improvement, drift,
    pending) of the series lies in that interval. Without one: the baseline
    value is outside the newest result's 99% CI. Otherwise the speed-up is
    noise and its cell is neutral.
    """
    la = s.latest or {}
    if points is not None:
        lo = model.cidx.get(base[1], -1)
        hi = model.cidx.get(la.get("value_commit"), len(model.order))
        return any(lo < x <= hi for x in points.get(s.key, ()))
    ci = la.get("ci")
    return bool(ci) and not (ci[0] <= base[0] <= ci[1])


def sol_status(la: dict, sol: float) -> tuple[str, str] | None:
    """Why a ``sol`` cell cannot be read as a speed of light: the newest record's
    guard status (``above_ceiling``, ``above_peak``, ...) with its reason, or
    ``"above 100%"`` (:data:`harness.report.fmt.UTIL_NOTE`); ``None`` when valid.
    Such a cell is drawn neutral with its badge, never as the best cell."""
    st = la.get("status")
    if st not in (None, "", "ok"):
        return str(st), str(la.get("status_reason") or st)
    if sol > 1:
        return "above 100%", F.UTIL_NOTE
    return None


def cases(model: SiteModel) -> list[dict]:
    """One row per case: ``sol`` per machine (with :func:`sol_status` where it
    is not valid), speed-up per baseline and machine (oriented so that > 1 is
    better, from the series' direction) and whether that speed-up is a change
    (:func:`changed`)."""
    points = attention.change_points(model)
    current = attention.current_keys(model)
    out: dict[str, dict] = {}
    for s in model.series:
        if s.key not in current:  # stopped reporting: nothing to say about it now
            continue
        c = out.setdefault(
            s.cid,
            {
                "id": s.cid,
                "href": s.href,
                "label": s.label,
                "suite": s.benchmark.rsplit(".", 1)[0] if "." in s.benchmark else s.benchmark,
                "sol": {},
                "sol_status": {},
                "speedup": {},
                "changed": {},
                "doubt": {},
            },
        )
        la = s.latest or {}
        sol = (la.get("metrics") or {}).get("sol")
        if sol is not None and sol > 0:
            c["sol"][s.machine] = sol
            bad = sol_status(la, sol)
            if bad:
                c["sol_status"][s.machine] = bad
        if model.doubt.get(s.key):
            c["doubt"][s.machine] = "; ".join(why for _, why in model.doubt[s.key])
        now = la.get("value")
        if now is None or now <= 0 or s.higher is None:
            continue
        for cand in model.candidates:
            b = s.base.get(cand["hash"])
            if b is None or not b[0] or b[0] <= 0 or b[1] == la.get("value_commit"):
                continue
            c["speedup"].setdefault(cand["hash"], {})[s.machine] = (now / b[0]) if s.higher else (b[0] / now)
            c["changed"].setdefault(cand["hash"], {})[s.machine] = changed(model, s, b, points)
    return sorted(out.values(), key=lambda c: F.natural_key(c["label"]))


def suite_means(model: SiteModel, rows: list[dict]) -> list[dict]:
    """Per suite, the geometric mean of ``sol`` and of each baseline's speed-up per
    machine. Cells whose record failed a guard (a :func:`sol_status` other than
    "above 100%") are left out and counted; a cell above 100% but within the guard
    margin passed the guards (noise, :data:`harness.report.fmt.UTIL_NOTE`) and counts.

    Cost: one pass over ``rows`` groups them by suite, then each row is read once
    per machine and per baseline: O(rows x machines x baselines). Filtering all
    rows once per suite made it quadratic in benchmark classes (16,000 classes:
    49 s, issue 29); ``experiments/scale/bench_matrix.py`` prints the ratio.
    """
    geo = []

    def usable(c, m):
        return m in c["sol"] and (m not in c["sol_status"] or c["sol_status"][m][0] == "above 100%")

    by_suite: dict[str, list[dict]] = {}
    for c in rows:
        by_suite.setdefault(c["suite"], []).append(c)
    for su in sorted(by_suite):
        members = by_suite[su]
        sol = []
        for m in model.machines:
            vals = [c["sol"][m] for c in members if usable(c, m)]
            n_bad = sum(1 for c in members if m in c["sol_status"] and not usable(c, m))
            g = geomean(vals)
            sol.append((F.util(g), f"{len(vals)}" + (f", {n_bad} failing a guard left out" if n_bad else "")))
        sp = {}
        for cand in model.candidates:
            cells = []
            for m in model.machines:
                vals = [v for v in (c["speedup"].get(cand["hash"], {}).get(m) for c in members) if v]
                g = geomean(vals)
                cells.append((f"{g:.3f}x" if g is not None else "n/a", len(vals)))
            sp[cand["hash"]] = cells
        geo.append({"suite": su, "sol": sol, "speedup": sp})
    return geo


def pages(model: SiteModel) -> Iterator[Page]:
    rows = cases(model)
    machines = model.machines
    data = {
        "machines": machines,
        "cases": [
            {
                "id": c["id"],
                "label": c["label"],
                "href": c["href"],
                "sol": [c["sol"].get(m) for m in machines],
                "sol_status": [(c["sol_status"].get(m) or [None])[0] for m in machines],
                "sol_reason": [(c["sol_status"].get(m) or [None, None])[1] for m in machines],
                "speedup": {h: [d.get(m) for m in machines] for h, d in sorted(c["speedup"].items())},
                "changed": {h: [d.get(m, False) for m in machines] for h, d in sorted(c["changed"].items())},
                "doubt": [c["doubt"].get(m) for m in machines],
            }
            for c in rows
        ],
    }
    yield Page(
        "matrix.html",
        "matrix.html",
        "",
        dict(
            title=f"kernel x {model.device_noun} matrix - kernelwatch",
            device_noun=model.device_noun,
            data=data,
            machines=machines,
            geo=suite_means(model, rows),
            candidates=model.candidates,
            n_speedup=sum(1 for c in rows if c["speedup"]),
            n_cases=len(rows),
            n_stale=len({s.cid for s in model.series}) - len(rows),
            n_sol=sum(1 for c in rows if c["sol"]),
            judged_by="the analysis' tested changes" if model.report is not None else "the newest result's 99% CI",
        ),
    )
