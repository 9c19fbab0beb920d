"""The site's model: machine parts and analysis findings merged into what every page reads.

Built once in the parent process of ``publish`` (:class:`SiteModel`); the page
modules (:mod:`harness.report.overview`, ``benchmark``, ``machine``,
``roofline``, ``matrix``, ``commit``, ``findings``) are functions of it.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.core.model import Status
from harness.core.records import compile_facts_text
from harness.report import ceilings
from harness.report import fmt as F

REGRESSION_STATUSES = (Status.REGRESSION, Status.DRIFT_REGRESSION, Status.PENDING, Status.FAILING, Status.MISSING)
DIVERGENCE_STATUSES = (Status.DIVERGENT_CHANGE, Status.EFFICIENCY_GAP, Status.UNEXPECTED_SPEEDUP)
STATUS_CLASS = {
    Status.REGRESSION: "bad",
    Status.DRIFT_REGRESSION: "bad",
    Status.DIVERGENT_CHANGE: "bad",
    Status.FAILING: "bad",
    Status.PENDING: "warn",
    Status.MISSING: "warn",
    Status.EFFICIENCY_GAP: "warn",
    Status.UNEXPECTED_SPEEDUP: "warn",
    Status.IMPROVEMENT: "good",
    Status.DRIFT_IMPROVEMENT: "good",
    Status.VERSION_CHANGE: "note",
    Status.ENV_CHANGE: "note",
}


class PublishError(ValueError):
    """An option ``publish`` cannot use (unknown baseline commit, unreadable analysis report)."""


def device_kind(info: dict | None, calibration: dict | None = None) -> str | None:
    """The kind of a machine's device, from what its results say: ``"cuda"``
    when ``machine.json`` names a GPU (``gpu``), ``"cpu"`` when it says
    ``gpu: "none"`` (what :func:`harness.core.devices.asv_machine_info` writes on
    a machine whose only device is a CPU) or the stored calibration is of a CPU
    (``device.kind``); ``None`` when neither says (a foreign asv machine.json)."""
    gpu = str((info or {}).get("gpu") or "").strip()
    if gpu and gpu.lower() != "none":
        return "cuda"
    dev = (calibration or {}).get("device") if isinstance((calibration or {}).get("device"), dict) else {}
    if dev.get("kind") in ("cuda", "cpu"):
        return str(dev["kind"])
    return "cpu" if gpu.lower() == "none" else None


def peaks_text(kind: str | None, calibration: dict | None) -> str:
    """What mfu, bw_util and sol are measured against on a machine of device
    ``kind`` (:func:`device_kind`): a GPU's datasheet, a CPU's measured
    ceilings (a CPU has no datasheet row, :func:`harness.core.guards.read_metrics`
    uses the calibration), or, for an unknown device, why there is none."""
    if kind == "cuda":
        return (
            "mfu, bw_util and sol are against the datasheet peaks of this GPU (its measured ceilings where no "
            "datasheet row is known); n/a where no cost model or peak is known, and bw_util and sol where the "
            "working set fits in the L2 (cache-resident: no DRAM traffic to hold against the DRAM roof)."
        )
    if kind == "cpu":
        if calibration:
            return (
                f"mfu, bw_util and sol are against the measured ceilings of this CPU (kernelwatch calibrate, "
                f"{str(calibration.get('date') or 'date n/a')[:10]}): a CPU has no datasheet peak; "
                f"n/a where no cost model is known, mfu where an op does no floating-point work, and bw_util "
                f"and sol where the working set fits in the last-level cache (cache-resident: its traffic "
                f"is not DRAM traffic; the roofline page names each)."
            )
        return (
            "mfu, bw_util and sol are n/a on this CPU: a CPU has no datasheet peak and no measured "
            "ceiling is stored (kernelwatch calibrate)."
        )
    # an unnamed device is a foreign asv machine: no records of ours, no peaks (store.dataset.foreign_metrics)
    return (
        "mfu, bw_util and sol are n/a on this machine: its results do not name its device (no gpu field in "
        "machine.json) and no calibration is stored, so no peak is known."
    )


def key_tuple(k: dict | None):
    """An analysis report's series key as ``(machine, benchmark, params, timing)``."""
    if not isinstance(k, dict) or not k.get("machine") or not k.get("benchmark"):
        return None
    try:
        params = tuple((str(a), str(b)) for a, b in (k.get("params") or []))
    except (TypeError, ValueError):
        return None
    return (k.get("machine"), k.get("benchmark"), params, k.get("timing"))


