// Kernel x GPU heatmaps: sol at the newest result, speed-up since a baseline.
(function () {
  "use strict";
  var D = KW.data(), ROOT = "";
  var sel = document.getElementById("baseline");
  var labels = D.cases.map(function (c) { return c.label; });
  var ROWS = 40;

  // A cell's text: never blank (no value reads "n/a"), never a number above 100% ("above ceiling", the label of every figure above its ceiling).
  var ABOVE = "above ceiling", NA = "n/a";
  function shown(v, fmt) {
    if (v[5] === ABOVE) return ABOVE;
    return v[3] === null || v[3] === undefined ? NA : fmt(v[3]);
  }
  // A cell with a status (a guard's, or its calibration's doubt: above ceiling, contended, ...)
  // reads the status; its figure, if any, is in the tooltip only.
  function label(v, fmt) {
    var st = v[5];
    if (!st || st === NA || st === ABOVE || st === "?" || st === "pending") return (st === "?" || st === "pending" ? "[" + st + "] " : "") + shown(v, fmt);
    return v[3] === null || v[3] === undefined ? "[" + st + "] " + NA : st;
  }
  // A neutral cell: grey, its status and reason in the tooltip.
  function neutral(x, y, v, changed, st, why, what) {
    return { value: [x, y, 0, v, changed, st, why, what], itemStyle: { color: "#eceef2" }, label: { color: "#7b8394" } };
  }

  function heat(el, cells, visual, fmt) {
    var chart = KW.chart(el), n = D.cases.length;
    el.style.height = (Math.min(ROWS, n) * 22 + 130) + "px";
    chart.resize();
    var zoom = n > ROWS ? [{ type: "slider", yAxisIndex: 0, right: 5, start: 0, end: 100 * ROWS / n, zoomLock: true },
                           { type: "inside", yAxisIndex: 0, zoomOnMouseWheel: false, moveOnMouseWheel: true }] : [];
    chart.setOption({
      animation: false,
      tooltip: { confine: true, formatter: function (p) {
        var c = D.cases[p.value[1]];
        return KW.esc(c.label) + "<br>" + KW.esc(D.machines[p.value[0]]) + ": <b>" + KW.esc(shown(p.value, fmt)) + "</b>" +
               (p.value[5] ? "<br><span class='badge warn'>" + KW.esc(p.value[5]) + "</span> " + KW.esc(p.value[6] || "") +
                "<br><span class='tt-muted'>" + KW.esc(p.value[7] || "") + "</span>" : "") +
               (p.value[4] === 0 && !p.value[5] ? "<br><span class='tt-muted'>no change found in this interval: neutral</span>" : "");
      } },
      grid: { left: 420, right: 60, top: 40, bottom: 70 },
      xAxis: { type: "category", data: D.machines, position: "top", axisLabel: { interval: 0 } },
      yAxis: { type: "category", data: labels, inverse: true, triggerEvent: true,
               axisLabel: { width: 400, overflow: "truncate", fontSize: 11, interval: 0 } },
      visualMap: Object.assign({ calculable: false, orient: "horizontal", left: "center", bottom: 5, dimension: 2 }, visual),
      dataZoom: zoom,
      series: [{ type: "heatmap", data: cells, label: { show: D.machines.length <= 8, fontSize: 10,
                 formatter: function (p) { return label(p.value, fmt); } } }]
    }, true);
    chart.on("click", function (p) {
      var c = p.componentType === "yAxis" ? D.cases[labels.indexOf(p.value)] : D.cases[p.value[1]];
      if (c) location.href = ROOT + c.href;
    });
    // A truncated row label (cut to the 400 px label column, about 60 characters): the whole
    // of it in a tooltip of its own and as the chart's title attribute, the browser's own
    // tooltip (issue 25: a newcomer found no way to read a cut label).
    chart.on("mouseover", function (p) {
      if (p.componentType !== "yAxis") return;
      el.setAttribute("title", p.value);
      tip.textContent = p.value;
      tip.hidden = false;
      var e = p.event && p.event.event;
      tip.style.left = ((e ? e.pageX : 0) + 12) + "px";
      tip.style.top = ((e ? e.pageY : 0) + 12) + "px";
    });
    chart.on("mouseout", function (p) {
      if (p.componentType !== "yAxis") return;
      tip.hidden = true;
      el.removeAttribute("title");
    });
    var tip = el.parentNode.querySelector(".label-tip[data-for='" + el.id + "']");
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "label-tip";
      tip.setAttribute("data-for", el.id);
      tip.hidden = true;
      el.parentNode.insertBefore(tip, el);
    }
    return chart;
  }

  var solEl = document.getElementById("sol");
  if (solEl) {
    var cells = [];
    D.cases.forEach(function (c, y) {
      c.sol.forEach(function (v, x) {
        var st = (c.sol_status || [])[x];
        // An invalid sol (a guard status, above 100%, none): neutral, labelled with its status, never the best colour.
        if (st) {
          var cell = neutral(x, y, v, null, st, c.sol_reason[x],
                             st === NA ? "no speed of light for this cell" : "not a valid speed of light: drawn neutral");
          if (st !== NA) cell.label.color = "#a04000";
          cells.push(cell);
        } else cells.push([x, y, v, v]);
      });
    });
    heat(solEl, cells, { min: 0, max: 1, text: ["sol 100%", "0%"],
                         inRange: { color: ["#fdecea", "#f9e79f", "#abebc6", "#1e8449"] } }, KW.pct);
  }

  var spEl = document.getElementById("speedup"), spChart = null;
  function speedup() {
    var h = sel.value, cells = [];
    D.cases.forEach(function (c, y) {
      var ch = c.changed[h] || [], sp = c.speedup[h] || [];
      D.machines.forEach(function (m, x) {
        var v = sp[x];
        if (v === null || v === undefined) { cells.push(neutral(x, y, null, null, NA, c.na[x], "no speed-up for this cell")); return; }
        // value[4]: 1 a confirmed change in the interval (coloured), 0 none or not confirmed (neutral)
        // value[5..7]: why a change is not coloured: a pending change, or the series' doubt (noisy,
        // under contention): the label reads "[?] 1.53x", the reason in the tooltip
        var dz = (c.doubt || [])[x];
        if (ch[x] === "changed" && !dz) cells.push([x, y, Math.log(v) / Math.LN2, v, 1]);
        else if (dz) cells.push(neutral(x, y, v, 0, "?", dz, "a noisy or contended series: read with care, not coloured"));
        else if (ch[x] === "pending") cells.push(neutral(x, y, v, 0, "pending", "a pending change in this interval: not confirmed by the next commits yet", "not coloured until confirmed"));
        else cells.push(neutral(x, y, v, 0));
      });
    });
    if (spChart) spChart.dispose();
    spChart = heat(spEl, cells, { min: -1, max: 1, text: ["2x faster", "2x slower"],
                                  inRange: { color: ["#c0392b", "#fbeee6", "#ffffff", "#e9f7ef", "#1e8449"] } },
                   function (v) { return v === null || v === undefined ? "n/a" : v.toFixed(3) + "x"; });
    Array.prototype.forEach.call(document.querySelectorAll("tr.geo-speedup"), function (tr) {
      tr.hidden = tr.getAttribute("data-baseline") !== h;
    });
  }
  if (spEl && sel) { sel.addEventListener("change", speedup); speedup(); }
})();
