"""What a machine's calibration record says of its own ceilings, for the pages.

A stored calibration (``kernelwatch calibrate``, :mod:`harness.measure.calibrate`)
keeps, beside each ceiling, how it was measured: its guard ``status`` and
``reason``, whether its best runs agreed (``stable``, ``stability``), whether
the chosen run was contended (``repeats[chosen_run].contended``), and, once the
store has read the suite's points against it, how many beat it
(``under_measured_points``, :func:`harness.store.columns.guard_records`). A
calibration may also carry a status of its own (``status``, ``reason``: the
calibration could not be made, its figures withheld).

This module turns that into ``(status, reason)`` pairs: per figure
(:func:`figure_doubts`) and per calibration (:func:`doubts`). The pages show
them wherever a ceiling or a figure computed against it appears: the overview's
machine line (never a "calibrated" badge over a doubtful calibration), the
machine page's ceilings, and every ``mfu``, ``bw_util`` and ``sol`` measured
against it (:func:`figure_badge`). Pure functions of the record, but for
:func:`refused`, which reads the stored calibration the store did not use.
"""

from __future__ import annotations

import re

from harness.core.guards import memory_ceiling_figure
from harness.core.metrics import STATUS_CONTENDED, STATUS_OK
from harness.report import fmt as F

#: The run a ceiling was taken from was flagged contended by the CPU timing.
CONTENDED = "contended"
#: The best runs of a ceiling did not agree (:data:`harness.measure.calibrate.STABLE_REL`).
UNSTABLE = "unstable"
#: The figure is not a ceiling: rejected by a guard, not measured, or withheld by the calibration.
WITHHELD = "withheld"

#: Bandwidth figures of a calibration (:data:`harness.measure.calibrate.BANDWIDTH_FIGURES`).
BANDWIDTH = ("copy", "read", "add")


def _value_key(name: str) -> str:
    return "gbps" if name in BANDWIDTH else "tflops"


def figure_doubts(fig, name: str) -> list[tuple[str, str]]:
    """Why one calibration figure (``fig``: ``copy``, ``read``, ``add`` or a
    ``matmul`` dtype's block; ``name`` as the page names it, ``"copy"`` or
    ``"matmul fp32"``) is not a trustworthy ceiling, as ``(status, reason)``;
    ``[]`` when it is. A figure that is not an object is :data:`WITHHELD`."""
    if not isinstance(fig, dict):
        return [(WITHHELD, f"{name}: no figure stored")]
    out = []
    if fig.get("status", STATUS_OK) != STATUS_OK or F.num(fig.get(_value_key(name.split()[0]))) is None:
        why = fig.get("reason") or fig.get("status") or "no value stored"
        return [(WITHHELD, f"{name}: {why}")]
    runs = fig.get("repeats") if isinstance(fig.get("repeats"), list) else []
    chosen = fig.get("chosen_run")
    if isinstance(chosen, int) and 0 <= chosen < len(runs) and isinstance(runs[chosen], dict):
        if runs[chosen].get("contended"):
            n = sum(1 for r in runs if isinstance(r, dict) and r.get("contended"))
            out.append((CONTENDED, f"{name}: taken from a contended run ({n} of {len(runs)} runs contended)"))
    if fig.get("stable") is False:
        stab = str(fig.get("stability") or "")
        few = _FEW_CLEAN.search(stab)
        if few and int(few.group(1)) < 2:
            # not "did not agree": no two runs could be compared (a newcomer's two copy runs were
            # 0.7% apart, uncontended, but neither converged)
            out.append(
                (
                    UNSTABLE,
                    f"{name}: not shown stable: {few.group(1)} of its runs converged uncontended, so no two "
                    f"could be compared ({stab})",
                )
            )
        else:
            out.append((UNSTABLE, f"{name}: its best runs did not agree ({stab or 'no reason stored'})"))
    return out


