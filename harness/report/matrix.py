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

from harness.core.model import Status
from harness.report import attention, ceilings
from harness.report import fmt as F
from harness.report.model import BASELINE_RULE, SiteModel
from harness.report.render import Page
from harness.report.roofline import no_roof_reason


def geomean(vals) -> float | None:
    """Geometric mean of the positive finite values; ``None`` when there are none."""
    vals = [v for v in vals if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


#: A speed-up cell's state: a confirmed change in the interval (coloured), a pending one
#: (neutral, tagged), or none (neutral).
CHANGED = "changed"


def changed(model: SiteModel, s, base: tuple, points: dict | None) -> str | None:
    """Whether series ``s`` changed between its baseline value and its newest one:
    :data:`CHANGED`, ``Status.PENDING`` or ``None``.

    With an analysis report: :data:`CHANGED` when a confirmed tested change
    (regression, improvement, drift) of the series lies in that interval,
    ``Status.PENDING`` when only a pending one does (not confirmed: never
    coloured as a regression). Without one: :data:`CHANGED` when the baseline
    value is outside the newest result's 99% CI. Otherwise the speed-up is
    noise and its cell is neutral.
    """
    la = s.latest or {}
    if points is not None:
        lo = model.cidx.get(base[1], -1)
        hi = model.cidx.get(la.get("value_commit"), len(model.order))
        hits = {st for x, st in points.get(s.key, ()) if lo < x <= hi}
        if hits - {Status.PENDING}:
            return CHANGED
        return Status.PENDING if hits else None
    ci = la.get("ci")
    return CHANGED if ci and not (ci[0] <= base[0] <= ci[1]) else None


def sol_status(la: dict, sol: float | None) -> tuple[str, str] | None:
    """Why a ``sol`` cell cannot be read as a speed of light: the newest record's
    guard status (``above_ceiling``, ``contended``, ...) with its reason,
    :data:`harness.core.model.ABOVE_CEILING_LABEL` (:data:`harness.report.fmt.UTIL_NOTE`),
    or, with no ``sol``, ``n/a`` and why (:func:`harness.report.roofline.no_roof_reason`);
    ``None`` when valid. Such a cell is drawn neutral with its label, never as
    the best cell and never blank."""
    st = la.get("status")
    if st not in (None, "", "ok"):
        return F.label(st), str(la.get("status_reason") or st)
    if sol is None:
        return "n/a", no_roof_reason(la)[1]
    if sol > 1:
        return F.ABOVE_CEILING_LABEL, f"{F.pct(sol)} measured: {F.UTIL_NOTE}"
    return None


#: Calibration doubts a sol cell can carry (:mod:`harness.report.ceilings`), named in a suite's mean.
DOUBTS = (F.ABOVE_CEILING_LABEL, F.DOUBTFUL_CEILING_LABEL, ceilings.CONTENDED, ceilings.UNSTABLE, ceilings.WITHHELD)

#: Why a machine's cell of a case is empty when the machine has no series of the case.
NOT_HERE = "no result of this case on this machine"


def _speedup_na(s, la: dict) -> str:
    """Why series ``s`` has no speed-up at any baseline."""
    if la.get("value") is None:
        return "n/a: no valid result at the newest commits (failed or guarded)"
    if s.higher is None:
        return "n/a: the benchmark's unit says neither higher nor lower is better"
    return "n/a: no valid result at or before this baseline, other than the newest"


def cases(model: SiteModel) -> list[dict]:
    """One row per case: ``sol`` per machine (with :func:`sol_status` where it
    is not valid, ``n/a`` included), speed-up per baseline and machine (oriented
    so that > 1 is better, from the series' direction), whether that speed-up
    is a change (:func:`changed`), and why a cell has no speed-up (``na``)."""
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
                "na": {},
            },
        )
        la = s.latest or {}
        sol = F.num((la.get("metrics") or {}).get("sol"))
        sol = sol if sol is None or sol > 0 else None
        if sol is not None:
            c["sol"][s.machine] = sol
        bad = sol_status(la, sol)
        ds = model.figure_doubts(s.machine, la, "sol")
        if not bad and ds and ceilings.against_calibration(la):  # a ceiling the suite beat, or contended
            bad = (
                F.DOUBTFUL_CEILING_LABEL,
                f"{F.pct(sol)} against a doubtful ceiling: " + "; ".join(f"{a}: {b}" for a, b in ds),
            )
        if bad:
            c["sol_status"][s.machine] = bad
        if model.doubt.get(s.key):
            c["doubt"][s.machine] = "; ".join(why for _, why in model.doubt[s.key])
        c["na"][s.machine] = _speedup_na(s, la)
        now = la.get("value")
        if now is None or now <= 0 or s.higher is None:
            continue
        for cand in model.candidates:
            b = s.base.get(cand["hash"])
            if b is None or not b[0] or b[0] <= 0 or b[1] == la.get("value_commit"):
                continue
            c["speedup"].setdefault(cand["hash"], {})[s.machine] = (now / b[0]) if s.higher else (b[0] / now)
            c["changed"].setdefault(cand["hash"], {})[s.machine] = changed(model, s, b, points)
    for c in out.values():  # a machine without this case: n/a, never a blank cell
        for m in model.machines:
            if m not in c["na"]:
                c["na"][m] = f"n/a: {NOT_HERE}"
                c["sol_status"][m] = ("n/a", NOT_HERE)
    return sorted(out.values(), key=lambda c: F.natural_key(c["label"]))


