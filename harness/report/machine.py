"""``machine/<machine>.html``: the machine's description, calibration, its
machine events (series that moved together and came back: the host, not the
code), its control kernels (frozen code measured with every run: when they
move, the machine moved) and the latest result of every one of its series."""

from __future__ import annotations

from typing import Iterator

from harness.core.model import is_control
from harness.report import attention, bookkeeping
from harness.report import fmt as F
from harness.report.model import SiteModel, peaks_text
from harness.report.render import Page

#: A matmul rate below this share of the fp32 one is labelled as slow (not a roof for fp32 kernels).
SLOW_SHARE = 0.1


def slow_note(dtype: str, cal: dict) -> str:
    """`` (far below fp32: ...)`` for a matmul dtype measured at under
    :data:`SLOW_SHARE` of the fp32 rate (a CPU's fp16 matmul, converted or
    emulated without fp16 units); empty otherwise."""
    mm = cal.get("matmul") or {}
    tf, ref = F.num((mm.get(dtype) or {}).get("tflops")), F.num((mm.get("fp32") or {}).get("tflops"))
    if dtype == "fp32" or not tf or not ref or tf >= SLOW_SHARE * ref:
        return ""
    return f" ({ref / tf:.3g}x below fp32: converted or emulated on this device, a roof only for {dtype} kernels)"


def calibration(cal: dict | None) -> dict | None:
    """The calibration block of a machine page: copy bandwidth, matmul rates, date."""
    if not cal:
        return None
    return {
        "copy_gbps": F.fmt(F.num((cal.get("copy") or {}).get("gbps"))),
        # read and add exist from the calibrations that measure them (older ones: None, not shown)
        **{
            f"{k}_gbps": F.fmt(F.num(cal[k].get("gbps"))) if isinstance(cal.get(k), dict) else None
            for k in ("read", "add")
        },
        "matmul": [
            (k, F.flops_rate(F.num((v or {}).get("tflops"))) + slow_note(k, cal))
            for k, v in sorted((cal.get("matmul") or {}).items())
        ],
        "date": str(cal.get("date") or ""),
        "under_measured": F.badge(
            "under-measured",
            f"{cal['under_measured_points']} point(s) above these "
            f"ceilings, e.g. {(cal.get('under_measured') or [{}])[0].get('reason')}",
            css="warn",
        )
        if cal.get("under_measured_points")
        else "",
    }


#: Machine-description fields that are byte counts, shown in GiB.
BYTES_FIELDS = ("ram",)


def info_rows(info: dict, seen: dict) -> list[tuple[str, str]]:
    """The machine description as ``(field, text)``: byte counts in GiB; a field
    whose value changed over the results (``seen``: every value of each
    environment field, oldest first) lists all of them, newest last."""
    out = []
    for k, v in sorted(info.items()):
        if v in (None, ""):
            continue
        text = F.gib(v) if k in BYTES_FIELDS else str(v)
        vals = [x for x in seen.get(k, []) if x not in (None, "", "None")]
        if len(vals) > 1 and k not in BYTES_FIELDS:
            text = ", ".join(vals) + f" ({len(vals)} versions seen, newest last)"
        out.append((k, text))
    for k in sorted(set(seen) - set(info)):  # changed over the results, not in machine.json
        vals = [x for x in seen[k] if x not in (None, "", "None")]
        if len(vals) > 1:
            out.append((k, ", ".join(vals) + f" ({len(vals)} versions seen, newest last)"))
    return out


def pages(model: SiteModel) -> Iterator[Page]:
    current = attention.current_keys(model)
    for m in model.machines:
        p = model.parts[m]
        info = p["info"]
        # series still reporting first, then the stopped ones, marked stale
        rows = [dict(model.latest_row(s, "../"), stale=s.key not in current) for s in model.series_of(m)]
        rows.sort(key=lambda r: r["stale"])
        yield Page(
            f"machine/{model.mslug[m]}.html",
            "machine.html",
            "../",
            dict(
                title=f"{m} - kernelwatch",
                machine=m,
                info=info_rows(info, p.get("env_seen") or {}),
                calibration=calibration(p["calibration"]),
                peaks=peaks_text(model.kinds[m], p["calibration"]),
                rows=rows,
                # the frozen control kernels (kernels/control.py): their move is the machine's
                controls=[r for r in rows if is_control(r["benchmark"])],
                n_stale=sum(1 for r in rows if r["stale"]),
                stale_badge=F.badge(
                    "stale", "stopped reporting: no result at the newest commits (a missing finding)", css="warn"
                ),
                slug=model.mslug[m],
                machine_events=bookkeeping.machine_events(model, m),
            ),
        )
