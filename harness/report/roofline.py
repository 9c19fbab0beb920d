"""``roofline/<machine>.html``: a log-log roofline of one machine.

Ceilings from the datasheet (:mod:`harness.core.devices`) and from the
machine's calibration, the latest point of each kernel x parameters (its
arithmetic intensity and TFLOP/s as the records or the dataset derived them),
each labelled (op and parameters) and listed under the chart with its distance
to the roof, furthest first; arrows from a chosen earlier commit.
"""

from __future__ import annotations

from typing import Iterator

from harness.core import guards
from harness.core.devices import lookup_spec
from harness.report import ceilings as ceilings_doubt
from harness.report import fmt as F
from harness.report.machine import slow_note
from harness.report.model import SiteModel
from harness.report.render import Page


def ceilings(model: SiteModel, m: str, infos: list) -> list[dict]:
    """Datasheet (spec table) and measured (calibration) ceilings of machine ``m``."""
    out = []
    gpu = str(model.parts[m]["info"].get("gpu") or "")
    if not gpu or gpu == "none":
        gpu = next((s.latest["device"] for s in infos if s.latest and s.latest.get("device")), "")
    spec = lookup_spec(gpu, warn=False) if gpu and gpu != "none" else None
    used = sorted(
        {(str(s.latest["dtype"]), s.latest["uses_tensor_cores"]) for s in infos if s.latest and s.latest.get("dtype")}
    )
    if spec is not None:
        comp = {}
        for dtype, tc in used:
            pk = spec.peak_for(dtype, tc)
            if pk:
                name = dtype if tc else ("fp64" if dtype == "fp64" else "fp32")
                comp[f"{name} {'tensor' if tc else 'vector'}"] = pk
        if not comp:
            comp = {k: v for k, v in spec.peak_tflops.items()}
        out.append(
            {
                "kind": "datasheet",
                "label": f"datasheet {spec.sku}",
                "gbps": spec.peak_gbps,
                "compute": sorted(comp.items()),
                "source": spec.source,
            }
        )
    cal = model.parts[m]["calibration"]
    if cal:
        gb = guards.memory_ceiling_gbps(cal)
        bw = ceilings_doubt.used_figures(cal, {"bound": "memory"}, "sol")
        dtypes = {d for d, _ in used}
        comp, other = [], []
        dtype_of: dict[str, str] = {}
        for k, v in sorted((cal.get("matmul") or {}).items()):
            dtype_of[f"{k} matmul"] = k
            tf = F.num((v or {}).get("tflops"))
            if tf:
                # a roof only for kernels of its dtype: a CPU's fp16 matmul (converted or emulated, no
                # fp16 units) runs far below its fp32 one and is no roof for the fp32 kernels
                (comp if not dtypes or k in dtypes else other).append((f"{k} matmul", tf))
        if gb or comp or other:
            out.append(
                {
                    "kind": "measured",
                    "label": f"measured {str(cal.get('date') or '')[:10]}",
                    # under-measured, contended, unstable: the roof is drawn, its doubts beside it (the
                    # chart's line label only says "doubtful": the badges above the chart say why)
                    "doubts": [F.badge(st, why, css="warn") for st, why in model.cal_doubts.get(m, [])],
                    "doubt_text": ", ".join(st for st, _ in model.cal_doubts.get(m, [])),
                    # per line (the bandwidth roof up to one matmul's): doubtful when one of the two
                    # ceilings it is drawn from is, or the whole calibration (not for an unused figure)
                    "line_doubt": {
                        # by the stored dtype key, not the label split again (a key with a space)
                        name: bool(ceilings_doubt.doubts_for(cal, bw + ([f"matmul {dtype_of[name]}"] if name else [])))
                        for name in [t for t, _ in comp] or [""]
                    },
                    "gbps": gb,
                    "compute": comp,
                    "source": "kernelwatch calibrate",
                    "not_drawn": [
                        (
                            k,
                            tf,
                            f"{k} matmul: not drawn, no kernel here is "
                            f"{dtype_of[k]} (kernels: {', '.join(sorted(dtypes))})",
                            slow_note(dtype_of[k], cal),
                        )
                        for k, tf in other
                    ],
                }
            )
    return out


def short_label(benchmark: str, params) -> str:
    """The op and its parameter values, for a label beside a point:
    ``suite.vector_add.track_time`` with ``provider=triton, shape=4096`` reads
    ``vector_add triton 4096``; ``benchmarks.Dgemm.time_dgemm(100, d)`` reads ``Dgemm 100 d``."""
    parts = benchmark.split(".")
    if len(parts) > 1 and parts[-1].split("_", 1)[0] in ("time", "track", "mem", "peakmem"):
        parts = parts[:-1]
    op = parts[-1] if parts else benchmark
    vals = [str(v).strip("'\"") for k, v in params if k != "timing"]
    return " ".join([op] + vals)


