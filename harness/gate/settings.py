"""Configuration of ``kernelwatch check`` and ``bisect``: the ``[check]`` table.

Read from the **base** commit (so a pull request cannot relax its own gate): a
``[check]`` table in ``kernelwatch.toml`` or, failing that,
``[tool.kernelwatch.check]`` in ``pyproject.toml``. See ``docs/pr-gate.md``.
Also the one error type of the gate's commands (:class:`CheckError`) and
resolving a ref to a commit (:func:`resolve`).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.gate import decide
from harness.gate.decide import GateConfig
from harness.gate.sequential import SPENDING, SequentialConfig

DEFAULT_ROUNDS = 2
DEFAULT_MAX_ROUNDS = 12
CONFIG_KEYS = {
    "threshold",
    "alpha",
    "rounds",
    "min_samples",
    "borderline_factor",
    "remeasure",
    "thresholds",
    "sequential",
    "max_rounds",
    "spending",
}


class CheckError(RuntimeError):
    """The check cannot run at all (bad refs, unreadable configuration, asv missing)."""


@dataclass
class CheckSettings:
    gate: GateConfig
    rounds: int = DEFAULT_ROUNDS
    remeasure: bool = True
    source: str = "defaults"
    #: The sequential gate (:mod:`harness.gate.sequential`): looks every ``rounds``
    #: rounds up to ``max_rounds`` a side; ``None`` = the fixed-round gate.
    sequential: SequentialConfig | None = None


# ----------------------------------------------------------------------------- configuration


def _toml_loads(text: str, where: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise CheckError(f"{where}: reading TOML needs Python 3.11+ or the 'tomli' package") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CheckError(f"{where}: invalid TOML: {exc}") from None


def parse_settings(
    table: dict,
    where: str,
    *,
    threshold: float | None = None,
    alpha: float | None = None,
    rounds: int | None = None,
    max_rounds: int | None = None,
) -> CheckSettings:
    """Settings from a ``[check]`` table; explicit arguments win over the table.

    Raises
    ------
    CheckError
        For an unknown key or a value of the wrong type, naming ``where`` and the key.
    """
    unknown = set(table) - CONFIG_KEYS
    if unknown:
        raise CheckError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(CONFIG_KEYS)}")

    def num(key, kind=float):
        v = table.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
            raise CheckError(f"{where}: {key} must be a{'n integer' if kind is int else ' number'}, got {v!r}")
        return kind(v)

    overrides = table.get("thresholds") or {}
    if not isinstance(overrides, dict):
        raise CheckError(f'{where}: thresholds must be a table of "pattern" = number')
    remeasure = table.get("remeasure", True)
    if not isinstance(remeasure, bool):
        raise CheckError(f"{where}: remeasure must be true or false, got {remeasure!r}")
    kw = {}
    for key, kind in (("min_samples", int), ("borderline_factor", float)):
        v = num(key, kind)
        if v is not None:
            kw[key] = v
    r = rounds if rounds is not None else num("rounds", int)
    r = DEFAULT_ROUNDS if r is None else r
    if r < 1:
        raise CheckError(f"{where}: rounds must be at least 1, got {r}")
    try:
        g = GateConfig(
            threshold=threshold if threshold is not None else (num("threshold") or 0.05),
            alpha=alpha if alpha is not None else (num("alpha") or 0.01),
            thresholds=tuple((str(k), v) for k, v in overrides.items()),
            **kw,
        )
    except ValueError as exc:
        raise CheckError(f"{where}: {exc}") from None
    sequential = table.get("sequential", True)
    if not isinstance(sequential, bool):
        raise CheckError(f"{where}: sequential must be true or false, got {sequential!r}")
    spending = table.get("spending", "pocock")
    if spending not in SPENDING:
        raise CheckError(f"{where}: spending must be one of {list(SPENDING)}, got {spending!r}")
    cap = max_rounds if max_rounds is not None else num("max_rounds", int)
    cap = max(DEFAULT_MAX_ROUNDS, r) if cap is None else cap
    seq = None
    if sequential:
        if cap < r:
            raise CheckError(f"{where}: max_rounds ({cap}) must be at least rounds ({r}), the rounds of one look")
        try:
            seq = SequentialConfig(alpha=g.alpha, step=r, max_rounds=cap, spending=spending)
        except ValueError as exc:
            raise CheckError(f"{where}: {exc}") from None
    return CheckSettings(gate=g, rounds=r, remeasure=remeasure, source=where, sequential=seq)


def load_settings(root: Path, commit: str, **explicit) -> CheckSettings:
    """Read the check configuration as it is at ``commit`` (``kernelwatch.toml``
    ``[check]``, else ``pyproject.toml`` ``[tool.kernelwatch.check]``, else defaults)."""
    for path, keys in (("kernelwatch.toml", ("check",)), ("pyproject.toml", ("tool", "kernelwatch", "check"))):
        proc = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True, text=True)
        if proc.returncode != 0:
            continue
        where = f"{path} at {commit[:12]}"
        table = _toml_loads(proc.stdout, where)
        for k in keys:
            table = table.get(k) if isinstance(table, dict) else None
            if table is None:
                break
        if table is None:
            continue
        if not isinstance(table, dict):
            raise CheckError(f"{where}: [{'.'.join(keys)}] must be a table")
        return parse_settings(table, f"{where} [{'.'.join(keys)}]", **explicit)
    return parse_settings({}, "defaults", **explicit)


# ----------------------------------------------------------------------------- git


def resolve(root: Path, ref: str) -> str:
    """Full hash of ``ref``; :class:`CheckError` naming the ref when it is not a commit here."""
    import git

    if not isinstance(ref, str) or not ref.strip():
        raise CheckError(f"empty ref {ref!r}: give a branch, tag or commit")
    try:
        return git.Repo(root).commit(ref).hexsha
    except (git.BadName, ValueError, git.GitCommandError) as exc:
        last = (str(exc).strip().splitlines() or [""])[-1]
        raise CheckError(f"{ref!r} is not a commit, branch or tag in {root}" + (f" ({last})" if last else "")) from None


#: Trailer acknowledging that a benchmark of base's suite was removed from head's
#: on purpose: ``Perf-Benchmark-Removed: <pattern> reason=<text>``, same form as
#: :data:`harness.gate.decide.ACK_TRAILER` (issue 29; ``docs/pr-gate.md``).
REMOVAL_TRAILER = "Perf-Benchmark-Removed"


def read_acknowledgements(
    root: Path, base: str, head: str, trailer: str = decide.ACK_TRAILER
) -> tuple[list[decide.Acknowledgement], list[str]]:
    """``trailer`` trailers (default the slowdown acknowledgement; also
    :data:`REMOVAL_TRAILER`) of the commits in ``base..head`` (newest first) and
    one warning per malformed trailer."""
    import git

    repo = git.Repo(root)
    acks, problems = [], []
    for c in repo.iter_commits(f"{base}..{head}"):
        for key, value in c.trailers_list:
            if key.strip().lower() != trailer.lower():
                continue
            try:
                acks.append(decide.parse_acknowledgement(value, c.hexsha, c.author.name))
            except ValueError as exc:
                problems.append(f"ignored {trailer} trailer: {str(exc).replace(decide.ACK_TRAILER, trailer)}")
    return acks, problems
