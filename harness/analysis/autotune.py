"""Annotate a step where the chosen autotune config, the compiled kernel or the compiler changed.

Pure: records' facts in, annotations out; no I/O. An annotation has the kind
``autotune_changed`` (the events contract in ``docs/analysis.md``), a sentence
("autotune chose BLOCK_SIZE_M=64 instead of 128 here") and the evidence (both
sides' values). It sits beside the other not-the-code annotations (benchmark
version, environment): the code may be unchanged while the autotuner picked
another config (a near tie measured differently) or a new Triton compiled the
kernel into something else (more registers, spills).

Facts come from kernelwatch records (``docs/records.md``): ``launch_config``
(the provider's chosen config), ``compile_facts`` (per launched Triton kernel:
``num_warps``, ``num_stages``, ``registers``, ``spills``, ``shared_bytes``) and
the Triton version (``compile_facts.triton``, else ``device.versions.triton``).
"""

from __future__ import annotations

import hashlib
from typing import Mapping

from harness.core.model import SAME_CODE_KIND
from harness.core.records import same_code

KIND = "autotune_changed"
KERNEL_FIELDS = ("num_warps", "num_stages", "registers", "spills", "shared_bytes")


def facts_from_record(rec: Mapping | None) -> dict | None:
    """``{"config", "triton", "kernels"}`` of one record, or ``None`` when it says
    nothing about autotuning or compilation (no launch config, no compile facts)."""
    if rec is None or not isinstance(rec, Mapping):  # None first: the typing check costs ~1.5 us a point
        return None
    cf = rec.get("compile_facts") if isinstance(rec.get("compile_facts"), Mapping) else {}
    cfg = rec.get("launch_config") if isinstance(rec.get("launch_config"), Mapping) else {}
    cfg = {k: v for k, v in (cfg or cf.get("autotune_config") or {}).items() if k != "error"}
    kernels = [k for k in cf.get("kernels") or [] if isinstance(k, Mapping)] if cf.get("status") == "ok" else []
    triton = cf.get("triton") or ((rec.get("device") or {}).get("versions") or {}).get("triton")
    code = code_key(rec)
    if not cfg and not kernels and code is None:
        return None
    return {"config": dict(cfg), "triton": triton, "kernels": [dict(k) for k in kernels], "code": code}


def code_key(rec: Mapping) -> str | None:
    """``"<fingerprint>/<environment digest>"`` of a record whose ``code_identity``
    is complete (:func:`harness.core.records.same_code` of it with itself), else
    ``None``. The environment is the record's device name and versions (driver,
    CUDA, torch, Triton, Python): equal keys = the same code in the same environment."""
    ci = rec.get("code_identity")
    if not isinstance(ci, Mapping) or not same_code(dict(ci), dict(ci)):
        return None
    dev = rec.get("device") if isinstance(rec.get("device"), Mapping) else {}
    versions = dev.get("versions") if isinstance(dev.get("versions"), Mapping) else {}
    env = "|".join([str(dev.get("name"))] + [f"{k}={versions[k]}" for k in sorted(versions)])
    digest = hashlib.sha256(env.encode()).hexdigest()[:12]
    return f"{ci['fingerprint']}/{digest}"


def same_code_notes(before: Mapping | None, after: Mapping | None) -> list[dict]:
    """``same_compiled_code`` annotation when both points ran the same compiled code
    in the same environment (:func:`code_key` equal): the step is the machine's."""
    if not before or not after or not before.get("code") or before.get("code") != after.get("code"):
        return []
    fp = str(before["code"]).split("/", 1)[0]
    return [
        {
            "kind": SAME_CODE_KIND,
            "text": f"same compiled code: fingerprint {fp} and the environment are identical at both "
            "commits, so this step is the machine's, not the code's",
            "evidence": {"code": before["code"]},
        }
    ]