#: The end of a stability text (:func:`harness.measure.calibrate.measure`) when fewer
#: than two runs were clean: ``"...; 0 clean (converged, uncontended) run(s)"``.
_FEW_CLEAN = re.compile(r"(?<![-0-9])([0-9]{1,6}) clean \(converged, uncontended\) run\(s\)$")


def named_figures(cal: dict) -> list[tuple[str, dict]]:
    """The ceilings of a calibration as ``(name, figure)``: the bandwidth
    figures it has, then ``matmul <dtype>`` in dtype order."""
    out = [(k, cal[k]) for k in BANDWIDTH if k in cal]
    mm = cal.get("matmul") if isinstance(cal.get("matmul"), dict) else {}
    out += [(f"matmul {k}", v) for k, v in sorted(mm.items())]
    return out


def doubts(cal: dict | None, names: list[str] | None = None) -> list[tuple[str, str]]:
    """Why a machine's calibration cannot be read as "calibrated", as
    ``(status, reason)``, one per status (the reasons of its figures joined):
    its own ``status`` (the calibration withheld as a whole),
    :data:`harness.core.model.ABOVE_CEILING_LABEL` (``under_measured_points`` of the
    suite ran above its ceilings, so they are too low; with the first one's reason), then :data:`CONTENDED`, :data:`UNSTABLE` and :data:`WITHHELD`
    over its figures: all of them, or only those named in ``names``
    (:func:`doubts_for`). ``[]`` for a calibration with nothing to doubt, and for
    none at all (the page then says no calibration is stored)."""
    if not isinstance(cal, dict):
        return []
    keep = None if names is None else set(names)
    out: list[tuple[str, str]] = []
    own = cal.get("status")
    if own not in (None, "", STATUS_OK):
        out.append((str(own), str(cal.get("reason") or own)))
    n = cal.get("under_measured_points")
    if isinstance(n, int) and n > 0:
        um = cal.get("under_measured")
        first = um[0] if isinstance(um, list) and um and isinstance(um[0], dict) else {}
        params = first.get("params")
        params = ", ".join(f"{k}={v}" for k, v in sorted(params.items())) if isinstance(params, dict) else params
        out.append(
            (
                F.ABOVE_CEILING_LABEL,
                f"{n} point(s) of the suite ran above these ceilings, so they are too low, e.g. "
                f"{first.get('benchmark')} ({params}): {first.get('reason')}; "
                f"run kernelwatch calibrate on a quiet machine",
            )
        )
    per: dict[str, list[str]] = {}
    for name, fig in named_figures(cal):
        if keep is None or name in keep:
            for st, why in figure_doubts(fig, name):
                per.setdefault(st, []).append(why)
    for st in (CONTENDED, UNSTABLE, WITHHELD):
        if per.get(st):
            out.append((st, "; ".join(per[st])))
    return out


def used_figures(cal: dict | None, la: dict, kind: str) -> list[str]:
    """The names of the calibration figures (as :func:`named_figures` names them)
    that figure ``kind`` (``"mfu"``, ``"bw_util"`` or ``"sol"``) of the newest
    point ``la`` was computed against, by the rule of
    :func:`harness.core.guards.calibration_ceilings`: ``mfu`` against the matmul
    rate of the point's dtype for tensor-core ops, else the fp32 one; ``bw_util``
    against the highest usable bandwidth figure (:func:`harness.core.guards.memory_ceiling_gbps`);
    ``sol`` against the one its ``bound`` names (``memory`` or ``compute``), both
    when the bound is not known. A newcomer's fp32 ``mfu`` against a stable fp32
    matmul ceiling was badged "doubtful" for an unstable copy figure it never used."""
    if not isinstance(cal, dict):
        return []
    mm = f"matmul {la.get('dtype') if la.get('uses_tensor_cores') and la.get('dtype') else 'fp32'}"
    best = memory_ceiling_figure(cal)  # the one rule that picks the memory roof
    bw = [best] if best else []
    if kind == "mfu":
        return [mm]
    if kind == "bw_util":
        return bw
    bound = la.get("bound")
    return bw if bound == "memory" else [mm] if bound == "compute" else bw + [mm]


