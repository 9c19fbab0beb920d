"""``profiles/<name>/index.html``: the profiles and triages stored in the results directory.

``kernelwatch profile --results DIR`` and ``kernelwatch triage --results DIR``
copy their report (``profile.json.gz`` / ``triage.json.gz``), markdown and
Chrome/Perfetto traces into ``DIR/kernelwatch-profiles/<name>/``. This module
reads them (:func:`load`), gives every benchmark case its profile and triage
links and every finding the triage of its commit range (:func:`attach`), writes
one page per stored run and copies its traces next to it (:func:`write`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.core import records
from harness.core.files import read_gzip_json
from harness.report import fmt as F
from harness.report.render import Page


def _case_key(benchmark: str, params) -> tuple:
    items = params.items() if isinstance(params, dict) else (tuple(p) for p in params or [])
    return (benchmark, tuple(sorted((str(k), str(v)) for k, v in items)))


def load(results_dir) -> tuple[list[dict], list[str]]:
    """Stored profiles and triages, newest name last: ``(entries, errors)``; an
    unreadable entry is reported by path and skipped, the others still load."""
    base = Path(results_dir) / records.PROFILES_SUBDIR if results_dir else None
    out, errors = [], []
    if base is None or not base.is_dir():
        return out, errors
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        for kind in ("triage", "profile"):
            path = d / f"{kind}.json.gz"
            if not path.exists():
                continue
            try:
                rep = read_gzip_json(path)  # bounded; a FIFO is refused, never waited on
                if not isinstance(rep, dict) or not isinstance(rep.get("cases"), list):
                    raise ValueError("not a kernelwatch profile or triage report")
            except (OSError, ValueError, EOFError) as exc:
                errors.append(f"{path}: {exc}")
                continue
            slug = F.machine_slug(d.name)
            out.append(
                {
                    "kind": kind,
                    "name": d.name,
                    "slug": slug,
                    "dir": d,
                    "report": rep,
                    "href": f"profiles/{slug}/index.html",
                }
            )
    return out, errors


def _case_rows(entry: dict) -> list[dict]:
    rows = []
    for c in entry["report"].get("cases") or []:
        if not isinstance(c, dict):
            continue
        kernels = []
        for k in (c.get("kernels") or [])[:15]:
            if entry["kind"] == "triage":
                kernels.append(
                    {
                        "name": k.get("name"),
                        "status": k.get("status"),
                        "a": F.fmt_value(_us(k.get("base_us")), "seconds"),
                        "b": F.fmt_value(_us(k.get("head_us")), "seconds"),
                        "calls": f"{k.get('base_calls', 0):g} -> {k.get('head_calls', 0):g}",
                    }
                )
            else:
                kernels.append(
                    {
                        "name": k.get("name"),
                        "status": "",
                        "a": F.fmt_value(_us(k.get("self_us_per_iter")), "seconds"),
                        "b": F.pct(k.get("share")),
                        "calls": f"{k.get('calls_per_iter', 0):g}",
                    }
                )
        traces = [
            t
            for t in ([c.get("trace")] + list(c.get("base_traces") or []) + list(c.get("head_traces") or []))
            if isinstance(t, str)
        ]
        facts = c.get("head_facts") if entry["kind"] == "triage" else c.get("compile_facts")
        rows.append(
            {
                "label": c.get("label") or "",
                "status": c.get("status") or "",
                "first": c.get("first"),
                "ratio": F.fmt(c.get("ratio"), 3) if c.get("ratio") is not None else "",
                "kernels": kernels,
                "traces": sorted(set(traces)),
                "facts": records.compile_facts_text(facts) if facts else "",
                "facts_changed": [
                    f"{x.get('field')}: {x.get('base')} -> {x.get('head')}"
                    for x in c.get("facts_changed") or []
                    if isinstance(x, dict)
                ],
                "reason": c.get("reason") or "",
            }
        )
    return rows


def _us(v):
    return None if v is None else float(v) * 1e-6


def attach(model) -> None:
    """Read the stored runs of ``model.results_dir`` and link them: ``model.profile_runs``,
    ``model.case_profiles[(benchmark, params)]`` (links per case) and ``finding["triage"]``
    for findings whose commit range equals a triage's base and head."""
    entries, errors = load(getattr(model, "results_dir", None))
    model.profile_runs = entries
    if isinstance(model.errors, list):
        model.errors.extend(errors)  # the publish report's own list: named, never silently dropped
    model.case_profiles = {}
    triages: dict[tuple, dict] = {}
    for e in entries:
        rep = e["report"]
        if e["kind"] == "triage":
            title = f"triage {str(rep.get('base'))[:8]}..{str(rep.get('head'))[:8]}"
            triages[(rep.get("base"), rep.get("head"))] = e
        else:
            title = f"profile at {str(rep.get('commit') or 'working tree')[:8]}"
        e["title"] = title
        for c in rep.get("cases") or []:
            if isinstance(c, dict) and c.get("benchmark"):
                model.case_profiles.setdefault(_case_key(c["benchmark"], c.get("params") or {}), []).append(
                    {"href": e["href"], "title": title, "status": c.get("status") or ""}
                )
    for f in model.findings:
        e = triages.get((f.get("c0"), f.get("c1")))
        f["triage"] = e["href"] if e else None


def links_for(model, benchmark: str, params) -> list[dict]:
    """The stored profile / triage links of one case (``[]`` before :func:`attach`)."""
    return list(getattr(model, "case_profiles", {}).get(_case_key(benchmark, params), []))


def pages(model):
    for e in getattr(model, "profile_runs", []):
        rep = e["report"]
        env = rep.get("environment") or {}
        if e["kind"] == "triage":
            env = env.get("head") or {}
        yield Page(
            f"profiles/{e['slug']}/index.html",
            "profile.html",
            "../../",
            dict(
                title=f"{e['title']} - kernelwatch",
                heading=e["title"],
                kind=e["kind"],
                name=e["name"],
                machine=rep.get("machine") or "",
                exit_code=rep.get("exit_code"),
                base=rep.get("base") or "",
                head=rep.get("head") or "",
                commit=rep.get("commit") or "",
                env=", ".join(
                    f"{k} {env.get(k)}" for k in ("device", "torch", "triton", "cuda", "driver") if env.get(k)
                ),
                env_diff=[
                    f"{d.get('key')}: {d.get('base')} -> {d.get('head')}"
                    for d in ((rep.get("environment") or {}).get("diff") or [])
                    if isinstance(d, dict)
                ]
                if e["kind"] == "triage"
                else [],
                problems=[str(p) for p in rep.get("problems") or []],
                notes=[str(n) for n in rep.get("notes") or []],
                cases=_case_rows(e),
                md=f"{e['kind']}.md",
            ),
        )


def write(model, renderer, out: Path) -> int:
    """Copy each stored run's markdown and traces under ``out/profiles/<name>/`` and
    render its page; returns the number of pages."""
    n = 0
    by_slug = {e["slug"]: e for e in getattr(model, "profile_runs", [])}
    for page in pages(model):
        e = by_slug[page.path.split("/")[1]]
        dest = out / "profiles" / e["slug"]
        dest.mkdir(parents=True, exist_ok=True)
        for f in e["dir"].rglob("*"):
            if f.is_file() and (f.name.endswith(".trace.json.gz") or f.suffix == ".md"):
                (dest / f.relative_to(e["dir"])).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dest / f.relative_to(e["dir"]))
        renderer.write(page)
        n += 1
    return n
