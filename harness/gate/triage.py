"""``kernelwatch triage``: which kernel got slower between two commits, and what changed in it.

Profiles ``base`` and ``head`` with :mod:`harness.measure.profile`, one process per
commit (each imports torch and its commit's suite once), interleaved: round 1
base then head, round 2 head then base, ..., so a drift of the machine hits
both sides, and compares the per-kernel tables
(:func:`diff_case`):

- kernels slower or faster (median self time per call of the case over the
  rounds, both sides shown): a change counts only when it is beyond the
  threshold *and* the rounds of one side are beyond the other's by a one-sided
  Mann-Whitney test at ``alpha`` (:func:`classify_change`) *and* it moves at
  least :data:`MIN_CASE_SHARE` of the case's time, so a noisy microsecond op is
  never named;
- kernels that appear or disappear, launch-count changes;
- the Triton compile facts and autotune config that changed (``num_warps``,
  ``num_stages``, registers, spills, shared memory, ``BLOCK_SIZE_*``);
- the environment diff (torch, Triton, CUDA, driver, device) of the two
  profiling runs and, given ``--results``, of the stored records of the two
  commits (the environment the step was measured in).

The diff is ordered by how much of the case's slowdown each kernel explains
(largest added time first). Output: ``triage.json`` (:data:`TRIAGE_SCHEMA`) and
``triage.md`` (for a PR comment), plus each side's traces.

Exit codes: 0 triaged, nothing slower; 1 triaged, a kernel or a case is slower
(or a kernel appeared that takes at least :data:`MIN_CASE_SHARE` of the case);
2 could not triage (bad ref, unknown finding, no case matched, a side failed).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

# The markdown of a triage lives in harness.gate.triage_summary; render_markdown is this module's too.
from harness.core import procs
from harness.core.files import write_text_atomic
from harness.core.workspace import Workspace, WorkspaceError
from harness.gate.triage_summary import render_markdown  # noqa: F401
from harness.measure import profile as P

TRIAGE_SCHEMA = "kernelwatch-triage/1"
DEFAULT_ROUNDS = 5
DEFAULT_THRESHOLD = 0.10
DEFAULT_ALPHA = 0.01
#: A kernel's change must move at least this share of the base case's time to be named.
MIN_CASE_SHARE = 0.01
EXIT_OK, EXIT_SLOWER, EXIT_BROKEN = 0, 1, 2
ENV_KEYS = ("torch", "triton", "cuda", "driver", "device", "compute_capability", "python", "harness", "torch_threads")


class TriageError(RuntimeError):
    """The triage cannot start (bad refs, unknown finding id, bad pattern)."""


@dataclass
class TriageOutcome:
    exit_code: int
    report: dict
    markdown: str
    json_path: Path | None = None
    md_path: Path | None = None


# ----------------------------------------------------------------------------- pure diff


def _kernel_us(row: dict) -> float:
    """A round's time of one kernel: its fastest call (``self_us_iter_min``; noise
    on a shared machine only adds time), else its mean per call."""
    v = row.get("self_us_iter_min")
    return float(v if v is not None else row["self_us_per_iter"])


def _case_us(row: dict) -> float:
    v = row.get("wall_us_min")
    return float(v if v is not None else row["wall_us_per_iter"])


def _side_stats(rounds: list[list[dict]]) -> dict:
    """``{kernel: {"us": [per-round self us per call], "calls": [per-round launches per call]}}``
    (per round: :func:`_kernel_us`); a round where the kernel did not run counts
    as 0 us and 0 launches."""
    names = {k["name"] for r in rounds for k in r}
    out = {}
    for n in names:
        us, calls = [], []
        for r in rounds:
            row = next((k for k in r if k["name"] == n), None)
            us.append(_kernel_us(row) if row else 0.0)
            calls.append(float(row["calls_per_iter"]) if row else 0.0)
        out[n] = {"us": us, "calls": calls}
    return out


def rounds_p_value(base: list[float], head: list[float], alternative: str) -> float:
    """One-sided exact Mann-Whitney U p-value of per-round times (``"greater"``:
    head slower). scipy's ``mannwhitneyu``; with ties it falls back to the
    asymptotic method, as scipy decides."""
    from scipy.stats import mannwhitneyu

    if len(set(base) | set(head)) == 1:
        return 1.0
    return float(mannwhitneyu(head, base, alternative=alternative).pvalue)


def smallest_p(n_base: int, n_head: int) -> float:
    """The smallest one-sided p-value the rounds can reach: ``1 / C(n_base + n_head, n_base)``."""
    import math

    return 1.0 / math.comb(n_base + n_head, n_base)


def classify_change(
    base: list[float], head: list[float], threshold: float, case_base_us: float | None, alpha: float = 0.01
) -> str:
    """``"slower"``, ``"faster"`` or ``"same"`` for per-round times of one kernel.

    Slower: median ratio head/base >= 1 + ``threshold``, head's rounds slower than
    base's by a one-sided Mann-Whitney test at ``alpha`` (:func:`rounds_p_value`;
    with 5 rounds a side and ``alpha=0.01`` at most one inverted pair of rounds),
    and the added time >= :data:`MIN_CASE_SHARE` of ``case_base_us`` (when known).
    Faster is the mirror image.

    Raises
    ------
    ValueError
        If a side has no rounds, or ``threshold`` / ``alpha`` is not positive.
    """
    if not base or not head:
        raise ValueError("each side needs at least one round")
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    mb, mh = statistics.median(base), statistics.median(head)
    big = case_base_us is None or abs(mh - mb) >= MIN_CASE_SHARE * case_base_us
    if not big:
        return "same"
    if mb > 0 and mh >= mb * (1 + threshold) and rounds_p_value(base, head, "greater") <= alpha:
        return "slower"
    if mh > 0 and mb >= mh * (1 + threshold) and rounds_p_value(base, head, "less") <= alpha:
        return "faster"
    return "same"


def diff_facts(base: dict | None, head: dict | None) -> list[dict]:
    """Changed compile facts / autotune config of one case: ``[{field, base, head}]``.
    Kernels are matched by position in launch order (names embed the kernel's
    Python name, which a refactor may keep while its specialisation changes)."""
    base, head = base or {}, head or {}
    out = []
    if base.get("status") != head.get("status"):
        out.append({"field": "status", "base": base.get("status"), "head": head.get("status")})
    if base.get("triton") != head.get("triton"):
        out.append({"field": "triton", "base": base.get("triton"), "head": head.get("triton")})
    bc, hc = base.get("autotune_config") or {}, head.get("autotune_config") or {}
    for k in sorted(set(bc) | set(hc)):
        if bc.get(k) != hc.get(k):
            out.append({"field": f"autotune_config.{k}", "base": bc.get(k), "head": hc.get(k)})
    bk, hk = base.get("kernels") or [], head.get("kernels") or []
    for i in range(max(len(bk), len(hk))):
        b = bk[i] if i < len(bk) else {}
        h = hk[i] if i < len(hk) else {}
        name = h.get("name") or b.get("name") or f"kernel {i}"
        for f in ("name", "num_warps", "num_stages", "num_ctas", "registers", "spills", "shared_bytes"):
            if b.get(f) != h.get(f):
                out.append({"field": f"{name}.{f}", "base": b.get(f), "head": h.get(f)})
    return out


def diff_environment(base: dict | None, head: dict | None) -> list[dict]:
    """``[{key, base, head}]`` for the :data:`ENV_KEYS` that differ."""
    base, head = base or {}, head or {}
    return [{"key": k, "base": base.get(k), "head": head.get(k)} for k in ENV_KEYS if base.get(k) != head.get(k)]


def diff_case(
    label: str, base_rounds: list[dict], head_rounds: list[dict], threshold: float, alpha: float = DEFAULT_ALPHA
) -> dict:
    """Compare one case's profiles: ``base_rounds``/``head_rounds`` are the case rows
    :func:`harness.measure.profile.worker_main` wrote, one per round (``status == "ok"``).

    Returns ``{label, status, base_us, head_us, ratio, kernels: [...], first, facts_changed}``;
    each kernel entry has ``name``, ``status`` (slower / faster / same / appeared /
    disappeared), ``base_us``/``head_us`` (median over the rounds of each round's
    fastest self time per call of the case, :func:`_kernel_us`),
    ``delta_us``, ``ratio``, ``base_calls``/``head_calls`` (launches per call),
    ``launches_changed`` and the per-round values. Kernels are ordered by
    ``delta_us``, largest added time first; ``first`` is the kernel that explains
    most of a slowdown (``None`` when nothing got slower).
    """
    bw = [_case_us(r) for r in base_rounds]
    hw = [_case_us(r) for r in head_rounds]
    b_case, h_case = statistics.median(bw), statistics.median(hw)
    bs, hs = _side_stats([r["kernels"] for r in base_rounds]), _side_stats([r["kernels"] for r in head_rounds])
    b_total = statistics.median([sum(_kernel_us(k) for k in r["kernels"]) for r in base_rounds])
    rows = []
    for name in sorted(set(bs) | set(hs)):
        b = bs.get(name, {"us": [0.0] * len(base_rounds), "calls": [0.0] * len(base_rounds)})
        h = hs.get(name, {"us": [0.0] * len(head_rounds), "calls": [0.0] * len(head_rounds)})
        mb, mh = statistics.median(b["us"]), statistics.median(h["us"])
        cb, ch = statistics.median(b["calls"]), statistics.median(h["calls"])
        if name not in bs or max(b["calls"]) == 0:
            status = "appeared"
        elif name not in hs or max(h["calls"]) == 0:
            status = "disappeared"
        else:
            status = classify_change(b["us"], h["us"], threshold, b_total, alpha)
        rows.append(
            {
                "name": name,
                "status": status,
                "base_us": round(mb, 3),
                "head_us": round(mh, 3),
                "delta_us": round(mh - mb, 3),
                "ratio": round(mh / mb, 4) if mb > 0 else None,
                "base_calls": cb,
                "head_calls": ch,
                "launches_changed": cb != ch,
                "base_rounds_us": b["us"],
                "head_rounds_us": h["us"],
            }
        )
    rows.sort(key=lambda r: (-r["delta_us"], r["name"]))
    case_status = classify_change(bw, hw, threshold, None, alpha)
    explaining = [
        r
        for r in rows
        if r["status"] == "slower" or (r["status"] == "appeared" and r["head_us"] >= MIN_CASE_SHARE * b_total)
    ]
    first = explaining[0]["name"] if explaining else None
    b_facts = base_rounds[0].get("compile_facts")
    h_facts = head_rounds[0].get("compile_facts")
    facts = diff_facts(
        {
            **(b_facts or {}),
            "autotune_config": base_rounds[0].get("launch_config") or (b_facts or {}).get("autotune_config"),
        },
        {
            **(h_facts or {}),
            "autotune_config": head_rounds[0].get("launch_config") or (h_facts or {}).get("autotune_config"),
        },
    )
    return {
        "label": label,
        "status": case_status,
        "base_us": round(b_case, 3),
        "head_us": round(h_case, 3),
        "ratio": round(h_case / b_case, 4) if b_case > 0 else None,
        "base_rounds_us": bw,
        "head_rounds_us": hw,
        "first": first,
        "kernels": rows,
        "facts_changed": facts,
        "base_facts": b_facts,
        "head_facts": h_facts,
        "base_traces": [r.get("trace") for r in base_rounds],
        "head_traces": [r.get("trace") for r in head_rounds],
    }


def exit_code_for(cases: list[dict], problems: list[str]) -> int:
    """2 on any problem, 1 when a case or a kernel is slower (or a weighty kernel
    appeared), else 0; see the module docstring."""
    if problems:
        return EXIT_BROKEN
    for c in cases:
        if c.get("status") == "slower" or c.get("first"):
            return EXIT_SLOWER
    return EXIT_OK


# ----------------------------------------------------------------------------- findings


def _params_dict(params) -> dict:
    """A series key's parameters as a dict: the analysis report writes ``[[name, value], ...]``."""
    if isinstance(params, dict):
        return {str(k): str(v) for k, v in params.items()}
    out = {}
    for pair in params or []:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            out[str(pair[0])] = str(pair[1])
    return out


