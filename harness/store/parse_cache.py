"""A cache of checked asv results files beside the results (issue 28).

Reading one results file is mostly checking it: on 1,000 commits x 2 machines
x 504 series, :func:`harness.store.asvfile.read_results_file` takes about
4.6 ms a file, of which ``json.loads`` is 1.2 ms and the per-row checks of
:func:`harness.core.schema.results_file` most of the rest; loading its checked
fields back from this cache takes 0.15 ms (``docs/performance.md``, "Results
cache and a publish after one new commit"). A publish after one new commit re-reads every file of the history,
so the cache makes its load that much cheaper; a first publish pays a few
percent more (it writes the entries).

What an entry holds: the fields :class:`harness.store.asvfile.ResultsFile`
keeps (plain dicts, lists, strings and numbers) and the problem lines the
reading wrote for that file, after the checks. Its key is a BLAKE2b hash of
the file's bytes, its path as given (the lines name it) and :func:`code_salt`
(the source of every module whose rules decide what a file reads as, asv's
version and Python's): an edited file, a moved folder or a new kernelwatch
reads the file again, and nothing else can make an entry stale. asv's JSON
stays the source of truth; the cache is derived from it, rebuilt entry by
entry when missing, and safe to delete.

Why a per-file cache of checked rows and not a columnar store of series (the
issue's example, Parquet through DuckDB or pyarrow): a new commit adds one
file but a point to every series of its machine, so a series store is
rewritten whole at every publish, while per-file entries are written once;
reading an entry costs 3% of reading and checking the file it replaces, the rest of the
load being the filing of rows into series that a store of series would
only move elsewhere. Neither library is installed here either.

Storage: one SQLite database, ``results.sqlite`` in the cache folder
(:mod:`sqlite3`, Python's own; WAL journal, so the per-machine loading
processes of ``--analysis off`` write side by side), one row an entry. One
file an entry was measured first and dropped: creating 2,000 small files cost
2.3 s of the 3.7 s a first publish then spent on the cache, on this VM's
overlay filesystem. An entry is ``KWRC2`` then a :mod:`marshal` dump (version 4) of the
fields: marshal writes and reads builtin values only (no class is looked up,
no function called; Python's own ``__pycache__`` is marshal), and it read an
entry in 0.15 ms where ``pickle`` took 0.7 ms (300 entries of that history).
Like ``__pycache__``, the cache is trusted as the user's own files are: its
folder is made mode 0700, and a hand-crafted entry could at worst feed
wrong values or crash the process, never run code; each entry carries a
BLAKE2b checksum of its payload, so one changed after it was written (a
flipped bit) is a miss. An unreadable entry (cut short, changed, of an
older format, of the wrong shape) is a miss, rewritten, and named once on
stderr by each loading process. A cache that cannot be opened or written
(read-only, full, locked for :data:`BUSY_S`, not a database, a database
kernelwatch did not make, which is left untouched) is turned off for the
rest of the process with one line; the load goes on from the JSON. The key
holds the path as given (relative or not), as the stored lines name it.

Entries not read or written for :data:`MAX_AGE_DAYS`, then the least
recently used past :data:`MAX_BYTES`, are removed by :func:`prune`
(``kernelwatch publish`` and ``analyze`` call it when done), and the file
shrinks with them (``auto_vacuum=INCREMENTAL``). Why a limit: ``analyze`` on
many throwaway histories (a detection benchmark) filled a default cache with
549 MB of entries no later run would read. A database of another layout
(:data:`SCHEMA`, an older kernelwatch) is emptied and made again.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "ResultsCache",
    "active",
    "using",
    "session",
    "default_root",
    "root_from",
    "prune",
    "placement_problem",
    "MAX_AGE_DAYS",
]

#: The entry format; part of the key and of each entry's first bytes.
FORMAT = b"KWRC2\n"
#: Entries neither read nor written for this many days are pruned.
MAX_AGE_DAYS = 14
#: Past this many bytes of entries the least recently used are pruned (2 GiB:
#: about 25,000 commits x 2 machines of the 504-series suite, at 40 KB a file).
MAX_BYTES = 2 * 2**30
#: The database's layout (``PRAGMA user_version``); another one is made again.
SCHEMA = 2
#: ``PRAGMA application_id`` of a kernelwatch cache ("KWRC"): a database without
#: it that holds tables is someone else's, left as it is (hostile trial).
APP_ID = 0x4B575243
#: Seconds to wait for a database another process holds locked (then: no cache).
BUSY_S = 10.0
#: Where the rules that decide what a file reads as live (hashed into every key).
_RULE_MODULES = ("harness/core", "harness/store/asvfile.py", "harness/store/parse_cache.py")

_active: ResultsCache | None = None
_salt: bytes | None = None


def code_salt() -> bytes:
    """A hash of kernelwatch's reading rules: the source of every module under
    :data:`_RULE_MODULES`, asv's version and Python's major.minor."""
    global _salt
    if _salt is None:
        import asv

        root = Path(__file__).resolve().parents[2]
        h = hashlib.blake2b(FORMAT, digest_size=16)
        for rel in _RULE_MODULES:
            p = root / rel
            for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
        h.update(f"asv {getattr(asv, '__version__', '?')} python {sys.version_info[:2]}".encode())
        _salt = h.digest()
    return _salt


def default_root() -> Path:
    """``$XDG_CACHE_HOME/kernelwatch/results`` (``~/.cache`` when that is unset),
    the XDG base-directory convention; ``$KERNELWATCH_CACHE`` is read by
    :func:`root_from`, before this."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelwatch" / "results"