#: The tag of a point whose working set fits in the cache: no DRAM roof holds it (drawn hollow).
CACHE_TAG = "cache-resident"


def no_roof_reason(la: dict) -> tuple[str, str]:
    """Why the newest point ``la`` of a series (:mod:`harness.report.series`) has
    no roof (no ``sol``), as ``(tag, reason)``, from what its record carries:
    a cache-resident working set (no DRAM roof for bytes that stay on chip,
    :func:`harness.core.metrics.cache_note`), no peak for its device (the read
    guards' reason: no datasheet row, no calibration), a foreign result (no
    record of ours, so no peaks), or a ceiling without the term its bound needs."""
    if la.get("cache_note"):
        return CACHE_TAG, str(la["cache_note"])
    if not la.get("has_record"):
        return "no peaks", "a foreign result (no kernelwatch record): no peaks are known for its machine, so no sol"
    if la.get("status_reason"):
        return "no peaks", str(la["status_reason"])
    if not la.get("peaks_source"):
        return "no peaks", "no datasheet peak and no calibration for this device: no sol"
    return "no roof", (
        f"the ceilings ({la['peaks_source']}) have no term for this kernel's {la.get('bound') or 'bound'}: no sol"
    )


def no_roof_notes(dist: list[dict]) -> list[tuple[str, str, list[str]]]:
    """The footnotes under the distance table: one per reason a row has no roof,
    as ``(tag, reason, kernels)`` (the rows' short labels, sorted). A reason that
    already starts with its tag loses it ("n/a, cache-resident: cache-resident:
    the 1 MiB ..." on a newcomer's page, which also could not tell the rows apart)."""
    groups: dict[tuple[str, str], set[str]] = {}
    for d in dist:
        if not d["why"]:
            continue
        why = d["why_full"]
        if why.startswith(d["why"] + ": "):
            why = why[len(d["why"]) + 2 :]
        groups.setdefault((d["why"], why), set()).add(str(d["short"]))
    return [
        (tag, why, sorted(kernels, key=F.natural_key))
        for (tag, why), kernels in sorted(groups.items(), key=lambda kv: F.natural_key(kv[0]))
    ]


def distances(pts: list[dict]) -> list[dict]:
    """The distance to the roof per kernel, furthest first: the roof (achieved
    TFLOP/s / ``sol``, ``sol = floor time / time`` from :mod:`harness.core.metrics`)
    and how many times below it the kernel runs; kernels without ``sol`` last."""
    rows = []
    for i, p in enumerate(pts):
        sol = p.get("sol")
        ok = sol is not None and sol > 0
        rows.append(
            {
                "index": i,
                "label": p["label"],
                "short": p["short"],
                "href": p["href"],
                "ai": F.fmt(p["ai"], 3),
                "tflops": F.fmt(p["tflops"]),
                "roof": F.fmt(p["tflops"] / sol) if ok else "n/a",
                "sol": p.get("sol_cell", F.util(sol)),
                "why": "" if ok else (p.get("no_roof") or ("no roof", "no sol"))[0],
                "why_full": "" if ok else (p.get("no_roof") or ("no roof", "no sol"))[1],
                "status": F.badge(p.get("status"), p.get("status_reason")),
                "below": f"{1 / sol:.3g}x" if ok else "n/a",
                # the factor is below the roof; the roof itself is doubtful (was the calibration's
                # own "above ceiling" glued to the factor: "7.84x above ceiling", newcomer trial)
                "roof_doubt": F.badge(F.DOUBTFUL_CEILING_LABEL, f"{p['doubt'][0]}: {p['doubt'][1]}", css="warn")
                if ok and p.get("doubt")
                else "",
                "bound": p.get("bound") or "n/a",
                "doubt": "above the roof: check the cost model, the peak or the timing" if ok and sol > 1 else "",
                "_key": (0, sol) if ok else (1, 0.0),
            }
        )
    rows.sort(key=lambda r: (r["_key"], r["label"]))
    for r in rows:
        del r["_key"]
    return rows


