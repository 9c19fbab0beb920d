"""Which entries of an asv results directory are machines (issue 14: every one accounted for).

A machine is a folder holding a readable ``machine.json`` (checked by
:func:`harness.core.schema.machine_json`). Anything else at the top level is
named in a warning and skipped: a file or a dangling symlink where a folder
should be, a folder without ``machine.json`` (with the number of result files
it holds), a dangling or unreadable ``machine.json``. ``benchmarks.json`` and
names starting with a dot (kernelwatch's lock, scratch and quarantine in
``.kernelwatch/``) are not machines and not warned about. Two folders naming
the same machine are kept apart (:func:`claim_machine_name`).
"""

from __future__ import annotations

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
    for p in entries:
        if p.name.startswith(".") or p.name == "benchmarks.json":
            continue
        if p.is_symlink() and not p.exists():
            errors.append(f"{p}: dangling symlink (to {os.readlink(p)}) where a machine folder should be; skipped")
            continue
        if not p.is_dir():
            errors.append(f"{p}: a file where a machine folder should be; skipped")
            continue
        mjson = p / "machine.json"
        if mjson.is_symlink() and not mjson.exists():
            errors.append(f"{mjson}: dangling symlink (to {os.readlink(mjson)}); machine folder {p.name!r} skipped")
            continue
        try:
            data = files.read_json(mjson)
        except FileNotFoundError:
            try:
                n = sum(1 for f in p.glob("*.json"))
            except OSError:
                n = "?"
            errors.append(f"{p}: no machine.json, so not a machine folder; its {n} .json file(s) are not loaded")
            continue
        except (OSError, UnicodeDecodeError, files.InputLimitError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            errors.append(f"{mjson}: cannot read ({why}); machine folder {p.name!r} skipped")
            continue
        except ValueError as exc:  # json.JSONDecodeError
            errors.append(f"{mjson}: not valid JSON ({exc}); machine folder {p.name!r} skipped")
            continue
        try:
            minfo = schema.machine_json(data, mjson)
        except ValueError as exc:  # SchemaError
            msg = str(exc)
            errors.append(f"{msg}; machine folder {p.name!r} skipped")
            continue
        if wanted is not None and p.name not in wanted and minfo.get("machine") not in wanted:
            continue
        yield p, minfo


def claim_machine_name(errors: list[str], mdir: Path, minfo: dict, claimed: dict) -> str:
    """The machine id of ``mdir``: its ``machine.json`` name, unless another folder
    holds that name already, then ``<name> (<folder>)`` with a warning: two
    machines are never merged into one."""
    name = str(minfo.get("machine") or mdir.name)
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