def root_from(option: str | None) -> Path | None:
    """The cache folder for a ``--cache`` value: ``None`` (not given) reads
    ``$KERNELWATCH_CACHE``, then :func:`default_root`; ``off`` (either place,
    any case) means no cache; blanks around a value are dropped, and an empty
    value is the default."""
    value = option if option is not None else os.environ.get("KERNELWATCH_CACHE")
    value = value.strip() if value is not None else ""
    if value.lower() == "off":
        return None
    return Path(value) if value else default_root()


def _has_our_id(path: Path) -> bool:
    """Whether ``path`` is an SQLite file with kernelwatch's application id
    (bytes 68-71 of the header, big-endian), read without opening it as a database."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(72)
    except OSError:
        return False
    return len(head) == 72 and head.startswith(b"SQLite format 3\0") and int.from_bytes(head[68:72], "big") == APP_ID


class NotOurs(Exception):
    """A database at the cache's place that kernelwatch did not make."""


def _shown(x) -> str:
    """``x`` as text on one line: control characters (a newline in a path) escaped."""
    from harness.core.model import printable

    return printable(x)


#: Bytes of the checksum after :data:`FORMAT` (BLAKE2b of the entry's key and payload).
_SUM = 16


def _checksum(key: str, payload) -> bytes:
    h = hashlib.blake2b(key.encode("ascii"), digest_size=_SUM)
    h.update(payload)
    return h.digest()


def _encode(key: str, fields: tuple, problems: list) -> bytes:
    payload = marshal.dumps((fields, list(problems)), 4)
    return FORMAT + _checksum(key, payload) + payload


def _decode(key: str, blob) -> tuple:
    """``(fields, problems)`` of the entry stored under ``key``; ``ValueError``
    for one that is damaged or not this key's (the checksum covers both), of
    another format, or of the wrong shape."""
    if not isinstance(blob, bytes) or not blob.startswith(FORMAT):
        raise ValueError("not a kernelwatch cache entry of this format")
    view = memoryview(blob)
    want, payload = view[len(FORMAT) : len(FORMAT) + _SUM], view[len(FORMAT) + _SUM :]
    if _checksum(key, payload) != want:
        raise ValueError("checksum does not match: the entry was changed after it was written")
    value = marshal.loads(payload)
    ok = isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tuple) and len(value[0]) == 6
    ok = ok and isinstance(value[1], list) and all(isinstance(x, str) for x in value[1])
    if ok:
        _commit, _date, params, _env, columns, results = value[0]
        ok = isinstance(params, dict) and isinstance(columns, list) and isinstance(results, dict)
        ok = ok and all(isinstance(c, str) for c in columns) and all(isinstance(r, list) for r in results.values())
    if not ok:
        raise ValueError("unexpected contents")
    return value


