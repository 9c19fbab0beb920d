"""Publish loads the results in a fresh process (issue 28): the site is the one
an in-process load gives, and a load that fails or dies is reported, not hung."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from test_site_data import sha, write_results

from harness.report import site
from harness.report.model import PublishError
from harness.store import results as R

BENCH = {"suite.a.track_time": {"param_names": ["n"], "params": [["'1'", "'2'"]]}}


def _value(m, i, bench, combo):
    return 1e-3 * (1 + 0.004 * ((i * 3) % 5)) * (1.3 if i >= 15 else 1.0)


def _res(tmp_path: Path) -> Path:
    return write_results(tmp_path / "r", {"m1": {"cpu": "a"}}, [sha(i) for i in range(24)], BENCH, _value)


def _site_bytes(out: Path) -> dict:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_loaded_apart_the_site_is_the_in_process_one(tmp_path, monkeypatch):
    res = _res(tmp_path)
    site.publish(res, tmp_path / "apart")
    monkeypatch.setattr(site, "_load_apart", lambda d, repo: R.load_columns(d, repo=repo, quartiles=False))
    site.publish(res, tmp_path / "here")
    a, b = _site_bytes(tmp_path / "apart"), _site_bytes(tmp_path / "here")
    assert a.keys() == b.keys() and a == b
    assert any(b"regression" in v for v in a.values())
    # Negative control: the comparison sees another history.
    (res / "m1" / f"{sha(20)[:8]}-kernelwatch-py3.11.json").unlink()
    site.publish(res, tmp_path / "other")
    assert _site_bytes(tmp_path / "other") != a


def test_an_error_of_the_load_is_raised_in_the_parent(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise FileNotFoundError("no such results folder: /nowhere")

    monkeypatch.setattr(R, "load_columns", boom)  # the fork inherits it
    with pytest.raises(FileNotFoundError, match="/nowhere"):
        site._load_apart(_res(tmp_path), None)


def test_an_unpicklable_error_comes_back_as_its_text(tmp_path, monkeypatch):
    class Local(Exception):  # defined in a function: pickle cannot find it
        pass

    def boom(*a, **k):
        raise Local("parse of row 7 went wrong")

    monkeypatch.setattr(R, "load_columns", boom)
    with pytest.raises(PublishError, match="Local: parse of row 7 went wrong"):
        site._load_apart(_res(tmp_path), None)


def test_a_loading_process_that_dies_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "load_columns", lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(PublishError, match=r"died without a result \(killed by SIGKILL\)"):
        site._load_apart(_res(tmp_path), None)


class TwoArgs(Exception):
    """Pickles, but does not unpickle (``__init__`` takes two arguments)."""

    def __init__(self, path, why):
        super().__init__(f"{path}: {why}")


def test_an_error_that_does_not_unpickle_comes_back_as_its_text(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise TwoArgs("/r/m1/abc.json", "row 7 is broken")

    monkeypatch.setattr(R, "load_columns", boom)
    with pytest.raises(PublishError, match=r"TwoArgs: /r/m1/abc.json: row 7 is broken"):
        site._load_apart(_res(tmp_path), None)


def _no_children() -> bool:
    try:
        return os.waitpid(-1, os.WNOHANG) is None  # pragma: no cover (raises when none)
    except ChildProcessError:
        return True


def test_a_parent_stopped_while_reading_stops_the_loader_at_once(tmp_path, monkeypatch):
    """A signal (here: the KeyboardInterrupt it becomes) while the parent waits for
    the result: the loader, still loading for 30 s, is killed and reaped at once."""
    import pickle
    import time

    def slow(*a, **k):
        time.sleep(30)

    def interrupted(fh):
        raise KeyboardInterrupt

    monkeypatch.setattr(R, "load_columns", slow)
    monkeypatch.setattr(pickle, "load", interrupted)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        site._load_apart(_res(tmp_path), None)
    assert time.monotonic() - t0 < 10
    assert _no_children()


def test_a_failed_read_is_named_and_the_loader_reaped(tmp_path, monkeypatch):
    import pickle

    def no_memory(fh):
        fh.read(100)
        raise MemoryError("no room for the columns")

    monkeypatch.setattr(pickle, "load", no_memory)
    with pytest.raises(PublishError, match=r"cannot read the loaded results .*MemoryError: no room for the columns"):
        site._load_apart(_res(tmp_path), None)
    assert _no_children()


def _publish_in(args):
    res, out = args
    try:
        return f"ok {site.publish(Path(res), Path(out)).pages}"
    except BaseException as exc:  # the test reads the text
        return f"{type(exc).__name__}: {exc}"


def test_publish_works_from_a_daemonic_process(tmp_path):
    """A multiprocessing pool worker (daemonic: it may not start multiprocessing
    children) publishing a folder: the load still runs apart."""
    import multiprocessing as mp

    res = _res(tmp_path)
    with mp.get_context("fork").Pool(2) as pool:
        got = pool.map(_publish_in, [(str(res), str(tmp_path / f"out{i}")) for i in range(2)])
    assert all(g.startswith("ok ") for g in got), got
    assert _site_bytes(tmp_path / "out0") == _site_bytes(tmp_path / "out1")