#: The tag of a change whose two commits' recorded samples do not differ (the samples test's
#: p above the analysis' ``sample_alpha``): the step may be noise, it is not yet evidence.
SAMPLES_AGREE_TAG = "samples do not differ"


def samples_note(f: dict, alpha) -> str | None:
    """Why finding ``f`` (an analysis report's) is in doubt because the samples
    test of its two commits did not find them different (``extra.p_samples``
    above ``alpha``, the report's ``config.sample_alpha``), or ``None``."""
    p = F.num((f.get("extra") or {}).get("p_samples")) if isinstance(f.get("extra"), dict) else None
    a = F.num(alpha)
    if p is None or a is None or p <= a:
        return None
    return (
        f"{SAMPLES_AGREE_TAG}: the recorded samples of the two commits are not told apart (p={p:.3g} > "
        f"{a:.3g}): the step may be noise; not evidence of a change until more commits stay at the new level"
    )


def finding_problems(report: dict | None, where: str) -> list[str]:
    """One line per entry of the report's ``findings`` that is not an object
    (:func:`finding_rows` cannot show it), naming ``where`` (the report file) and
    its index; ``[]`` when there are none. A hostile report's ``"junk"`` and ``7``
    left the pages counting 8 of its 10 findings without a word."""
    fs = (report or {}).get("findings") if isinstance(report, dict) else None
    if not isinstance(fs, list):
        return []
    return [
        f"{where}: findings[{i}] is {type(f).__name__}, not an object: not shown"
        for i, f in enumerate(fs)
        if not isinstance(f, dict)
    ]


def finding_rows(report: dict | None) -> list[dict]:
    """Findings of an analysis report as flat rows (commit hashes, formatted
    magnitude), then the pending changes the analysis set aside because their
    series stopped (``health.stopped_pending``), as ``pending`` rows with
    ``stopped`` set (bookkeeping: :func:`harness.report.bookkeeping.health_kind`)."""
    health = (report or {}).get("health")
    aside = health.get("stopped_pending") if isinstance(health, dict) else None
    items = [(f, False) for f in (report or {}).get("findings") or []]
    items += [
        (dict(f, status=Status.PENDING, magnitude={"change": f.get("change")}), True)
        for f in (aside if isinstance(aside, list) else [])
        if isinstance(f, dict)
    ]
    rows = []
    for f, stopped in items:
        if not isinstance(f, dict):
            continue
        st = str(f.get("status"))
        cr = list(f.get("commit_range") or []) + [None, None]
        mg = f.get("magnitude") or {}
        ratio, change = F.num(mg.get("ratio")), F.num(mg.get("change"))
        ci = mg.get("ci")
        ci = [F.num(ci[0]), F.num(ci[1])] if isinstance(ci, list) and len(ci) == 2 else None
        if ci and None in ci:
            ci = None
        key = f.get("key") if isinstance(f.get("key"), dict) else {}
        other = f.get("other_key") if isinstance(f.get("other_key"), dict) else {}
        rows.append(
            {
                "status": st,
                "cls": STATUS_CLASS.get(st, "note"),
                "series": str(f.get("series") or ""),
                "key": key_tuple(key),
                "other_key": key_tuple(other),
                "machine": str(key.get("machine") or ""),
                "benchmark": str(key.get("benchmark") or ""),
                "other_machine": str(other.get("machine") or ""),
                "c0": cr[0] if isinstance(cr[0], str) else None,
                "c1": cr[1] if isinstance(cr[1], str) else None,
                "ratio_num": ratio,
                "ci_num": ci,
                "change_num": change,
                # a divergence: each machine's own move (oriented), for its change text
                "moves": (
                    (f.get("extra") or {}).get("change_worse_machine") if isinstance(f.get("extra"), dict) else None,
                    (f.get("extra") or {}).get("change_other_machine") if isinstance(f.get("extra"), dict) else None,
                ),
                "ratio": F.fmt(ratio, 4),
                "ci": f"{ci[0]:.4g} .. {ci[1]:.4g}" if ci else "n/a",
                "change": F.change_text(change),
                "abs_change": abs(change) if change is not None else 0.0,
                "reason": str(f.get("reason") or ""),
                "stopped": stopped,
                "samples_note": samples_note(f, ((report or {}).get("config") or {}).get("sample_alpha")),
                "annotations": [
                    {"kind": str(a.get("kind") or ""), "text": str(a.get("text") or "")}
                    for a in (f.get("annotations") or [])
                    if isinstance(a, dict)
                ],
            }
        )
    _note_undoing(rows)
    return rows


