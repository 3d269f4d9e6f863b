// The book's live explorers: drawn in the browser from precomputed JSON, no kernel, no library.
// A page holds <div class="explorer" data-explorer="KIND" data-src="explorers/FILE.json"></div>; data-src is
// relative to this script's folder (_static/), so it works from every page. KIND is
//   attention-split: chapter 4, raw, effective and null attention of a chosen text, layer and head;
//   null-space: chapter 3, one query row moved along null-space directions, and the head output it gives.
// The data are written by book/explorers/build.py (make explorers).
(function () {
  "use strict";
  var BASE = document.currentScript ? document.currentScript.src.replace(/[^/]*$/, "") : "_static/";
  var FONT = "11px sans-serif";
  var RED = [178, 24, 43], BLUE = [33, 102, 172], GREY = "#bbbbbb";

  function fetchJson(src) {
    return fetch(new URL(src, BASE)).then(function (r) {
      if (!r.ok) throw new Error(src + ": HTTP " + r.status);
      return r.json();
    });
  }

  function el(tag, attrs, parent) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]);
    });
    if (parent) parent.appendChild(e);
    return e;
  }

  function control(parent, id, labelText, tag) {
    var box = el("span", {class: "explorer-control"}, parent);
    el("label", {for: id, text: labelText}, box);
    return el(tag, {id: id}, box);
  }

  function select(parent, id, labelText, options) {
    var s = control(parent, id, labelText, "select");
    options.forEach(function (text, i) { el("option", {value: String(i), text: text}, s); });
    return s;
  }

  // A canvas sharp on any screen: drawing units are CSS pixels.
  function sized(canvas, width, height) {
    var ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    return ctx;
  }

  // white at 0, red for positive and blue for negative values, full colour at |value| = limit
  function colour(value, limit) {
    var t = Math.min(1, Math.abs(value) / limit), end = value < 0 ? BLUE : RED;
    var c = end.map(function (e) { return Math.round(255 + t * (e - 255)); });
    return "rgb(" + c.join(",") + ")";
  }

  function shortToken(token) { return token.length > 9 ? token.slice(0, 8) + "…" : token; }

  function fmt(x, digits) { return (Math.abs(x) < 0.5 * Math.pow(10, -digits) ? 0 : x).toFixed(digits); }

  function columnWidth(container) { return Math.max(240, Math.min(container.clientWidth, 900)); }

  // ---- chapter 4: raw, effective and null attention ----------------------------------------------------
  function attentionSplit(container, index) {
    var texts = {}, state = {};
    var controls = el("div", {class: "explorer-controls"}, container);
    var id = container.id || "explorer-split";
    var textSelect = select(controls, id + "-text", "text", index.texts.map(function (t) { return t.label; }));
    var layerSelect = null, headSelect = null;
    var canvas = el("canvas", {role: "img"}, container);
    var summary = el("p", {class: "explorer-readout", "aria-live": "polite"}, container);
    var hover = el("p", {class: "explorer-readout explorer-hover", text: "Point at (or tap) a cell to read its three weights."}, container);

    function load(k) {
      if (!texts[k]) texts[k] = fetchJson("explorers/" + index.texts[k].file);
      return texts[k];
    }

    function draw() {
      load(+textSelect.value).then(function (text) {
        var L = text.raw.length, h = text.raw[0].length;
        if (!layerSelect) {
          layerSelect = select(controls, id + "-layer", "layer", range(L).map(function (i) { return String(i + 1); }));
          headSelect = select(controls, id + "-head", "head", range(h).map(function (i) { return String(i + 1); }));
          layerSelect.value = String(Math.floor((L - 1) / 2));
          [layerSelect, headSelect].forEach(function (s) { s.addEventListener("change", draw); });
        }
        render(text, +layerSelect.value, +headSelect.value);
        container.dataset.drawn = textSelect.value + "-" + layerSelect.value + "-" + headSelect.value;
      }).catch(function (err) { failed(container, err); });
    }

    function render(text, li, hi) {
      var s = index.scale, n = text.tokens.length;
      var raw = text.raw[li][hi].map(function (row) { return row.map(function (v) { return v / s; }); });
      var eff = text.effective[li][hi].map(function (row) { return row.map(function (v) { return v / s; }); });
      var nul = raw.map(function (row, i) { return row.map(function (v, j) { return v - eff[i][j]; }); });
      var panels = [["raw A", raw], ["effective A_eff", eff], ["null A_null = A − A_eff", nul]];
      var limit = 1e-9;
      panels.forEach(function (p) { p[1].forEach(function (row) { row.forEach(function (v) { limit = Math.max(limit, Math.abs(v)); }); }); });
      var W = columnWidth(container), wide = W >= 620, gap = 14, title = 20;
      var ctx0 = sized(canvas, 10, 10), left = 0;
      text.tokens.forEach(function (t) { left = Math.max(left, ctx0.measureText(shortToken(t)).width); });
      left = Math.ceil(left) + 6;
      var size = wide ? Math.floor((W - left - 2 * gap) / 3) : Math.floor(W - left - 4);
      var cell = size / n, step = Math.ceil(13 / cell), bottom = left + 4;
      var panelH = title + size + bottom, barH = 40;
      var height = (wide ? panelH : 3 * panelH) + barH;
      var ctx = sized(canvas, W, height);
      state.geometry = [];
      panels.forEach(function (p, k) {
        var x0 = wide ? left + k * (size + gap) : left, y0 = (wide ? 0 : k * panelH) + title;
        ctx.fillStyle = "#222";
        ctx.textAlign = "left";
        ctx.fillText(p[0], x0, y0 - title / 2);
        for (var i = 0; i < n; i++) {
          for (var j = 0; j < n; j++) {
            ctx.fillStyle = colour(p[1][i][j], limit);
            ctx.fillRect(x0 + j * cell, y0 + i * cell, Math.ceil(cell), Math.ceil(cell));
          }
        }
        ctx.strokeStyle = "#888";
        ctx.strokeRect(x0, y0, size, size);
        ctx.fillStyle = "#222";
        for (var t = 0; t < n; t += step) {
          var label = shortToken(text.tokens[t]), c = (t + 0.5) * cell;
          if (k === 0 || !wide) { ctx.textAlign = "right"; ctx.fillText(label, x0 - 3, y0 + c); }
          ctx.save();
          ctx.translate(x0 + c, y0 + size + 3);
          ctx.rotate(-Math.PI / 2);
          ctx.textAlign = "right";
          ctx.fillText(label, 0, 0);
          ctx.restore();
        }
        state.geometry.push({x0: x0, y0: y0, size: size, name: p[0], values: p[1]});
      });
      colourBar(ctx, left, height - barH + 8, Math.min(320, W - left - 20), limit);
      var norm = function (M) { var t = 0; M.forEach(function (r) { r.forEach(function (v) { t += v * v; }); }); return Math.sqrt(t); };
      var dim = text.null_dims[li][hi];
      summary.textContent = "Layer " + (li + 1) + ", head " + (hi + 1) + ", " + n + " tokens (d_v = " + index.d_v + "): the null space has dimension " +
        dim + (dim === 0 ? " (n ≤ d_v), so effective attention is raw attention" : " (n − d_v)") +
        "; the null part holds " + fmt(norm(nul) / norm(raw), 2) + " of the map's norm (Frobenius).";
      canvas.setAttribute("aria-label", "Heat maps of raw, effective and null attention, " + summary.textContent +
        " Rows are queries, columns keys; red is positive, blue negative.");
      state.text = text;
    }

    // the readout follows a mouse, and a finger's tap (a tap fires pointerdown and click, no pointermove)
    var readout = function (event) {
      if (!state.geometry) return;
      var box = canvas.getBoundingClientRect(), x = event.clientX - box.left, y = event.clientY - box.top;
      state.geometry.forEach(function (g) {
        if (x < g.x0 || y < g.y0 || x >= g.x0 + g.size || y >= g.y0 + g.size) return;
        var n = g.values.length, i = Math.floor((y - g.y0) / g.size * n), j = Math.floor((x - g.x0) / g.size * n);
        var v = state.geometry.map(function (p) { return fmt(p.values[i][j], 3); });
        hover.textContent = "query " + state.text.tokens[i] + " (position " + i + ") to key " + state.text.tokens[j] +
          " (position " + j + "): raw " + v[0] + ", effective " + v[1] + ", null " + v[2];
      });
    };
    ["pointermove", "pointerdown", "click"].forEach(function (kind) { canvas.addEventListener(kind, readout); });
    textSelect.addEventListener("change", draw);
    window.addEventListener("resize", debounce(draw));
    draw();
  }

  function colourBar(ctx, x, y, width, limit) {
    for (var i = 0; i < width; i++) {
      ctx.fillStyle = colour((2 * i / (width - 1) - 1) * limit, limit);
      ctx.fillRect(x + i, y, 1, 10);
    }
    ctx.strokeStyle = "#888";
    ctx.strokeRect(x, y, width, 10);
    ctx.fillStyle = "#222";
    [[0, "−" + fmt(limit, 2), "left"], [0.5, "0", "center"], [1, fmt(limit, 2), "right"]].forEach(function (l) {
      ctx.textAlign = l[2];
      ctx.fillText(l[1], x + l[0] * width, y + 20);
    });
  }

  // ---- chapter 3: a row moved along null-space directions --------------------------------------------
  function nullSpace(container, data) {
    var id = container.id || "explorer-null", k = data.ranges.length, d = data.T[0].length;
    var controls = el("div", {class: "explorer-controls"}, container);
    var rowSelect = select(controls, id + "-row", "query row", data.rows.map(function (r) {
      return data.tokens[r.query] + " (position " + r.query + ")";
    }));
    var sliders = data.ranges.map(function (r, m) {
      var s = control(controls, id + "-t" + (m + 1), "step t" + (m + 1), "input");
      s.type = "range";
      s.min = String(r[0]);
      s.max = String(r[1]);
      s.step = "any";
      s.value = "0";
      // the slider's value beside it, as the reader moves it
      var shown = el("output", {for: s.id, class: "explorer-value"}, s.parentNode);
      function show() { shown.textContent = (+s.value).toFixed(2); }
      s.addEventListener("input", show);
      show();
      return s;
    });
    var canvas = el("canvas", {role: "img"}, container);
    var readout = el("p", {class: "explorer-readout", "aria-live": "polite"}, container);
    var change = el("p", {class: "explorer-readout explorer-output-change"}, container);

    function steps() { return sliders.map(function (s) { return +s.value; }); }

    function moved(row, t) {
      return row.a.map(function (v, j) {
        var x = v;
        for (var m = 0; m < k; m++) x += t[m] * row.directions[m][j];
        return x;
      });
    }

    function times(p) {  // the head output of one query: p (n) times T (n, d)
      var out = new Float64Array(d);
      p.forEach(function (w, j) { var Tj = data.T[j]; for (var c = 0; c < d; c++) out[c] += w * Tj[c]; });
      return out;
    }

    function maxAbs(v) { var m = 0; for (var i = 0; i < v.length; i++) m = Math.max(m, Math.abs(v[i])); return m; }

    function draw() {
      var row = data.rows[+rowSelect.value], t = steps(), p = moved(row, t), n = p.length;
      // the keys that carry weight at t = 0 or at any corner of the sliders' box (each row is affine in t)
      var corners = [[]];
      data.ranges.forEach(function (r) {
        corners = [].concat.apply([], corners.map(function (c) { return [c.concat(r[0]), c.concat(r[1])]; }));
      });
      var sum = function (v, js) { return js.reduce(function (s, j) { return s + v[j]; }, 0); };
      var reach = row.a.slice(), rows = corners.map(function (c) { return moved(row, c); });
      rows.forEach(function (m) { m.forEach(function (v, j) { reach[j] = Math.max(reach[j], v); }); });
      var keys = range(n).filter(function (j) { return reach[j] >= 0.02; });
      keys = keys.sort(function (x, y) { return reach[y] - reach[x]; }).slice(0, 24).sort(function (x, y) { return x - y; });
      var rest = range(n).filter(function (j) { return keys.indexOf(j) < 0; });
      // one scale for every bar and every slider setting: the largest weight a shown bar reaches
      var top = Math.max.apply(null, keys.map(function (j) { return reach[j]; }).concat(
        [row.a].concat(rows).map(function (m) { return sum(m, rest); }), [0.05]));
      var W = columnWidth(container), rowH = 16, head = 36;
      var labels = keys.map(function (j) { return shortToken(data.tokens[j]) + " " + j; }).concat(["the other " + rest.length]);
      var ctx = sized(canvas, W, head + rowH * labels.length + 8), left = 0;
      labels.forEach(function (l) { left = Math.max(left, ctx.measureText(l).width); });
      left = Math.ceil(left) + 8;
      var width = W - left - ctx.measureText("0.00 → 0.00").width - 8;
      var scale = function (v) { return Math.max(0, Math.min(1, v / top)) * width; };
      ctx.fillStyle = GREY; ctx.fillRect(left, 6, 14, 10);
      ctx.fillStyle = "rgb(" + BLUE.join(",") + ")"; ctx.fillRect(left, 22, 14, 6);
      ctx.fillStyle = "#222"; ctx.textAlign = "left";
      ctx.fillText("the model's row a", left + 20, 11);
      ctx.fillText("the moved row a + t1 d1 + t2 d2", left + 20, 25);
      labels.forEach(function (label, r) {
        var y = head + r * rowH, before = r < keys.length ? row.a[keys[r]] : sum(row.a, rest);
        var after = r < keys.length ? p[keys[r]] : sum(p, rest);
        ctx.fillStyle = "#222"; ctx.textAlign = "right";
        ctx.fillText(label, left - 6, y + rowH / 2);
        ctx.fillStyle = GREY; ctx.fillRect(left, y + 2, scale(before), rowH - 4);
        ctx.fillStyle = "rgb(" + BLUE.join(",") + ")"; ctx.fillRect(left, y + 5, scale(after), rowH - 10);
        ctx.fillStyle = "#222"; ctx.textAlign = "left";
        ctx.fillText(fmt(before, 2) + " → " + fmt(after, 2), left + scale(Math.max(before, after)) + 4, y + rowH / 2);
      });
      var aT = times(row.a), pT = times(p), diff = new Float64Array(d);
      for (var c = 0; c < d; c++) diff[c] = pT[c] - aT[c];
      var relative = maxAbs(diff) / maxAbs(aT), total = p.reduce(function (s, v) { return s + v; }, 0);
      var moves = maxAbs(p.map(function (v, j) { return v - row.a[j]; }));
      readout.textContent = "t1 = " + fmt(t[0], 3) + (k > 1 ? ", t2 = " + fmt(t[1], 3) : "") + ": the largest weight moves by " +
        fmt(moves, 3) + "; smallest weight " + fmt(Math.min.apply(null, p), 4) + " (never below 0), row sum " + total.toFixed(6) + ".";
      change.dataset.value = String(relative);
      change.dataset.moved = String(moves);
      change.textContent = "Relative change of the head output for this query, max |(a′ − a) T| / max |a T|: " +
        relative.toExponential(1) + " (zero up to rounding).";
      canvas.setAttribute("aria-label", "Bars of the attention row of query " + data.tokens[row.query] +
        " before and after the step. " + readout.textContent + " " + change.textContent);
      container.dataset.drawn = rowSelect.value + ":" + t.join(",");
    }

    rowSelect.addEventListener("change", draw);
    sliders.forEach(function (s) { s.addEventListener("input", draw); });
    window.addEventListener("resize", debounce(draw));
    draw();
  }

  function range(n) { var r = []; for (var i = 0; i < n; i++) r.push(i); return r; }

  function debounce(f) { var timer; return function () { clearTimeout(timer); timer = setTimeout(f, 150); }; }

  function failed(container, err) {
    var note = container.querySelector(".explorer-error") || el("p", {class: "explorer-error"}, container);
    note.textContent = "The explorer could not load its data (" + err.message + "). It needs the book served over " +
      "http, e.g. python -m http.server in _build/html, not opened as a file.";
  }

  var KINDS = {"attention-split": attentionSplit, "null-space": nullSpace};

  function start() {
    document.querySelectorAll("div.explorer[data-explorer]").forEach(function (container) {
      var kind = KINDS[container.dataset.explorer];
      if (!kind || container.dataset.started) return;
      container.dataset.started = "1";
      fetchJson(container.dataset.src).then(function (data) { kind(container, data); })
        .catch(function (err) { failed(container, err); });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
