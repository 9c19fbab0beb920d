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

  function build() {
    var series = [];
    D.ceilings.forEach(function (c) {
      var dash = c.kind === "measured" ? "dashed" : "solid";
      var color = c.kind === "measured" ? "#8e44ad" : "#2c3e50";
      var comps = c.compute.length ? c.compute : [[null, null]];
      comps.forEach(function (t) {
        if (!c.gbps && !t[1]) return;
        var name = c.label + (t[0] ? ": " + t[0] + " " + KW.num(t[1]) + " TFLOP/s" : "") + (c.gbps ? ", " + KW.num(c.gbps) + " GB/s" : "");
        series.push({ name: name, type: "line", data: roof(c.gbps, t[1]), symbol: "none", silent: true,
                      lineStyle: { type: dash, color: color, width: 1.2 }, color: color,
                      endLabel: { show: true, formatter: t[0] || "bandwidth", color: color, fontSize: 10 } });
      });
    });
    series.push({ name: "kernels (newest)", type: "scatter", symbolSize: 9, color: "#e67e22",
                  data: pts.map(function (p, i) { return { value: [p.ai, p.tflops, i] }; }) });
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
      grid: { left: 80, right: 140, top: 50, bottom: 60 },
      tooltip: { trigger: "item", confine: true, formatter: function (p) {
        if (!p.value || p.value.length < 3) return "";
        var q = pts[p.value[2]];
        var s = "<b>" + KW.esc(q.label) + "</b><br>intensity " + KW.num(q.ai) + " FLOP/B<br>";
        if (p.seriesName === "at the baseline") {
          var b = q.base[sel.value];
          return s + "at " + KW.esc(b[2]) + ": " + KW.num(b[1]) + " TFLOP/s";
        }
        return s + KW.num(q.tflops) + " TFLOP/s at " + KW.esc(q.commit) + "<br>sol " + KW.pct(q.sol) +
               (q.bound ? ", " + KW.esc(q.bound) + "-bound" : "");
      } },
      xAxis: { type: "log", min: xmin, max: xmax, name: "FLOP / byte", nameLocation: "middle", nameGap: 30,
               axisLabel: { formatter: function (v) { return KW.num(v, 2); } } },
      yAxis: { type: "log", min: ymin, max: ymax, name: "TFLOP/s",
               axisLabel: { formatter: function (v) { return KW.num(v, 2); } } },
      dataZoom: [{ type: "inside", xAxisIndex: 0, filterMode: "none" }, { type: "inside", yAxisIndex: 0, filterMode: "none" }],
      series: series
    }, true);
  }
  chart.on("click", function (p) {
    if (p.seriesType !== "scatter" || !p.value) return;
    var q = pts[p.value[2]];
    if (q) location.href = ROOT + "bench/" + q.bench + ".html#" + q.case;
  });
  if (sel) sel.addEventListener("change", build);
  build();
})();
