"""Publish is atomic (issue 29, item 3): the previous site survives a kill -9 at
any point, a full disk, and results with nothing usable; files publish does not
own are carried over. The kill test has a negative control: the same kills
against a publish that writes into the live folder (the old behaviour) must
break the site at least once."""

from __future__ import annotations

import errno
import hashlib
import multiprocessing as mp
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest
from test_site_data import sha, write_results

from harness import cli
from harness.report import render, site, swap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and kill -9 are tested on Linux")

BENCH = {"suite.vector_add.track_time": {"param_names": ["shape"], "params": [["'1024'", "'4096'", "'65536'"]]}}


def _results(root: Path, n: int, scale: float) -> Path:
    def value(m, i, bench, combo):
        return scale * 1e-4 * (1 + 0.01 * (i % 3)) * len(combo[0])

    return write_results(root, {"m1": {"cpu": "x"}, "m2": {"cpu": "y"}}, [sha(i) for i in range(n)], BENCH, value)


def _manifest(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


def _publish_child(results: str, out: str) -> None:
    rep = site.publish(Path(results), Path(out), analysis="off", jobs=1)
    os._exit(0 if rep.usable else 3)


def _old_publish_child(results: str, out: str) -> None:
    """The behaviour before issue 29: the owned entries of ``out`` removed, then the site written there."""

    class InPlace:
        def __init__(self, out, owned):
            import shutil

            self.path = Path(out)
            self.left_behind = []  # the Staging interface: nothing is ever swapped, so nothing left
            self.path.mkdir(parents=True, exist_ok=True)
            for name in owned:
                p = self.path / name
                if p.is_dir():
                    shutil.rmtree(p)
                elif p.exists():
                    p.unlink()

        def commit(self):
            pass

        def abort(self):
            pass

    swap.begin = InPlace
    _publish_child(results, out)


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("atomic")
    old_res, new_res = _results(tmp / "old", 8, 1.0), _results(tmp / "new", 40, 2.0)
    ref = tmp / "ref-new"
    site.publish(new_res, ref, analysis="off", jobs=1)
    return tmp, old_res, new_res, _manifest(ref)


def _fresh_old_site(tmp: Path, old_res: Path, name: str) -> tuple[Path, dict]:
    out = tmp / name
    site.publish(old_res, out, analysis="off", jobs=1)
    (out / "CNAME").write_text("bench.example.org\n")  # not publish's: must survive
    return out, _manifest(out)


def _kill_loop(target, tmp, old_res, new_res, n, seed):
    """Publish ``new_res`` over a fresh old site ``n`` times in a forked child,
    killed with SIGKILL after a random delay; returns [(killed?, manifest after)]."""
    ctx = mp.get_context("fork")
    t0 = time.perf_counter()
    p = ctx.Process(target=target, args=(str(new_res), str(tmp / "timing")))
    p.start()
    p.join()
    full = time.perf_counter() - t0
    assert p.exitcode == 0
    rng = random.Random(seed)
    outcomes = []
    for k in range(n):
        out, before = _fresh_old_site(tmp, old_res, f"site-{target.__name__}-{k}")
        p = ctx.Process(target=target, args=(str(new_res), str(out)))
        p.start()
        time.sleep(rng.uniform(0.02, 0.9) * full)
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        outcomes.append((p.exitcode == -signal.SIGKILL, before, _manifest(out) if out.exists() else {}))
    return outcomes


def test_kill_9_at_random_points_leaves_a_whole_site(sites):
    tmp, old_res, new_res, new_manifest = sites
    outcomes = _kill_loop(_publish_child, tmp, old_res, new_res, 20, seed=29)
    killed = sum(k for k, _, _ in outcomes)
    assert killed >= 10, f"only {killed} of 20 kills landed during the build"
    for i, (_, before, after) in enumerate(outcomes):
        with_cname = dict(new_manifest, CNAME=before["CNAME"])
        assert after in (before, with_cname), f"kill {i}: the site is neither the previous one nor the new one"
    # The scratch folders the kills left are removed by the next publish to the same place.
    left = [p for p in tmp.iterdir() if ".kw-stage-" in p.name]
    assert left, "no kill left a scratch folder: the kills did not land during the build"
    for k in range(len(outcomes)):
        out = tmp / f"site-_publish_child-{k}"
        if any(p.name.startswith(f".{out.name}.kw-") for p in left):
            site.publish(new_res, out, analysis="off", jobs=1)
            assert not [p for p in tmp.iterdir() if p.name.startswith(f".{out.name}.kw-")]
            assert _manifest(out) == dict(new_manifest, CNAME=outcomes[k][1]["CNAME"])


def test_negative_control_in_place_publish_breaks_under_kill(sites):
    tmp, old_res, new_res, new_manifest = sites
    outcomes = _kill_loop(_old_publish_child, tmp, old_res, new_res, 6, seed=3)
    broken = [
        i
        for i, (_, before, after) in enumerate(outcomes)
        if after not in (before, dict(new_manifest, CNAME=before["CNAME"]))
    ]
    assert broken, "the kill test would not notice a publish that writes into the live folder"


def test_nothing_usable_leaves_the_previous_site(sites, capsys):
    tmp, old_res, _, _ = sites
    out, before = _fresh_old_site(tmp, old_res, "site-unusable")
    empty = tmp / "empty-results"
    (empty / "m").mkdir(parents=True)
    (empty / "m" / "machine.json").write_text('{"machine": "m", "version": 1}')
    (empty / "m" / "deadbeef-env.json").write_text("garbage")
    code = cli.main(["publish", "--results", str(empty), "--out", str(out), "--repo", "", "--analysis", "off"])
    assert code == 2 and "left as it was" in capsys.readouterr().err
    assert _manifest(out) == before
    assert not [p for p in tmp.iterdir() if ".kw-" in p.name]


def test_full_disk_leaves_the_previous_site_and_names_the_path(sites, monkeypatch, capsys):
    tmp, old_res, new_res, _ = sites
    out, before = _fresh_old_site(tmp, old_res, "site-full")
    real = render.Renderer.write
    calls = []

    def write(self, page):
        calls.append(page.path)
        if len(calls) == 3:
            path = self.out / page.path
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(self, page)

    monkeypatch.setattr(render.Renderer, "write", write)
    code = cli.main(["publish", "--results", str(new_res), "--out", str(out), "--repo", "", "--analysis", "off"])
    err = capsys.readouterr().err
    assert code == 2 and "No space left on device" in err and calls[2] in err and "left as it was" in err
    assert _manifest(out) == before
    assert not [p for p in tmp.iterdir() if ".kw-" in p.name]


def test_two_rename_fallback_and_its_recovery(sites, monkeypatch):
    tmp, old_res, new_res, new_manifest = sites
    out, before = _fresh_old_site(tmp, old_res, "site-fallback")
    stale = out.parent / "site-fallback-stale"
    stale.mkdir()
    (stale / "extra").mkdir()
    (stale / "extra" / "note.txt").write_text("mine")
    monkeypatch.setattr(swap, "exchange", lambda a, b: False)
    site.publish(new_res, out, analysis="off", jobs=1)
    after = _manifest(out)
    assert after == dict(new_manifest, CNAME=before["CNAME"])
    # A kill between the two renames: the old site parked, the live folder missing.
    dead = 2**22 + 12345  # above the default pid_max: no such process
    parked = out.parent / f".{out.name}.kw-old-{dead}-abcd"
    os.rename(out, parked)
    swap.begin(out, site.OWNED).abort()
    assert _manifest(out) == after and not parked.exists()


def test_files_publish_does_not_own_are_kept_and_stale_pages_go(sites):
    tmp, old_res, new_res, _ = sites
    out, _ = _fresh_old_site(tmp, old_res, "site-extras")
    (out / "notes").mkdir()
    (out / "notes" / "a.txt").write_text("keep me")
    (out / "bench" / "gone.html").write_text("stale")
    site.publish(new_res, out, analysis="off", jobs=1)
    assert (out / "notes" / "a.txt").read_text() == "keep me" and (out / "CNAME").exists()
    assert not (out / "bench" / "gone.html").exists()


def test_an_output_path_that_is_a_file_is_refused_and_kept(sites, capsys):
    tmp, old_res, _, _ = sites
    f = tmp / "not-a-folder"
    f.write_text("mine")
    code = cli.main(["publish", "--results", str(old_res), "--out", str(f), "--repo", "", "--analysis", "off"])
    assert code == 2 and "not a folder" in capsys.readouterr().err and f.read_text() == "mine"