def _moves_agree(change: float, w, o) -> bool:
    """Whether two machines' moves ``w`` (the worse one's) and ``o`` can stand for
    a divergence of ``change``: both finite and above -100%, the worse one the
    worse, and ``(1 + w) / (1 + o) - 1`` within 1% of ``change`` (a hostile report's
    "-20% faster, +30% slower: 13.7% apart" read as nonsense)."""
    if w is None or o is None or not all(math.isfinite(x) for x in (change, w, o)) or min(w, o) <= -1:
        return False
    return w >= o and abs((1 + w) / (1 + o) - (1 + change)) <= 0.01 * (1 + change)


def _relative_text(change, other: str, higher: bool | None = None, moves=None, machine: str = "") -> str:
    """A divergent change's magnitude in words. With each machine's own move
    (``moves``: the finding's ``extra.change_worse_machine`` and
    ``change_other_machine``, oriented, + is worse): ``gha-aws-graviton +0.4%
    slower, gha-aws-skylake -11.7% faster: 13.7% apart``, so no reader takes
    the gap for one machine's slowdown (a newcomer read "+13.7% against
    gha-aws-skylake" in red as graviton 13.7% slower). Without them (a report
    saved before they were stored): ``+13.7% against gha-aws-skylake``. ``n/a``
    when the change is unknown."""
    txt = F.change_text(change, higher)
    if txt == "n/a":
        return txt
    w, o = (F.num(m) for m in (moves or (None, None)))
    if _moves_agree(change, w, o) and machine and other:
        gap = f"x{1 + change:.3g}" if change >= 1 else f"{100 * abs(change):.1f}%"
        return f"{machine} {F.change_text(w, higher)}, {other} {F.change_text(o, higher)}: {gap} apart"
    rel = txt.rsplit(" ", 1)[0] if txt.endswith(("slower", "faster", "worse", "better")) else txt
    return f"{rel} against {other}" if other else f"{rel} relative"


def _note_undoing(rows: list[dict]) -> None:
    """A confirmed step whose series has a later ``pending`` move back to the level
    before it (the analysis' reason says "back to the level before the ... step at
    <commit>") says so in its own reason, where the overview shows it: OpenBLAS's
    noble ``axpy(1000, z)`` read "regression +5.4%" on the overview while only the
    findings page said its newest two commits were back (newcomer trial, 2026-12-03)."""
    back = [r for r in rows if r["status"] == Status.PENDING and "back to the level before" in r["reason"]]
    if not back:
        return
    for r in rows:
        if r["status"] not in (Status.REGRESSION, Status.DRIFT_REGRESSION, Status.IMPROVEMENT) or not r["c1"]:
            continue
        for p in back:
            if p["key"] == r["key"] and f"step at {r['c1'][:12]}" in p["reason"]:
                r["reason"] += (
                    f"; the newest commits may undo it: a pending {p['change']} at "
                    f"{(p['c0'] or '')[:8]}..{(p['c1'] or '')[:8]} is back at the level before (not yet confirmed)"
                )
                r["undone_by"] = p["c1"]  # read by harness.report.attention.events for the same words


def marks(findings: list[dict]) -> dict:
    out: dict = {}
    for f in findings:
        mark = {
            "status": f["status"],
            "c0": f["c0"],
            "c1": f["c1"],
            "ratio": f["ratio_num"],
            "ci": f["ci_num"],
            "reason": f["reason"],
        }
        for k in {f["key"], f["other_key"]} - {None}:
            out.setdefault(k, []).append(mark)
    return out