def from_finding(analysis_json: str | os.PathLike, finding_id: str) -> tuple[str, str, list[dict], str]:
    """``(base, head, exact case selection, description)`` for a finding of a
    ``kernelwatch analyze --json`` report.

    ``finding_id`` is an event id (``ev-<hash>``, the ``events[].id`` field), a
    finding's ``id`` field, or ``f<N>`` / ``<N>``: the N-th entry of ``findings``
    (0-based, as in the JSON).

    Raises
    ------
    TriageError
        If the report cannot be read, the id matches nothing, or the finding has
        no commit range.
    """
    from harness.core.files import read_json

    path = Path(analysis_json)
    try:
        rep = read_json(path)
    except (OSError, ValueError) as exc:
        raise TriageError(f"{path}: cannot read the analysis report: {exc}") from None
    if not isinstance(rep, dict):
        raise TriageError(f"{path}: not an analysis report (expected a JSON object)")
    keys: list[dict] = []
    rng = None
    what = None
    for ev in rep.get("events") or []:
        if isinstance(ev, dict) and ev.get("id") == finding_id:
            rng = ev.get("commit_range")
            keys = [s.get("key") for s in ev.get("series") or [] if isinstance(s, dict) and s.get("key")]
            what = f"event {finding_id} ({ev.get('status')})"
            break
    if rng is None:
        findings = [f for f in rep.get("findings") or [] if isinstance(f, dict)]
        hit = next((f for f in findings if f.get("id") == finding_id), None)
        if hit is None:
            idx = finding_id[1:] if finding_id.startswith("f") else finding_id
            if idx.isdigit() and int(idx) < len(findings):
                hit = findings[int(idx)]
        if hit is None:
            raise TriageError(
                f"{path}: no event or finding {finding_id!r} (events have ids like 'ev-1a2b3c4d'; "
                f"findings are f0..f{max(len(findings) - 1, 0)})"
            )
        rng = hit.get("commit_range")
        keys = [hit["key"]] if hit.get("key") else []
        what = f"finding {finding_id} ({hit.get('status')}: {hit.get('series')})"
    if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, str) and x for x in rng)):
        raise TriageError(f"{path}: {what} has no commit range [base, head] to triage")
    exact = [
        {"benchmark": k.get("benchmark"), "params": _params_dict(k.get("params"))}
        for k in keys
        if isinstance(k, dict) and k.get("benchmark")
    ]
    if not exact:
        raise TriageError(f"{path}: {what} names no benchmark series")
    return rng[0], rng[1], exact, what


