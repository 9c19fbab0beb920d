// Findings page: filter the rows by machine, kind and benchmark, in the table of the
// changes that matter and in the folded health tables; the count says how many rows and
// how many findings (a collapsed row stands for several) are shown in each.
(function () {
  "use strict";
  var m = document.getElementById("f-machine"), k = document.getElementById("f-kind"),
      b = document.getElementById("f-bench"), out = document.getElementById("f-count"),
      health = document.getElementById("health");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#all-findings tbody tr"));
  var hrows = Array.prototype.slice.call(document.querySelectorAll("#health table.findings tbody tr"));
  function filter(list, mv, kv, bv) {
    var nr = 0, nf = 0;
    list.forEach(function (tr) {
      var show = (!mv || tr.getAttribute("data-machine") === mv) && (!kv || tr.getAttribute("data-status") === kv) &&
                 (!bv || tr.getAttribute("data-benchmark").toLowerCase().indexOf(bv) >= 0);
      tr.hidden = !show;
      if (show) { nr++; nf += parseInt(tr.getAttribute("data-n"), 10) || 1; }
    });
    return [nr, nf];
  }
  function apply() {
    var mv = m.value, kv = k.value, bv = b.value.trim().toLowerCase(), any = mv || kv || bv;
    var lead = filter(rows, mv, kv, bv), hl = filter(hrows, mv, kv, bv);
    out.textContent = lead[0] + " row(s), " + lead[1] + " finding(s)" + (any ? " match the filters" : "") +
      (any && hl[0] ? "; under Health: " + hl[0] + " row(s), " + hl[1] + " finding(s)" : "");
    // a filter that matches only bookkeeping shows it
    if (health && any && hl[0] && !lead[0]) { health.open = true; }
  }
  if (m) {  // the filters exist with an analysis report
    [m, k].forEach(function (el) { el.addEventListener("change", apply); });
    b.addEventListener("input", apply);
    apply();
  }
  // a link to a folded list (#health, #health-missing, #trust-too-noisy, ...) opens it
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1)), target = id && document.getElementById(id);
    for (var el = target; el; el = el.parentElement) { if (el.tagName === "DETAILS") { el.open = true; } }
    if (target) { target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", reveal);
  reveal();
})();