def no_subject_why(order, repo) -> str:
    """Why a commit's page has no subject, from its place in the history
    (``order``: ``None`` when no repository ordered it, negative when the store
    parked it as outside ``repo``'s HEAD history, see
    :func:`harness.store.results.load`) and the ``repo`` given to ``publish``."""
    if repo is None:
        return "published without --repo, so no subject is read from git"
    if order is None:  # the store ordered nothing by git: an unusable repository, or none of the commits in it
        return (
            f"the commit is not in the history of {repo} (nor is any commit of these results, or it is "
            "not a usable git repository: see the input problems on the overview)"
        )
    if order < 0:
        return f"the commit is not in the history of {repo}'s HEAD"
    return "its subject is empty in git"


def commit_key(t: tuple):
    h, date, order = t[0], t[1], t[2]
    return (order if order is not None else math.inf, date if date is not None else math.inf, h)


def resolve_baselines(requested, commits: list[dict], repo: Path | None, results_dir) -> list[str]:
    """Full hashes for ``requested`` (hashes, unique prefixes, or git refs when a
    repository is given). Raises :class:`PublishError` naming an unknown one, and
    for a prefix several commits with results start with, a few of them: ``03``
    used to read as "not a commit with results" (hostile trial round 6, S-n). A
    prefix under 4 digits is tried as a git ref first (a tag or branch may be named so)."""
    known = {c["hash"] for c in commits}
    out = []
    for ref in requested or ():
        ref = str(ref).strip()
        hits = (
            [c["hash"] for c in commits if c["hash"].startswith(ref.lower())]
            if re.fullmatch(r"[0-9a-fA-F]{1,40}", ref)
            else []
        )
        if len(ref) >= 4 and len(hits) == 1:
            out.append(hits[0])
            continue
        if len(ref) >= 4 and len(hits) > 1:
            raise PublishError(_ambiguous_baseline(ref, hits))
        full = None
        if repo is not None:
            try:
                import git

                full = git.Repo(repo, search_parent_directories=True).commit(ref).hexsha
            except Exception:
                full = None
        if full is not None and full in known:
            out.append(full)
        elif len(hits) == 1:
            out.append(hits[0])
        elif len(hits) > 1:
            raise PublishError(_ambiguous_baseline(ref, hits))
        else:
            raise PublishError(f"baseline {ref!r} is not a commit with results in {results_dir}")
    return list(dict.fromkeys(out))


def _ambiguous_baseline(ref: str, hits: list[str]) -> str:
    shown = ", ".join(h[:12] for h in hits[:4]) + (", ..." if len(hits) > 4 else "")
    return (
        f"baseline {ref!r} is ambiguous: {len(hits)} commits with results start with it ({shown}); "
        "give more digits of the hash"
    )


def baseline_candidates(order: list[str], chosen: list[str], current: str | None = None) -> list[dict]:
    """The chosen baselines, then ``current`` (the oldest commit the current
    series have, :func:`harness.report.attention.current_baseline`), then the
    oldest commit and the commits 1, 10, 100 and 1000 before the newest (those
    that exist), oldest first."""
    n = len(order)
    auto = {}
    lead = [current] if current in order and current not in chosen else []
    if current in order:
        auto[current] = "oldest commit of the current series"
    if n >= 2:
        auto.setdefault(order[0], "oldest commit")
        for back in (1000, 100, 10, 1):
            if back < n - 1:
                auto.setdefault(order[n - 1 - back], f"{back} commit{'s' if back > 1 else ''} before the newest")
    pos = {h: i for i, h in enumerate(order)}
    hashes = list(dict.fromkeys(list(chosen) + lead + sorted(auto, key=pos.__getitem__)))
    return [
        {"hash": h, "short": h[:8], "index": pos[h], "why": "chosen with --baseline" if h in chosen else auto[h]}
        for h in hashes
    ]


#: Valid results taken either side of the baseline's own for its level (:func:`baseline_level`).
BASELINE_HALF_WINDOW = 2

#: What the matrix page says of :func:`baseline_level`.
BASELINE_RULE = (
    f"a series' value at the baseline is the median of its result there and up to {BASELINE_HALF_WINDOW} "
    "valid results either side (never its newest, an odd count), so one commit whose figures are off-level "
    "does not set the speed-up"
)


