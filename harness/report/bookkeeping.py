"""Bookkeeping: the findings a person does not read first, counted, one click away.

On real histories most findings are bookkeeping (on a Liger-Kernel history
3,392 of 4,039 were ``missing``), and a list that starts with them buries the
changes that matter. A finding is bookkeeping (issue 23 item 7) when its kind
is in :data:`BOOKKEEPING_STATUSES` (a series that stopped reporting, a
benchmark version or environment change, an excursion that reverted, a
machine-event finding) or when it is a ``pending`` change at the end of a
series that stopped long ago: more than the confirm window
(:func:`confirm_window`, the analysis' ``confirm_after``) of its machine's
commits before the machine's newest one, so it will never be confirmed (the
series was renamed or removed). The overview and the findings page lead with
the other findings and show the bookkeeping as exact counts per kind with
every item listed one click away.

Two parts of the analysis report are read here when present and tolerated when
absent (older reports): ``health.excursions`` (moves of 2-3 commits that
revert: not regressions) and ``machine_events`` (many series of one machine
moving together and coming back: the host, not the code).

Pure functions of the :class:`harness.report.model.SiteModel`; they return
finished strings and numbers for the templates.
"""

from __future__ import annotations

import numpy as np

from harness.core.model import SAME_CODE_KIND, Status
from harness.report import fmt as F
from harness.report.model import SiteModel, key_tuple

#: Kinds the analysis is adding (reverted excursions, host events); not ``Status`` members yet.
EXCURSION, MACHINE_EVENT = "excursion", "machine_event"
#: Finding statuses that are bookkeeping whatever their series: the one place the report says so.
BOOKKEEPING_STATUSES = frozenset(
    {Status.MISSING.value, Status.VERSION_CHANGE.value, Status.ENV_CHANGE.value, EXCURSION, MACHINE_EVENT}
)
#: A pending finding is bookkeeping when its series stopped long ago (:func:`stopped_long_ago`).
PENDING = Status.PENDING.value
#: The health kind of such a pending finding (a row kind of the health list, not a finding status).
STOPPED_PENDING = "pending_of_stopped_series"
#: The health kind of a step between two commits that ran the same compiled code in the
#: same environment (the analysis' ``same_compiled_code`` annotation, issue 24): the machine's.
SAME_CODE = SAME_CODE_KIND
#: The status of an event whose every series is bookkeeping (listed under Health, not as an event).
HEALTH_EVENT = "bookkeeping"
#: The confirm window when the report does not state one (the analysis' default ``confirm_after``).
CONFIRM_AFTER = 4
#: Health kinds in page order, with what each counts (``{window}``: :func:`confirm_window`).
HEALTH_KINDS = (
    (Status.MISSING.value, "series that stopped reporting"),
    (
        STOPPED_PENDING,
        "pending change(s) at the end of series that stopped: set aside by the analysis (its series has a "
        "'missing' finding) or more than {window} of their machine's commits before its newest (renamed or "
        "removed, so never to be confirmed)",
    ),
    (Status.VERSION_CHANGE.value, "benchmark version change(s) (version bookkeeping)"),
    (Status.ENV_CHANGE.value, "environment change(s)"),
    (EXCURSION, "excursion finding(s) that reverted"),
    (MACHINE_EVENT, "machine-event finding(s)"),
    (SAME_CODE, "step(s) between commits that ran the same compiled code: the machine moved, not the code"),
)


def kinds_of(per: dict, window: int) -> list[tuple[str, str]]:
    """``(kind, what)`` of the health kinds present in ``per`` (kind -> anything),
    in :data:`HEALTH_KINDS` order, any other kind after them under its own name:
    nothing counted is left off a list."""
    known = [(k, what.format(window=window)) for k, what in HEALTH_KINDS if k in per]
    return known + [(k, k) for k in sorted(set(per) - {k for k, _ in HEALTH_KINDS})]


def confirm_window(report: dict | None) -> int:
    """The analysis' confirm window in commits (``config.confirm_after``), else :data:`CONFIRM_AFTER`."""
    v = ((report or {}).get("config") or {}).get("confirm_after")
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else CONFIRM_AFTER


def commits_behind(model: SiteModel, key) -> int | None:
    """How many of its machine's commits came after series ``key``'s last point
    (0 when it has a point at the machine's newest commit); ``None`` for an
    unknown series or one without points."""
    sv = model.by_key.get(key)
    if sv is None or not len(sv.gx):
        return None
    mc = model.maps.get(sv.machine)
    if mc is None or not len(mc):
        return None
    return len(mc) - 1 - int(np.searchsorted(mc, int(sv.gx[-1])))


