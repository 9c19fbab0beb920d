// kernelwatch site helpers: lazy data files, base64 arrays, escaping, number formats.
// Data files are scripts that call KW.put(key, object): a <script src> works from
// file:// as well as over http (fetch() of a local file does not in Chromium).
(function () {
  "use strict";
  var KW = window.KW = window.KW || {};
  var store = {}, waiting = {}, failed = {};

  KW.put = function (key, obj) {
    store[key] = obj;
    var cbs = waiting[key] || [];
    delete waiting[key];
    cbs.forEach(function (cb) { cb(null, obj); });
  };

  // KW.load(root, key, cb): cb(err, obj) once root + "data/" + key + ".js" has run.
  KW.load = function (root, key, cb) {
    if (Object.prototype.hasOwnProperty.call(store, key)) { cb(null, store[key]); return; }
    if (failed[key]) { cb(failed[key]); return; }
    if (waiting[key]) { waiting[key].push(cb); return; }
    waiting[key] = [cb];
    var s = document.createElement("script");
    s.src = root + "data/" + key + ".js";
    s.onerror = function () {
      failed[key] = "cannot load " + s.src;
      var cbs = waiting[key] || [];
      delete waiting[key];
      cbs.forEach(function (f) { f(failed[key]); });
    };
    document.head.appendChild(s);
  };

  KW.loadAll = function (root, keys, cb) {
    var left = keys.length, out = {}, err = null;
    if (!left) { cb(null, out); return; }
    keys.forEach(function (k) {
      KW.load(root, k, function (e, obj) {
        if (e) err = err || e; else out[k] = obj;
        if (--left === 0) cb(err, out);
      });
    });
  };

  function bytes(b64) {
    var bin = atob(b64), n = bin.length, u = new Uint8Array(n);
    for (var i = 0; i < n; i++) u[i] = bin.charCodeAt(i);
    return u.buffer;
  }
  // Little-endian on every platform a browser runs on (x86, ARM).
  KW.f32 = function (b64) { return new Float32Array(bytes(b64)); };
  KW.i32 = function (b64) { return new Int32Array(bytes(b64)); };

  var ENT = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" };
  KW.esc = function (s) { return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g, function (c) { return ENT[c]; }); };

  // d significant digits (default 4), trailing zeros after the decimal point dropped.
  KW.num = function (x, d) {
    if (x === null || x === undefined || !isFinite(x)) return "n/a";
    var parts = Number(x).toPrecision(d || 4).split("e");
    if (parts[0].indexOf(".") >= 0) parts[0] = parts[0].replace(/0+$/, "").replace(/\.$/, "");
    return parts.join("e");
  };
  KW.time = function (s) {
    if (s === null || s === undefined || !isFinite(s)) return "n/a";
    var a = Math.abs(s);
    if (a >= 1) return KW.num(s) + " s";
    if (a >= 1e-3) return KW.num(s * 1e3) + " ms";
    if (a >= 1e-6) return KW.num(s * 1e6) + " us";
    return KW.num(s * 1e9) + " ns";
  };
  KW.pct = function (x) { return (x === null || x === undefined || !isFinite(x)) ? "n/a" : (100 * x).toFixed(1) + "%"; };

  KW.data = function () { return JSON.parse(document.getElementById("kw-data").textContent); };

  KW.chart = function (el) {
    var c = echarts.init(el, null, { renderer: "canvas" });
    window.addEventListener("resize", function () { c.resize(); });
    c.on("finished", function () { el.setAttribute("data-kw-rendered", "1"); });
    return c;
  };
})();
