// vkecho show: draws the timelines of the view embedded in #echo-data as SVG (no library;
// ES5 and DOM calls old browsers have, so the page opens on a Jetson's browser too).
// When done it writes what it drew into #echo-status (data attributes) for tests; any script
// error is caught there too.
(function () {
  "use strict";
  var status = document.getElementById("echo-status");
  var errors = [];
  window.addEventListener("error", function (e) {
    errors.push(String(e.message || e));
    if (status) { status.setAttribute("data-state", "error"); status.setAttribute("data-errors", errors.join(" | ")); }
  });
  var NS = "http://www.w3.org/2000/svg";
  var V = JSON.parse(document.getElementById("echo-data").textContent);
  var LABEL_W = 190, ROW_H = 30, BAR_H = 9, AXIS_H = 22;
  var SHORT = { copy: "copy", elided: "elided", dispatch: "dispatch", draw: "draw", use: "cmd",
    write: "W", read: "R", readwrite: "RW", submit: "", wait: "wait" };
  var DARK = { copy: 1, dispatch: 1, write: 1, wait: 1 };
  // The axis (issue 47): "time" (ns since the trace began; traces with times open on it) or
  // "events" (the trace's event sequence, the only axis of traces without times).
  var MODE = V.timed ? "time" : "events";
  // seq -> host time, from what carries both (for links to events in time mode).
  var T_OF = {};
  V.marks.forEach(function (m) { if (m.t !== undefined) T_OF[m.seq] = m.t; });
  V.spans.forEach(function (s) { if (s.t0 !== undefined && T_OF[s.seq] === undefined) T_OF[s.seq] = s.t0; });

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function title(e, text) { el("title", {}, e).textContent = text; }

  // The axis: seq, with every submission widened to give its commands room (V.stretch).
  function pos(q) {
    var x = q;
    for (var i = 0; i < V.stretch.length; i++) {
      var s = V.stretch[i][0], e = V.stretch[i][1];
      if (q >= s + 1) x += e; else if (q > s) x += e * (q - s); else break;
    }
    return x;
  }
  function seqAt(x) {
    var add = 0;
    for (var i = 0; i < V.stretch.length; i++) {
      var s = V.stretch[i][0], e = V.stretch[i][1];
      if (x <= s + add) break;
      if (x < s + add + 1 + e) return s + (x - s - add) / (1 + e);
      add += e;
    }
    return x - add;
  }
  // Lane geometry: y of each lane and its height.
  var laneY = [], y = AXIS_H;
  V.lanes.forEach(function (l, i) { laneY[i] = y; y += Math.max(1, l.rows) * ROW_H + 4; });
  var DECIDED = V.marks.some(function (m) { return m.kind === "decided"; });
  var HEIGHT = y + 4 + (DECIDED ? 18 : 0);
  // Items per lane, sorted by start, for drawing only what is visible.
  var spans = V.spans.slice().sort(function (a, b) { return a.start - b.start; });
  // Where a span or mark lies on the current axis ([a, b] / x; null: not on it).
  function spanX(s) {
    if (MODE === "events") return [s.start, s.end];
    if (s.t0 === undefined || s.t1 === undefined) return null;
    return [s.t0, s.t1];
  }
  function markX(m) {
    if (MODE === "events") return pos(m.seq);
    return m.t === undefined ? null : m.t;
  }
  function seqX(seq) {
    if (MODE === "events") return pos(seq);
    return T_OF[seq] === undefined ? null : T_OF[seq];
  }
  // Time units for a visible width of `w` ns.
  function unitFor(w) {
    if (w >= 2e9) return { name: "s", f: 1e9 };
    if (w >= 2e6) return { name: "ms", f: 1e6 };
    if (w >= 2e3) return { name: "\u00b5s", f: 1e3 };
    return { name: "ns", f: 1 };
  }
  function fmtNs(ns) {
    var u = unitFor(Math.abs(ns) * 2);
    var v = ns / u.f;
    return (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2)) + " " + u.name;
  }

  function Panel(id, homes) {
    this.root = document.getElementById(id);
    this.box = this.root.querySelector(".svgbox");
    this.homes = homes;
    this.home = homes[MODE];
    this.x0 = this.home[0]; this.x1 = this.home[1];
    var self = this;
    this.root.querySelectorAll("button").forEach(function (b) {
      b.addEventListener("click", function () { self.act(b.getAttribute("data-act")); self.root.focus(); });
    });
    this.box.addEventListener("wheel", function (e) {
      e.preventDefault();
      var r = self.box.getBoundingClientRect();
      var f = self.xAt(e.clientX - r.left);
      self.zoom(e.deltaY < 0 ? 0.8 : 1.25, f);
    }, { passive: false });
    var drag = null;
    this.box.addEventListener("mousedown", function (e) { drag = { x: e.clientX, x0: self.x0, x1: self.x1 }; active = self; });
    window.addEventListener("mouseup", function () { drag = null; });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var per = (drag.x1 - drag.x0) / self.plotW();
      var d = (e.clientX - drag.x) * per;
      self.x0 = drag.x0 - d; self.x1 = drag.x1 - d; self.draw();
    });
    this.root.addEventListener("focus", function () { active = self; });
    this.root.addEventListener("keydown", function (e) { if (key(self, e)) e.preventDefault(); });
  }
  Panel.prototype.plotW = function () { return Math.max(200, (this.box.clientWidth || 1240) - LABEL_W - 8); };
  Panel.prototype.xAt = function (px) { return this.x0 + (px - LABEL_W) / this.plotW() * (this.x1 - this.x0); };
  Panel.prototype.px = function (x) { return LABEL_W + (x - this.x0) / (this.x1 - this.x0) * this.plotW(); };
  Panel.prototype.zoom = function (f, at) {
    if (at === undefined) at = (this.x0 + this.x1) / 2;
    var w = (this.x1 - this.x0) * f;
    var least = MODE === "time" ? 100 : 2;
    if (w < least) w = least;
    this.x0 = at - (at - this.x0) * (w / (this.x1 - this.x0));
    this.x1 = this.x0 + w;
    this.draw();
  };
  Panel.prototype.pan = function (f) { var d = (this.x1 - this.x0) * f; this.x0 += d; this.x1 += d; this.draw(); };
  Panel.prototype.act = function (a) {
    if (a === "in") this.zoom(0.5);
    else if (a === "out") this.zoom(2);
    else if (a === "left") this.pan(-0.25);
    else if (a === "right") this.pan(0.25);
    else if (a === "reset") { this.x0 = this.home[0]; this.x1 = this.home[1]; this.draw(); }
  };
  Panel.prototype.show = function (seq) {
    var x = seqX(seq);
    if (x === null) return;
    var w = MODE === "events" ? Math.max(20, Math.min(this.x1 - this.x0, 200))
      : Math.max(20000, Math.min(this.x1 - this.x0, 2e6));
    this.x0 = x - w / 2; this.x1 = x + w / 2; this.focus = seq; this.draw();
  };
  // The axis changed: back to this panel's whole range on it.
  Panel.prototype.remode = function () {
    this.home = this.homes[MODE];
    this.x0 = this.home[0]; this.x1 = this.home[1];
    this.draw();
  };

  Panel.prototype.draw = function () {
    var W = LABEL_W + this.plotW() + 4, self = this;
    var svg = el("svg", { width: W, height: HEIGHT, role: "img",
      "aria-label": MODE === "events"
        ? "timeline from event " + Math.round(seqAt(this.x0)) + " to " + Math.round(seqAt(this.x1))
        : "timeline from " + fmtNs(this.x0) + " to " + fmtNs(this.x1) });
    var defs = el("defs", {}, svg);
    var pat = el("pattern", { id: this.root.id + "-hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
      patternTransform: "rotate(45)" }, defs);
    el("rect", { width: 6, height: 6, fill: "#fff" }, pat);
    el("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#E69F00", "stroke-width": 3 }, pat);
    el("clipPath", { id: this.root.id + "-clip" }, defs).appendChild(
      el("rect", { x: LABEL_W, y: 0, width: this.plotW(), height: HEIGHT }));
    var axis = el("g", {}, svg), t, px, step, span;
    if (MODE === "events") {
      // Axis: event numbers.
      var q0 = seqAt(this.x0), q1 = seqAt(this.x1);
      span = q1 - q0; step = Math.pow(10, Math.floor(Math.log10(span / 8 || 1)));
      if (span / step > 16) step *= 5; else if (span / step > 8) step *= 2;
      step = Math.max(1, step);
      el("text", { x: 4, y: 14, "class": "lane-name axis-name" }, axis).textContent = "event seq \u2192";
      for (t = Math.ceil(q0 / step) * step; t <= q1; t += step) {
        px = this.px(pos(t));
        el("line", { x1: px, y1: AXIS_H - 6, x2: px, y2: HEIGHT, stroke: "#eee" }, axis);
        el("text", { x: px + 2, y: 14, fill: "#555" }, axis).textContent = String(Math.round(t));
      }
      this.unit = "event";
    } else {
      // Axis: time since the trace began, in the unit the visible width calls for.
      span = this.x1 - this.x0;
      var u = unitFor(span);
      step = Math.pow(10, Math.floor(Math.log10(span / 8 || 1)));
      if (span / step > 16) step *= 5; else if (span / step > 8) step *= 2;
      el("text", { x: 4, y: 14, "class": "lane-name axis-name" }, axis).textContent = "time (" + u.name + ") \u2192";
      for (t = Math.ceil(this.x0 / step) * step; t <= this.x1; t += step) {
        px = this.px(t);
        el("line", { x1: px, y1: AXIS_H - 6, x2: px, y2: HEIGHT, stroke: "#eee" }, axis);
        var v = t / u.f;
        el("text", { x: px + 2, y: 14, fill: "#555" }, axis).textContent =
          String(Math.abs(v) >= 100 || step / u.f >= 1 ? Math.round(v) : step / u.f >= 0.1 ? v.toFixed(1) : v.toFixed(2));
      }
      this.unit = u.name;
    }
    V.lanes.forEach(function (l, i) {
      var g = el("g", {}, svg);
      el("rect", { x: 0, y: laneY[i] - 2, width: W, height: Math.max(1, l.rows) * ROW_H + 2,
        fill: i % 2 ? "#fafafa" : "#f3f6f9" }, g);
      el("text", { x: 4, y: laneY[i] + 18, "class": "lane-name" }, g).textContent = l.name;
    });
    var plot = el("g", { "clip-path": "url(#" + this.root.id + "-clip)" }, svg);
    var lastPx = {}, drawn = { elided: 0, copy: 0, spans: 0 };
    var widest = { copy: 0, submit: 0 };
    spans.forEach(function (s) {
      var r0 = spanX(s);
      if (r0 === null || r0[1] < self.x0 || r0[0] > self.x1) return;
      var x = self.px(r0[0]), x2 = self.px(r0[1]), w = Math.max(1, x2 - x);
      // What the drawing says the longest copy and submission took (tests compare it with the
      // trace): the drawn width back through the axis.
      var k = s.kind === "submit" ? "submit" : (s.kind === "copy" || s.kind === "elided") ? "copy" : null;
      if (k && r0[0] >= self.x0 && r0[1] <= self.x1) widest[k] = Math.max(widest[k], (x2 - x) / self.plotW() * (self.x1 - self.x0));
      var sub = s.kind === "submit";
      var yy = laneY[s.lane] + s.row * ROW_H + (sub ? 0 : BAR_H + 1);
      var h = sub ? BAR_H : ROW_H - BAR_H - 5;
      // Thin: one item per pixel column per band.
      var band = s.lane + ":" + s.row + ":" + sub;
      if (w < 2 && lastPx[band] !== undefined && Math.floor(x) <= lastPx[band]) return;
      lastPx[band] = Math.floor(x + w);
      var g = el("g", { "class": "span s-" + s.kind + (s.timing ? " t-" + s.timing : ""), "data-seq": s.seq }, plot);
      var r = el("rect", { x: x, y: yy, width: w, height: h, "class": "k-" + s.kind }, g);
      if (s.kind === "elided") r.style.fill = "url(#" + self.root.id + "-hatch)";
      title(g, s.label + (MODE === "time" && s.t0 !== undefined ? " [" + fmtNs(s.t0) + " \u2013 " + fmtNs(s.t1) + "]" : ""));
      var lab = SHORT[s.kind] !== undefined ? SHORT[s.kind] : s.kind;
      if (s.buffer) lab += " #" + s.buffer;
      if (s.count > 1 && lab) lab += " ×" + s.count;
      if (lab && w > lab.length * 6.5 + 4) {
        var tx = el("text", { x: x + 3, y: yy + h - 5, "class": (DARK[s.kind] ? "lbl-dark" : "lbl-light") }, g);
        tx.textContent = lab;
        if (s.kind === "elided") tx.setAttribute("font-weight", "700");
      }
      drawn.spans++;
      if (s.kind === "elided") drawn.elided++;
      if (s.kind === "copy") drawn.copy++;
    });
    V.marks.forEach(function (m) {
      var mx = markX(m);
      if (mx === null || mx < self.x0 || mx > self.x1) return;
      var x = self.px(mx), y0 = laneY[m.lane];
      var g = el("g", { "class": "mark m-" + m.kind, "data-seq": m.seq }, plot);
      if (m.kind === "decided") {
        g.setAttribute("id", self.root.id === "panel-run" ? "ev-" + m.seq : "ev-iter-" + m.seq);
        el("line", { x1: x, y1: AXIS_H, x2: x, y2: HEIGHT, "class": "m-decided" + (self.focus === m.seq ? " m-hl" : "") }, g);
        var tb = el("text", { x: x + 3, y: HEIGHT - 5, fill: "#6b2f55", "font-weight": "700" }, g);
        tb.textContent = m.label;
      } else if (m.kind === "fence" || m.kind === "idle") {
        el("path", { d: "M" + x + " " + (y0 + 4) + " l6 12 l-12 0 Z", "class": "m-" + m.kind }, g);
      } else {
        el("path", { d: "M" + x + " " + (y0 + 18) + " l6 -7 l-6 -7 l-6 7 Z", "class": "m-" + m.kind }, g);
      }
      title(g, m.label);
    });
    var fq = this.focus !== undefined ? seqX(this.focus) : null;
    if (fq !== null) {
      var fx = this.px(fq);
      el("line", { x1: fx, y1: AXIS_H, x2: fx, y2: HEIGHT, "class": "m-hl" }, plot);
    }
    // (not replaceChildren: older browsers, e.g. JetPack's Chromium, lack it)
    while (this.box.firstChild) this.box.removeChild(this.box.firstChild);
    this.box.appendChild(svg);
    this.drawn = drawn;
    this.widest = widest;
  };

  var active = null;
  function key(p, e) {
    if (e.key === "+" || e.key === "=") p.zoom(0.5);
    else if (e.key === "-" || e.key === "_") p.zoom(2);
    else if (e.key === "ArrowLeft") p.pan(-0.2);
    else if (e.key === "ArrowRight") p.pan(0.2);
    else if (e.key === "0" || e.key === "Home") p.act("reset");
    else return false;
    return true;
  }
  document.addEventListener("keydown", function (e) {
    if (!active || e.target === active.root || /INPUT|TEXTAREA|SELECT/.test(e.target.tagName)) return;
    if (key(active, e)) e.preventDefault();
  });

  var last = pos(Math.max(2, V.last_seq + 1));
  var lastT = Math.max(1000, V.last_t) * 1.01;
  var runHomes = { events: [0, last], time: [0, lastT] };
  var iterHomes = {
    events: V.iteration ? [pos(V.iteration[0]) - 1, pos(V.iteration[1]) + 1] : [0, last],
    time: V.iteration_t ? [V.iteration_t[0] - (V.iteration_t[1] - V.iteration_t[0]) * 0.02,
      V.iteration_t[1] + (V.iteration_t[1] - V.iteration_t[0]) * 0.02] : [0, lastT]
  };
  var run = new Panel("panel-run", runHomes);
  var iter = new Panel("panel-iter", iterHomes);
  if (!V.iteration) iter.root.querySelector("h3").textContent = "The run does not repeat: the whole run";
  active = iter;
  run.draw(); iter.draw();
  // The axis toggle: time or event order (traces without times: event order only).
  var toggle = document.getElementById("axis-toggle");
  function setMode(m) {
    if (m === "time" && !V.timed) return;
    MODE = m;
    if (toggle) {
      toggle.textContent = MODE === "time" ? "show in event order" : "show in time";
      toggle.setAttribute("aria-pressed", MODE === "time" ? "true" : "false");
    }
    document.body.setAttribute("data-axis", MODE);
    run.remode(); iter.remode();
    report();
  }
  if (toggle) {
    if (!V.timed) { toggle.disabled = true; toggle.textContent = "event order only (this trace holds no times)"; }
    else toggle.addEventListener("click", function () { setMode(MODE === "time" ? "events" : "time"); });
  }
  document.body.setAttribute("data-axis", MODE);
  if (toggle && V.timed) toggle.textContent = "show in event order";
  window.addEventListener("resize", function () { run.draw(); iter.draw(); report(); });
  // "decided at" anchors: show the event on both timelines and scroll to the run's.
  document.querySelectorAll("a.ev").forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      var seq = Number(a.getAttribute("data-seq"));
      iter.show(seq); run.show(seq);
      var t = document.getElementById("ev-" + seq) || run.root;
      run.root.scrollIntoView({ block: "start" });
      if (history.replaceState) history.replaceState(null, "", "#ev-" + seq);
      active = run;
      return t;
    });
  });
  // Opened at #ev-N: show it.
  var m = /^#ev-(\d+)$/.exec(location.hash);
  if (m) { run.show(Number(m[1])); iter.show(Number(m[1])); }

  // What the page drew, for tests: counts over the whole run (every span is drawn there at
  // the initial zoom unless thinned) and the rows of the pairs table.
  function report() {
    var rows = document.querySelectorAll("#pairs-table tr.pair");
    var verdicts = 0;
    rows.forEach(function (r) { if (r.querySelector("td.verdict").textContent.length > 0) verdicts++; });
    var dec = document.querySelectorAll("#panel-run .mark.m-decided").length;
    status.setAttribute("data-pairs", String(rows.length));
    status.setAttribute("data-verdicts", String(verdicts));
    status.setAttribute("data-elided-drawn", String(document.querySelectorAll("#panel-run .span.s-elided").length));
    status.setAttribute("data-kept-drawn", String(document.querySelectorAll("#panel-run .span.s-copy").length));
    status.setAttribute("data-elided-iter", String(document.querySelectorAll("#panel-iter .span.s-elided").length));
    status.setAttribute("data-spans-drawn", String(document.querySelectorAll("#panel-run .span").length));
    status.setAttribute("data-decided-drawn", String(dec));
    status.setAttribute("data-lanes", String(V.lanes.length));
    status.setAttribute("data-axis", MODE);
    status.setAttribute("data-timed", V.timed ? "true" : "false");
    status.setAttribute("data-unit-iter", iter.unit);
    status.setAttribute("data-unit-run", run.unit);
    status.setAttribute("data-waits-drawn", String(document.querySelectorAll("#panel-run .span.s-wait").length));
    status.setAttribute("data-gpu-timed", String(document.querySelectorAll("#panel-run .span.s-submit.t-gpu, #panel-run .span.s-submit.t-gpu-aligned").length));
    // Drawn lengths in the steady iteration's panel, in ns (time axis only).
    status.setAttribute("data-widest-submit-ns", MODE === "time" ? String(Math.round(iter.widest.submit)) : "");
    status.setAttribute("data-widest-copy-ns", MODE === "time" ? String(Math.round(iter.widest.copy)) : "");
  }
  report();
  // #selftest (the browser test opens the page so): drive the controls as a person would and
  // record whether each did what it should.
  if (location.hash === "#selftest") {
    var fails = [];
    var width = function (p) { return p.x1 - p.x0; };
    var startMode = MODE;
    var w0 = width(iter);
    iter.root.dispatchEvent(new KeyboardEvent("keydown", { key: "+", bubbles: true }));
    // Relative: the axis is in ns from the trace's start, where one ulp of a long run's
    // coordinates is more than 1e-6 (a profile run of seconds failed an absolute bound).
    if (!(Math.abs(width(iter) - w0 / 2) <= 1e-9 * w0)) fails.push("key + did not zoom in");
    var x0 = iter.x0;
    iter.root.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true }));
    if (!(iter.x0 > x0)) fails.push("key ArrowRight did not pan");
    iter.root.dispatchEvent(new KeyboardEvent("keydown", { key: "-", bubbles: true }));
    iter.root.dispatchEvent(new KeyboardEvent("keydown", { key: "0", bubbles: true }));
    if (!(iter.x0 === iter.home[0] && iter.x1 === iter.home[1])) fails.push("key 0 did not reset");
    var r = run.box.getBoundingClientRect();
    run.box.dispatchEvent(new WheelEvent("wheel", { deltaY: -100, clientX: r.left + LABEL_W + 50,
      clientY: r.top + 30, bubbles: true, cancelable: true }));
    if (!(width(run) < run.home[1] - run.home[0])) fails.push("the mouse wheel did not zoom");
    var link = document.querySelector("a.ev");
    if (link) {
      link.click();
      var q = seqX(Number(link.getAttribute("data-seq")));
      if (q === null || !(run.x0 <= q && q <= run.x1)) fails.push("an event link did not show its event");
      if (!document.getElementById("ev-" + link.getAttribute("data-seq"))) fails.push("no #ev- anchor after the link");
    }
    // The axis toggle: event order and back, each with its own ticks.
    if (V.timed && toggle) {
      toggle.click();
      var axisName = function () { var a = document.querySelector("#panel-iter .axis-name"); return a ? a.textContent : ""; };
      if (MODE !== "events" || axisName().indexOf("event") < 0) fails.push("the toggle did not switch to event order");
      toggle.click();
      if (MODE !== "time" || axisName().indexOf("time") < 0) fails.push("the toggle did not switch back to time");
      // A span is drawn as long as it lasted: the widest submission of the iteration, drawn,
      // against its own times.
      var sub = null;
      V.spans.forEach(function (s) {
        if (s.kind === "submit" && s.t0 !== undefined && s.t0 >= iter.x0 && s.t1 <= iter.x1 && (!sub || s.t1 - s.t0 > sub.t1 - sub.t0)) sub = s;
      });
      if (sub && Math.abs(iter.widest.submit - (sub.t1 - sub.t0)) > (iter.x1 - iter.x0) / iter.plotW() * 1.5)
        fails.push("a submission of " + fmtNs(sub.t1 - sub.t0) + " is drawn " + fmtNs(iter.widest.submit) + " long");
    } else if (toggle && !toggle.disabled) {
      fails.push("a trace without times offers the time axis");
    }
    if (MODE !== startMode) setMode(startMode);
    status.setAttribute("data-selftest", fails.length ? fails.join("; ") : "ok");
  }
  if (errors.length === 0) status.setAttribute("data-state", "ok");
})();