def stopped_long_ago(model: SiteModel, key, window: int) -> bool:
    """Whether series ``key`` stopped more than ``window`` of its machine's
    commits before the machine's newest: a series stopping exactly ``window``
    commits before is still live (a pending change there can still be confirmed)."""
    behind = commits_behind(model, key)
    return behind is not None and behind > window


def health_kind(model: SiteModel, status: str, key, window: int, annotations=()) -> str | None:
    """The health kind of a finding of ``status`` on series ``key`` with
    ``annotations`` (the report's ``[{kind, text}]``) (:data:`HEALTH_KINDS`),
    ``None`` for one the pages lead with. A step between the same compiled code
    in the same environment is :data:`SAME_CODE`: the machine moved."""
    if any(isinstance(a, dict) and a.get("kind") == SAME_CODE for a in annotations or ()):
        return SAME_CODE
    if status in BOOKKEEPING_STATUSES:
        return status
    if status == PENDING and stopped_long_ago(model, key, window):
        return STOPPED_PENDING
    return None


def classify(model: SiteModel) -> None:
    """Set ``health`` on every finding row: its :func:`health_kind` or ``""``."""
    window = confirm_window(model.report)
    for f in model.findings:
        if f.get("stopped"):  # set aside by the analysis: its series stopped after it
            f["health"] = STOPPED_PENDING
            continue
        f["health"] = health_kind(model, f["status"], f.get("skey"), window, f.get("annotations")) or ""


def lead_findings(model: SiteModel) -> list[dict]:
    """The finding rows the pages lead with (after :func:`classify`)."""
    return [f for f in model.findings if not f.get("health")]


def health_findings(model: SiteModel) -> list[dict]:
    """The bookkeeping finding rows (after :func:`classify`)."""
    return [f for f in model.findings if f.get("health")]


def _series(model: SiteModel, kd) -> tuple[str, str | None]:
    """Label and link of a report key (a key without its timing method matches any)."""
    k = key_tuple(kd)
    sv = model.by_key.get(k) if k else None
    if sv is None and k is not None:
        sv = next((v for kk, v in model.by_key.items() if kk[:3] == k[:3]), None)
    if sv is not None:
        return f"{sv.machine} / {sv.label}", sv.href
    kd = kd if isinstance(kd, dict) else {}
    return f"{kd.get('machine', '?')} / {kd.get('benchmark', '?')}", None


def _commit(model: SiteModel, h) -> dict:
    """A commit of a report as ``{hash (None without a page), short}``."""
    h = h if isinstance(h, str) else None
    return {"hash": h if h in model.cidx else None, "short": (h or "")[:8] or "-"}


def _range(model: SiteModel, cr) -> tuple[dict, dict]:
    cr = list(cr) + [None, None] if isinstance(cr, list) else [None, None]
    return _commit(model, cr[0]), _commit(model, cr[1])


def _ratio_text(ratio, direction) -> str:
    r = F.num(ratio)
    if r is None:
        return "n/a"
    return f"x{r:.4g}" + (f" ({direction})" if direction in ("slower", "faster") else "")


def excursions(model: SiteModel) -> list[dict]:
    """The report's ``health.excursions`` as rows (series label and link, the
    commits before, at and back, length, ratio, direction, machine event),
    newest first; ``[]`` for a report without them."""
    h = (model.report or {}).get("health")
    raw = h.get("excursions") if isinstance(h, dict) else None
    rows = []
    for e in raw if isinstance(raw, list) else []:
        if not isinstance(e, dict):
            continue
        label, href = _series(model, e.get("key"))
        c0, c1 = _range(model, e.get("commit_range"))
        direction = str(e.get("direction") or "")
        rows.append(
            {
                "label": label,
                "href": href,
                "c0": c0,
                "c1": c1,
                "back": _commit(model, e.get("back_at")),
                "length": e.get("length") if isinstance(e.get("length"), int) else None,
                "ratio": _ratio_text(e.get("ratio"), direction),
                "cls": "bad" if direction == "slower" else "good" if direction == "faster" else "note",
                "machine_event": str(e.get("machine_event") or ""),
                "order": model.cidx.get(c1["hash"], -1),
            }
        )
    rows.sort(key=lambda r: (-r["order"], r["label"]))
    return rows


