"""Hostile-input trial round 6, the command line: each split (S-d, S-i, S-k, S-m,
S-n, S-o) is refused up front with one line naming the option or file and what is
accepted (exit 2), and each has a control (a good value is accepted)."""

from __future__ import annotations

import pytest
from test_site_data import sha, write_results

from harness import cli
from harness.core import procs
from harness.gate import bisect
from harness.report.model import PublishError, resolve_baselines


def _usage_error(argv: list[str], capsys) -> str:
    """The one error line argparse printed for ``argv`` (exit 2)."""
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(argv)
    assert exc.value.code == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert len(lines) == 1, lines
    return lines[0]


# ----------------------------------------------------------------------------- S-i


def test_bisect_refuses_a_bad_benchmark_regex_before_any_work(tmp_path, monkeypatch, capsys):
    """``bisect --benchmark '('`` ran asv for 7-11 s, then printed an re.error as
    "undecided". It is refused first, as ``check --bench '('`` is; outside a
    repository too, so nothing was opened or run."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(bisect.BisectError, match=r"--benchmark '\(' is not a regular expression"):
        bisect.run_bisect("HEAD~1", "HEAD", "(", repo=tmp_path, quick=True)
    code = cli.main(["bisect", "--good", "HEAD~1", "--bad", "HEAD", "--benchmark", "(", "--quick"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [err[0]] and err[0].startswith("kernelwatch: error: --benchmark '('")


def test_bisect_accepts_a_good_benchmark_regex(tmp_path):
    """Control: a valid pattern passes the check and fails later, on the missing repository."""
    with pytest.raises(bisect.BisectError) as exc:
        bisect.run_bisect("HEAD~1", "HEAD", r"suite\.vector_add\.track_time", repo=tmp_path)
    assert "regular expression" not in str(exc.value)


# ----------------------------------------------------------------------------- S-k


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--base", "a", "--head", "b", "--quick"],
        ["run", "--quick"],
        ["bisect", "--good", "a", "--bad", "b", "--benchmark", "x"],
        ["triage", "--base", "a", "--head", "b", "--benchmark", "x"],
    ],
)
def test_rounds_above_the_bound_are_refused(argv, capsys):
    """``check --rounds 99999999999999999999`` started measuring."""
    line = _usage_error([*argv, "--rounds", "99999999999999999999"], capsys)
    assert f"argument --rounds: must be at most {cli.MAX_ROUNDS}, got 99999999999999999999" in line
    assert "at most 1000" in _usage_error([*argv, "--rounds", "1001"], capsys)


@pytest.mark.parametrize("option", ["--iters", "--warmup"])
def test_profile_call_counts_above_the_bound_are_refused(option, capsys):
    line = _usage_error(["profile", option, "100001", "x"], capsys)
    assert f"argument {option}: must be at most {cli.MAX_CALLS}" in line


def test_counts_at_the_bound_are_accepted():
    """Control: 1000 rounds and 100000 calls parse."""
    p = cli.build_parser()
    assert p.parse_args(["check", "--base", "a", "--head", "b", "--rounds", "1000"]).rounds == 1000
    assert p.parse_args(["run", "--rounds", "1000"]).rounds == 1000
    args = p.parse_args(["profile", "--iters", "100000", "--warmup", "100000", "x"])
    assert (args.iters, args.warmup) == (100000, 100000)


# ----------------------------------------------------------------------------- S-m


@pytest.mark.parametrize(
    "option, value",
    [("--min-effect", "1e400"), ("--min-effect", "0"), ("--min-effect", "nan"), ("--fdr", "0"), ("--fdr", "1")],
)
def test_analyze_numbers_are_refused_naming_the_option_and_the_value_as_typed(option, value, capsys):
    """``--min-effect 1e400`` said "min_effect must be a finite number, got inf"."""
    line = _usage_error(["analyze", "--results", "r", option, value], capsys)
    assert f"argument {option}:" in line and f"got {value!r}" in line
    assert "min_effect" not in line and "fdr_q" not in line and "inf" not in line.replace(value, "")


def test_analyze_good_numbers_are_accepted():
    args = cli.build_parser().parse_args(["analyze", "--results", "r", "--min-effect", "0.1", "--fdr", "0.2"])
    assert (args.min_effect, args.fdr) == (0.1, 0.2)


def test_phase_limit_shows_the_value_as_typed(monkeypatch):
    """``KERNELWATCH_PHASE_LIMIT_S=1e400`` was reported as ``=inf``."""
    monkeypatch.setenv(procs.LIMIT_ENV, "1e400")
    with pytest.raises(procs.LimitError) as exc:
        procs.phase_limit("measure")
    assert f"{procs.LIMIT_ENV}='1e400'" in str(exc.value) and "inf" not in str(exc.value)
    monkeypatch.setenv(procs.LIMIT_ENV, "0.5")
    with pytest.raises(procs.LimitError, match=rf"{procs.LIMIT_ENV}='0.5' is out of range"):
        procs.phase_limit("measure")
    monkeypatch.setenv(procs.LIMIT_ENV, "600")  # control
    assert procs.phase_limit("measure")[0] == 600.0


# ----------------------------------------------------------------------------- S-n

_COMMITS = [{"hash": h} for h in ("03a" + "1" * 37, "03b" + "2" * 37, "03c" + "3" * 37, "4d" + "4" * 38)]


@pytest.mark.parametrize("ref", ["03", "0"])
def test_an_ambiguous_baseline_prefix_says_so_and_names_matches(ref):
    """``publish --baseline 03`` said "is not a commit with results"."""
    with pytest.raises(PublishError) as exc:
        resolve_baselines([ref], _COMMITS, None, "results")
    msg = str(exc.value)
    assert f"baseline {ref!r} is ambiguous: 3 commits" in msg
    assert all(c["hash"][:12] in msg for c in _COMMITS[:3]) and "not a commit with results" not in msg


def test_a_unique_baseline_prefix_is_accepted_and_an_unknown_one_refused():
    assert resolve_baselines(["03b2"], _COMMITS, None, "results") == [_COMMITS[1]["hash"]]
    assert resolve_baselines(["4d"], _COMMITS, None, "results") == [_COMMITS[3]["hash"]]
    with pytest.raises(PublishError, match="'ffff' is not a commit with results"):
        resolve_baselines(["ffff"], _COMMITS, None, "results")


# ----------------------------------------------------------------------------- S-o


@pytest.mark.parametrize(
    "argv, option",
    [
        (["analyze", "--results", ""], "--results"),
        (["analyze", "--results", " "], "--results"),
        (["analyze", "--results", "r", "--json", ""], "--json"),
        (["publish", "--results", ""], "--results"),
        (["publish", "--out", ""], "--out"),
        (["run", "--results", ""], "--results"),
        (["check", "--base", "a", "--head", "b", "--json", ""], "--json"),
        (["bisect", "--good", "a", "--bad", "b", "--benchmark", "x", "--json", ""], "--json"),
    ],
)
def test_an_empty_path_is_refused_up_front(argv, option, capsys):
    """``analyze --results ''`` scanned the current folder, then "error: : no benchmark series"."""
    line = _usage_error(argv, capsys)
    assert f"argument {option}: empty; give " in line


def test_non_empty_paths_are_accepted():
    p = cli.build_parser()
    assert p.parse_args(["analyze", "--results", "r", "--json", "-"]).json_path == "-"
    assert p.parse_args(["publish", "--results", "r", "--out", "o", "--repo", ""]).repo == ""


# ----------------------------------------------------------------------------- S-d


def test_publish_of_a_csv_file_says_what_publish_reads(tmp_path, capsys):
    """``publish --results some.csv`` said "does not exist or is not a folder" of a file that exists."""
    csv = tmp_path / "liger.csv"
    csv.write_text("kernel_name,x_value,y_value_50\nrms_norm,1024,0.5\n")
    code = cli.main(["publish", "--results", str(csv), "--out", str(tmp_path / "site"), "--repo", ""])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"--results {csv}: a file, not a folder" in err[0] and "asv results folder" in err[0]
    assert f"kernelwatch analyze --results {csv}" in err[0] and "does not exist" not in err[0]
    assert not (tmp_path / "site").exists()


def test_publish_of_an_asv_results_folder_is_accepted(tmp_path, capsys):
    bench = {"suite.vector_add.track_time": {"param_names": ["shape"], "params": [["'1024'"]]}}
    res = write_results(tmp_path / "res", {"m1": {"cpu": "x"}}, [sha(i) for i in range(4)], bench, lambda *_: 1e-4)
    code = cli.main(
        ["publish", "--results", str(res), "--out", str(tmp_path / "site"), "--repo", "", "--analysis", "off"]
    )
    assert code == 0 and (tmp_path / "site" / "index.html").exists()
