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
the file's bytes, its absolute path (the lines name it) and :func:`code_salt`
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
wrong values or crash the process, never run code. An unreadable entry (cut short, edited, from an
older format) is a miss, rewritten, and named once on stderr. A cache that
cannot be opened or written (read-only, full, not a database) is turned off
for the rest of the process with one line; the load goes on from the JSON.

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

__all__ = ["ResultsCache", "active", "using", "default_root", "prune", "MAX_AGE_DAYS"]

#: The entry format; part of the key and of each entry's first bytes.
FORMAT = b"KWRC2\n"
#: Entries neither read nor written for this many days are pruned.
MAX_AGE_DAYS = 14
#: Past this many bytes of entries the least recently used are pruned (2 GiB:
#: about 25,000 commits x 2 machines of the 504-series suite, at 40 KB a file).
MAX_BYTES = 2 * 2**30
#: The database's layout (``PRAGMA user_version``); another one is made again.
SCHEMA = 2
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
    """``$KERNELWATCH_CACHE`` when set (``off`` turns the cache off: see
    :func:`root_from`), else ``$XDG_CACHE_HOME/kernelwatch/results`` (``~/.cache``
    when that is unset), the XDG base-directory convention."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelwatch" / "results"


def root_from(option: str | None) -> Path | None:
    """The cache folder for a ``--cache`` value: ``None`` (not given) reads
    ``$KERNELWATCH_CACHE``, then :func:`default_root`; ``off`` (either place)
    means no cache."""
    value = option if option is not None else os.environ.get("KERNELWATCH_CACHE")
    if value is not None and value.strip().lower() == "off":
        return None
    return Path(value) if value else default_root()


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
        h = hashlib.blake2b(code_salt(), digest_size=20)
        h.update(os.path.abspath(path).encode("utf-8", "surrogateescape") + b"\0")
        h.update(data)
        return h.hexdigest()

    def _off(self, why: Exception) -> None:
        self._usable = False
        self._db = None
        path = self.root / self.FILE
        tail = "; it holds derived data only: deleting it is safe" if path.is_file() else ""
        print(
            f"kernelwatch: results cache {path} unusable ({type(why).__name__}: {why}); "
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
        if not create and not path.exists():
            return None
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            db = _open(path)
        except (OSError, sqlite3.Error) as exc:
            self._off(exc)
            return None
        self._db, self._pid = db, os.getpid()
        return db

    def get(self, path: str | os.PathLike, data: bytes) -> tuple | None:
        """``(fields, problems)`` stored for ``path`` with these bytes, or ``None``."""
        import sqlite3

        db = self._conn(create=False)
        if db is None:
            self.misses += 1
            return None
        key = self.key(path, data)
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
            blob = row[0]
            if not isinstance(blob, bytes) or not blob.startswith(FORMAT):
                raise ValueError("not a kernelwatch cache entry of this format")
            value = marshal.loads(memoryview(blob)[len(FORMAT) :])
            if not (
                isinstance(value, tuple)
                and len(value) == 2
                and isinstance(value[0], tuple)
                and len(value[0]) == 6
                and isinstance(value[1], list)
                and all(isinstance(x, str) for x in value[1])
            ):
                raise ValueError("unexpected contents")
        except Exception as exc:  # any damage: a miss, rewritten by put()
            if not self._named_bad:
                self._named_bad = True
                print(
                    f"kernelwatch: results cache {self.root / self.FILE}: entry for {path} unreadable "
                    f"({type(exc).__name__}: {exc}); read from its JSON and the entry rewritten",
                    file=sys.stderr,
                )
            self.misses += 1
            return None
        self.hits += 1
        self._used.append(key)
        return value

    def put(self, path: str | os.PathLike, data: bytes, fields: tuple, problems: list) -> None:
        """Store ``(fields, problems)`` for ``path`` with these bytes; a cache
        that cannot be written is turned off with one line on stderr."""
        import sqlite3

        db = self._conn(create=True)
        if db is None:
            return
        try:
            blob = FORMAT + marshal.dumps((fields, list(problems)), 4)
            if self._pending == 0:
                db.execute("BEGIN")
            db.execute(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)",
                (self.key(path, data), time.time(), len(blob), blob),
            )
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


def _open(path: Path):
    """A connection to the database at ``path`` in autocommit mode, its table
    made when new. A database of another :data:`SCHEMA` (an older kernelwatch)
    is emptied and made again: it is derived data.

    Raises
    ------
    sqlite3.Error
        Not a database, locked past the timeout, unwritable.
    """
    import sqlite3

    db = sqlite3.connect(path, timeout=60.0, isolation_level=None)
    try:
        db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # takes on a new file only: prune() gives pages back
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
            db.execute("BEGIN IMMEDIATE")  # one process makes the table; the others wait, then see it
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
                db.execute("DROP TABLE IF EXISTS entries")
                db.execute(
                    "CREATE TABLE entries (key TEXT PRIMARY KEY, used REAL NOT NULL, size INTEGER NOT NULL, "
                    "blob BLOB NOT NULL)"
                )
                db.execute(f"PRAGMA user_version={SCHEMA}")
            db.execute("COMMIT")
    except BaseException:
        db.close()
        raise
    return db


def prune(
    root: str | os.PathLike,
    max_age_days: float = MAX_AGE_DAYS,
    max_bytes: int = MAX_BYTES,
    now: float | None = None,
) -> int:
    """Remove entries under ``root`` neither read nor written for
    ``max_age_days``, then the least recently used ones until the entries
    hold at most ``max_bytes`` (:data:`MAX_BYTES`), and give the space back to
    the file system; returns how many were removed. A cache that cannot be
    pruned is only bigger: errors are ignored."""
    import sqlite3

    path = Path(root) / ResultsCache.FILE
    if not path.is_file():
        return 0
    cutoff = (time.time() if now is None else now) - max_age_days * 86400.0
    try:
        db = _open(path)
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
    except sqlite3.Error:
        return 0