def changes(before: Mapping | None, after: Mapping | None) -> list[dict]:
    """Annotations for what changed between two points' facts (:func:`facts_from_record`).

    Returns
    -------
    list of dict
        ``{"kind": "autotune_changed", "text", "evidence": {"what", "before", "after"}}``,
        ``what`` one of ``"config"`` (the chosen autotune config), ``"compiler"``
        (Triton version) or ``"compiled_kernel"`` (registers, spills, ... of a
        kernel launched on both sides). Empty when either side is unknown.
    """
    if not before or not after:
        return []
    out = []
    bc, ac = before.get("config") or {}, after.get("config") or {}
    diff = [k for k in sorted(set(bc) | set(ac)) if bc.get(k) != ac.get(k)]
    if diff:
        parts = [f"{k}={ac.get(k, 'unset')} instead of {bc.get(k, 'unset')}" for k in diff]
        out.append(
            {
                "kind": KIND,
                "text": "autotune chose " + ", ".join(parts) + " here",
                "evidence": {
                    "what": "config",
                    "before": {k: bc.get(k) for k in diff},
                    "after": {k: ac.get(k) for k in diff},
                },
            }
        )
    bt, at = before.get("triton"), after.get("triton")
    if bt and at and bt != at:
        out.append(
            {
                "kind": KIND,
                "text": f"Triton {bt} -> {at} compiled the kernels here",
                "evidence": {"what": "compiler", "before": bt, "after": at},
            }
        )
    bk = {k.get("name"): k for k in before.get("kernels") or []}
    for k in after.get("kernels") or []:
        b = bk.get(k.get("name"))
        if b is None:
            continue
        moved = [f for f in KERNEL_FIELDS if b.get(f) is not None and k.get(f) is not None and b.get(f) != k.get(f)]
        if moved:
            out.append(
                {
                    "kind": KIND,
                    "text": f"{k.get('name')} compiled differently: "
                    + ", ".join(f"{f} {b.get(f)} -> {k.get(f)}" for f in moved),
                    "evidence": {
                        "what": "compiled_kernel",
                        "kernel": k.get("name"),
                        "before": {f: b.get(f) for f in moved},
                        "after": {f: k.get(f) for f in moved},
                    },
                }
            )
    return out


def _pairs(params) -> tuple:
    if isinstance(params, Mapping):
        items = params.items()
    else:
        items = [tuple(p) for p in params or [] if isinstance(p, (list, tuple)) and len(p) == 2]
    return tuple(sorted((str(k), str(v)) for k, v in items))


def facts_key(machine: str, benchmark: str, params, commit: str) -> tuple:
    """Lookup key of :func:`annotate`: params as sorted ``(name, value)`` pairs
    (a dict or the report's ``[[name, value], ...]``)."""
    return (machine, benchmark, _pairs(params), commit)


def annotate(report: dict, facts: Mapping[tuple, Mapping]) -> int:
    """Add ``autotune_changed`` and ``same_compiled_code`` annotations to an analysis
    report (``Report.as_dict()``) in place.

    For each finding whose ``commit_range`` [before, after] has facts on both
    sides (``facts[facts_key(machine, benchmark, params, commit)]``), the
    annotations of :func:`changes` and :func:`same_code_notes` are appended to ``finding["annotations"]``;
    each event (``events[]``, ``docs/analysis.md``) gets those of its series over its
    own commit range, once each. Returns how many annotations were added.
    """
    n = 0

    def found_for(key, rng):
        if len(rng) != 2 or not all(rng):
            return []
        before = facts.get(facts_key(key.get("machine"), key.get("benchmark"), key.get("params"), rng[0]))
        after = facts.get(facts_key(key.get("machine"), key.get("benchmark"), key.get("params"), rng[1]))
        return changes(before, after) + same_code_notes(before, after)

    for f in report.get("findings") or []:
        found = found_for(f.get("key") or {}, list(f.get("commit_range") or []))
        if found:
            have = f.setdefault("annotations", [])
            for a in found:
                if a not in have:
                    have.append(a)
                    n += 1
    for ev in report.get("events") or []:
        rng = list(ev.get("commit_range") or [])
        for s in ev.get("series") or []:
            found = found_for(s.get("key") or {}, rng)
            if found:
                have = ev.setdefault("annotations", [])
                for a in found:
                    if a not in have:
                        have.append(a)
                        n += 1
    return n
