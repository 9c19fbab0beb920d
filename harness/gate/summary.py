"""The pull-request summary of ``kernelwatch check``: markdown from the JSON report.

Pure: the report's dict in, text out (:func:`render_markdown`). Labels and
trailer reasons are untrusted text of a pull request, so every one is escaped
(:func:`md_escape`, :func:`md_code`). Re-exported by :mod:`harness.gate.decide`.
"""

from __future__ import annotations

import re

from harness.core.model import GateStatus
from harness.core.model import signed_pct as pct  # the one wording: +5.0%

#: GitHub rejects a step summary above 1 MiB; stay clearly below it.
SUMMARY_LIMIT_BYTES = 1_000_000

_MD_ESCAPE = re.compile(r"([\\`*_{}\[\]<>|#~])")


def md_escape(text: str) -> str:
    """Escape markdown and HTML specials: benchmark labels and trailer reasons
    are untrusted text in a pull request's summary."""
    return _MD_ESCAPE.sub(r"\\\1", " ".join(str(text).split()))


def md_code(text: str) -> str:
    """``text`` as an inline code span that is safe inside a table cell (no
    markdown or HTML is interpreted in a code span; GFM still splits cells on ``|``)."""
    return "`" + " ".join(str(text).split()).replace("`", "'").replace("|", "\\|") + "`"


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    ms = x * 1e3
    if ms >= 100:
        return f"{ms:.1f} ms"
    if ms >= 1:
        return f"{ms:.3f} ms"
    return f"{ms * 1e3:.2f} µs"


def _row(v: dict) -> str:
    st = v.get("stats") or {}
    status = v["status"]
    if v.get("acknowledged"):
        status += " (acknowledged)"
    elif v.get("blocking"):
        status = f"**{status}**"
    change = pct(st["ratio"] - 1) if st.get("ratio") is not None else "-"
    ci = f"{pct(st['ci_low'] - 1)}..{pct(st['ci_high'] - 1)}" if st.get("ci_low") is not None else "-"
    p = f"{st['p_value']:.2g}" if st.get("p_value") is not None else "-"
    note = v.get("reason") or ""
    if v.get("acknowledged"):
        a = v["acknowledged"]
        note = f"acknowledged in {a['commit'][:12]}: {a['reason']}; {note}"
    if len(note) > 600:
        note = note[:600] + " ..."
    return (
        f"| {status} | {md_code(v['label'])} | {_ms(st.get('base_p50_s'))} | {_ms(st.get('head_p50_s'))} "
        f"| {change} | {ci} | {p} | {md_escape(note)} |"
    )


_TABLE_HEAD = (
    "| status | series | base p50 | head p50 | change | 99% CI | p | note |\n|---|---|---|---|---|---|---|---|\n"
)


def render_markdown(report: dict, limit_bytes: int = SUMMARY_LIMIT_BYTES) -> str:
    """The pull-request summary from a check report (the JSON report's dict).

    Worst first; SAME and FASTER rows are folded into a ``<details>`` block. If
    the text would exceed ``limit_bytes`` (UTF-8), rows are dropped from the end
    and a note says how many and where the full report is.

    Raises
    ------
    ValueError
        If ``limit_bytes`` is too small to hold the header.
    """
    verdicts = report.get("series", [])
    text = "\n".join(_header(report)) + "\n"
    foot_full = f"\nFull report: `{md_escape(report.get('json_path') or 'the JSON report')}`.\n"
    if len(text.encode()) + len(foot_full.encode()) > limit_bytes:
        raise ValueError(f"summary limit {limit_bytes} bytes cannot hold the header")

    main_rows = [v for v in verdicts if v["status"] not in (GateStatus.SAME, GateStatus.FASTER)]
    quiet_rows = [v for v in verdicts if v["status"] in (GateStatus.SAME, GateStatus.FASTER)]
    parts: list[str] = []
    used = len(text.encode()) + len(foot_full.encode())
    dropped = 0
    note_reserve = 200  # room for the truncation note

    def add(s: str) -> bool:
        nonlocal used
        n = len(s.encode())
        if used + n + note_reserve > limit_bytes:
            return False
        parts.append(s)
        used += n
        return True

    if main_rows:
        add(_TABLE_HEAD)
        for i, v in enumerate(main_rows):
            if not add(_row(v) + "\n"):
                dropped += len(main_rows) - i
                break
    else:
        add("No series is slower, broken, uncertain, new or removed.\n")
    if quiet_rows:
        if dropped or not add(
            f"\n<details><summary>{len(quiet_rows)} series SAME or FASTER</summary>\n\n" + _TABLE_HEAD
        ):
            dropped += len(quiet_rows)
        else:
            for i, v in enumerate(quiet_rows):
                if not add(_row(v) + "\n"):
                    dropped += len(quiet_rows) - i
                    break
            parts.append("\n</details>\n")
    out = text + "".join(parts)
    if dropped:
        out += (
            f"\n**Truncated**: {dropped} more rows omitted to keep this summary under "
            f"{limit_bytes} bytes; every series is in the JSON report.\n"
        )
    return out + foot_full


def _header(report: dict) -> list[str]:
    """The summary's lines above the table: verdict, device, commits, rule, counts,
    problems, warnings and acknowledgements."""
    from harness.gate.decide import ACK_TRAILER  # decide re-exports this module: import it late

    code = report.get("exit_code")
    verdict_word = {0: "passed", 1: "BLOCKED: slower", 2: "BROKEN or undecided"}.get(code, f"exit {code}")
    c = report.get("counts", {})
    dev = report.get("device") or {}
    cfg = report.get("config") or {}
    head = [f"## kernelwatch check: {verdict_word}", ""]
    head.append(
        f"- **Device**: {md_escape(dev.get('name') or 'unknown')} ({md_escape(dev.get('kind') or '?')}), "
        f"machine `{md_escape(report.get('machine') or '?')}`"
    )
    seq = cfg.get("sequential")
    rounds = (
        f"sequential: a look every {seq['step']} interleaved rounds per commit, at most {seq['max_rounds']}"
        if seq
        else f"{cfg.get('rounds', '?')} interleaved rounds per commit"
    )
    head.append(f"- **Base** `{report.get('base', '')[:12]}` vs **head** `{report.get('head', '')[:12]}`, {rounds}")
    overrides = (
        f"slower than {cfg.get('threshold', 0):.0%} (per-benchmark overrides: {len(cfg.get('thresholds') or [])})"
    )
    if seq:
        rule = (
            f"{overrides} and past the {seq['spending']} group-sequential boundary (one-sided alpha "
            f"{seq['alpha']:g} over all looks); {report.get('remeasured', 0)} series needed more than one look"
        )
    else:
        rule = (
            f"{overrides} and Mann-Whitney p < {cfg.get('alpha', 0):g}; "
            f"borderline results re-measured once ({report.get('remeasured', 0)} were)"
        )
    head.append(f"- **Rule**: {rule}")
    head.append("- **Counts**: " + ", ".join(f"{k} {n}" for k, n in c.items() if n))
    for msg in report.get("problems", []):
        head.append(f"- :x: {md_escape(msg)}")
    for msg in report.get("warnings", []):
        head.append(f"- :warning: {md_escape(msg)}")
    acks = report.get("acknowledgements") or []
    if acks:
        head.append(
            f"- **Acknowledgements** ({ACK_TRAILER} trailers in base..head): "
            + "; ".join(f"`{md_escape(a['pattern'])}` in {a['commit'][:12]}: {md_escape(a['reason'])}" for a in acks)
        )
    head.append("")
    return head