def suite_means(model: SiteModel, rows: list[dict]) -> list[dict]:
    """Per suite, the geometric mean of ``sol`` and of each baseline's speed-up per
    machine. Only valid cells count: a cell with a :func:`sol_status` (a guard
    status, above 100%, which is no speed of light even within the guard
    margin, or a sol against a doubtful calibration) is left out, and the
    left-out cells are counted per reason beside the mean. A speed-up mean over
    cells marked ``[?]`` (the series too noisy to judge, or measured under
    contention) is marked ``[?]`` too, with their count.

    Cost: one pass over ``rows`` groups them by suite, then each row is read once
    per machine and per baseline: O(rows x machines x baselines). Filtering all
    rows once per suite made it quadratic in benchmark classes (16,000 classes:
    49 s, issue 29); ``experiments/scale/bench_matrix.py`` prints the ratio.
    """
    geo = []
    by_suite: dict[str, list[dict]] = {}
    for c in rows:
        by_suite.setdefault(c["suite"], []).append(c)
    for su in sorted(by_suite):
        members = by_suite[su]
        sol = []
        for m in model.machines:
            vals = [c["sol"][m] for c in members if m in c["sol"] and m not in c["sol_status"]]
            left = [st for st, _ in (c["sol_status"].get(m, ("n/a", "")) for c in members) if st != "n/a"]
            note = f"{len(vals)}"
            for st in dict.fromkeys(left):  # each reason a cell is no valid sol, counted
                what = st if st in DOUBTS else "failing a guard"
                note += f", {left.count(st)} {what} left out"
            sol.append((F.util(geomean(vals)), note))
        sp = {}
        for cand in model.candidates:
            cells = []
            for m in model.machines:
                got = [c for c in members if c["speedup"].get(cand["hash"], {}).get(m)]
                vals = [c["speedup"][cand["hash"]][m] for c in got]
                g = geomean(vals)
                # a mean over cells marked [?] (too noisy, under contention) carries the mark too
                n_doubt = sum(1 for c in got if c["doubt"].get(m))
                cells.append(
                    (("[?] " if n_doubt else "") + (f"{g:.3f}x" if g is not None else "n/a"), len(vals), n_doubt)
                )
            sp[cand["hash"]] = cells
        geo.append({"suite": su, "sol": sol, "speedup": sp})
    return geo


def no_sol_reasons(rows: list[dict]) -> list[tuple[str, int]]:
    """Why the cells of ``rows`` (:func:`cases`) have no ``sol``, as ``(reason,
    cells)``, most cells first: the reasons the records themselves give
    (:func:`sol_status`, e.g. no peak for a CPU with no usable calibration, a
    foreign result), never a guess (issue 25: a kernelwatch run's own matrix
    said "foreign asv results")."""
    counts: dict[str, int] = {}
    for c in rows:
        for st, why in c["sol_status"].values():
            if why != NOT_HERE:
                k = why if st == "n/a" else f"{st}: {why}"
                counts[k] = counts.get(k, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


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
                "changed": {h: [d.get(m) for m in machines] for h, d in sorted(c["changed"].items())},
                "doubt": [c["doubt"].get(m) for m in machines],
                "na": [c["na"][m] for m in machines],
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
            no_sol=no_sol_reasons(rows),
            baseline_rule=BASELINE_RULE,
            judged_by="the analysis' tested changes" if model.report is not None else "the newest result's 99% CI",
        ),
    )