class ResultsCache:
    """Checked results files in ``root/results.sqlite``, keyed by content (see the module).

    Parameters
    ----------
    root : Path
        The cache folder; created when first written (mode 0700).

    Attributes
    ----------
    hits, misses, written : int
        Counts for this process (a forked loader counts its own).
    """

    #: The database file in ``root``.
    FILE = "results.sqlite"
    #: Entries written per transaction.
    BATCH = 256

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.hits = 0
        self.misses = 0
        self.written = 0
        self._usable = True
        self._named_bad = False
        self._db = None
        self._pid = None
        self._pending = 0
        self._used: list = []

    def key(self, path: str | os.PathLike, data: bytes) -> str:
        # The path as the lines name it (relative stays relative), not resolved:
        # the same file read as P/x.json and as /abs/P/x.json prints differently.
        h = hashlib.blake2b(code_salt(), digest_size=20)
        h.update(os.fsencode(path) + b"\0")
        h.update(data)
        return h.hexdigest()

    def _off(self, why: Exception) -> None:
        self._usable = False
        self._db = None
        path = self.root / self.FILE
        ours = not isinstance(why, NotOurs) and _has_our_id(path)
        tail = "; it holds derived data only: deleting it is safe" if ours else ""
        print(
            f"kernelwatch: results cache {_shown(path)} unusable ({type(why).__name__}: {_shown(why)}); "
            f"the results are read from their JSON for the rest of this run{tail}",
            file=sys.stderr,
        )

    def _conn(self, create: bool):
        """This process' connection (a forked process opens its own), or ``None``."""
        import sqlite3

        if not self._usable:
            return None
        if self._db is not None and self._pid == os.getpid():
            return self._db
        self._db, self._pending, self._used = None, 0, []
        path = self.root / self.FILE
        try:
            if not create and not path.exists():
                return None
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            db = _open(path)
        except (OSError, sqlite3.Error, NotOurs) as exc:
            self._off(exc)
            return None
        self._db, self._pid = db, os.getpid()
        return db

    def get(self, key: str, path: str | os.PathLike) -> tuple | None:
        """``(fields, problems)`` stored under ``key`` (:meth:`key` of ``path``
        and its bytes), or ``None``; ``path`` only names the file in a line."""
        import sqlite3

        db = self._conn(create=False)
        if db is None:
            self.misses += 1
            return None
        try:
            row = db.execute("SELECT blob FROM entries WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            self._off(exc)
            self.misses += 1
            return None
        if row is None:
            self.misses += 1
            return None
        try:
            value = _decode(key, row[0])
        except Exception as exc:  # any damage: a miss, rewritten by put()
            if not self._named_bad:
                self._named_bad = True
                print(
                    f"kernelwatch: results cache {_shown(self.root / self.FILE)}: entry for {_shown(path)} "
                    f"unreadable ({type(exc).__name__}: {_shown(exc)}); read from its JSON and the entry rewritten",
                    file=sys.stderr,
                )
            self.misses += 1
            return None
        self.hits += 1
        self._used.append(key)
        return value

    def put(self, key: str, fields: tuple, problems: list) -> None:
        """Store ``(fields, problems)`` under ``key`` (:meth:`key`); a cache
        that cannot be written is turned off with one line on stderr."""
        import sqlite3

        db = self._conn(create=True)
        if db is None:
            return
        try:
            blob = _encode(key, fields, problems)
            if self._pending == 0:
                db.execute("BEGIN")
            db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)", (key, time.time(), len(blob), blob))
            self._pending += 1
            if self._pending >= self.BATCH:
                db.execute("COMMIT")
                self._pending = 0
        except (sqlite3.Error, TypeError, ValueError, RecursionError) as exc:
            self._off(exc)
            return
        self.written += 1

    def flush(self) -> None:
        """Commit what :meth:`put` wrote and mark what :meth:`get` read as used
        (kept by :func:`prune`). :func:`harness.store.results.load_columns` calls
        it when it returns, in the process that loaded."""
        import sqlite3

        db = self._db if self._pid == os.getpid() else None
        if db is None:
            return
        try:
            if self._used:
                if self._pending == 0:
                    db.execute("BEGIN")
                    self._pending = 1
                now = time.time()
                db.executemany("UPDATE entries SET used = ? WHERE key = ?", ((now, k) for k in self._used))
                self._used = []
            if self._pending:
                db.execute("COMMIT")
                self._pending = 0
        except sqlite3.Error as exc:
            self._off(exc)

    def close(self) -> None:
        self.flush()
        if self._db is not None and self._pid == os.getpid():
            self._db.close()
        self._db = None


def active() -> ResultsCache | None:
    """The cache :func:`using` set for this process, or ``None``."""
    return _active


@contextmanager
def using(cache: ResultsCache | None):
    """Read results files through ``cache`` inside the block (``None``: no cache).
    A forked loader inherits it."""
    global _active
    before = _active
    _active = cache
    try:
        yield cache
    finally:
        _active = before
        if cache is not None:
            cache.close()