def recorded_environments(
    results_dir: str | os.PathLike, base: str, head: str, exact: list[dict] | None, pattern: str | None
) -> dict:
    """Environment of the stored records of ``base`` and ``head`` (torch, Triton,
    CUDA, driver, device), from the first record of each commit whose case is
    selected; ``{"base": {...} | None, "head": ..., "diff": [...], "errors": [...]}``."""
    from harness.core import records

    errors: list[str] = []
    recs = records.load_records(results_dir, errors)

    def pick(sha):
        for rec in recs.values():
            if not str(rec.get("commit", "")).startswith(sha[:12]) and rec.get("commit") != sha:
                continue
            spec = P.CaseSpec(
                rec.get("benchmark") or "",
                rec.get("op") or "",
                tuple((k, str(v)) for k, v in (rec.get("params") or {}).items()),
            )
            if P.select_cases([spec], pattern, exact):
                dev = rec.get("device") or {}
                v = dev.get("versions") or {}
                return {
                    "machine": rec.get("machine"),
                    "torch": v.get("torch"),
                    "triton": v.get("triton"),
                    "cuda": v.get("cuda"),
                    "driver": dev.get("driver"),
                    "device": dev.get("name"),
                    "compute_capability": dev.get("compute_capability"),
                    "harness": v.get("harness"),
                    "python": None,
                }
        return None

    b, h = pick(base), pick(head)
    return {"base": b, "head": h, "diff": diff_environment(b, h) if b and h else [], "errors": errors[:10]}


