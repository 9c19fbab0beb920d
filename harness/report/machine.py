"""``machine/<machine>.html``: the machine's description, calibration, its
machine events (series that moved together and came back: the host, not the
code), its control kernels (frozen code measured with every run: when they
move, the machine moved) and the latest result of every one of its series."""

from __future__ import annotations

from typing import Iterator

from harness.core.model import is_control
from harness.report import attention, bookkeeping, ceilings
from harness.report import fmt as F
from harness.report.model import SiteModel, peaks_text
from harness.report.render import Page

#: A matmul rate below this share of the fp32 one is labelled as slow (not a roof for fp32 kernels).
SLOW_SHARE = 0.1


def slow_note(dtype: str, cal: dict) -> str:
    """`` (far below fp32: ...)`` for a matmul dtype measured at under
    :data:`SLOW_SHARE` of the fp32 rate (a CPU's fp16 matmul, converted or
    emulated without fp16 units); empty otherwise."""
    mm = cal.get("matmul") if isinstance(cal.get("matmul"), dict) else {}
    fig, f32 = mm.get(dtype), mm.get("fp32")
    tf = F.num(fig.get("tflops")) if isinstance(fig, dict) else None
    ref = F.num(f32.get("tflops")) if isinstance(f32, dict) else None
    if dtype == "fp32" or not tf or not ref or tf >= SLOW_SHARE * ref:
        return ""
    return f" ({ref / tf:.3g}x below fp32: converted or emulated on this device, a roof only for {dtype} kernels)"


def calibration(cal: dict | None) -> dict | None:
    """The calibration block of a machine page: each ceiling (``figures``:
    ``(name, text, badges)``; bandwidth in GB/s, matmul rates in the unit that
    reads, each with its own :func:`harness.report.ceilings.figure_doubts` as
    badges), the date, and the calibration's doubts (``badges``:
    :func:`harness.report.ceilings.badges`, under-measured among them)."""
    if not cal:
        return None
    figs = []
    for name, fig in ceilings.named_figures(cal):
        v = (
            F.num((fig or {}).get("gbps" if name in ceilings.BANDWIDTH else "tflops"))
            if isinstance(fig, dict)
            else None
        )
        if name in ceilings.BANDWIDTH:
            text = f"{F.fmt(v)} GB/s" if v is not None else "n/a"
        else:
            # the dtype key as stored ("matmul " + key: an empty or spaced key has no second word)
            text = F.flops_rate(v) + slow_note(name[len("matmul ") :], cal)
        figs.append((name, text, [F.badge(st, why, css="warn") for st, why in ceilings.figure_doubts(fig, name)]))
    return {
        "figures": figs,
        # read and add exist from the calibrations that measure them (older ones: the copy only)
        "several_bandwidths": sum(1 for k in ceilings.BANDWIDTH if k in cal) > 1,
        "date": str(cal.get("date") or ""),
        "badges": ceilings.badges(cal),
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


#: Providers that time a GPU only: on a CPU machine their cases are not in the results.
GPU_ONLY_PROVIDERS = ("triton", "cupy")


def _unquoted(v: str) -> str:
    """An asv parameter value without the one pair of quotes its repr carries
    (``'torch'`` reads ``torch``; ``'"q"'`` keeps its own quotes)."""
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v


def providers_note(model: SiteModel, m: str) -> str:
    """For a CPU machine of our own runs (its series carry kernelwatch records)
    whose results name providers but none of :data:`GPU_ONLY_PROVIDERS`: which
    providers were timed and why the others are absent; ``""`` otherwise (a GPU,
    a foreign asv history, or GPU providers present). A newcomer's CPU site showed
    only torch providers and said nowhere why."""
    if model.kinds.get(m) != "cpu":
        return ""
    mine = model.series_of(m)
    if not any((s.latest or {}).get("has_record") for s in mine):
        return ""
    seen = sorted(
        {
            _unquoted(str(p[1]))
            for s in mine
            for p in s.params
            if isinstance(p, (tuple, list)) and len(p) == 2 and p[0] == "provider"
        }
    )
    if not seen or any(p.lower() in GPU_ONLY_PROVIDERS for p in seen):
        return ""
    return (
        f"Providers timed on this CPU: {', '.join(seen)}. Triton and CuPy cases need a GPU: without one "
        "Triton kernels run under TRITON_INTERPRET=1 for correctness only (the tests) and are never timed, "
        "and CuPy is not run, so their cases are not in these results."
    )


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
                refused=None if p["calibration"] else ceilings.refused(model.results_dir, m),
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
                providers_note=providers_note(model, m),
            ),
        )