def baseline_level(values: np.ndarray, j: int) -> float:
    """The level of a series at its ``j``-th valid result, robust to a one-commit
    outlier (:data:`BASELINE_RULE`).

    ``values``: 1-D float array of the series' valid results, oldest first (no
    NaN), unit of the series; ``j``: index into it, ``0 <= j < len(values)``.
    Returns the median of ``values[j - h : j + h + 1]`` (``h`` is
    :data:`BASELINE_HALF_WINDOW`), leaving out the newest result (the one a
    speed-up compares against) unless it is ``j`` itself, and dropping the
    newest of the window while its count is even. Raises ``IndexError`` for a
    ``j`` outside ``values``."""
    n = len(values)
    if not 0 <= j < n:
        raise IndexError(f"baseline index {j} outside a series of {n} valid result(s)")
    hi = min(j + BASELINE_HALF_WINDOW + 1, n - 1 if j < n - 1 else n)
    window = values[max(0, j - BASELINE_HALF_WINDOW) : hi]
    if len(window) % 2 == 0:
        window = window[:-1]
    return float(np.median(window))


@dataclass
class SeriesView:
    """A series as the pages see it: global commit indices, values, latest point and baselines."""

    key: tuple
    machine: str
    benchmark: str
    params: tuple
    timing: str | None
    sid: str
    cid: str
    unit: str | None
    higher: bool | None
    gx: np.ndarray
    v: np.ndarray
    fail: list
    contended: list  # (index, reason) of points measured under CPU contention: no value, not failed
    ver: list
    latest: dict | None
    ai: np.ndarray | None
    tflops: np.ndarray | None
    base: dict = field(default_factory=dict)  # baseline hash -> (value, commit, ai, tflops)

    @functools.cached_property
    def label(self) -> str:
        return f"{self.benchmark}({F.params_text(self.params)})"  # the timing method is one of the params

    @functools.cached_property
    def href(self) -> str:
        return f"bench/{F.bench_slug(self.benchmark)}.html#{self.cid}"


def contended_badge(la: dict):
    """The badge of a newest point measured under CPU contention (``la["contended"]``,
    :mod:`harness.report.series`): its status and reason, and which older value
    is shown instead; empty when the newest point was not contended."""
    why = la.get("contended")
    if not why:
        return ""
    from harness.core.metrics import STATUS_CONTENDED

    shown = (la.get("value_commit") or "")[:8]
    tail = f"; the value shown is the newest clean one, at {shown}" if shown else "; no clean value to show"
    return F.badge(STATUS_CONTENDED, f"{why}{tail}", css="warn")


def _status_of(reason: str | None) -> str | None:
    """The guard status a failed point's reason starts with (``"timing_bug: ..."``), if any."""
    from harness.core.metrics import reason_status

    return reason_status(reason)


