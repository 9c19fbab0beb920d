// History chart of one benchmark: one line per machine x parameters, x = commit
// in history order; failed results are red markers at the bottom, never zero.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("kw-data").textContent);
  var el = document.getElementById("chart");
  var chart = echarts.init(el, null, { renderer: "canvas" });
  var commits = data.commits;
  var index = {};
  commits.forEach(function (c, i) { index[c.hash] = i; });
  var select = document.getElementById("metric");

  function build(metric) {
    var series = [];
    data.series.forEach(function (s) {
      var pts = [], fails = [];
      s.points.forEach(function (p) {
        var i = index[p.commit];
        if (i === undefined) return;
        var v = metric === "value" ? p.value : p[metric];
        if (p.value === null) { fails.push([i, null, p.reason || "failed"]); return; }
        if (v === null || v === undefined) return;
        pts.push([i, v, p.ci ? p.ci.join(" .. ") : ""]);
      });
      var name = s.machine + " " + s.label;
      series.push({ name: name, type: "line", showSymbol: true, data: pts });
      if (fails.length) {
        series.push({ name: name + " (failed)", type: "scatter", symbol: "triangle", symbolSize: 10,
                      itemStyle: { color: "#c0392b" }, data: fails.map(function (f) { return [f[0], 0, f[2]]; }),
                      yAxisIndex: 1 });
      }
    });
    return series;
  }

  function render() {
    var metric = select.value;
    chart.setOption({
      animation: false,
      tooltip: { trigger: "item", formatter: function (p) {
        var c = commits[p.value[0]] || {};
        var val = p.seriesName.indexOf("(failed)") >= 0 ? "failed: " + p.value[2] : p.value[1];
        return p.seriesName + "<br>" + (c.short || "") + " " + (c.date || "") + "<br>" +
               (c.subject || "").replace(/[<>&]/g, "") + "<br>" + metric + ": " + val + (p.value[2] && val !== "failed" ? "<br>99% CI: " + p.value[2] : "");
      } },
      legend: { type: "scroll", bottom: 0 },
      grid: { left: 70, right: 30, top: 30, bottom: 90 },
      dataZoom: [{ type: "inside" }, { type: "slider", bottom: 40 }],
      xAxis: { type: "value", name: "commit #", minInterval: 1 },
      yAxis: [{ type: "value", name: metric === "value" ? "seconds" : metric, scale: true },
              { type: "value", show: false, min: 0, max: 1 }],
      series: build(metric)
    }, true);
  }
  select.addEventListener("change", render);
  window.addEventListener("resize", function () { chart.resize(); });
  render();
  el.setAttribute("data-kw-rendered", "1");
})();
