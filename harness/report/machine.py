"""``machine/<machine>.html``: the machine's description, calibration and the
latest result of every one of its series."""

from __future__ import annotations

from typing import Iterator

from harness.report import fmt as F
from harness.report.model import SiteModel
from harness.report.render import Page


def calibration(cal: dict | None) -> dict | None:
    """The calibration block of a machine page: copy bandwidth, matmul rates, date."""
    if not cal:
        return None
    return {"copy_gbps": F.fmt(F.num((cal.get("copy") or {}).get("gbps"))),
            "matmul": [(k, F.flops_rate(F.num((v or {}).get("tflops"))))
                       for k, v in sorted((cal.get("matmul") or {}).items())],
            "date": str(cal.get("date") or ""),
            "under_measured": F.badge("under-measured", f"{cal['under_measured_points']} point(s) above these "
                                      f"ceilings, e.g. {(cal.get('under_measured') or [{}])[0].get('reason')}",
                                      css="warn") if cal.get("under_measured_points") else ""}


#: Machine-description fields that are byte counts, shown in GiB.
BYTES_FIELDS = ("ram",)


def pages(model: SiteModel) -> Iterator[Page]:
    for m in model.machines:
        p = model.parts[m]
        info = p["info"]
        yield Page(f"machine/{model.mslug[m]}.html", "machine.html", "../", dict(
            title=f"{m} - kernelwatch", machine=m,
            info=[(k, F.gib(v) if k in BYTES_FIELDS else str(v)) for k, v in sorted(info.items()) if v not in (None, "")],
            calibration=calibration(p["calibration"]), rows=[model.latest_row(s, "../") for s in model.series_of(m)],
            slug=model.mslug[m]))
