// Roofline of one machine (Williams, Waterman, Patterson, CACM 2009): log-log,
// attainable TFLOP/s = min(peak TFLOP/s, intensity x peak GB/s / 1000).
(function () {
  "use strict";
  var D = KW.data(), ROOT = "../";
  var el = document.getElementById("chart"), chart = KW.chart(el);
  var sel = document.getElementById("baseline");
  var pts = D.points;
  var xs = pts.map(function (p) { return p.ai; }), ys = pts.map(function (p) { return p.tflops; });
  Object.keys(pts).forEach(function (k) {
    Object.keys(pts[k].base).forEach(function (h) { xs.push(pts[k].base[h][0]); ys.push(pts[k].base[h][1]); });
  });
  D.ceilings.forEach(function (c) {
    c.compute.forEach(function (t) { ys.push(t[1]); if (c.gbps) xs.push(t[1] * 1000 / c.gbps); });
  });
  // axis ends on powers of ten, with room around the points and the ridge points
  function lo10(v) { return Math.pow(10, Math.floor(Math.log10(v / 2))); }
  function hi10(v) { return Math.pow(10, Math.ceil(Math.log10(v * 2))); }
  var xmin = lo10(Math.min.apply(null, xs)), xmax = hi10(Math.max.apply(null, xs));
  var ymin = lo10(Math.min.apply(null, ys)), ymax = hi10(Math.max.apply(null, ys));

  function roof(gbps, peak) {
    var out = [], n = 60;
    for (var i = 0; i <= n; i++) {
      var x = xmin * Math.pow(xmax / xmin, i / n);
      out.push([x, peak ? (gbps ? Math.min(peak, x * gbps / 1000) : peak) : x * gbps / 1000]);
    }
    if (gbps && peak) {
      var ridge = peak * 1000 / gbps;
      if (ridge > xmin && ridge < xmax) { out.push([ridge, peak]); out.sort(function (a, b) { return a[0] - b[0]; }); }
    }
    return out;
  }

  // Powers of ten read 0.01, 0.1, 1, 10, 100, 1000, 10000, then 1e5: one style on both axes.
  function tick(v) {
    var e = Math.round(Math.log10(v));
    if (Math.abs(v / Math.pow(10, e) - 1) < 1e-6) return (e >= -4 && e <= 4) ? String(+Math.pow(10, e).toFixed(Math.max(0, -e))) : "1e" + e;
    return KW.num(v, 2);
  }
  var ends = [], LABEL_GAP = 13;
  // More points than this: labels only on the picked point (the table names every one).
  var LABELS_MAX = 60;
  // Ceiling labels at the right end of their line, pushed apart so that none overlaps another.
  function placeLabels() {
    var right = chart.getWidth() - 195, items = [];
    ends.forEach(function (e) {
      var px = chart.convertToPixel({ gridIndex: 0 }, e.at);
      if (px && isFinite(px[1])) items.push({ e: e, y: px[1] });
    });
    items.sort(function (a, b) { return a.y - b.y; });
    for (var i = 1; i < items.length; i++) if (items[i].y - items[i - 1].y < LABEL_GAP) items[i].y = items[i - 1].y + LABEL_GAP;
    chart.setOption({ graphic: items.map(function (it, k) {
      return { type: "text", id: "ceil-" + k, x: right + 6, y: it.y - 6, silent: true,
               style: { text: it.e.text, fill: it.e.color, fontSize: 10 } };
    }) }, { replaceMerge: ["graphic"] });
  }
  var picked = null;
  function cached(p) { return !!(p.no_roof && p.no_roof[0] === "cache-resident"); }

  function build() {
    var series = [];
    ends = [];
    D.ceilings.forEach(function (c) {
      var dash = c.kind === "measured" ? "dashed" : "solid";
      var color = c.kind === "measured" ? "#8e44ad" : "#2c3e50";
      var comps = c.compute.length ? c.compute : [[null, null]];
      comps.forEach(function (t) {
        if (!c.gbps && !t[1]) return;
        // short legend names (the figures are listed above the chart and on the line ends): no overflow
        var name = (c.kind === "measured" ? "measured: " : "datasheet: ") + (t[0] || "bandwidth");
        var data = roof(c.gbps, t[1]);
        ends.push({ text: (c.kind === "measured" ? "measured " : "") + (t[0] || "bandwidth") + ((c.line_doubt ? c.line_doubt[t[0] || ""] : c.doubt_text) ? " (doubtful)" : ""), color: color,
                    at: data[data.length - 1] });
        series.push({ name: name, type: "line", data: data, symbol: "none", silent: true,
                      lineStyle: { type: dash, color: color, width: 1.2 }, color: color });
      });
    });
    series.push({ name: "kernels (newest)", type: "scatter", symbolSize: 9, color: "#e67e22",
                  label: { show: pts.length <= LABELS_MAX, position: "right", fontSize: 10, color: "#7a4a12",
                           formatter: function (p) { return pts[p.value[2]].short; } },
                  labelLayout: { hideOverlap: true },
                  emphasis: { scale: 1.8, label: { show: true, fontWeight: "bold" } },
                  data: pts.map(function (p, i) {
                    if (i === picked) return { value: [p.ai, p.tflops, i], symbolSize: 16, itemStyle: { color: "#c0392b" },
                                               label: { show: true, fontWeight: "bold", color: "#c0392b" } };
                    // cache-resident: hollow (no DRAM roof holds it); above the roof: a red ring
                    if (cached(p)) return { value: [p.ai, p.tflops, i], itemStyle: { color: "#ffffff", borderColor: "#e67e22", borderWidth: 2 } };
                    if (p.sol > 1) return { value: [p.ai, p.tflops, i], itemStyle: { color: "#e67e22", borderColor: "#c0392b", borderWidth: 3 } };
                    return { value: [p.ai, p.tflops, i] }; }) });
    var h = sel ? sel.value : "";
    if (h) {
      var arrows = [], before = [];
      pts.forEach(function (p, i) {
        var b = p.base[h];
        if (!b) return;
        before.push({ value: [b[0], b[1], i] });
        if (b[0] !== p.ai || b[1] !== p.tflops) arrows.push({ coords: [[b[0], b[1]], [p.ai, p.tflops]] });
      });
      series.push({ name: "at the baseline", type: "scatter", symbolSize: 6, color: "#95a5a6", data: before });
      series.push({ name: "change since the baseline", type: "lines", coordinateSystem: "cartesian2d", data: arrows,
                    symbol: ["none", "arrow"], symbolSize: 7, silent: true,
                    lineStyle: { color: "#7f8c8d", width: 1, opacity: 0.8 } });
    }
    chart.setOption({
      animation: false,
      legend: { type: "scroll", top: 0 },
      grid: { left: 80, right: 200, top: 50, bottom: 60 },
      tooltip: { trigger: "item", confine: true, formatter: function (p) {
        if (!p.value || p.value.length < 3) return "";
        var q = pts[p.value[2]];
        var s = "<b>" + KW.esc(q.label) + "</b><br>intensity " + KW.num(q.ai) + " FLOP/B<br>";
        if (p.seriesName === "at the baseline") {
          var b = q.base[sel.value];
          return s + "at " + KW.esc(b[2]) + ": " + KW.num(b[1]) + " TFLOP/s";
        }
        return s + KW.num(q.tflops) + " TFLOP/s at " + KW.esc(q.commit) + "<br>sol " + KW.pct(q.sol) + (q.no_roof ? " (" + KW.esc(q.no_roof[0]) + (cached(q) ? ": no DRAM roof holds it, it may lie above the bandwidth roof" : "") + ")" : "") + (q.status ? " [" + KW.esc(q.status) + "]" : q.sol > 1 ? " [above ceiling]" : "") +
               (q.bound ? ", " + KW.esc(q.bound) + "-bound" : "");
      } },
      xAxis: { type: "log", min: xmin, max: xmax, name: "FLOP / byte", nameLocation: "middle", nameGap: 30,
               axisLabel: { formatter: tick } },
      yAxis: { type: "log", min: ymin, max: ymax, name: "TFLOP/s",
               axisLabel: { formatter: tick } },
      dataZoom: [{ type: "inside", xAxisIndex: 0, filterMode: "none" }, { type: "inside", yAxisIndex: 0, filterMode: "none" }],
      series: series
    }, true);
    placeLabels();
  }
  // A row of the distance table marks its kernel on the chart.
  Array.prototype.forEach.call(document.querySelectorAll("#roof-table tbody tr"), function (tr) {
    tr.addEventListener("click", function (ev) {
      if (ev.target.tagName === "A") return;
      picked = parseInt(tr.getAttribute("data-index"), 10);
      Array.prototype.forEach.call(document.querySelectorAll("#roof-table tr.picked"), function (o) { o.classList.remove("picked"); });
      tr.classList.add("picked");
      build();
      chart.dispatchAction({ type: "showTip", seriesName: "kernels (newest)", dataIndex: picked });
    });
  });
  chart.on("dataZoom", placeLabels);
  window.addEventListener("resize", placeLabels);
  chart.on("click", function (p) {
    if (p.seriesType !== "scatter" || !p.value) return;
    var q = pts[p.value[2]];
    if (q) location.href = ROOT + "bench/" + q.bench + ".html#" + q.case;
  });
  if (sel) sel.addEventListener("change", build);
  build();
})();