# ----------------------------------------------------------------------------- orchestration


def run_triage(
    base: str | None = None,
    head: str | None = None,
    *,
    benchmark: str | None = None,
    finding: str | None = None,
    analysis: str | os.PathLike | None = None,
    results: str | os.PathLike | None = None,
    rounds: int = DEFAULT_ROUNDS,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    iters: int = P.DEFAULT_ITERS,
    warmup: int = P.DEFAULT_WARMUP,
    quick: bool = False,
    out: str | os.PathLike | None = None,
    repo: str | os.PathLike = ".",
    log=lambda m: print(m, file=sys.stderr),
) -> TriageOutcome:
    """Profile ``base`` and ``head`` interleaved and diff them; see the module docstring.

    Parameters
    ----------
    base, head : str
        Git refs; taken from the finding when ``finding`` is given.
    benchmark : str
        Regular expression searched in asv case names (``suite.softmax.track_time('torch', ...)``).
    finding, analysis : str
        A finding or event id of the ``kernelwatch analyze --json`` report at ``analysis``.
    results : path, optional
        Results directory: adds the environment diff of the stored records, and
        stores the triage there (``kernelwatch-profiles/triage-<base12>-<head12>/``)
        so ``kernelwatch publish`` links it from the finding.
    rounds : int
        Profiled processes per commit (interleaved), at least 1.
    threshold : float
        Relative change that counts (0.10 = 10%).

    Raises
    ------
    TriageError
        For bad arguments, refs, finding ids or a failed checkout.
    """
    exact = None
    described = None
    if finding:
        if not analysis:
            raise TriageError("--finding needs --analysis REPORT.json (written by 'kernelwatch analyze --json')")
        fb, fh, exact, described = from_finding(analysis, finding)
        base, head = base or fb, head or fh
    _check_arguments(base, head, exact, benchmark, rounds, threshold, alpha)
    try:  # a bad $KERNELWATCH_PHASE_LIMIT_S fails now, not at the first round
        procs.phase_limit("profile")
    except procs.LimitError as exc:
        raise TriageError(str(exc)) from None
    try:
        ws = Workspace.open(repo, "triage")
    except WorkspaceError as exc:
        raise TriageError(str(exc)) from None
    root, state = ws.root, ws.state
    try:
        base_sha, base_src, _ = P.prepare_source(root, base, state)
        head_sha, head_src, _ = P.prepare_source(root, head, state)
    except P.ProfileError as exc:
        raise TriageError(str(exc)) from None
    out_dir = Path(out).resolve() if out else state / "triage" / f"{base_sha[:12]}-{head_sha[:12]}"
    out_dir.mkdir(parents=True, exist_ok=True)
    sides = {"base": (base_sha, base_src), "head": (head_sha, head_src)}
    log(
        f"kernelwatch triage: {base_sha[:12]} (base) vs {head_sha[:12]} (head), {rounds} interleaved rounds, "
        f"{iters} profiled calls per case" + (f"; {described}" if described else "")
    )
    spec = {
        "pattern": None if exact else benchmark,
        "exact": exact,
        "iters": iters,
        "warmup": warmup,
        "quick": quick,
        "cpu_threads": P.DEFAULT_CPU_THREADS,
    }
    results_by_side = _profile_interleaved(sides, spec, rounds, out_dir, log)
    report = build_report(
        base_sha,
        head_sha,
        results_by_side,
        threshold=threshold,
        alpha=alpha,
        rounds=rounds,
        iters=iters,
        warmup=warmup,
        quick=quick,
        pattern=benchmark,
        exact=exact,
        described=described,
        out_dir=out_dir,
    )
    if results:
        report["recorded_environment"] = recorded_environments(results, base_sha, head_sha, exact, benchmark)
    md = render_markdown(report)
    json_path, md_path = out_dir / "triage.json", out_dir / "triage.md"
    write_text_atomic(json_path, json.dumps(report, indent=1, allow_nan=False, default=str))
    write_text_atomic(md_path, md)
    if results and report["cases"]:
        stored = P.store_in_results(out_dir, results, f"triage-{base_sha[:12]}-{head_sha[:12]}", report, md, "triage")
        log(f"  stored in {stored}: kernelwatch publish links it from the finding")
    return TriageOutcome(
        exit_code=report["exit_code"], report=report, markdown=md, json_path=json_path, md_path=md_path
    )


