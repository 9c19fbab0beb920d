"""The results cache (issue 28, ``harness.store.parse_cache``): a load through
a cold cache, a warm one and none gives the same columns and the same lines;
an edited file, a moved folder or a damaged entry is read from its JSON again;
an entry can hold data only; a cache that cannot be written is turned off
without losing the load."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import OPENBLAS_EXAMPLE
from test_store_streaming import _flat

from harness.cli import main as cli_main
from harness.store import parse_cache as P
from harness.store import results as R


def _history(tmp_path: Path) -> Path:
    """The in-repository OpenBLAS slice, one file given a duplicate key (a
    problem line that must come back from the cache too)."""
    res = tmp_path / "results"
    shutil.copytree(OPENBLAS_EXAMPLE / "results", res)
    first = sorted((res / "gha-aws-skylake").glob("*-*.json"))[0]
    text = first.read_text()
    first.write_text(text.replace('{"commit_hash"', '{"env_name": "dup", "commit_hash"', 1))
    return res


def _load(res: Path, cache: P.ResultsCache | None) -> dict:
    with P.using(cache):
        return _flat(*R.load_columns(res))


def _db(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / P.ResultsCache.FILE)


def _tree(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _entries(root: Path) -> list[str]:
    if not (root / P.ResultsCache.FILE).exists():
        return []
    db = _db(root)
    try:
        return [k for (k,) in db.execute("SELECT key FROM entries ORDER BY key")]
    finally:
        db.close()


def _set(root: Path, sql: str, rows) -> None:
    db = _db(root)
    with db:
        db.executemany(sql, rows)
    db.close()


def test_cold_warm_and_no_cache_load_the_same(tmp_path):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    plain = _load(res, None)
    cold = P.ResultsCache(root)
    first = _load(res, cold)
    warm = P.ResultsCache(root)
    second = _load(res, warm)
    assert plain == first == second
    assert any("duplicate key" in e for e in second["errors"])  # a line the cache stored
    n_files = plain["files"]
    assert cold.written == n_files and cold.hits == 0
    assert warm.hits == n_files and warm.written == 0
    assert len(_entries(root)) == n_files
    assert oct(root.stat().st_mode & 0o777) == "0o700"


def test_an_edited_file_is_read_again_not_served_stale(tmp_path):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    _load(res, P.ResultsCache(root))
    f = sorted((res / "gha-aws-graviton").glob("*-*.json"))[3]
    stat = f.stat()
    text = f.read_text()
    # Same length, same mtime: only the bytes say it changed.
    edited = text.replace('"version": 2', '"version": 3', 1)
    assert edited != text and len(edited) == len(text)
    f.write_text(edited)
    os.utime(f, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = P.ResultsCache(root)
    got = _load(res, again)
    assert got == _load(res, None)
    assert again.misses == 1
    assert any(str(f) in e and "'version'" in e for e in got["errors"])


def test_the_key_holds_the_path_and_the_rules(tmp_path, monkeypatch):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    _load(res, P.ResultsCache(root))
    moved = tmp_path / "moved"
    res.rename(moved)
    c = P.ResultsCache(root)
    got = _load(moved, c)
    assert c.hits == 0  # lines name the path: a moved folder is read again
    assert all(str(res) + os.sep not in e for e in got["errors"])
    monkeypatch.setattr(P, "_salt", b"other rules")
    c2 = P.ResultsCache(root)
    _load(moved, c2)
    assert c2.hits == 0 and c2.written == c.written


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # cut short
        lambda b: b"garbage",  # not an entry
        lambda b: P.FORMAT + marshal.dumps(("x", [])),  # another shape
        lambda b: P.FORMAT + marshal.dumps(((1, 2, 3, 4, 5, 6), [7])),  # problem lines not text
        lambda b: P.FORMAT + marshal.dumps((compile("1", "x", "eval"), [])),  # code: data, never run
        lambda b: b"KWRC1\n" + b[6:],  # an older format
    ],
)
def test_a_damaged_entry_is_a_miss_named_once_and_rewritten(tmp_path, capsys, damage):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    want = _load(res, P.ResultsCache(root))
    db = _db(root)
    rows = db.execute("SELECT key, blob FROM entries ORDER BY key LIMIT 3").fetchall()
    db.close()
    _set(root, "UPDATE entries SET blob = ? WHERE key = ?", [(damage(b), k) for k, b in rows])
    c = P.ResultsCache(root)
    assert _load(res, c) == want
    assert c.misses == 3 and c.written == 3
    err = capsys.readouterr().err
    assert err.count("unreadable") == 1
    c3 = P.ResultsCache(root)
    _load(res, c3)
    assert c3.hits == want["files"]


def test_an_unwritable_cache_is_turned_off_with_one_line(tmp_path, capsys):
    res = _history(tmp_path)
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder would be")
    c = P.ResultsCache(blocker)
    assert _load(res, c) == _load(res, None)
    err = capsys.readouterr().err
    assert err.count("unusable") == 1 and str(blocker) in err
    assert c.written == 0


def test_a_file_that_is_no_database_is_turned_off_with_one_line(tmp_path, capsys):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    root.mkdir()
    (root / P.ResultsCache.FILE).write_bytes(b"not sqlite at all" * 100)
    c = P.ResultsCache(root)
    assert _load(res, c) == _load(res, None)
    assert capsys.readouterr().err.count("unusable") == 1


def test_prune_removes_only_old_entries(tmp_path):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    _load(res, P.ResultsCache(root))
    entries = _entries(root)
    old = time.time() - (P.MAX_AGE_DAYS + 1) * 86400
    _set(root, "UPDATE entries SET used = ? WHERE key = ?", [(old, k) for k in entries[:5]])
    assert P.prune(root) == 5
    assert len(_entries(root)) == len(entries) - 5
    assert P.prune(tmp_path / "absent") == 0


def test_a_read_keeps_an_entry_from_prune(tmp_path):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    _load(res, P.ResultsCache(root))
    old = time.time() - (P.MAX_AGE_DAYS + 1) * 86400
    _set(root, "UPDATE entries SET used = ?", [(old,)])
    _load(res, P.ResultsCache(root))  # every entry read: marked used
    assert P.prune(root) == 0
    n = len(_entries(root))
    _set(root, "UPDATE entries SET used = ?", [(old,)])  # negative control: nothing read since
    assert P.prune(root) == n > 0


def test_root_from_option_and_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWATCH_CACHE", str(tmp_path / "env"))
    assert P.root_from(None) == tmp_path / "env"
    assert P.root_from(str(tmp_path / "opt")) == tmp_path / "opt"
    assert P.root_from("OFF") is None
    monkeypatch.setenv("KERNELWATCH_CACHE", "off")
    assert P.root_from(None) is None
    monkeypatch.delenv("KERNELWATCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert P.root_from(None) == tmp_path / "xdg" / "kernelwatch" / "results"


def test_publish_through_the_cache_builds_the_same_site(tmp_path):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    args = ["publish", "--results", str(res), "--repo", "", "--analysis", "auto"]
    assert cli_main([*args, "--out", str(tmp_path / "plain"), "--cache", "off"]) == 0
    assert not root.exists()
    assert cli_main([*args, "--out", str(tmp_path / "cold"), "--cache", str(root)]) == 0
    n = len(_entries(root))
    assert n > 0
    assert cli_main([*args, "--out", str(tmp_path / "warm"), "--cache", str(root)]) == 0
    assert len(_entries(root)) == n

    plain = _tree(tmp_path / "plain")
    assert plain == _tree(tmp_path / "cold") == _tree(tmp_path / "warm")


def test_parallel_loaders_share_one_cache(tmp_path):
    """``--analysis off`` loads machines in worker processes side by side: each
    writes its own entries into the one database."""
    res = _history(tmp_path)
    root = tmp_path / "cache"
    args = ["publish", "--results", str(res), "--repo", "", "--analysis", "off", "--jobs", "3"]
    assert cli_main([*args, "--out", str(tmp_path / "a"), "--cache", str(root)]) == 0
    files = len(list(res.glob("*/*-*.json")))
    assert len(_entries(root)) == files
    assert cli_main([*args, "--out", str(tmp_path / "b"), "--cache", str(root)]) == 0
    assert cli_main([*args, "--out", str(tmp_path / "c"), "--cache", "off"]) == 0
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b") == _tree(tmp_path / "c")


def test_analyze_through_the_cache_gives_the_same_report(tmp_path):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    outs = []
    for i, cache in enumerate(["off", str(root), str(root)]):
        out = tmp_path / f"r{i}.json"
        assert cli_main(["analyze", "--results", str(res), "--json", str(out), "--cache", cache]) == 0
        outs.append(json.loads(out.read_text()))
    assert outs[0] == outs[1] == outs[2]
    assert len(_entries(root)) > 0


def test_prune_keeps_the_newest_entries_under_the_size_limit_and_shrinks_the_file(tmp_path):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    _load(res, P.ResultsCache(root))
    db = _db(root)
    rows = db.execute("SELECT key, size FROM entries ORDER BY key").fetchall()
    db.close()
    # the used times in key order: the last keys are the most recent
    _set(root, "UPDATE entries SET used = ? WHERE key = ?", [(1e9 + i, k) for i, (k, _) in enumerate(rows)])
    keep = rows[-10:]
    limit = sum(sz for _, sz in keep)
    size_before = (root / P.ResultsCache.FILE).stat().st_size
    assert P.prune(root, max_age_days=1e9, max_bytes=limit) == len(rows) - 10
    assert _entries(root) == sorted(k for k, _ in keep)
    P.ResultsCache(root).close()  # a checkpoint folds the WAL back
    assert (root / P.ResultsCache.FILE).stat().st_size < size_before / 2
    assert P.prune(root, max_age_days=1e9, max_bytes=limit) == 0  # control: at the limit, nothing more


def test_a_database_of_another_layout_is_made_again(tmp_path, capsys):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    root.mkdir()
    old = sqlite3.connect(root / P.ResultsCache.FILE)
    old.execute(f"PRAGMA application_id={P.APP_ID}")  # ours, an older layout
    old.execute("CREATE TABLE entries (key TEXT PRIMARY KEY, used REAL NOT NULL, blob BLOB NOT NULL)")
    old.commit()
    old.close()
    c = P.ResultsCache(root)
    assert _load(res, c) == _load(res, None)
    assert c.written == _load(res, None)["files"] and "unusable" not in capsys.readouterr().err


def test_someone_elses_database_is_left_as_it_is(tmp_path, capsys):
    """Hostile trial: a results.sqlite kernelwatch did not make lost its table."""
    res = _history(tmp_path)
    root = tmp_path / "cache"
    root.mkdir()
    theirs = sqlite3.connect(root / P.ResultsCache.FILE)
    theirs.execute("CREATE TABLE entries (id INTEGER, note TEXT)")
    theirs.executemany("INSERT INTO entries VALUES (?, ?)", [(i, f"row {i}") for i in range(5)])
    theirs.commit()
    theirs.close()
    c = P.ResultsCache(root)
    assert _load(res, c) == _load(res, None) and c.written == 0
    err = capsys.readouterr().err
    assert err.count("did not make") == 1 and "deleting it is safe" not in err
    db = _db(root)
    assert db.execute("SELECT count(*) FROM entries").fetchone()[0] == 5
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    db.close()
    assert P.prune(root, max_bytes=0) == 0


def test_an_entry_changed_after_it_was_written_is_a_miss(tmp_path, capsys):
    """Hostile trial: one bit of one float flipped in a blob showed a made-up x6.5e4 regression."""
    res = _history(tmp_path)
    root = tmp_path / "cache"
    want = _load(res, P.ResultsCache(root))
    db = _db(root)
    key, blob = db.execute("SELECT key, blob FROM entries ORDER BY key LIMIT 1").fetchone()
    db.close()
    flipped = bytearray(blob)
    flipped[-20] ^= 0x10
    _set(root, "UPDATE entries SET blob = ? WHERE key = ?", [(bytes(flipped), key)])
    c = P.ResultsCache(root)
    assert _load(res, c) == want and c.misses == 1
    assert "checksum" in capsys.readouterr().err


def test_the_lines_name_the_path_as_given(tmp_path, monkeypatch):
    """Hostile trial: a warm cache printed the relative path a first run had used."""
    res = _history(tmp_path)
    root = tmp_path / "cache"
    monkeypatch.chdir(tmp_path)
    rel = _load(Path("results"), P.ResultsCache(root))
    absolute = _load(res, P.ResultsCache(root))
    assert absolute == _load(res, None) and rel == _load(Path("results"), None)
    assert any(str(res) in e for e in absolute["errors"]) and not any(str(res) in e for e in rel["errors"])


def test_a_cache_path_that_cannot_be_looked_at_is_no_cache(tmp_path, capsys):
    """Hostile trial: a 300-character name stopped the whole run (exit 2)."""
    res = _history(tmp_path)
    c = P.ResultsCache(tmp_path / ("a" * 300))
    assert _load(res, c) == _load(res, None)
    assert "unusable" in capsys.readouterr().err
    assert P.prune(tmp_path / ("a" * 300)) == 0


@pytest.mark.parametrize("inside", ["out", "results"])
def test_a_cache_inside_the_site_or_the_results_is_refused(tmp_path, capsys, inside):
    """Hostile trial: a cache in the site folder was published; one in the results
    folder added a 'not a machine folder' line to the site."""
    res = _history(tmp_path)
    out = tmp_path / "site"
    cache = (out if inside == "out" else res) / "kwcache"
    args = ["publish", "--results", str(res), "--repo", "", "--out", str(out), "--cache", str(cache)]
    assert cli_main(args) == 2
    assert f"is inside --{inside}" in capsys.readouterr().err
    assert not cache.exists()
    ok = tmp_path / "elsewhere"
    assert cli_main([*args[:-1], str(ok)]) == 0  # control: a folder of its own
    if inside == "results":
        assert cli_main(["analyze", "--results", str(res), "--cache", str(cache)]) == 2


def test_an_entry_moved_to_another_key_is_a_miss(tmp_path, capsys):
    """Re-check of the hostile trial: one entry's blob copied onto another key
    was read as that file's (the checksum did not cover the key)."""
    res = _history(tmp_path)
    root = tmp_path / "cache"
    want = _load(res, P.ResultsCache(root))
    db = _db(root)
    (k1, b1), (k2, _b2) = db.execute("SELECT key, blob FROM entries ORDER BY key LIMIT 2").fetchall()
    db.close()
    _set(root, "UPDATE entries SET blob = ? WHERE key = ?", [(b1, k2)])
    c = P.ResultsCache(root)
    assert _load(res, c) == want and c.misses == 1 and "checksum" in capsys.readouterr().err


def test_a_text_file_at_the_cache_place_is_not_called_safe_to_delete(tmp_path, capsys):
    res = _history(tmp_path)
    root = tmp_path / "cache"
    root.mkdir()
    (root / P.ResultsCache.FILE).write_text("my notes\n" * 200)
    assert _load(res, P.ResultsCache(root)) == _load(res, None)
    err = capsys.readouterr().err
    assert "unusable" in err and "deleting it is safe" not in err
    assert (root / P.ResultsCache.FILE).read_text() == "my notes\n" * 200
    mine = tmp_path / "mine"
    _load(res, P.ResultsCache(mine))
    assert P._has_our_id(mine / P.ResultsCache.FILE)  # control: a cache of ours is recognised