def points(infos: list, doubts=None) -> tuple[list[dict], list[dict], int, list[dict]]:
    """Roofline points (latest of each series with intensity and TFLOP/s), the
    zero-flop kernels (listed by bandwidth instead), how many have no cost, and
    the kernels not plotted because a read guard withheld their figures (above
    the measured ceiling, contended, ...: each with its badge and reason, never
    left off without a word). ``doubts``: ``(newest point, figure) -> ``the
    calibration doubts of the ceilings that figure was computed against
    (:meth:`harness.report.model.SiteModel.figure_doubts`), carried by each
    ``sol`` and ``bw_util`` against the calibration (``sol_cell``); none when
    not given."""
    doubts = doubts or (lambda la, kind: [])
    pts, zero_flop, no_cost, withheld = [], [], 0, []
    for s in infos:
        la = s.latest or {}
        met = la.get("metrics") or {}
        ai, tf = la.get("ai"), met.get("tflops")
        label = f"{s.benchmark}({F.params_text(s.params)})"
        if (ai is None or tf is None) and la.get("status") not in (None, "ok"):
            withheld.append(
                {
                    "label": label,
                    "href": "../" + s.href,
                    "status": F.badge(la.get("status"), la.get("status_reason")),
                    "reason": str(la.get("status_reason") or la.get("status")),
                }
            )
            continue
        if ai is None or tf is None:
            no_cost += 1
            continue
        if ai <= 0 or tf <= 0:
            zero_flop.append(
                {
                    "label": label,
                    "href": "../" + s.href,
                    "gbps": F.fmt(met.get("gbps")),
                    "bw_util": ceilings_doubt.util_cell(doubts(la, "bw_util"), la, met.get("bw_util")),
                    "status": F.badge(la.get("status"), la.get("status_reason")),
                }
            )
            continue
        base = {h: [b[2], b[3], b[1][:8]] for h, b in sorted(s.base.items()) if b[2] and b[3] and b[2] > 0 and b[3] > 0}
        pts.append(
            {
                "id": s.sid,
                "label": label,
                "short": short_label(s.benchmark, s.params),
                "href": "../" + s.href,
                "case": s.cid,
                "bench": F.bench_slug(s.benchmark),
                "ai": ai,
                "tflops": tf,
                "sol": met.get("sol"),
                "sol_cell": ceilings_doubt.util_cell(doubts(la, "sol"), la, met.get("sol")),
                # the roof and the distance to it are against the same doubtful ceilings
                "doubt": doubts(la, "sol")[0] if doubts(la, "sol") and ceilings_doubt.against_calibration(la) else None,
                "bound": la.get("bound"),
                "status": F.label(la.get("status")) if la.get("status") not in (None, "ok") else None,
                "status_reason": la.get("status_reason"),
                "commit": (la.get("value_commit") or "")[:8],
                "base": base,
                "no_roof": list(no_roof_reason(la)) if not (met.get("sol") or 0) > 0 else None,
            }
        )
    return pts, zero_flop, no_cost, withheld


#: Why a machine of each device kind (:func:`harness.report.model.device_kind`) has no ceiling.
NO_CEILINGS_WHY = {
    "cuda": "no datasheet row for this GPU and no calibration stored",
    "cpu": "a CPU has no datasheet peak and no calibration is stored",
    None: "the results do not name the device and no calibration is stored",
}


def is_local(machine: str) -> bool:
    """Whether ``machine`` is this host's: its name starts with this host's part
    of a machine name (``KERNELWATCH_HOST`` or the hostname, as
    :func:`harness.core.devices.identify` names machines). A machine that is not
    can only be calibrated by its own runner, so its page does not tell the
    reader to run ``kernelwatch calibrate`` here."""
    import os
    import socket

    from harness.core.devices import machine_name_for

    host = os.environ.get("KERNELWATCH_HOST") or socket.gethostname()
    return machine.startswith(machine_name_for(host, "cpu", "")[: -len("cpu")])


def pages(model: SiteModel) -> Iterator[Page]:
    for m in model.machines:
        infos = model.series_of(m)
        pts, zero_flop, no_cost, withheld = points(infos, lambda la, kind, m=m: model.figure_doubts(m, la, kind))
        ceil = ceilings(model, m, infos)
        dist = distances(pts)
        for p in pts:
            p.pop("sol_cell", None)  # table cells, not chart data
            p.pop("doubt", None)
        yield Page(
            f"roofline/{model.mslug[m]}.html",
            "roofline.html",
            "../",
            dict(
                title=f"roofline {m} - kernelwatch",
                machine=m,
                data={"machine": m, "points": pts, "ceilings": ceil},
                ceilings=ceil,
                no_ceilings_why=NO_CEILINGS_WHY[model.kinds[m]],
                local=is_local(m),
                n_points=len(pts),
                distances=dist,
                no_roof=no_roof_notes(dist),
                zero_flop=zero_flop,
                no_cost=no_cost,
                withheld=withheld,
                n_cache=sum(1 for p in pts if (p["no_roof"] or [""])[0] == CACHE_TAG),
                n_above=sum(1 for p in pts if (p["sol"] or 0) > 1),
                slug=model.mslug[m],
                candidates=model.candidates,
            ),
        )