def _check_arguments(base, head, exact, benchmark, rounds, threshold, alpha) -> None:
    """:class:`TriageError` naming the first bad argument of :func:`run_triage`."""
    if not base or not head:
        raise TriageError("give --base and --head, or --finding with --analysis")
    if not exact and not benchmark:
        raise TriageError("give --benchmark PATTERN (a regular expression over asv case names), or --finding")
    if not isinstance(rounds, int) or rounds < 1:
        raise TriageError(f"--rounds must be a positive integer, got {rounds!r}")
    if not (isinstance(threshold, (int, float)) and threshold > 0):
        raise TriageError(f"--threshold must be positive, got {threshold!r}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise TriageError(f"--alpha must be in (0, 1), got {alpha!r}")
    if benchmark:
        try:
            P.select_cases([], benchmark)
        except ValueError as exc:
            raise TriageError(str(exc)) from None


def _profile_interleaved(sides: dict, spec: dict, rounds: int, out_dir: Path, log) -> dict[str, list[dict]]:
    """``{"base": [round results], "head": [...]}``: one profiling process per commit
    (:class:`harness.measure.profile.WorkerProcess`), ``rounds`` rounds alternating
    base, head / head, base / ..."""
    results_by_side: dict[str, list[dict]] = {"base": [], "head": []}
    # One process per commit, kept across rounds (torch and the suite import once per side).
    workers = {}
    try:
        for role in ("base", "head"):
            sha, src = sides[role]
            workers[role] = P.WorkerProcess(
                {"checkout": str(src), "commit": sha, **spec, "out_dir": str(out_dir / role), "role": role},
                out_dir / "work",
            )
        for w in workers.values():  # both import in parallel
            w.wait_ready()
        for r in range(rounds):
            for role in ("base", "head") if r % 2 == 0 else ("head", "base"):
                res = workers[role].round(r)
                results_by_side[role].append(res)
                n_ok = sum(1 for c in res.get("cases", []) if c.get("status") == "ok")
                log(
                    f"  round {r + 1}/{rounds} {role} {sides[role][0][:12]}: {n_ok} cases profiled"
                    + (f"; problem: {res['problems'][0]}" if res.get("problems") else "")
                )
    finally:
        for w in workers.values():
            w.close()
    return results_by_side


def build_report(
    base_sha: str,
    head_sha: str,
    results_by_side: dict[str, list[dict]],
    *,
    threshold: float,
    alpha: float = DEFAULT_ALPHA,
    rounds: int,
    iters: int,
    warmup: int,
    quick: bool,
    pattern: str | None,
    exact: list | None,
    described: str | None,
    out_dir: Path,
) -> dict:
    """The triage report from each side's worker results (pure apart from path
    relativisation against ``out_dir``)."""
    problems: list[str] = []
    for role in ("base", "head"):
        for res in results_by_side[role]:
            problems += [f"{role}: {p}" for p in res.get("problems", [])]
    by_label: dict[str, dict[str, list[dict]]] = {}
    notes: list[str] = []
    for role in ("base", "head"):
        for res in results_by_side[role]:
            for c in res.get("cases", []):
                if c.get("trace"):
                    c["trace"] = os.path.relpath(c["trace"], out_dir)
                by_label.setdefault(c["label"], {"base": [], "head": []})[role].append(c)
    cases = []
    for label in sorted(by_label):
        s = by_label[label]
        bad = [c for role in ("base", "head") for c in s[role] if c.get("status") == "failed"]
        ok_b = [c for c in s["base"] if c.get("status") == "ok"]
        ok_h = [c for c in s["head"] if c.get("status") == "ok"]
        if bad:
            problems.append(f"{label}: {bad[0].get('reason')}")
            continue
        if not ok_b and not ok_h:
            notes.append(f"{label}: skipped on both sides ({(s['base'] or s['head'])[0].get('reason')})")
            continue
        if not ok_b or not ok_h:
            present = "head" if ok_h else "base"
            notes.append(
                f"{label}: only in {present} (the other side skips it: "
                f"{((s['base'] if present == 'head' else s['head']) or [{}])[0].get('reason', 'absent')})"
            )
            cases.append(
                {
                    "label": label,
                    "status": "new" if present == "head" else "removed",
                    "kernels": [],
                    "first": None,
                    "facts_changed": [],
                }
            )
            continue
        cases.append(diff_case(label, ok_b, ok_h, threshold, alpha))
    if rounds and smallest_p(rounds, rounds) > alpha:
        notes.append(
            f"with {rounds} rounds a side the smallest attainable p-value is {smallest_p(rounds, rounds):.3f} "
            f"> alpha {alpha}: no change can be named; use --rounds 4 or more"
        )
    if not by_label and not problems:
        problems.append("no benchmark case matched on either side" + (f" (pattern {pattern!r})" if pattern else ""))
    order = {"slower": 0, "faster": 1, "same": 2, "new": 3, "removed": 4}
    cases.sort(key=lambda c: (0 if c.get("first") else 1, order.get(c["status"], 5), -(c.get("ratio") or 0)))
    env_b = next((r.get("environment") for r in results_by_side["base"] if r.get("environment")), None)
    env_h = next((r.get("environment") for r in results_by_side["head"] if r.get("environment")), None)
    report = {
        "schema": TRIAGE_SCHEMA,
        "base": base_sha,
        "head": head_sha,
        "finding": described,
        "machine": next(
            (r.get("machine") for r in results_by_side["head"] + results_by_side["base"] if r.get("machine")), None
        ),
        "config": {
            "rounds": rounds,
            "iters": iters,
            "warmup": warmup,
            "threshold": threshold,
            "alpha": alpha,
            "min_case_share": MIN_CASE_SHARE,
            "quick": quick,
            "pattern": pattern,
            "exact": exact,
        },
        "environment": {"base": env_b, "head": env_h, "diff": diff_environment(env_b, env_h)},
        "cases": cases,
        "problems": problems,
        "notes": notes,
        "logs": [r.get("log") for role in ("base", "head") for r in results_by_side[role] if r.get("log")],
    }
    report["exit_code"] = exit_code_for(cases, problems)
    return report