#: Series named per machine event (the event's count is of all).
EVENT_KEYS_SHOWN = 5


def machine_events(model: SiteModel, machine: str | None = None) -> list[dict]:
    """The report's ``machine_events`` as rows (of ``machine`` only when given),
    newest first: id, machine and its page, the commits before, at and back,
    ``n_series`` of ``n_tested`` series moved, median ratio and direction, the
    series named (the first :data:`EVENT_KEYS_SHOWN`; every one on the
    machine's own page, where the others link), the reason; ``[]`` for a
    report without them."""
    raw = (model.report or {}).get("machine_events")
    rows = []
    for e in raw if isinstance(raw, list) else []:
        if not isinstance(e, dict) or (machine is not None and e.get("machine") != machine):
            continue
        m = str(e.get("machine") or "")
        c0, c1 = _range(model, e.get("commit_range"))
        direction = str(e.get("direction") or "")
        keys = [_series(model, k) for k in e.get("keys") or [] if isinstance(k, dict)]
        rows.append(
            {
                "id": str(e.get("id") or f"me-{m}-{c1['short']}"),
                "machine": m,
                "slug": model.mslug.get(m),
                "c0": c0,
                "c1": c1,
                "back": _commit(model, e.get("back_at")),
                "n_series": e.get("n_series") if isinstance(e.get("n_series"), int) else len(keys),
                "n_tested": e.get("n_tested") if isinstance(e.get("n_tested"), int) else None,
                "ratio": _ratio_text(e.get("median_ratio"), direction),
                "cls": "warn",  # the host, not the code: worth a look, never a regression's red
                "kind": "benchmark event" if e.get("scope") == "benchmark" else "machine event",
                "direction": direction,
                "series": [{"label": lb, "href": h} for lb, h in (keys if machine else keys[:EVENT_KEYS_SHOWN])],
                "n_keys": len(keys),
                "reason": str(e.get("reason") or ""),
                "order": model.cidx.get(c1["hash"], -1),
            }
        )
    rows.sort(key=lambda r: (-r["order"], r["id"]))
    return rows


def counts(model: SiteModel, rows: list[dict]) -> dict:
    """The health count: per kind of :data:`HEALTH_KINDS` the bookkeeping
    findings (``kinds``: ``(kind, what, n)``, kinds with none left out), the
    excursions of ``health.excursions`` (``excursions``), ``findings`` (the
    bookkeeping findings in all), ``total`` (findings and excursions) and
    ``window`` (the confirm window "long ago" is measured against)."""
    per: dict[str, int] = {}
    for f in rows:
        per[f["health"]] = per.get(f["health"], 0) + 1
    n_exc = len(excursions(model))
    window = confirm_window(model.report)
    return {
        "kinds": [(k, what, per[k]) for k, what in kinds_of(per, window)],
        "findings": len(rows),
        "excursions": n_exc,
        "total": len(rows) + n_exc,
        "window": window,
    }


def is_health_series(model: SiteModel, status: str, key, annotations=()) -> bool:
    """Whether an event's series of ``status`` is bookkeeping (:func:`health_kind`)."""
    return health_kind(model, status, key, confirm_window(model.report), annotations) is not None


def chart_marks(marks: dict, report: dict | None) -> dict:
    """``marks`` (per series key, the findings drawn on its chart,
    :func:`harness.report.model.marks`) with each excursion of the report's
    ``health.excursions`` added as an :data:`EXCURSION` mark from its first
    commit to the commit where it was back, its reason saying it reverted."""
    h = (report or {}).get("health")
    for e in (h.get("excursions") if isinstance(h, dict) else None) or []:
        k = key_tuple(e.get("key")) if isinstance(e, dict) else None
        cr = e.get("commit_range") if k else None
        if not isinstance(cr, list) or len(cr) != 2 or not isinstance(e.get("back_at"), str):
            continue
        n = e.get("length") if isinstance(e.get("length"), int) else "a few"
        reason = f"excursion of {n} point(s), {_ratio_text(e.get('ratio'), e.get('direction'))}, that reverted: not a regression"
        marks.setdefault(k, []).append(
            {
                "status": EXCURSION,
                "c0": cr[1],
                "c1": e["back_at"],
                "ratio": F.num(e.get("ratio")),
                "ci": None,
                "reason": reason,
            }
        )
    return marks