class SiteModel:
    """Everything the pages draw, merged from the machine parts (:mod:`harness.report.series`).

    ``commits`` is the global commit table (oldest first), ``series`` every
    series with global commit indices, ``findings`` the analysis findings as
    rows, ``candidates`` the baselines offered (after :meth:`resolve`), ``noise``
    the analysis' relative noise per series id.
    """

    def __init__(self, parts, findings, report, amsg, results_dir, errors, repo):
        self.report, self.amsg, self.results_dir, self.errors = report, amsg, results_dir, errors
        self.repo = Path(repo) if repo else None
        self.parts = {p["machine"]: p for p in parts}
        self.machines = sorted(self.parts)
        self.mslug = {m: F.machine_slug(m) for m in self.machines}
        #: Per machine its device kind (:func:`device_kind`); the pages say "GPU" only when every machine is one.
        self.kinds = {m: device_kind(self.parts[m]["info"], self.parts[m]["calibration"]) for m in self.machines}
        self.device_noun = "GPU" if self.machines and all(k == "cuda" for k in self.kinds.values()) else "device"
        #: Per machine why its calibration is not to be read as "calibrated" (:func:`harness.report.ceilings.doubts`).
        self.cal_doubts = {m: ceilings.doubts(self.parts[m]["calibration"]) for m in self.machines}
        info: dict[str, tuple] = {}
        for p in parts:
            for t in p["commits"]:
                info.setdefault(t[0], t)
        self.order = [t[0] for t in sorted(info.values(), key=commit_key)]
        self.cidx = {h: i for i, h in enumerate(self.order)}
        self.commits = [
            {
                "hash": h,
                "short": h[:8],
                "date": F.date_text(info[h][1]),
                "subject": info[h][3] or "",
                "no_subject": "" if info[h][3] else no_subject_why(info[h][2], self.repo),
                "author": info[h][4] or "",
            }
            for h in self.order
        ]
        self.maps: dict[str, np.ndarray] = {}
        self.env_changes: dict[str, list[dict]] = {}
        self.series: list[SeriesView] = []
        for m in self.machines:
            p = self.parts[m]
            gmap = np.array([self.cidx[t[0]] for t in p["commits"]], dtype=np.int64)
            self.maps[m] = gmap
            self.env_changes[m] = [
                {"x": int(gmap[i]), "commit": self.order[gmap[i]], "text": t} for i, t in p["env_changes"]
            ]
            for s in p["series"]:
                k = s["key"]
                self.series.append(
                    SeriesView(
                        key=k,
                        machine=k[0],
                        benchmark=k[1],
                        params=k[2],
                        timing=k[3],
                        sid=s["sid"],
                        cid=s["cid"],
                        unit=s["unit"],
                        higher=s["higher"],
                        gx=gmap[s["x"]] if len(s["x"]) else np.empty(0, dtype=np.int64),
                        v=s["v"],
                        fail=s["fail"],
                        contended=s.get("contended", []),
                        ver=s["ver"],
                        latest=s["latest"],
                        ai=s["ai"],
                        tflops=s["tflops"],
                    )
                )
        # Parameters in numeric order (256x1024 before 1024x1024).
        self.series.sort(key=lambda s: (s.benchmark, F.natural_key(s.params), s.timing or "", s.machine))
        self.by_key = {s.key: s for s in self.series}
        self.findings = []
        for f in findings:
            s = self.by_key.get(f["key"])
            row = dict(
                f,
                href=s.href if s else None,
                # a divergence's magnitude is the move of one machine against the other, not
                # a slowdown of either ("+13.7% slower" where one moved +0.4%, the other -11.7%)
                change=_relative_text(
                    f["change_num"], f["other_machine"], s.higher if s else None, f["moves"], f["machine"]
                )
                if f["status"] == Status.DIVERGENT_CHANGE
                else F.change_text(f["change_num"], s.higher if s else None),
                c0=f["c0"] if f["c0"] in self.cidx else None,
                c1=f["c1"] if f["c1"] in self.cidx else None,
                c0_short=(f["c0"] or "")[:8],
                c1_short=(f["c1"] or "")[:8],
                order=self.cidx.get(f["c1"], self.cidx.get(f["c0"], -1)),
                params=F.params_text(f["key"][2]) if f["key"] else "",
            )
            row["skey"] = row.pop("key")  # the series' key, for :func:`harness.report.attention.qualify`
            row.pop("other_key")
            row.setdefault("tags", [])
            row.setdefault("notes", [])
            self.findings.append(row)
        #: ``missing`` findings of series that did not stop: their later points were measured
        #: under CPU contention (left out of the analysis, so it saw no point there): not shown as
        #: missing, the series is listed as measured under contention (:meth:`_contended_not_missing`).
        self.contended_missing = [f for f in self.findings if self._contended_not_missing(f)]
        if self.contended_missing:
            self.findings = [f for f in self.findings if not any(f is g for g in self.contended_missing)]
        self.findings.sort(key=lambda r: (-r["order"], -r["abs_change"], r["series"], r["status"]))
        #: Per series key, why its figures are not to be read unqualified (``[(tag, reason)]``),
        #: set by :func:`harness.report.attention.qualify`.
        self.doubt: dict[tuple, list[tuple[str, str]]] = {}
        self.noise: dict[str, float] = {}
        rows = (report or {}).get("series") or []
        if rows:
            try:
                from harness.analysis import SeriesKey as AKey

                label_noise = {r.get("series"): r.get("noise_rel") for r in rows if isinstance(r, dict)}
                for s in self.series:
                    nz = F.num(label_noise.get(AKey(s.machine, s.benchmark, tuple(s.params), s.timing).label()))
                    if nz is not None:
                        self.noise[s.sid] = nz
            except Exception:
                pass

    def _contended_not_missing(self, f: dict) -> bool:
        """Whether ``missing`` finding row ``f`` is a series whose every point from
        the commit the finding names on was measured under CPU contention (it did
        not stop reporting: the analysis leaves contended points out)."""
        if f["status"] != Status.MISSING:
            return False
        sv, at = self.by_key.get(f["skey"]), self.cidx.get(f["c1"])
        if sv is None or at is None or not len(sv.gx) or int(sv.gx[-1]) < at:
            return False
        cont = {i for i, _ in sv.contended}
        return all(i in cont for i in np.flatnonzero(sv.gx >= at).tolist())

    def resolve(self, baselines, current: str | None = None) -> None:
        """Resolve the ``--baseline`` commits, offer them (and ``current``, the
        default when none is chosen) and look up each series' value there."""
        chosen = resolve_baselines(baselines, self.commits, self.repo, self.results_dir)
        self.candidates = baseline_candidates(self.order, chosen, current)
        for s in self.series:
            valid = np.flatnonzero(~np.isnan(s.v))
            if not valid.size:
                continue
            xs = s.gx[valid]
            for cand in self.candidates:
                j = int(np.searchsorted(xs, cand["index"], side="right")) - 1
                if j < 0:
                    continue
                i = int(valid[j])
                s.base[cand["hash"]] = (
                    baseline_level(s.v[valid], j),
                    self.order[int(s.gx[i])],
                    F.num(s.ai[i]) if s.ai is not None else None,
                    F.num(s.tflops[i]) if s.tflops is not None else None,
                )

    def latest_row(self, s: SeriesView, root: str) -> dict:
        la = s.latest or {}
        m = la.get("metrics") or {}
        c = self.commits[self.cidx[la["commit"]]] if la.get("commit") in self.cidx else {}
        return {
            "benchmark": s.benchmark,
            "params": F.params_text(s.params),
            "timing": s.timing or "",
            "href": root + s.href,
            "machine": s.machine,
            "commit": (la.get("commit") or "")[:8],
            "commit_full": la.get("commit") or "",
            "date": c.get("date") or "",
            "failed": bool(la.get("failed")),
            "fail_reason": la.get("fail_reason") or "",
            "fail_badge": F.badge(_status_of(la.get("fail_reason")) or "failed", la.get("fail_reason") or None)
            if la.get("failed")
            else contended_badge(la),
            "contended": la.get("contended") or "",
            "value": F.fmt_value(la.get("value"), s.unit),
            # the series' health labels (too noisy, under contention) beside its value, as
            # every other page shows them (issue 25: the latest tables printed plain values)
            "tags": [F.badge(t, why, css="warn") for t, why in self.doubt.get(s.key, ())],
            "ci": (f"{F.fmt_value(la['ci'][0], s.unit)} .. {F.fmt_value(la['ci'][1], s.unit)}" if la.get("ci") else ""),
            "tflops": F.flops_rate(m.get("tflops")),
            "gbps": F.fmt(m.get("gbps")),
            # against a doubtful calibration (under-measured, contended, ...): a badge, never a plain number
            **{
                k: ceilings.util_cell(self.figure_doubts(s.machine, la, k), la, m.get(k))
                for k in ("mfu", "bw_util", "sol")
            },
            "bound": la.get("bound") or "n/a",
            "status": la.get("status") if la.get("status") not in (None, "ok") else "",
            "status_reason": la.get("status_reason") or "",
            "n": la.get("n", 0),
            "n_failed": la.get("n_failed", 0),
            "n_contended": la.get("n_contended", 0),
            "compile_facts": compile_facts_text(la["compile_facts"]) if la.get("compile_facts") else "",
        }

    def figure_doubts(self, machine: str, la: dict, kind: str) -> list[tuple[str, str]]:
        """The calibration doubts that figure ``kind`` (``mfu``, ``bw_util``, ``sol``)
        of the newest point ``la`` of a series of ``machine`` carries: those of the
        ceilings it was computed against (:func:`harness.report.ceilings.doubts_for`)."""
        cal = self.parts[machine]["calibration"] if machine in self.parts else None
        return ceilings.doubts_for(cal, ceilings.used_figures(cal, la, kind))

    def budget(self) -> dict | None:
        """The report's ``false_alarm_budget`` for the pages: its figures as text
        and ``plain``, what they mean in plain words (:func:`budget_plain`);
        ``None`` when the report has none."""
        b = (self.report or {}).get("false_alarm_budget")
        if not isinstance(b, dict):
            return None
        return {
            "plain": budget_plain(b),
            "expected": F.fmt(F.num(b.get("expected_false_alerts")), 3),
            "without_fdr": F.fmt(F.num(b.get("expected_false_alerts_without_fdr")), 3),
            "fdr_q": F.fmt(F.num(b.get("fdr_q")), 3),
            # two significant digits, as the findings' reasons print p: rounding is monotone, so
            # a p that passed never reads above it ("p=0.00066" against "0.000658": newcomer trial)
            "threshold": F.fmt(_p_or_none(b.get("bh_threshold_p")), 2),
            "threshold_newest": F.fmt(_p_or_none(b.get("bh_threshold_p_newest")), 2),
            "hypotheses": b.get("hypotheses"),
            "method": str(b.get("method") or ""),
        }

    def series_of(self, machine: str) -> list[SeriesView]:
        """The series of one machine, in page order."""
        return [s for s in self.series if s.machine == machine]


