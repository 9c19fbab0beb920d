"""The markdown of ``kernelwatch triage`` (for a PR comment), from its report.

Pure: the report's dict (:func:`harness.gate.triage.build_report`) in, text out.
Re-exported by :mod:`harness.gate.triage`.
"""

from __future__ import annotations

from harness.measure import profile as P


def _us(v) -> str:
    return P._us(v)


def render_markdown(report: dict, max_kernels: int = 12) -> str:
    """Markdown for a PR comment: per case the verdict, the kernel that explains most
    of it, the kernel diff table, compile-fact changes, then the environment diff."""
    from harness.gate.triage import MIN_CASE_SHARE  # triage re-exports this module: import it late

    cfg = report.get("config") or {}
    lines = [
        f"### kernelwatch triage: `{report['base'][:12]}` (base) vs `{report['head'][:12]}` (head)"
        + (f" on {report['machine']}" if report.get("machine") else ""),
        "",
    ]
    if report.get("finding"):
        lines += [f"From {report['finding']}.", ""]
    lines += [
        f"{cfg.get('rounds')} interleaved rounds per commit, {cfg.get('iters')} profiled calls per case; "
        f"a change counts beyond {100 * cfg.get('threshold', 0):.0f}%, with the rounds apart (one-sided "
        f"Mann-Whitney, alpha {cfg.get('alpha')}), moving at least {100 * MIN_CASE_SHARE:.0f}% of the case. "
        f"Times: median over rounds of each round's fastest call (self time per call of the case). Exit code {report['exit_code']}.",
        "",
    ]
    for p in report.get("problems") or []:
        lines.append(f"- **could not triage**: {p}")
    for n in report.get("notes") or []:
        lines.append(f"- note: {n}")
    for c in report.get("cases") or []:
        lines += ["", f"#### `{c['label']}`: {c['status']}"]
        if not c.get("kernels"):
            continue
        lines.append("")
        ratio = f" ({c['ratio']:.2f}x)" if c.get("ratio") else ""
        lines.append(f"Whole case: {_us(c['base_us'])} -> {_us(c['head_us'])} per call{ratio}.")
        if c.get("first"):
            k = next(k for k in c["kernels"] if k["name"] == c["first"])
            launches = (
                f", {k['base_calls']:g} -> {k['head_calls']:g} launches per call" if k["launches_changed"] else ""
            )
            lines.append(
                f"**Most of the difference: `{k['name']}`** ({k['status']}, "
                f"{_us(k['base_us'])} -> {_us(k['head_us'])}, {k['delta_us']:+.1f} us per call{launches})."
            )
        lines += [
            "",
            "| kernel | status | base | head | change | launches per call (base -> head) |",
            "|---|---|---:|---:|---:|---|",
        ]
        shown = [k for k in c["kernels"] if k["status"] != "same" or k["launches_changed"]]
        rest = [k for k in c["kernels"] if k not in shown]
        for k in (shown + rest)[:max_kernels]:
            chg = f"{k['ratio']:.2f}x" if k.get("ratio") else ("new" if k["status"] == "appeared" else "gone")
            lc = f"{k['base_calls']:g} -> {k['head_calls']:g}" + (" (changed)" if k["launches_changed"] else "")
            lines.append(
                f"| `{k['name']}` | {k['status']} | {_us(k['base_us'])} | {_us(k['head_us'])} | {chg} | {lc} |"
            )
        if len(c["kernels"]) > max_kernels:
            lines.append(f"| ({len(c['kernels']) - max_kernels} more in triage.json) | | | | | |")
        if c.get("facts_changed"):
            lines += ["", "Compile facts / autotune config that changed:", ""]
            lines += [f"- `{f['field']}`: {f['base']} -> {f['head']}" for f in c["facts_changed"]]
        else:
            lines += ["", f"Compile facts / autotune config: unchanged ({P.facts_summary(c.get('head_facts'))})."]
        lines.append(
            f"Traces: base `{c['base_traces'][0]}`, head `{c['head_traces'][0]}` (open in https://ui.perfetto.dev)."
        )
    lines += _environment_lines(report)
    return "\n".join(lines) + "\n"


def _environment_lines(report: dict) -> list[str]:
    """The environment section: the profiled environments' diff, then the stored records'."""
    lines: list[str] = []
    env = report.get("environment") or {}
    lines += ["", "#### Environment", ""]
    if env.get("diff"):
        lines += ["| | base | head |", "|---|---|---|"] + [
            f"| {d['key']} | {d['base']} | {d['head']} |" for d in env["diff"]
        ]
    else:
        e = env.get("head") or env.get("base") or {}
        lines.append(
            f"Profiled in the same environment: torch {e.get('torch')}, Triton {e.get('triton')}, "
            f"CUDA {e.get('cuda')}, driver {e.get('driver')}, {e.get('device')}, torch threads {e.get('torch_threads')}."
        )
    rec = report.get("recorded_environment")
    if rec:
        if rec.get("base") and rec.get("head"):
            if rec["diff"]:
                lines += [
                    "",
                    "Stored records of the two commits were measured in different environments:",
                    "",
                    "| | base | head |",
                    "|---|---|---|",
                ]
                lines += [f"| {d['key']} | {d['base']} | {d['head']} |" for d in rec["diff"]]
            else:
                lines += ["", "The stored records of both commits were measured in the same environment."]
        else:
            lines += [
                "",
                "No stored record of "
                + " and ".join(r for r in ("base", "head") if not rec.get(r))
                + " in the results directory: recorded environments not compared.",
            ]
    return lines
