// Findings page: filter the rows by machine, kind and benchmark; the count says
// how many rows and how many findings (a collapsed row stands for several) are shown.
(function () {
  "use strict";
  var m = document.getElementById("f-machine"), k = document.getElementById("f-kind"),
      b = document.getElementById("f-bench"), out = document.getElementById("f-count");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#all-findings tbody tr"));
  function apply() {
    var mv = m.value, kv = k.value, bv = b.value.trim().toLowerCase(), nr = 0, nf = 0;
    rows.forEach(function (tr) {
      var show = (!mv || tr.getAttribute("data-machine") === mv) && (!kv || tr.getAttribute("data-status") === kv) &&
                 (!bv || tr.getAttribute("data-benchmark").toLowerCase().indexOf(bv) >= 0);
      tr.hidden = !show;
      if (show) { nr++; nf += parseInt(tr.getAttribute("data-n"), 10) || 1; }
    });
    out.textContent = nr + " row(s), " + nf + " finding(s)" + (mv || kv || bv ? " match the filters" : "");
  }
  [m, k].forEach(function (el) { el.addEventListener("change", apply); });
  b.addEventListener("input", apply);
  apply();
})();
