// Benchmark page: history of one case on every machine, in commit order.
// Values are never drawn as zero: failed results are red triangles on their own
// (hidden) axis and carry their reason in the tooltip.
(function () {
  "use strict";
  var D = KW.data(), ROOT = "../";
  var el = document.getElementById("chart"), chart = KW.chart(el);
  var caseSel = document.getElementById("case"), metricSel = document.getElementById("metric");
  var scaleSel = document.getElementById("scale");
  var statusEl = document.getElementById("status");
  var COLORS = ["#1f77b4", "#e67e22", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22"];
  var MARK = { regression: "#c0392b", drift_regression: "#c0392b", divergent_change: "#c0392b", failing: "#c0392b",
               improvement: "#1e8449", drift_improvement: "#1e8449", pending: "#d68910", missing: "#d68910",
               efficiency_gap: "#d68910", unexpected_generation_speedup: "#d68910",
               benchmark_version_change: "#7f8c8d", environment_change: "#8e44ad",
               excursion: "#95a5a6", machine_event: "#95a5a6" };
  var METRICS = ["tflops", "gbps", "mfu", "bw_util", "sol"];
  // A utilisation above 100% passed the guards only within their margin: noise of the peak or the
  // time, never a number on the chart. It is an orange diamond at 100% with the measured value in
  // the tooltip (harness.report.fmt.UTIL_NOTE says the same in the tables).
  var UTILS = { mfu: true, bw_util: true, sol: true }, ABOVE_COLOR = "#d35400";
  function above(metric, v) { return UTILS[metric] === true && isFinite(v) && v > 1; }
  // A machine whose calibration the suite beat, or that was taken under contention: its
  // utilisations are against that calibration (a CPU's), drawn dashed and named in the tooltip.
  var CAL = D.cal_doubts || {};
  function doubtful(m, metric) { return UTILS[metric] === true && !!CAL[m]; }
  var ABOVE_NOTE = "above ceiling: over 100% of the peak or ceiling, within the 5% guard margin: noise of the peak or the time, not a speed-up";
  var commits = null, loaded = {}, drawSeq = 0;
  // More CI polygons than this per machine slow the chart down; the tooltip still gives the CI.
  var BAND_MAX = 4000;

  // Findings of the case shown (all cases with the box ticked), each with its evidence.
  // (The table comes after this script in the page: looked up when used.)
  function showFindings(c) {
    var fTable = document.getElementById("bench-findings"), fAll = document.getElementById("findings-all");
    var fCount = document.getElementById("findings-shown");
    if (!fTable || !c) return;
    var n = 0;
    Array.prototype.forEach.call(fTable.querySelectorAll("tbody tr"), function (tr) {
      tr.hidden = !(fAll.checked || tr.getAttribute("data-case") === c.id);
      if (!tr.hidden) n++;
    });
    fTable.hidden = n === 0;
    fCount.textContent = n + " shown" + (fAll.checked ? " (every case)" : " for " + c.label);
  }
  document.addEventListener("DOMContentLoaded", function () {
    var fAll = document.getElementById("findings-all");
    var now = function () { return D.cases.filter(function (c) { return c.id === caseSel.value; })[0]; };
    if (fAll) fAll.addEventListener("change", function () { showFindings(now()); });
    showFindings(now());
  });

  function caseFromHash() {
    var h = decodeURIComponent((location.hash || "").replace(/^#/, ""));
    for (var i = 0; i < D.cases.length; i++) if (D.cases[i].id === h) return D.cases[i];
    return D.cases[0];
  }

  // x in a series file indexes its machine's commit list; map it onto the global commit table.
  function decode(s, map) {
    if (s._d) return s._d;
    var xl = KW.i32(s.x), x = new Int32Array(xl.length);
    for (var j = 0; j < xl.length; j++) x[j] = map[xl[j]];
    var d = { x: x, xl: xl, v: KW.f32(s.v), lo: KW.f32(s.lo), hi: KW.f32(s.hi), m: {}, c: {}, fail: {}, thr: {}, pos: {},
              marks: (s.marks || []).map(function (mk) {
                return { status: mk.status, reason: mk.reason,
                         x0: (mk.x0 === null || mk.x0 === undefined) ? null : map[mk.x0],
                         x1: (mk.x1 === null || mk.x1 === undefined) ? null : map[mk.x1] }; }) };
    Object.keys(s.metrics).forEach(function (k) { d.m[k] = KW.f32(s.metrics[k]); });
    Object.keys(s.clocks).forEach(function (k) { d.c[k] = KW.f32(s.clocks[k]); });
    s.fail.forEach(function (f) { d.fail[f[0]] = f[1]; });
    d.cont = {};
    (s.contended || []).forEach(function (f) { d.cont[f[0]] = f[1]; });
    s.throttle.forEach(function (t) { d.thr[t[0]] = t[1]; });
    for (var i = 0; i < d.x.length; i++) d.pos[d.x[i]] = i;
    s._d = d;
    return d;
  }

  function val(d, metric, i) {
    if (metric === "time") return d.v[i];
    var a = d.m[metric];
    return a ? a[i] : NaN;
  }
  // Every metric here is (constant / time), so the time interval maps onto it.
  function interval(d, metric, i) {
    var lo = d.lo[i], hi = d.hi[i];
    if (!isFinite(lo) || !isFinite(hi)) return null;
    if (metric === "time") return [lo, hi];
    var m = val(d, metric, i), v = d.v[i];
    if (!isFinite(m) || !isFinite(v) || lo <= 0 || hi <= 0) return null;
    return [m * v / hi, m * v / lo];
  }
  function fmtMetric(metric, x) {
    if (metric === "time") return D.unit === "seconds" ? KW.time(x) : KW.num(x) + (D.unit ? " " + D.unit : "");
    if (metric === "mfu" || metric === "bw_util" || metric === "sol") return KW.pct(x);
    return KW.num(x) + (metric === "tflops" ? " TFLOP/s" : " GB/s");
  }
  function say(msg) { statusEl.textContent = msg; }

  var maps = {};
  function load(c) {
    var keys = ["commits"];
    D.machines.forEach(function (m) { if (c.series[m]) keys.push("s/" + c.series[m], "m/" + D.mslug[m]); });
    say("loading " + (keys.length - 1) + " series ...");
    var seq = ++drawSeq;
    KW.loadAll(ROOT, keys, function (err, objs) {
      if (seq !== drawSeq) return;
      if (err) { say(err); return; }
      commits = objs.commits;
      loaded = {};
      D.machines.forEach(function (m) {
        if (!c.series[m]) return;
        if (!maps[m]) maps[m] = KW.i32(objs["m/" + D.mslug[m]].commits);
        loaded[m] = objs["s/" + c.series[m]];
        decode(loaded[m], maps[m]);
      });
      updateMetrics();
      draw();
    });
  }

  function updateMetrics() {
    var have = {};
    Object.keys(loaded).forEach(function (m) { Object.keys(loaded[m].metrics).forEach(function (k) { have[k] = true; }); });
    Array.prototype.forEach.call(metricSel.options, function (o) {
      if (o.value === "time") return;
      o.disabled = !have[o.value];
      o.textContent = o.getAttribute("data-label") + (have[o.value] ? "" : " (n/a: no cost model or peak)");
    });
    if (metricSel.value !== "time" && !have[metricSel.value]) metricSel.value = "time";
  }

  function tooltip(params) {
    var p = Array.isArray(params) ? params[0] : params;
    if (!p) return "";
    var x = Math.round(Array.isArray(p.value) ? p.value[0] : p.axisValue);
    var metric = metricSel.value;
    var head = "<b>" + KW.esc((commits.hash[x] || "").slice(0, 8)) + "</b> " + KW.esc(commits.date[x] || "") +
               "<br>" + KW.esc(commits.subject[x] || "") + (commits.author[x] ? " <i>(" + KW.esc(commits.author[x]) + ")</i>" : "");
    var lines = [];
    D.machines.forEach(function (m) {
      if (!loaded[m]) return;
      var d = decode(loaded[m], maps[m]), i = d.pos[x];
      if (i === undefined) { lines.push(KW.esc(m) + ": <span class='tt-muted'>no result at this commit</span>"); return; }
      if (d.fail[i] !== undefined) { lines.push(KW.esc(m) + ": <b style='color:#c0392b'>failed</b>: " + KW.esc(d.fail[i])); return; }
      if (d.cont[i] !== undefined) { lines.push(KW.esc(m) + ": <b style='color:" + ABOVE_COLOR + "'>contended</b> (no value, not a failure): " + KW.esc(d.cont[i])); return; }
      var v = val(d, metric, i), ci = interval(d, metric, i);
      var s = KW.esc(m) + ": <b>" + KW.esc(above(metric, v) ? "above ceiling" : fmtMetric(metric, v)) + "</b>";
      if (doubtful(m, metric)) s += " <span style='color:" + ABOVE_COLOR + "'>[against a doubtful calibration: " + KW.esc(CAL[m]) + "]</span>";
      if (above(metric, v)) s += " <span style='color:" + ABOVE_COLOR + "'>(" + KW.esc(fmtMetric(metric, v)) + " measured: " + KW.esc(ABOVE_NOTE) + ")</span>";
      else if (ci) s += " [" + KW.esc(fmtMetric(metric, ci[0])) + " .. " + KW.esc(fmtMetric(metric, ci[1])) + "]";
      var clk = [];
      if (d.c.sm_mhz && isFinite(d.c.sm_mhz[i])) clk.push("SM " + KW.num(d.c.sm_mhz[i]) + " MHz");
      if (d.c.mem_mhz && isFinite(d.c.mem_mhz[i])) clk.push("mem " + KW.num(d.c.mem_mhz[i]) + " MHz");
      if (d.c.temp_c && isFinite(d.c.temp_c[i])) clk.push(KW.num(d.c.temp_c[i], 3) + " C");
      if (d.c.power_w && isFinite(d.c.power_w[i])) clk.push(KW.num(d.c.power_w[i], 3) + " W");
      if (clk.length) s += "<br>&nbsp;&nbsp;clocks: " + KW.esc(clk.join(", "));
      if (d.thr[i]) s += "<br>&nbsp;&nbsp;<span style='color:#c0392b'>throttled: " + KW.esc(d.thr[i]) + "</span>";
      lines.push(s);
    });
    var nt = (notes[x] || []).map(function (t) { return "<span style='color:#8e44ad'>" + KW.esc(t) + "</span>"; });
    return head + "<br>" + lines.join("<br>") + (nt.length ? "<br>" + nt.join("<br>") : "");
  }

  var notes = {};  // commit index -> version and environment changes there (the tooltip says them)
  // One time unit for every tick, named on the axis: "time (us)", not "time (s)" above "45 us".
  var TUNITS = [[1, "s"], [1e-3, "ms"], [1e-6, "us"], [1e-9, "ns"]];
  function timeUnit(maxV) {
    for (var k = 0; k < TUNITS.length; k++) if (maxV >= TUNITS[k][0]) return TUNITS[k];
    return TUNITS[TUNITS.length - 1];
  }
  var tunit = null;

  function draw() {
    notes = {};
    var metric = metricSel.value, series = [], minX = Infinity, maxX = -Infinity, nPts = 0, nFail = 0, nGap = 0, noBand = false;
    var nAbove = 0, nCont = 0;
    var minV = Infinity, maxV = -Infinity, labelAt = {};
    D.machines.forEach(function (m, k) {
      if (!loaded[m]) return;
      var s = loaded[m], d = decode(s, maps[m]), color = COLORS[k % COLORS.length];
      var line = [], band = [], fails = [], conts = [], highs = [], prev = null;
      // The line breaks ("-" is a gap for ECharts) at a failed point, at a point
      // without a value, and where the machine measured commits without this series.
      var drawn = 0;
      for (var i = 0; i < d.x.length; i++) {
        var x = d.x[i];
        if (x < minX) minX = x;
        if (x > maxX) maxX = x;
        if (i > 0 && d.xl[i] - d.xl[i - 1] > 1) { line.push([x - 0.5, "-"]); prev = null; nGap++; }
        if (d.fail[i] !== undefined) { fails.push([x, 0.04, i]); line.push([x, "-"]); prev = null; continue; }
        if (d.cont[i] !== undefined) { conts.push([x, 0.04, i]); line.push([x, "-"]); prev = null; continue; }
        var v = val(d, metric, i);
        if (!isFinite(v)) { line.push([x, "-"]); prev = null; continue; }
        if (above(metric, v)) { highs.push([x, 1, i]); line.push([x, "-"]); prev = null; continue; }
        line.push([x, v]);
        drawn++;
        if (v > 0 && v < minV) minV = v;
        if (v > maxV) maxV = v;
        var ci = interval(d, metric, i);
        if (ci && prev) band.push([prev[0], prev[1], prev[2], x, ci[0], ci[1]]);
        prev = ci ? [x, ci[0], ci[1]] : null;
      }
      nPts += drawn;
      nFail += fails.length;
      nAbove += highs.length;
      nCont += conts.length;
      var big = drawn > 1500;
      var marks = [], areas = [];
      var byX = {};  // one line per commit and series; one label per commit on the chart
      d.marks.forEach(function (mk) {
        if (mk.x1 === null || mk.x1 === undefined) return;
        var e = byX[mk.x1];
        if (!e) {
          e = byX[mk.x1] = { xAxis: mk.x1, lineStyle: { color: MARK[mk.status] || "#555", type: "solid", width: 1.5 } };
          marks.push(e);
          if (mk.x0 !== null && mk.x0 !== undefined && mk.x0 < mk.x1)
            areas.push([{ xAxis: mk.x0, itemStyle: { color: MARK[mk.status] || "#555", opacity: 0.08 } }, { xAxis: mk.x1 }]);
          if (!labelAt[mk.x1]) labelAt[mk.x1] = { owner: e, names: [] };
          else e.label = { show: false };
        }
        var l = labelAt[mk.x1];
        if (l.names.indexOf(mk.status) < 0) l.names.push(mk.status);
      });
      // Version and environment changes: unlabelled markers (a label per line overlaps into an
      // unreadable strip on a long history); what changed is in the tooltip of that commit.
      (s.ver || []).forEach(function (vc) {
        var x = d.x[vc[0]];
        marks.push({ xAxis: x, lineStyle: { color: "#7f8c8d", type: "dashed" }, label: { show: false } });
        (notes[x] = notes[x] || []).push(m + ": benchmark version " + vc[1] + " -> " + vc[2]);
      });
      (D.env[m] || []).forEach(function (e) {
        if (e.x === null || e.x === undefined) return;
        marks.push({ xAxis: e.x, lineStyle: { color: "#8e44ad", type: "dotted" }, label: { show: false } });
        (notes[e.x] = notes[e.x] || []).push(m + ": environment " + e.text);
      });
      if (band.length && band.length <= BAND_MAX) series.push({
        id: "band-" + m, name: m, type: "custom", data: band, silent: true, clip: true, color: color,
        encode: { x: [0, 3], y: [1, 2, 4, 5] }, tooltip: { show: false },
        renderItem: function (params, api) {
          var p = [api.coord([api.value(0), api.value(1)]), api.coord([api.value(0), api.value(2)]),
                   api.coord([api.value(3), api.value(5)]), api.coord([api.value(3), api.value(4)])];
          return { type: "polygon", shape: { points: p }, style: { fill: api.visual("color"), opacity: 0.18 } };
        } });
      if (band.length > BAND_MAX) noBand = true;
      series.push({ id: "line-" + m, name: m, type: "line", data: line, color: color, showSymbol: !big, symbolSize: 5,
                    connectNulls: false,
                    sampling: big ? "lttb" : undefined, lineStyle: { width: 1.5, type: doubtful(m, metric) ? "dashed" : "solid" },
                    markLine: { symbol: ["none", "none"], silent: true, data: marks, animation: false },
                    markArea: { silent: true, data: areas } });
      if (fails.length) series.push({ id: "fail-" + m, name: m, type: "scatter", yAxisIndex: 1, data: fails,
                                      symbol: "triangle", symbolSize: 11, itemStyle: { color: "#c0392b" } });
      if (conts.length) series.push({ id: "contended-" + m, name: m, type: "scatter", yAxisIndex: 1, data: conts,
                                      symbol: "triangle", symbolSize: 11, itemStyle: { color: ABOVE_COLOR } });
      if (highs.length) series.push({ id: "above-" + m, name: m, type: "scatter", data: highs, symbol: "diamond",
                                      symbolSize: 10, itemStyle: { color: ABOVE_COLOR } });
    });
    Object.keys(labelAt).forEach(function (x) {
      var l = labelAt[x];
      l.owner.label = { formatter: l.names.join(" + ").replace(/_/g, " "), color: l.owner.lineStyle.color };
    });
    if (!isFinite(minX)) { minX = 0; maxX = 1; }
    // "auto": log scale when the machines' values differ by more than 10x (a GPU and a CPU on one chart)
    var secs = metric === "time" && D.unit === "seconds";
    tunit = secs && isFinite(maxV) && maxV > 0 ? timeUnit(maxV) : null;
    var yName = tunit ? "time (" + tunit[1] + ")" : metricSel.options[metricSel.selectedIndex].getAttribute("data-label");
    // The menu names the unit the axis uses (issue 25: the menu said "time (s)" over a "time (us)" axis).
    Array.prototype.forEach.call(metricSel.options, function (o) {
      if (o.value === "time" && D.unit === "seconds") o.textContent = tunit ? "time (" + tunit[1] + ")" : o.getAttribute("data-label");
    });
    var useLog = scaleSel.value === "log" || (scaleSel.value === "auto" && minV > 0 && maxV / minV > 10);
    chart.setOption({
      animation: false,
      color: COLORS,
      tooltip: { trigger: "axis", axisPointer: { type: "line", snap: true }, formatter: tooltip, confine: true },
      legend: { type: "scroll", top: 0 },
      grid: { left: 80, right: 30, top: 40, bottom: 100 },
      dataZoom: [{ type: "inside", xAxisIndex: 0, filterMode: "weakFilter" },
                 { type: "slider", xAxisIndex: 0, bottom: 8, height: 22, filterMode: "weakFilter" }],
      xAxis: { type: "value", min: maxX === minX ? minX - 1 : minX, max: maxX === minX ? maxX + 1 : maxX, minInterval: 1, name: "", axisLine: { onZero: false },
               axisLabel: { lineHeight: 15, formatter: function (x) {
                 return x === Math.round(x) && commits.hash[x] ? commits.hash[x].slice(0, 8) + "\n" + (commits.date[x] || "").slice(0, 10) : ""; } } },
      yAxis: [{ type: useLog ? "log" : "value", scale: true, name: yName,
                axisLine: { onZero: false },
                axisLabel: { formatter: function (v) { return tunit ? KW.num(v / tunit[0]) : fmtMetric(metric, v); } } },
              { type: "value", min: 0, max: 1, show: false }],
      series: series
    }, true);
    say(nPts + " point(s), " + nFail + " failed, " + (nCont ? nCont + " measured under contention (orange triangles), " : "") + (nAbove ? nAbove + " above ceiling (orange diamonds at 100%, not plotted as values), " : "") + nGap + " gap(s) where a machine measured without this case, on " +
        Object.keys(loaded).length + " machine(s)" +
        (metric === "time" ? "" : "; interval: 99% CI of the time, mapped onto " + metric) +
        (noBand ? "; CI band off (too many points), see the tooltip" : "") +
        Object.keys(loaded).filter(function (m) { return doubtful(m, metric); }).map(function (m) {
          return "; " + m + ": " + metric + " against a doubtful calibration (" + CAL[m] + "), dashed: not a trustworthy figure"; }).join(""));
  }

  chart.on("click", function (p) {
    if (!p || !Array.isArray(p.value) || !commits) return;
    var h = commits.hash[Math.round(p.value[0])];
    if (h) location.href = ROOT + "commit/" + h + ".html";
  });

  function select(c, push) {
    caseSel.value = c.id;
    if (push && location.hash !== "#" + c.id) history.replaceState(null, "", "#" + c.id);
    showFindings(c);
    load(c);
  }
  caseSel.addEventListener("change", function () {
    for (var i = 0; i < D.cases.length; i++) if (D.cases[i].id === caseSel.value) select(D.cases[i], true);
  });
  metricSel.addEventListener("change", function () { if (commits) draw(); });
  scaleSel.addEventListener("change", function () { if (commits) draw(); });
  window.addEventListener("hashchange", function () { select(caseFromHash(), false); });
  if (D.cases.length) select(caseFromHash(), false); else say("no cases");
})();
