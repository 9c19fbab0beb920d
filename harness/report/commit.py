"""``commit/<hash>.html``: everything one commit changed on every machine.

Its findings, environment and benchmark-version changes, failures started or
fixed, and the largest point-to-point moves of each machine (with the
analysis' noise of that series beside them). :func:`prepare` indexes the
model by commit once; :func:`page` is then one commit's page (10,000 commits
render in parallel workers: see :mod:`harness.report.site`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.report import attention
from harness.report import fmt as F
from harness.report.model import SiteModel
from harness.report.render import Page

#: Largest point-to-point moves listed per machine on a commit page.
COMMIT_MOVES = 5

_EMPTY = {"env": [], "version": [], "started": [], "fixed": [], "contended": [], "moves": []}


@dataclass
class CommitIndex:
    """Per commit index: ``per_commit[i][machine]`` sections, findings by the
    hash they name (``c1``), the machines that measured commit ``i``, and the
    findings whose range starts right after a hash (``after``: its page links
    to them, it does not list them as its own)."""

    per_commit: dict
    findings: dict
    measured: dict
    after: dict  # hash -> findings whose range starts after it (it is their last commit before)


def _slot(per_commit: dict, i: int, m: str) -> dict:
    d = per_commit.setdefault(i, {})
    return d.setdefault(m, {"env": [], "version": [], "started": [], "fixed": [], "contended": [], "moves": []})


def _machine_events(model: SiteModel, m: str, per_commit: dict) -> None:
    """Failures started/fixed, version changes and the largest moves of machine ``m``."""
    infos = model.series_of(m)
    n_c = len(model.order)
    if not infos or not n_c:
        return
    # Largest point-to-point moves: a commits x series matrix of the
    # log ratio to the previous valid point, oriented so that + is worse.
    mat = np.zeros((n_c, len(infos)), dtype=np.float32)
    for j, s in enumerate(infos):
        ok = ~np.isnan(s.v)
        failed_at = dict(s.fail)
        # a point measured under contention is no failure: listed as such, skipped when
        # telling where a series started failing or was fixed
        for i, why in s.contended:
            _slot(per_commit, int(s.gx[i]), m)["contended"].append(
                {"label": s.label, "href": "../" + s.href, "reason": why}
            )
        cont = {i for i, _ in s.contended}
        judged = np.array([i for i in range(len(ok)) if i not in cont], dtype=np.int64)
        okj = ok[judged]
        for k in (np.flatnonzero(np.diff(okj.astype(np.int8)) != 0) + 1).tolist():
            i = int(judged[k])
            e = {"label": s.label, "href": "../" + s.href, "reason": failed_at.get(i) or ""}
            _slot(per_commit, int(s.gx[i]), m)["fixed" if ok[i] else "started"].append(e)
        if len(okj) and not okj[0]:
            i = int(judged[0])
            _slot(per_commit, int(s.gx[i]), m)["started"].append(
                {"label": s.label, "href": "../" + s.href, "reason": failed_at.get(i) or ""}
            )
        for i, old, new in s.ver:
            _slot(per_commit, int(s.gx[i]), m)["version"].append(f"{s.label}: version {old} -> {new}")
        valid = np.flatnonzero(ok)
        if valid.size >= 2:
            d = np.diff(np.log(s.v[valid]))
            if s.higher:
                d = -d
            mat[s.gx[valid[1:]], j] = d
    absm = np.abs(mat)
    k_top = min(COMMIT_MOVES, len(infos))
    if k_top < len(infos):
        top = np.argpartition(-absm, k_top - 1, axis=1)[:, :k_top]
    else:
        top = np.tile(np.arange(len(infos)), (n_c, 1))
    for xi in np.flatnonzero(absm.max(axis=1) > 0).tolist():
        cols = sorted((int(c) for c in top[xi] if absm[xi, c] > 0), key=lambda c: (-absm[xi, c], c))
        for c in cols:
            s, d = infos[c], float(mat[xi, c])
            nz = model.noise.get(s.sid)
            _slot(per_commit, xi, m)["moves"].append(
                {
                    "label": s.label,
                    "href": "../" + s.href,
                    # a move beyond the float range (values 1e-300 next to 1e300) is n/a, not a crash
                    "change": F.change_text(math.expm1(d) if abs(d) < 700 else None, s.higher),
                    "cls": "bad" if d > 0 else "good",
                    "noise": F.pct(nz) if nz is not None else "n/a",
                    "tags": attention.tag_badges(model, s.key),
                }
            )


def prepare(model: SiteModel) -> CommitIndex:
    per_commit: dict[int, dict] = {}
    for m, lst in model.env_changes.items():
        for e in lst:
            _slot(per_commit, e["x"], m)["env"].append(e["text"])
    for m in model.machines:
        _machine_events(model, m, per_commit)
    # A finding belongs to the commit it names (``c1``, the first commit of the new level);
    # ``c0`` is the last one before it: its page only points to it (the change is not there).
    find_by_commit: dict[str, list[dict]] = {}
    after: dict[str, list[dict]] = {}
    for f in model.findings:
        c = f["c1"] or f["c0"]
        if c:
            find_by_commit.setdefault(c, []).append(f)
        if f["c0"] and f["c1"] and f["c0"] != f["c1"]:
            after.setdefault(f["c0"], []).append(f)
    measured: dict[int, set] = {}
    for m in model.machines:
        for i in model.maps[m].tolist():
            measured.setdefault(i, set()).add(m)
    return CommitIndex(per_commit, find_by_commit, measured, after)


def _after(findings: list[dict]) -> list[dict]:
    """The findings that start after a commit, as one line per commit they name:
    ``{hash, short, n, statuses}``, in commit order."""
    by: dict[str, dict] = {}
    for f in sorted(findings, key=lambda f: f["order"]):
        e = by.setdefault(f["c1"], {"hash": f["c1"], "short": f["c1_short"], "n": 0, "statuses": {}})
        e["n"] += 1
        e["statuses"][f["status"]] = e["statuses"].get(f["status"], 0) + 1
    return [dict(e, statuses=sorted(e["statuses"].items())) for e in by.values()]


def page(model: SiteModel, index: CommitIndex, i: int) -> Page:
    c = model.commits[i]
    d = index.per_commit.get(i, {})
    n_c = len(model.commits)
    sections = [{"machine": m, "measured": m in index.measured.get(i, ()), **d.get(m, _EMPTY)} for m in model.machines]
    return Page(
        f"commit/{c['hash']}.html",
        "commit.html",
        "../",
        dict(
            title=f"{c['short']} - kernelwatch",
            commit=c,
            findings=index.findings.get(c["hash"], []),
            after=_after(index.after.get(c["hash"], [])),
            sections=sections,
            prev=model.commits[i - 1] if i > 0 else None,
            next=model.commits[i + 1] if i + 1 < n_c else None,
            analysis=model.amsg if model.report is None else None,
        ),
    )