def _open(path: Path, busy_s: float = BUSY_S):
    """A connection to the database at ``path`` in autocommit mode, its table
    made when new. A database of ours (:data:`APP_ID`) of another
    :data:`SCHEMA` (an older kernelwatch) is emptied and made again: it is
    derived data. A database with tables and another application id is not
    touched (not even switched to WAL).

    Raises
    ------
    sqlite3.Error
        Not a database, locked past :data:`BUSY_S`, unwritable.
    NotOurs
        Someone else's database.
    """
    import sqlite3

    db = sqlite3.connect(path, timeout=busy_s, isolation_level=None)

    def foreign() -> int | None:
        app = db.execute("PRAGMA application_id").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        return app if app != APP_ID and tables else None

    try:
        db.execute("BEGIN")  # one snapshot: a loader beside this one may be making the table
        app = foreign()
        db.execute("COMMIT")
        if app is not None:
            raise NotOurs(f"a database kernelwatch did not make (application_id {app}); left as it is")
        db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # takes on a new file only: prune() gives pages back
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
            db.execute("BEGIN IMMEDIATE")  # one process makes the table; the others wait, then see it
            if foreign() is not None:
                db.execute("ROLLBACK")
                raise NotOurs("a database kernelwatch did not make appeared at its place; left as it is")
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
                db.execute("DROP TABLE IF EXISTS entries")
                db.execute(
                    "CREATE TABLE entries (key TEXT PRIMARY KEY, used REAL NOT NULL, size INTEGER NOT NULL, "
                    "blob BLOB NOT NULL)"
                )
                db.execute(f"PRAGMA user_version={SCHEMA}")
                db.execute(f"PRAGMA application_id={APP_ID}")
            db.execute("COMMIT")
    except BaseException:
        db.close()
        raise
    return db


@contextmanager
def session(option: str | None):
    """For a command: read results files through the cache ``option`` names
    (:func:`root_from`) inside the block, then :func:`prune` it; no cache for
    ``off``."""
    root = root_from(option)
    cache = ResultsCache(root) if root is not None else None
    with using(cache):
        yield
    if cache is not None and cache._usable:  # one that was turned off here is not waited for again
        prune(root, busy_s=1.0)


def placement_problem(root: Path | None, folders: dict) -> str | None:
    """Why the cache folder ``root`` cannot go where it is, or ``None``:
    inside one of ``folders`` (``{"--out": path, ...}``), where it would be
    published with the site (or removed with the old one), or read as a
    machine folder of the results (hostile trial, 2026-12-07)."""
    if root is None:
        return None
    try:
        here = root.resolve()
        for option, folder in folders.items():
            if folder is None:
                continue
            there = Path(folder).resolve()
            if here == there or there in here.parents:
                return (
                    f"the results cache {_shown(root)} (--cache or KERNELWATCH_CACHE) is inside {option} "
                    f"{_shown(folder)}: give the cache a folder of its own (default ~/.cache/kernelwatch/results) "
                    "or 'off'"
                )
    except (OSError, RuntimeError):  # a path that cannot be resolved is judged when opened
        return None
    return None


def prune(
    root: str | os.PathLike,
    max_age_days: float = MAX_AGE_DAYS,
    max_bytes: int = MAX_BYTES,
    now: float | None = None,
    busy_s: float = BUSY_S,
) -> int:
    """Remove entries under ``root`` neither read nor written for
    ``max_age_days``, then the least recently used ones until the entries
    hold at most ``max_bytes`` (:data:`MAX_BYTES`), and give the space back to
    the file system; returns how many were removed. A cache that cannot be
    pruned is only bigger: errors are ignored."""
    import sqlite3

    path = Path(root) / ResultsCache.FILE
    cutoff = (time.time() if now is None else now) - max_age_days * 86400.0
    try:
        if not path.is_file():
            return 0
        db = _open(path, busy_s)
        try:
            n = max(db.execute("DELETE FROM entries WHERE used < ?", (cutoff,)).rowcount, 0)
            total = db.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()[0]
            if total > max_bytes:
                # newest first; an entry goes when the newer ones and it pass the limit
                n += max(
                    db.execute(
                        "DELETE FROM entries WHERE key IN (SELECT key FROM (SELECT key, SUM(size) OVER "
                        "(ORDER BY used DESC, key) AS upto FROM entries) WHERE upto > ?)",
                        (max_bytes,),
                    ).rowcount,
                    0,
                )
            if n:
                db.executescript("PRAGMA incremental_vacuum;")  # run to the end (execute() steps it once: one page)
            return n
        finally:
            db.close()
    except (OSError, sqlite3.Error, NotOurs):
        return 0
