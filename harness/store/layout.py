"""Which entries of an asv results directory are machines (issue 14: every one accounted for).

A machine is a folder holding a readable ``machine.json`` (checked by
:func:`harness.core.schema.machine_json`). Anything else at the top level is
named in a warning and skipped: a file or a dangling symlink where a folder
should be, a folder without ``machine.json`` (with the number of result files
it holds), a dangling ``machine.json``, a second path to a folder already
loaded (a symlink ``h100-link -> h100-runner``: the plain folder is loaded, the
link named and skipped, so no results count twice). A ``machine.json`` that is
there but unusable (not JSON, too deep, not UTF-8, not a regular file, wrong
types) is named and the folder loaded all the same, as the machine named like
the folder. ``benchmarks.json`` and
names starting with a dot (kernelwatch's lock, scratch and quarantine in
``.kernelwatch/``) are not machines and not warned about. Two folders naming
the same machine are kept apart (:func:`claim_machine_name`).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from harness.core import files, schema


def machine_folders(base: Path, errors: list[str], wanted: set | None = None):
    """Yield ``(folder, machine.json content)`` for every machine folder of ``base``,
    in name order (only those named in ``wanted`` by folder or machine name,
    when given); everything else at the top level is one line in ``errors``."""
    try:
        entries = sorted(base.iterdir())
    except OSError as exc:
        errors.append(f"{base}: cannot list the results folder ({exc.strerror or exc})")
        return
    empty: list[Path] = []  # folders with neither machine.json nor .json files: one line for all
    real_of: dict = {}  # realpath -> the folder kept for it (a plain folder before a link to it)
    for p in entries:
        try:
            if not p.name.startswith(".") and p.is_dir():
                real = os.path.realpath(p)
                kept = real_of.get(real)
                if kept is None or (kept.is_symlink() and not p.is_symlink()):
                    real_of[real] = p
        except OSError:
            continue
    for p in entries:
        if p.name.startswith(".") or p.name == "benchmarks.json":
            continue
        if p.is_symlink() and not p.exists():
            errors.append(f"{p}: dangling symlink (to {os.readlink(p)}) where a machine folder should be; skipped")
            continue
        if not p.is_dir():
            errors.append(f"{p}: a file where a machine folder should be; skipped")
            continue
        kept = real_of.get(os.path.realpath(p), p)
        if kept != p:
            # One folder reached twice (h100-link -> h100-runner): the same results as two
            # machines would count every point twice and compare the machine with itself.
            errors.append(
                f"{p}: the same folder as {kept} (both resolve to {os.path.realpath(p)}); "
                f"loaded once, as {kept.name!r}, {p.name!r} skipped"
            )
            continue
        mjson = p / "machine.json"
        try:
            dangling = mjson.is_symlink() and not mjson.exists()
        except OSError as exc:  # a folder that cannot be searched (permissions)
            errors.append(f"{p}: cannot read the machine folder ({exc.strerror or exc}); machine skipped")
            continue
        if dangling:
            errors.append(f"{mjson}: dangling symlink (to {os.readlink(mjson)}); machine folder {p.name!r} skipped")
            continue
        try:
            data = files.read_json(mjson, problems=errors)
        except FileNotFoundError:
            try:
                n = sum(1 for f in p.glob("*.json"))
            except OSError:
                n = "?"
            if n == 0:
                empty.append(p)
            else:
                errors.append(f"{p}: no machine.json, so not a machine folder; its {n} .json file(s) are not loaded")
            continue
        except (OSError, ValueError) as exc:
            # A machine.json that is there but unusable (not JSON, nested too deep, not
            # UTF-8, a FIFO): the folder is a machine all the same; its results are kept
            # under the folder's name rather than lost with the one file describing them.
            if isinstance(exc, OSError):
                why = f"cannot read ({exc.strerror or exc})"
            elif isinstance(exc, (UnicodeDecodeError, files.InputLimitError)):
                why = f"cannot read ({exc})"
            else:
                why = f"not valid JSON ({exc})"
            errors.append(f"{mjson}: {why}; its results are loaded as machine {p.name!r} (the folder's name)")
            data = {"machine": p.name}
        try:
            minfo = schema.machine_json(data, mjson)
        except ValueError as exc:  # SchemaError
            errors.append(f"{exc}; its results are loaded as machine {p.name!r} (the folder's name)")
            minfo = {"machine": p.name}
        if wanted is not None and p.name not in wanted and minfo.get("machine") not in wanted:
            continue
        yield p, minfo
    if len(empty) <= 3:
        errors += [f"{p}: no machine.json, so not a machine folder; it holds no .json file" for p in empty]
    else:  # 3,000 empty folders were 3,000 lines, burying the one that mattered (hostile trial round 7)
        errors.append(
            f"{base}: {len(empty)} folders with no machine.json and no .json file (e.g. "
            f"{', '.join(p.name for p in empty[:3])}, ...): not machine folders, skipped"
        )


def claim_machine_name(errors: list[str], mdir: Path, minfo: dict, claimed: dict) -> str:
    """The machine id of ``mdir``: its ``machine.json`` name (with a warning when it is
    not the folder's name), unless another folder holds that name already, then
    ``<name> (<folder>)`` with a warning: two machines are never merged into one."""
    name = str(minfo.get("machine") or mdir.name)
    if name != mdir.name:
        # asv names a machine by its machine.json; a folder renamed by hand, or a file copied
        # from another machine, used to rename it without a word (hostile trial round 6, S-g)
        errors.append(
            f"{mdir}/machine.json: names machine {name!r}, not its folder's name {mdir.name!r}; "
            f"named {name!r}, as asv does"
        )
    if name not in claimed:
        claimed[name] = mdir
        return name
    alt = f"{name} ({mdir.name})"
    errors.append(
        f"{mdir}/machine.json: names machine {name!r}, as {claimed[name]}/machine.json does; "
        f"kept apart as machine {alt!r}"
    )
    claimed[alt] = mdir
    return alt


#: Files over the folder-wide grid total named one line each; the rest are counted
#: in one line (:func:`report_over_folder_limit`): at 10,000 commits x 4 machines
#: the limit skipped 36,000 files, one warning line each.
MAX_OVER_NAMED = 3


def within_folder_budget(path: Path, res, errors: list[str], budget: dict) -> bool:
    """Whether the parsed results file ``res`` at ``path`` fits the folder-wide grid
    total :data:`harness.core.files.MAX_FOLDER_GRID_POINTS`, counted in ``budget``
    (:attr:`harness.store.model.ResultSet.grid_points`: path -> combinations,
    ``None`` -> the running total, ``"over"`` -> the files refused). A file read
    again (a machine redone in memory) replaces its own count. A refused file is
    named in ``errors`` when it is one of the first :data:`MAX_OVER_NAMED`."""
    i = res.columns.index("params") if "params" in res.columns else None
    n = sum(
        schema._grid_points(row[i]) if i is not None and isinstance(row, list) and i < len(row) else 1
        for row in res.results.values()
    )
    before = budget.get(None, 0) - budget.get(str(path), 0)
    if before + n > files.MAX_FOLDER_GRID_POINTS:
        over = budget.setdefault("over", {})  # path -> its combinations, each file once (a redo reads it again)
        over[str(path)] = n
        if str(path) in itertools.islice(over, MAX_OVER_NAMED):  # the first ones, again on a redo
            errors.append(
                f"{path}: declares {n:,} parameter combinations, which with the {before:,} of the files read before "
                f"is over the folder-wide limit MAX_FOLDER_GRID_POINTS={files.MAX_FOLDER_GRID_POINTS:,} "
                "(harness/core/files.py); file skipped (split the results folder to read all of it)"
            )
        return False
    budget[str(path)], budget[None] = n, before + n
    return True


def report_over_folder_limit(base: Path, budget: dict, errors: list[str]) -> None:
    """One line in ``errors`` for the files past :data:`MAX_OVER_NAMED` that
    :func:`within_folder_budget` refused (how many, their combinations, the last
    one's name), and one for the rows past it refused over
    :data:`harness.core.files.MAX_FOLDER_SERIES`
    (:func:`harness.store.columns._series_room`)."""
    rows = budget.get("series_over") or {}
    if len(rows) > MAX_OVER_NAMED:
        rest_rows = list(rows)[MAX_OVER_NAMED:]
        errors.append(
            f"{base}: {len(rest_rows):,} more rows ({sum(rows[k] for k in rest_rows):,} series, the last "
            f"{rest_rows[-1][0]} benchmark {rest_rows[-1][1]}) skipped over the folder-wide limit "
            f"MAX_FOLDER_SERIES={files.MAX_FOLDER_SERIES:,} (harness/core/files.py); "
            "split the results folder to read all of it"
        )
    over = budget.get("over") or {}
    if len(over) <= MAX_OVER_NAMED:
        return
    rest = list(over)[MAX_OVER_NAMED:]
    errors.append(
        f"{base}: {len(rest):,} more results files ({sum(over[p] for p in rest):,} parameter "
        f"combinations, the last {rest[-1]}) skipped over the folder-wide limit "
        f"MAX_FOLDER_GRID_POINTS={files.MAX_FOLDER_GRID_POINTS:,} (harness/core/files.py); "
        "split the results folder to read all of it"
    )
