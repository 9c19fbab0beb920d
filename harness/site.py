"""``kernelwatch publish``: results -> static HTML (jinja2, autoescape on).

A pure transform: the same results give the same bytes (sorted iteration, no
build timestamps). Templates live in ``site/templates`` and receive finished
numbers; scripts and styles ship from ``site/static`` (ECharts is vendored with
its licence, no CDN).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from harness import results as _results

SITE_ROOT = Path(__file__).resolve().parent.parent / "site"
METRIC_KEYS = ("tflops", "gbps", "mfu", "bw_util", "sol")


@dataclass
class PublishReport:
    out: Path
    index: Path
    pages: int
    series: int
    machines: list[str]
    usable: bool
    errors: list[str] = field(default_factory=list)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(SITE_ROOT / "templates")),
        autoescape=jinja2.select_autoescape(["html", "xml", "j2"], default_for_string=True, default=True),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = fmt
    env.filters["pct"] = pct
    env.filters["tojson_sorted"] = lambda v: jinja2.utils.htmlsafe_json_dumps(v, dumps=lambda o, **k: json.dumps(o, sort_keys=True, allow_nan=False))
    return env


def fmt(x, digits: int = 4) -> str:
    """Significant-digit formatting; ``None`` renders as ``n/a``."""
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return "n/a"
    return f"{x:.{digits}g}"


def pct(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:.1f}%"


def bench_slug(name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]
    return f"{safe}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def _date(ms) -> str | None:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def _row_for(series: _results.Series, rs: _results.ResultSet) -> dict | None:
    """The newest point of a series with its metrics (from our record when present)."""
    if not series.points:
        return None
    last = series.points[-1]
    valid = [p for p in series.points if p.value is not None]
    newest_valid = valid[-1] if valid else None
    rec = newest_valid.record if newest_valid else None
    m = (rec or {}).get("metrics") or {}
    status = m.get("status") if rec else None
    commit = rs.commits.get(last.commit)
    return {
        "benchmark": series.key.benchmark,
        "params": series.key.label()[len(series.key.benchmark):].strip("()"),
        "slug": bench_slug(series.key.benchmark),
        "commit": last.commit[:8],
        "date": _date(commit.date_ms if commit else None),
        "failed": last.value is None,
        "fail_reason": last.reason,
        "value": newest_valid.value if newest_valid else None,
        "unit": series.unit,
        "p50_ms": newest_valid.value * 1e3 if (newest_valid and series.unit == "seconds") else None,
        "tflops": m.get("tflops"),
        "gbps": m.get("gbps"),
        "mfu": m.get("mfu"),
        "bw_util": m.get("bw_util"),
        "sol": m.get("sol"),
        "bound": m.get("bound"),
        "status": status,
        "status_reason": m.get("reason"),
        "has_record": rec is not None,
    }


def publish(results_dir: Path, out: Path, repo: Path | None = None) -> PublishReport:
    """Build the site for ``results_dir`` into ``out``.

    Raises
    ------
    FileNotFoundError
        When ``results_dir`` does not exist.
    """
    rs = _results.load(results_dir, repo=repo)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()

    order = rs.commit_order()
    commits = []
    for h in order:
        c = rs.commits[h]
        commits.append({"hash": h, "short": h[:8], "date": _date(c.date_ms), "subject": c.subject or "", "author": c.author or ""})

    machines = []
    for name in sorted(rs.machines):
        info = rs.machines[name]
        rows = [r for s in sorted(rs.series.values(), key=lambda s: (s.key.benchmark, s.key.params, s.key.timing or ""))
                if s.key.machine == name for r in [_row_for(s, rs)] if r]
        cal = rs.calibrations.get(name)
        machines.append({
            "name": name,
            "info": {k: str(v) for k, v in sorted(info.items()) if v not in (None, "")},
            "rows": rows,
            "calibration": {
                "copy_gbps": (cal or {}).get("copy", {}).get("gbps"),
                "matmul": {k: v.get("tflops") for k, v in sorted(((cal or {}).get("matmul") or {}).items())},
                "date": (cal or {}).get("date"),
            } if cal else None,
        })

    # One page per benchmark, every machine and parameter combination on it.
    by_bench: dict[str, list[_results.Series]] = {}
    for s in rs.series.values():
        by_bench.setdefault(s.key.benchmark, []).append(s)
    pages = 0
    (out / "bench").mkdir(exist_ok=True)
    for bname in sorted(by_bench):
        series_list = sorted(by_bench[bname], key=lambda s: (s.key.machine, s.key.params, s.key.timing or ""))
        payload = []
        for s in series_list:
            pts = []
            for p in s.points:
                m = ((p.record or {}).get("metrics") or {})
                pts.append({
                    "commit": p.commit, "value": p.value, "reason": p.reason,
                    "ci": list(p.ci_99) if p.ci_99 else None,
                    **{k: m.get(k) for k in METRIC_KEYS},
                })
            payload.append({"machine": s.key.machine, "label": s.key.label()[len(bname):].strip("()") or bname,
                            "unit": s.unit, "points": pts})
        used = sorted({p["commit"] for s in payload for p in s["points"]}, key=lambda h: order.index(h) if h in order else len(order))
        html = env.get_template("benchmark.html").render(
            title=bname, benchmark=bname, series=payload,
            commits=[c for c in commits if c["hash"] in set(used)],
            commit_index={h: i for i, h in enumerate(used)},
            root="../",
        )
        (out / "bench" / f"{bench_slug(bname)}.html").write_text(html, encoding="utf-8")
        pages += 1

    index = out / "index.html"
    index.write_text(env.get_template("index.html").render(
        title="kernelwatch", machines=machines, commits=commits, errors=rs.errors, root="",
        results_dir=str(results_dir),
    ), encoding="utf-8")
    pages += 1

    static_out = out / "static"
    if static_out.exists():
        shutil.rmtree(static_out)
    shutil.copytree(SITE_ROOT / "static", static_out)
    return PublishReport(out=out, index=index, pages=pages, series=len(rs.series), machines=sorted(rs.machines),
                         usable=rs.usable(), errors=list(rs.errors))