def doubts_for(cal: dict | None, names: list[str]) -> list[tuple[str, str]]:
    """:func:`doubts` of ``cal`` restricted to the figures ``names``
    (:func:`used_figures`): the calibration's own status and the suite's points
    above its ceilings always count; a figure's contended, unstable or withheld
    status only for a figure in ``names``."""
    return doubts(cal, list(names))


def badges(cal: dict | None) -> list:
    """:func:`doubts` as warning badges, reason on hover."""
    return [F.badge(st, why, css="warn") for st, why in doubts(cal)]


def against_calibration(la: dict) -> bool:
    """Whether the newest point ``la``'s ``mfu``, ``bw_util`` and ``sol`` were
    computed against the machine's measured ceilings (a CPU, or a GPU with no
    datasheet row: :func:`harness.core.guards.calibration_ceilings` names its
    source ``measured ...``) rather than a datasheet."""
    return str(la.get("peaks_source") or "").startswith("measured")


def util_cell(ds: list[tuple[str, str]], la: dict, x):
    """One ``mfu``, ``bw_util`` or ``sol`` (fraction ``x``) of the newest point
    ``la``, for a table, given its machine's calibration :func:`doubts` ``ds``:
    :func:`harness.report.fmt.util` when it is not against the calibration
    (:func:`against_calibration`) or ``ds`` is empty; otherwise a badge,
    :data:`harness.core.model.ABOVE_CEILING_LABEL` when the figure is above 100%
    and :data:`harness.core.model.DOUBTFUL_CEILING_LABEL` when it is not, with the
    figure and every doubt in its title, so a figure against a ceiling the suite
    beat, or one taken under contention, is never a plain number."""
    if not ds or F.num(x) is None or not against_calibration(la):
        return F.util(x)
    above = F.num(x) > 1
    shown = F.pct(x) + (f" ({F.ABOVE_CEILING_LABEL})" if above else "")
    return F.badge(
        F.ABOVE_CEILING_LABEL if above else F.DOUBTFUL_CEILING_LABEL,
        f"{shown} against a doubtful ceiling: " + "; ".join(f"{st}: {why}" for st, why in ds),
        css="warn",
    )


def refused(results_dir, machine: str) -> dict | None:
    """Why ``machine`` has no usable calibration although one is stored: the
    newest calibration line of ``<results>/<machine>/kernelwatch/calibration.jsonl``
    (:func:`harness.core.records.read_jsonl`; unreadable lines are passed over)
    and its figures that are not ceilings (:func:`figure_doubts`, withheld ones),
    as ``{"date", "contended": bool, "why": text}``. ``None`` when no
    calibration is stored or the file cannot be read (the page then says none
    is stored). Called only where the store found no usable calibration."""
    from harness.core.records import CALIBRATION_FILE, read_jsonl, records_dir

    if results_dir is None:
        return None
    path = records_dir(results_dir, machine) / CALIBRATION_FILE
    try:
        if not path.is_file():
            return None
        cals = [c for c in read_jsonl(path, []) if isinstance(c, dict)]
    except (OSError, ValueError):
        return None
    if not cals:
        return None
    cal = cals[-1]
    whys = [why for name, fig in named_figures(cal) for st, why in figure_doubts(fig, name) if st == WITHHELD]
    own = cal.get("reason") if cal.get("status") not in (None, "", STATUS_OK) else None
    if own:
        whys.insert(0, str(own))
    contended = any(isinstance(f, dict) and f.get("status") == STATUS_CONTENDED for _, f in named_figures(cal))
    return {
        "date": str(cal.get("date") or ""),
        "contended": contended,
        "why": "; ".join(whys) or "no usable ceiling in it",
    }