def _p_or_none(x) -> float | None:
    """``x`` when it is a probability a report can hold, in (0, 1]; else ``None``
    (shown ``n/a``: a threshold "p=7" or "p=-1" is no figure to print)."""
    v = F.num(x)
    return v if v is not None and 0 < v <= 1 else None


def budget_plain(b: dict) -> str:
    """The false-alarm budget ``b`` (the report's ``false_alarm_budget``:
    ``expected_false_alerts``, ``expected_false_alerts_without_fdr``, ``fdr_q``,
    ``min_effect``, ``hypotheses``) in plain words: how many alerts of this
    analysis are expected to be false if no code had changed, as a count and as
    "one analysis in N", the smallest change that can alert, and what alerting
    on every test alone would expect. A missing figure reads ``n/a``; no test
    at all (``hypotheses`` 0) says so instead."""
    e = F.num(b.get("expected_false_alerts"))
    naive = F.num(b.get("expected_false_alerts_without_fdr"))
    q, eff, n = F.num(b.get("fdr_q")), F.num(b.get("min_effect")), b.get("hypotheses")
    # figures no configuration can hold read as unknown, not "at least inf%" or "-50%" (hostile trial)
    q = q if q is not None and 0 < q < 1 else None
    eff = eff if eff is not None and 0 < eff <= 10 else None
    if e is None:
        odds = "n/a"
    elif e <= 0:
        odds = "none"
    elif e < 1e-3:
        # "one in about 4428892 analyses" read as false precision (newcomer trial, 2026-12-03)
        odds = f"about {F.fmt(e, 2)}, that is fewer than one false alert in 1,000 analyses like this one"
    elif e < 1:
        odds = f"about {F.fmt(e, 2)}, that is one false alert in about {max(1, round(1 / e))} analyses like this one"
    else:
        odds = f"about {F.fmt(e, 2)} in every analysis like this one"
    counted = isinstance(n, int) and not isinstance(n, bool)
    if counted and n == 0:
        return (
            "No test was made: no series had enough valid history to test, so this analysis could raise "
            "no alert, true or false."
        )
    tests = f" over its {F.plural(n, 'test')}" if counted else ""
    newest = b.get("hypotheses_newest")
    if counted and isinstance(newest, int) and not isinstance(newest, bool) and 0 < newest < n:
        tests += " (two for each series it tested: a change in its history, and one at its newest commits)"
    out = f"If no code had changed, this analysis would still raise false alerts from noise alone{tests}: {odds}."
    if eff is not None:
        out += f" An alert needs a change whose confidence interval reaches {100 * eff:g}%"
        out += f", and at most {100 * q:g}% of all alerts may be false by design." if q is not None else "."
    if naive is not None:
        # not "tests x 1%": each test still needs the change of min_effect (newcomer trial: "64 x 1% is 0.64")
        out += (
            f" Alerting on each series on its own (at 1% a series, still needing a change of at least "
            f"{100 * eff:g}%) would expect {F.fmt(naive, 2)} false alerts instead."
            if eff is not None
            else f" Alerting on each series on its own (at 1% a series) would expect {F.fmt(naive, 2)} false alerts instead."
        )
    return out
