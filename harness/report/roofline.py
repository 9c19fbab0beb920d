"""``roofline/<machine>.html``: a log-log roofline of one machine.

Ceilings from the datasheet (:mod:`harness.core.devices`) and from the
machine's calibration, the latest point of each kernel x parameters (its
arithmetic intensity and TFLOP/s as the records or the dataset derived them),
and arrows from a chosen earlier commit.
"""

from __future__ import annotations

from typing import Iterator

from harness.core.devices import lookup_spec
from harness.report import fmt as F
from harness.report.model import SiteModel
from harness.report.render import Page


def ceilings(model: SiteModel, m: str, infos: list) -> list[dict]:
    """Datasheet (spec table) and measured (calibration) ceilings of machine ``m``."""
    out = []
    gpu = str(model.parts[m]["info"].get("gpu") or "")
    if not gpu or gpu == "none":
        gpu = next((s.latest["device"] for s in infos if s.latest and s.latest.get("device")), "")
    spec = lookup_spec(gpu, warn=False) if gpu and gpu != "none" else None
    used = sorted({(str(s.latest["dtype"]), s.latest["uses_tensor_cores"]) for s in infos
                   if s.latest and s.latest.get("dtype")})
    if spec is not None:
        comp = {}
        for dtype, tc in used:
            pk = spec.peak_for(dtype, tc)
            if pk:
                name = dtype if tc else ("fp64" if dtype == "fp64" else "fp32")
                comp[f"{name} {'tensor' if tc else 'vector'}"] = pk
        if not comp:
            comp = {k: v for k, v in spec.peak_tflops.items()}
        out.append({"kind": "datasheet", "label": f"datasheet {spec.sku}", "gbps": spec.peak_gbps,
                    "compute": sorted(comp.items()), "source": spec.source})
    cal = model.parts[m]["calibration"]
    if cal:
        gb = F.num((cal.get("copy") or {}).get("gbps"))
        comp = [(f"{k} matmul", F.num((v or {}).get("tflops"))) for k, v in sorted((cal.get("matmul") or {}).items())]
        comp = [(k, v) for k, v in comp if v]
        if gb or comp:
            out.append({"kind": "measured", "label": f"measured {str(cal.get('date') or '')[:10]}", "gbps": gb,
                        "compute": comp, "source": "kernelwatch calibrate"})
    return out


def points(infos: list) -> tuple[list[dict], list[dict], int]:
    """Roofline points (latest of each series with intensity and TFLOP/s), the
    zero-flop kernels (listed by bandwidth instead), and how many have no cost."""
    pts, zero_flop, no_cost = [], [], 0
    for s in infos:
        la = s.latest or {}
        met = la.get("metrics") or {}
        ai, tf = la.get("ai"), met.get("tflops")
        label = f"{s.benchmark}({F.params_text(s.params)})"
        if ai is None or tf is None:
            no_cost += 1
            continue
        if ai <= 0 or tf <= 0:
            zero_flop.append({"label": label, "href": "../" + s.href,
                              "gbps": F.fmt(met.get("gbps")), "bw_util": F.util(met.get("bw_util"))})
            continue
        base = {h: [b[2], b[3], b[1][:8]] for h, b in sorted(s.base.items())
                if b[2] and b[3] and b[2] > 0 and b[3] > 0}
        pts.append({"id": s.sid, "label": label, "case": s.cid, "bench": F.bench_slug(s.benchmark),
                    "ai": ai, "tflops": tf, "sol": met.get("sol"), "bound": la.get("bound"),
                    "commit": (la.get("value_commit") or "")[:8], "base": base})
    return pts, zero_flop, no_cost


def pages(model: SiteModel) -> Iterator[Page]:
    for m in model.machines:
        infos = model.series_of(m)
        pts, zero_flop, no_cost = points(infos)
        ceil = ceilings(model, m, infos)
        yield Page(f"roofline/{model.mslug[m]}.html", "roofline.html", "../", dict(
            title=f"roofline {m} - kernelwatch", machine=m, data={"machine": m, "points": pts, "ceilings": ceil},
            ceilings=ceil, n_points=len(pts), zero_flop=zero_flop, no_cost=no_cost, slug=model.mslug[m],
            candidates=model.candidates))
