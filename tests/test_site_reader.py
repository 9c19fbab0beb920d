"""What a fresh reader of the site was confused by (site2): device wording on
CPU-only machines, units in every numeric column header, what each "failing"
count counts, and why a roof or distance is n/a."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_read_guards import _results_with, cal_for
from test_site_data import sha, write_results

MIB12 = 12 * 2**20


def _pages(out) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*.html"))}


def _cpu_site(tmp_path, cal):
    from harness.report import site

    root, _ = _results_with(tmp_path, [MIB12 / 3e9] * 5, cal)
    out = tmp_path / "site"
    site.publish(root, out, analysis="off")
    return _pages(out)


def _gpu_site(tmp_path):
    from harness.report import site

    bench = {"suite.vector_add.track_time": {"param_names": ["shape"], "params": [["'4096'"]]}}
    root = write_results(
        tmp_path / "results",
        {"h-gpu": {"gpu": "NVIDIA H100 80GB HBM3"}},
        [sha(i) for i in range(3)],
        bench,
        lambda m, i, b, c: 1e-3,
    )
    out = tmp_path / "site"
    site.publish(root, out, analysis="off")
    return _pages(out)


# ------------------------------------------------------------------ 1. device wording


def test_cpu_only_pages_speak_of_a_device_and_its_measured_ceilings(tmp_path):
    pages = _cpu_site(tmp_path, [cal_for(gbps=4.0)])
    for name, html in pages.items():
        assert "GPU" not in html, name  # kernel x device, divergences between devices, ...
        # the only datasheet a CPU page names is the one a CPU does not have
        assert html.count("datasheet") == html.count("a CPU has no datasheet peak"), name
    assert "kernel x device</a>" in pages["index.html"]
    assert "Kernel x device" in pages["matrix.html"]
    machine = next(h for n, h in pages.items() if n.startswith("machine/"))
    assert "against the measured ceilings of this CPU (kernelwatch calibrate, 2026-12-01)" in machine
    assert "against the measured ceilings of this CPU" in pages["index.html"]


def test_an_uncalibrated_cpu_says_why_it_has_no_peak(tmp_path):
    pages = _cpu_site(tmp_path, None)
    roof = next(h for n, h in pages.items() if n.startswith("roofline/"))
    assert "a CPU has no datasheet peak and no calibration is stored" in roof
    machine = next(h for n, h in pages.items() if n.startswith("machine/"))
    assert "n/a on this CPU: a CPU has no datasheet peak and no measured ceiling is stored" in machine


def test_gpu_pages_keep_the_gpu_wording(tmp_path):
    pages = _gpu_site(tmp_path)  # the negative control: a GPU machine is still a GPU with a datasheet
    assert "kernel x GPU</a>" in pages["index.html"] and "Kernel x GPU" in pages["matrix.html"]
    assert "Divergences between GPUs" in pages["index.html"]
    machine = next(h for n, h in pages.items() if n.startswith("machine/"))
    assert "against the datasheet peaks of this GPU" in machine
    roof = next(h for n, h in pages.items() if n.startswith("roofline/"))
    assert "<b>datasheet H100" in roof  # its ceiling, named by the datasheet


def test_device_kind_from_machine_json_and_calibration():
    from harness.report.model import device_kind

    assert device_kind({"gpu": "NVIDIA H100 80GB HBM3"}) == "cuda"
    assert device_kind({"gpu": "none"}) == "cpu"
    assert device_kind({}, {"device": {"kind": "cpu"}}) == "cpu"
    assert device_kind({"machine": "gha-aws-skylake"}) is None  # a foreign asv machine.json says nothing


# ------------------------------------------------------------------ 2. units in column headers

#: The unit each figure's column header must name (field names of the brief).
UNITS = {
    "gbps": "(GB/s)",
    "tflops": "(TFLOP/s)",
    "latency_ms": "(ms)",
    "mfu": "(%)",
    "bw_util": "(%)",
    "sol": "(%)",
    "roof": "(TFLOP/s)",
    "FLOP rate": "(FLOP/s)",
    "series noise": "(%)",
    "share": "(%)",
}
#: A header that is only a unit says neither the figure nor, for a prefixed rate, which unit a cell is in.
BARE_UNITS = ("GB/s", "FLOP/s", "TFLOP/s", "GFLOP/s", "ms", "%")


def header_problems(html: str) -> list[str]:
    """Column headers (``<th>``) of a page naming a figure without its unit, or only a unit."""
    out = []
    for th in re.findall(r"<th[^>]*>([^<]*)</th>", html):
        text = th.strip()
        if text in BARE_UNITS or text.replace("roof ", "") in BARE_UNITS:
            out.append(text)
            continue
        head = next((k for k in UNITS if text == k or text.startswith(k + " ")), None)
        if head and UNITS[head] not in text:
            out.append(text)
    return out


def test_header_check_has_teeth():
    assert header_problems("<th>GB/s</th><th>mfu</th><th>roof TFLOP/s</th><th>gbps</th>") == [
        "GB/s",
        "mfu",
        "roof TFLOP/s",
        "gbps",
    ]
    assert header_problems("<th>gbps (GB/s)</th><th>sol (%)</th><th>bound</th><th>points (failed)</th>") == []


def test_every_numeric_column_header_names_its_unit(tmp_path):
    pages = _cpu_site(tmp_path, [cal_for(gbps=4.0)])
    roof = next(h for n, h in pages.items() if n.startswith("roofline/"))
    assert 'id="roof-table"' in roof  # the distance table is on the page checked
    assert any(n.startswith("bench/") for n in pages) and any(n.startswith("commit/") for n in pages)
    for name, html in pages.items():
        assert header_problems(html) == [], name
    assert "<td>sol (%)</td>" in pages["matrix.html"]  # the per-suite means name theirs too


# ------------------------------------------------------------------ 3. what each failing count counts


def _failing_site(tmp_path):
    from harness.report import site

    bench = {"suite.op.track_time": {"param_names": ["n"], "params": [["'1'", "'2'", "'3'"]]}}

    def val(m, i, b, c):
        if c[0] == "'1'" and i == 2:
            return None  # failed once, valid again since
        if c[0] == "'2'" and i == 7:
            return None  # failing at the newest commit
        return 1e-3 * (1 + 0.001 * (i % 2))

    root = write_results(
        tmp_path / "results", {"h-cpu": {"gpu": "none", "cpu": "Test CPU"}}, [sha(i) for i in range(8)], bench, val
    )
    out = tmp_path / "site"
    site.publish(root, out)  # with the analysis: the findings page has its failing findings
    return (out / "index.html").read_text(), (out / "findings.html").read_text()


def test_the_overview_and_findings_failing_counts_say_what_they_count_and_reconcile(tmp_path):
    index, findings = _failing_site(tmp_path)
    assert '<span class="badge">failing: 2</span>' in findings  # over the history
    assert (
        "(series with a failed result anywhere in their history: 1 still failing at their newest commit "
        "(the count on the overview), 1 valid again since)"
    ) in findings
    assert "series failing at their newest commit: <b>1</b>" in index  # now
    assert (
        "counts 2 failing finding(s): series with a failed result anywhere in their history, 1 of them "
        "still failing at their newest commit and 1 valid again since" in index
    )
    assert ">failing at newest commit</th>" in index and "failing now" not in index


def test_failing_counts_follow_the_data():
    from types import SimpleNamespace

    from harness.report.attention import failing_counts

    k1, k2, k3 = ("m", "a", (), None), ("m", "b", (), None), ("m", "c", (), None)
    series = [
        SimpleNamespace(key=k1, latest={"failed": True}),
        SimpleNamespace(key=k2, latest={"failed": False}),
        SimpleNamespace(key=k3, latest={"failed": True}),
    ]
    fnd = [{"status": "failing", "skey": k1}, {"status": "failing", "skey": k2}, {"status": "regression", "skey": k3}]
    model = SimpleNamespace(series=series, findings=fnd)
    assert failing_counts(model) == {"now": 2, "findings": 2, "still": 1, "fixed": 1}


# ------------------------------------------------------------------ 4. why a roof is n/a


def _roofline(tmp_path, l2_bytes):
    import json

    from harness.report import site

    root, commits = _results_with(tmp_path, [MIB12 / 3e9] * 5, [cal_for(gbps=4.0)])
    d = root / "h-cpu" / "kernelwatch"
    for h in commits:  # the same records on a device whose last-level cache holds the 12 MiB, or not
        f = d / f"{h}.jsonl"
        r = json.loads(f.read_text())
        r["device"]["l2_bytes"] = l2_bytes
        f.write_text(json.dumps(r) + "\n")
    out = tmp_path / "site"
    site.publish(root, out, analysis="off")
    return next((out / "roofline").glob("*.html")).read_text()


def test_a_cache_resident_kernel_says_why_it_has_no_roof(tmp_path):
    roof = _roofline(tmp_path / "in", 64 << 20)
    table = roof.split('id="roof-table"', 1)[1].split("</table>", 1)[0]
    assert re.search(
        r'n/a <span class="badge note" title="cache-resident: the 12 MiB working set fits in the '
        r'64 MiB last-level cache[^"]*">cache-resident</span>',
        table,
    )
    assert 'id="no-roof"' in roof and "n/a, cache-resident: the 12 MiB working set" in roof
    assert "cache-resident: cache-resident" not in roof  # the tag said once, not glued to the reason's own
    note = re.search(r'<ul class="muted" id="no-roof">(.*?)</ul>', roof, re.S).group(1)
    assert re.search(r'<span class="no-roof-rows">\(rows: [^)]+\)</span>', note), note  # which rows it is about
    (pt,) = json.loads(re.search(r'id="kw-data">(.*?)</script>', roof, re.S).group(1))["points"]
    assert pt["sol"] is None and pt["no_roof"][0] == "cache-resident"
    # the negative control: the same kernel on a 1 MiB cache has a roof and no reason to give
    roof = _roofline(tmp_path / "out", 1 << 20)
    table = roof.split('id="roof-table"', 1)[1].split("</table>", 1)[0]
    assert "n/a" not in table and 'id="no-roof"' not in roof


def test_no_roof_notes_are_in_working_set_order():
    from harness.report.roofline import no_roof_notes

    rows = [
        {"why": "cache-resident", "why_full": f"cache-resident: the {n} MiB working set", "short": f"k{n}"}
        for n in ("12", "2.01", "1", "128")
    ]
    rows.append({"why": "", "why_full": "", "short": "has a roof"})
    notes = no_roof_notes(rows)
    assert [w for _, w, _ in notes] == [f"the {n} MiB working set" for n in ("1", "2.01", "12", "128")]
    assert all(t == "cache-resident" and k == [f"k{w.split()[1]}"] for t, w, k in notes)  # one row each, no roof-less


def test_no_roof_reasons_come_from_the_record():
    from harness.report.roofline import no_roof_reason

    assert no_roof_reason({"has_record": False})[0] == "no peaks"
    why = "no peaks known for this device: no mfu, bw_util or sol"
    assert no_roof_reason({"has_record": True, "status_reason": why}) == ("no peaks", why)
    assert (
        "no term for this kernel's memory"
        in no_roof_reason({"has_record": True, "peaks_source": "measured 2026-12-01", "bound": "memory"})[1]
    )


def test_an_unnamed_device_is_not_called_a_gpu(tmp_path):
    from harness.report import site

    bench = {"bench.Dgemm.time_dgemm": {"param_names": ["n"], "params": [["'100'"]]}}
    root = write_results(
        tmp_path / "results", {"gha-runner": {}}, [sha(i) for i in range(3)], bench, lambda m, i, b, c: 1e-3
    )  # a foreign asv machine.json: no gpu, no cpu field
    out = tmp_path / "site"
    site.publish(root, out, analysis="off")
    for name, html in _pages(out).items():
        assert "GPU" not in html and "datasheet" not in html, name
    assert "no peak is known" in (out / "index.html").read_text()


def test_a_cpu_machine_page_says_which_providers_were_timed():
    # a newcomer's CPU site showed only torch providers and said nowhere why
    from types import SimpleNamespace as NS

    from harness.report.machine import providers_note

    def model(kind, provs, rec=True):
        ser = [NS(params=(("provider", f"'{p}'"), ("shape", "'4'")), latest={"has_record": rec}) for p in provs]
        return NS(kinds={"m": kind}, series_of=lambda m: ser)

    note = providers_note(model("cpu", ["torch_unfused", "torch", "torch"]), "m")
    assert note.startswith("Providers timed on this CPU: torch, torch_unfused.") and "TRITON_INTERPRET=1" in note
    # Controls: a GPU, a CPU run that timed a GPU provider, a foreign history (no records), no providers
    assert providers_note(model("cuda", ["torch"]), "m") == ""
    assert providers_note(model("cpu", ["torch", "triton"]), "m") == ""
    assert providers_note(model("cpu", ["torch"], rec=False), "m") == ""
    assert providers_note(model("cpu", []), "m") == ""
    odd = model("cpu", ["torch"])
    odd.series_of("m").append(NS(params=("bare",), latest={"has_record": True}))  # a bare value: no crash
    assert providers_note(odd, "m").startswith("Providers timed on this CPU: torch.")
    src = (Path(__file__).parents[1] / "site" / "templates" / "machine.html").read_text()
    assert '<p class="muted" id="providers-note">{{ providers_note }}</p>' in src
