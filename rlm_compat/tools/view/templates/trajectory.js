(function () {
  "use strict";
  // Model-written text only ever enters the page through textContent / createTextNode.
  var data = JSON.parse(document.getElementById("trajectory-data").textContent);
  var FOLD_CHARS = 1500, FOLD_LINES = 24, CHUNK = 50, LINKS = 20;
  var byId = {}, childIndex = {};
  data.nodes.forEach(function (n) {
    byId[n.node_id] = n;
    n.steps.forEach(function (s) {  // highlighted replies travel once, as tokens
      if (s.reply === undefined) s.reply = s.hl_reply.filter(function (_, i) { return i % 2; }).join("");
    });
  });
  data.nodes.forEach(function (n) { n.children.forEach(function (c, i) { childIndex[c] = i; }); });
  var tops = data.nodes.filter(function (n) { return !byId[n.parent_id]; });

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(v) { return v === null || v === undefined ? "?" : Number(v).toLocaleString("en-US"); }
  function cost(v) { return v === null || v === undefined ? "?" : "$" + Number(v).toPrecision(3); }
  function secs(v) { return v === null || v === undefined ? "?" : Number(v).toFixed(3) + " s"; }
  function excerpt(t, n) { t = String(t || "").replace(/\s+/g, " "); return t.length > n ? t.slice(0, n) + "\u2026" : t; }

  function tokensInto(pre, tokens) {
    for (var i = 0; i < tokens.length; i += 2) {
      if (tokens[i]) pre.appendChild(el("span", tokens[i], tokens[i + 1]));
      else pre.appendChild(document.createTextNode(tokens[i + 1]));
    }
    return pre;
  }
  function isLong(text) {
    if (text.length > FOLD_CHARS) return true;
    var lines = 0;
    for (var i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) if (++lines > FOLD_LINES) return true;
    return false;
  }
  // A text block; a long one shows its head and a button to unfold the rest (built only then).
  function block(text, cls, tokens) {
    text = text === null || text === undefined ? "" : String(text);
    var wrap = el("div", "fold");
    function full() {
      var pre = el("pre", cls + (tokens ? " hl" : ""));
      return tokens ? tokensInto(pre, tokens) : (pre.textContent = text, pre);
    }
    if (!isLong(text)) { wrap.appendChild(full()); return wrap; }
    var head = text.slice(0, FOLD_CHARS).split("\n").slice(0, FOLD_LINES).join("\n");
    var pre = el("pre", cls + " folded", head + "\n\u2026");
    var btn = el("button", "fold-btn", "show all " + num(text.length) + " characters");
    btn.type = "button";
    btn.addEventListener("click", function () { wrap.replaceChild(full(), pre); btn.remove(); });
    wrap.appendChild(pre); wrap.appendChild(btn);
    return wrap;
  }
  // Items in chunks of CHUNK: a chunk is built when its placeholder nears the viewport, when its
  // placeholder is clicked, or when a link or search result needs one of its items.
  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { if (e.isIntersecting && e.target.fill) e.target.fill(); });
  }, { rootMargin: "600px 0px" }) : null;
  function lazyList(container, items, render, estimate) {
    var holders = [];
    for (var start = 0; start < items.length; start += CHUNK) holders.push(placeholder(start));
    function placeholder(start) {
      var end = Math.min(start + CHUNK, items.length);
      // As tall as its items will roughly be, so only the chunks near the screen get built.
      var h = el("div", "chunk-holder");
      h.style.height = (end - start) * estimate + "px";
      var b = el("button", "more-btn", "show " + (start + 1) + "\u2013" + end + " of " + num(items.length));
      b.type = "button";
      h.appendChild(b);
      h.fill = function () {
        if (!h.isConnected || h.done) return;
        h.done = true;
        if (observer) observer.unobserve(h);
        var frag = document.createDocumentFragment();
        for (var i = start; i < end; i++) frag.appendChild(render(items[i], i));
        h.replaceWith(frag);
      };
      b.addEventListener("click", h.fill);
      container.appendChild(h);
      if (observer) observer.observe(h);
      return h;
    }
    if (holders.length) holders[0].fill();
    return { ensure: function (i) { var h = holders[Math.floor(i / CHUNK)]; if (h) h.fill(); } };
  }

  // A replay's divergences (rlm-compat replay --json), found by node and replay step number.
  var marks = {}, marked = [];
  if (data.replay) {
    data.replay.divergences.forEach(function (d) {
      var n = byId[d.node_id];
      if (!n) return;
      for (var i = 0; i < n.steps.length; i++) {
        if (n.steps[i].replay_step === d.step) { marks[d.node_id + "\u0000" + i] = d; marked.push([d.node_id, i]); return; }
      }
    });
  }

  function childLink(id) {
    var c = byId[id];
    var a = el("a", "child-link", id + (c ? " (" + c.kind + ", depth " + c.depth + ")" : ""));
    a.href = "#node-" + id;
    a.addEventListener("click", function (ev) { ev.preventDefault(); revealNode(id, true); });
    return a;
  }

  function stepEl(n, s, i) {
    var box = el("div", "step");
    box.id = "step-" + n.node_id + "-" + i;
    var h = el("h4");
    h.appendChild(el("span", "", n.kind === "leaf" ? "reply" : "iteration " + s.iteration));
    if (s.call) {
      h.appendChild(el("span", "badge", s.call.model));
      h.appendChild(el("span", "badge", num(s.call.total_tokens) + " tokens"));
      h.appendChild(el("span", "badge", cost(s.call.cost_usd)));
      h.appendChild(el("span", "badge", "model " + secs(s.call.latency_seconds)));
      if (s.call.retries) h.appendChild(el("span", "badge err", s.call.retries + " retries"));
      if (s.call.error) h.appendChild(el("span", "badge err", "call failed"));
    }
    if (s.duration_seconds !== null && s.duration_seconds !== undefined) h.appendChild(el("span", "badge", "repl " + secs(s.duration_seconds)));
    box.appendChild(h);
    (s.notes || []).forEach(function (t) { box.appendChild(el("div", "note", t)); });
    if (s.call && s.call.error) { box.appendChild(el("div", "label", "call error")); box.appendChild(block(s.call.error, "obs error")); }
    if (s.reply !== null && s.reply !== undefined) {
      box.appendChild(el("div", "label", s.code === null && n.kind === "rlm" ? "model reply (run as code)" : "model reply"));
      box.appendChild(block(s.reply, "reply", s.hl_reply));
    }
    if (s.code !== null && s.code !== undefined) { box.appendChild(el("div", "label", "code")); box.appendChild(block(s.code, "code", s.hl_code)); }
    s.subcalls.forEach(function (b) {
      var p = el("div", "subcalls");
      p.appendChild(el("span", "label", b.function + " \u00d7" + b.count + (b.errors ? ", " + b.errors + " errors" : "") + (b.duration_seconds !== null ? ", " + secs(b.duration_seconds) : "") + " \u2192 "));
      var shown = b.children.slice(0, LINKS);
      shown.forEach(function (c) { p.appendChild(childLink(c)); });
      if (b.children.length > LINKS) {
        var rest = el("button", "more-btn", "+" + (b.children.length - LINKS) + " more");
        rest.type = "button";
        rest.addEventListener("click", function () { b.children.slice(LINKS).forEach(function (c) { p.insertBefore(childLink(c), rest); }); rest.remove(); });
        p.appendChild(rest);
      }
      box.appendChild(p);
    });
    if (s.output !== null && s.output !== undefined) {
      box.appendChild(el("div", "label", s.error ? "error (what the model read next)" : "observation"));
      box.appendChild(block(s.output, "obs" + (s.error ? " error" : "")));
    }
    var d = marks[n.node_id + "\u0000" + i];
    if (d) {
      box.classList.add("diverged");
      var m = el("div", "divergence-marker");
      m.appendChild(el("strong", "fail", "replay diverged here: "));
      m.appendChild(document.createTextNode(d.reason + " (replay step " + d.step + (d.where ? ", " + d.where : "") + ")"));
      box.insertBefore(m, box.firstChild);
      var side = el("div", "side");
      [["recorded observation", d.recorded], ["replayed under " + data.replay.profile, d.replayed === null ? "(not reached)" : d.replayed]].forEach(function (pair) {
        var col = el("div"); col.appendChild(el("h5", "", pair[0])); col.appendChild(block(pair[1], "obs")); side.appendChild(col);
      });
      box.insertBefore(side, m.nextSibling);
    }
    return box;
  }

  function nodeEl(n) {
    var d = el("div", "node " + n.kind);
    d.id = "node-" + n.node_id;
    var head = el("div", "node-head");
    head.appendChild(el("span", "tw", "\u25b8"));
    head.appendChild(el("strong", "", n.node_id));
    head.appendChild(el("span", "badge", "depth " + n.depth));
    if (n.model) head.appendChild(el("span", "badge", n.model));
    var t = n.totals;
    if (n.kind === "rlm") head.appendChild(el("span", "badge", n.steps.length + " iterations"));
    head.appendChild(el("span", "badge", num(t.tokens) + " tokens"));
    head.appendChild(el("span", "badge", cost(t.cost_usd)));
    head.appendChild(el("span", "badge", secs(t.latency_seconds)));
    if (n.children.length) {
      head.appendChild(el("span", "badge", n.children.length + " sub-calls"));
      var sub = el("span", "badge subtree", "with sub-calls: " + num(n.subtree.calls) + " calls, " + num(n.subtree.tokens) + " tokens, " + cost(n.subtree.cost_usd));
      sub.title = "this node and everything it started";
      head.appendChild(sub);
    }
    if (n.error) head.appendChild(el("span", "badge err", "error"));
    head.appendChild(el("span", "muted", excerpt(n.query, 90)));
    d.appendChild(head);
    d.appendChild(el("div", "node-body"));
    head.tabIndex = 0;
    head.setAttribute("role", "button");
    head.setAttribute("aria-expanded", "false");
    function toggle() { if (d.classList.contains("open")) close(d); else open(d); }
    head.addEventListener("click", toggle);
    head.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(); } });
    return d;
  }
  function build(d) {
    var n = byId[d.id.slice(5)], body = d.lastChild;
    d.built = true;
    if (n.kind === "rlm" && n.query !== null) { body.appendChild(el("div", "label", "query")); body.appendChild(block(n.query, "query")); }
    if (n.system_prompt) {
      var prompt = el("details", "system-prompt");
      var promptSummary = el("summary", "label", "system prompt (" + num(n.system_prompt.length) + " characters)");
      prompt.appendChild(promptSummary);
      // filled on first open; on click too, because "toggle" fires a task later than the click
      var fillPrompt = function () { if (prompt.childNodes.length === 1) prompt.appendChild(block(n.system_prompt, "query")); };
      promptSummary.addEventListener("click", fillPrompt);
      prompt.addEventListener("toggle", function () { if (prompt.open) fillPrompt(); });
      body.appendChild(prompt);
    }
    if (n.kind === "leaf") { body.appendChild(el("div", "label", "prompt")); body.appendChild(block(n.query, "query")); }
    var steps = el("div", "steps");
    body.appendChild(steps);
    d.steps = lazyList(steps, n.steps, function (s, i) { return stepEl(n, s, i); }, 220);
    var kids = n.children.filter(function (c) { return byId[c]; });
    if (kids.length) {
      body.appendChild(el("div", "label", "sub-calls (" + kids.length + ")"));
      var list = el("div", "children");
      body.appendChild(list);
      d.kids = lazyList(list, kids, function (c) { return nodeEl(byId[c]); }, 32);
    }
    if (n.kind === "rlm" && n.answer !== null) { body.appendChild(el("div", "label", "answer")); body.appendChild(block(n.answer, "answer")); }
    if (n.error) { body.appendChild(el("div", "label", "error")); body.appendChild(block(n.error, "obs error")); }
  }
  function open(d) { if (!d.built) build(d); d.classList.add("open"); d.firstChild.firstChild.textContent = "\u25be"; d.firstChild.setAttribute("aria-expanded", "true"); }
  function close(d) { d.classList.remove("open"); d.firstChild.firstChild.textContent = "\u25b8"; d.firstChild.setAttribute("aria-expanded", "false"); }

  function revealNode(id, scroll) {
    var chain = [];
    for (var n = byId[id]; n; n = byId[n.parent_id]) chain.unshift(n);
    var d = null;
    chain.forEach(function (n, k) {
      if (k > 0) { open(d); d.kids.ensure(childIndex[n.node_id]); }
      d = document.getElementById("node-" + n.node_id);
    });
    if (!d) return null;
    open(d);
    if (scroll) { d.scrollIntoView({ block: "start" }); flash(d.firstChild); }
    return d;
  }
  function revealStep(id, i) {
    var d = revealNode(id, false);
    if (!d) return;
    d.steps.ensure(i);
    var s = document.getElementById("step-" + id + "-" + i);
    s.scrollIntoView({ block: "center" });
    flash(s);
    return s;
  }
  function flash(e) { e.classList.remove("flash"); void e.offsetWidth; e.classList.add("flash"); }

  // Header.
  document.getElementById("query").textContent = data.query === null ? "(not recorded)" : data.query;
  var fa = document.getElementById("final-answer");
  fa.textContent = data.error ? data.error : data.answer === null ? "(none)" : data.answer;
  if (data.error) fa.className = "obs error";
  var st = data.stats || {};
  var figs = [];
  if (st.llm_calls !== undefined) figs.push(num(st.llm_calls) + " model calls");
  figs.push(num(data.nodes.filter(function (n) { return n.kind === "rlm"; }).length) + " RLM nodes");
  if (st.total_tokens !== undefined) figs.push(num(st.total_tokens) + " tokens");
  if (st.estimated_cost_usd !== undefined) figs.push(cost(st.estimated_cost_usd));
  if (st.max_depth_reached !== undefined) figs.push("max depth " + st.max_depth_reached);
  if (st.wall_seconds !== undefined) figs.push(secs(st.wall_seconds) + " wall");
  document.getElementById("figures").textContent = figs.join(" \u00b7 ");
  if (data.replay) {
    var r = data.replay, banner = document.getElementById("divergence-banner");
    banner.classList.remove("hidden");
    var what = "Replayed under profile " + r.profile + (r.isolation ? " (isolation " + r.isolation + ")" : "") + ": ";
    if (!r.divergences.length) {
      banner.classList.add("identical");
      banner.appendChild(el("strong", "", what));
      banner.appendChild(document.createTextNode("identical, every one of " + r.steps + " steps gave its recorded observation."));
    } else {
      banner.appendChild(el("strong", "fail", what));
      banner.appendChild(document.createTextNode(r.divergences.length + " of " + r.steps + " steps diverge; the first: " + r.divergences[0].reason + " "));
      var next = 0;
      var go = el("button", "", "show the first divergence");
      go.type = "button"; go.id = "goto-divergence";
      go.addEventListener("click", function () {
        if (!marked.length) return;
        var t = marked[next % marked.length];
        revealStep(t[0], t[1]);
        next += 1;
        go.textContent = "show divergence " + (next % marked.length + 1) + " of " + marked.length;
      });
      banner.appendChild(go);
    }
  }

  var tree = document.getElementById("tree");
  tops.forEach(function (n) { tree.appendChild(nodeEl(n)); });
  if (tops.length) open(tree.firstChild);

  document.getElementById("expand-all").addEventListener("click", function () {
    for (var round = 0; round < 50; round++) {
      var closed = tree.querySelectorAll(".node:not(.open)");
      if (!closed.length || tree.querySelectorAll(".node").length > 2000) break;
      closed.forEach(open);
    }
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    tree.querySelectorAll(".node.open").forEach(function (d) { if (d !== tree.firstChild) close(d); });
  });

  // Search: code, replies, observations, prompts; the index is built on first use.
  var index = null, timer = null;
  var box = document.getElementById("search"), count = document.getElementById("search-count"), results = document.getElementById("search-results");
  function buildIndex() {
    index = [];
    data.nodes.forEach(function (n) {
      n.steps.forEach(function (s, i) {
        var parts = [s.reply, s.code, s.output, n.kind === "leaf" ? n.query : null].filter(function (x) { return x; });
        index.push({ node: n.node_id, step: i, label: n.node_id + (n.kind === "leaf" ? " reply" : " iteration " + s.iteration), text: parts.join("\n"), lower: parts.join("\n").toLowerCase() });
      });
    });
  }
  function search() {
    var q = box.value.toLowerCase();
    results.textContent = "";
    if (q.length < 2) { count.textContent = ""; return; }
    if (!index) buildIndex();
    var hits = 0;
    index.forEach(function (e) {
      var at = e.lower.indexOf(q);
      if (at < 0) return;
      if (++hits > 200) return;
      var a = el("a", "search-hit");
      a.href = "#step-" + e.node + "-" + e.step;
      a.appendChild(el("strong", "", e.label + ": "));
      a.appendChild(document.createTextNode(excerpt(e.text.slice(Math.max(0, at - 40), at + q.length + 60), 140)));
      a.addEventListener("click", function (ev) { ev.preventDefault(); var s = revealStep(e.node, e.step); if (s) s.classList.add("hit"); });
      results.appendChild(a);
    });
    count.textContent = hits === 0 ? "no match" : hits + " match" + (hits === 1 ? "" : "es") + (hits > 200 ? " (first 200 listed)" : "");
  }
  box.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(search, 150); });
  box.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { clearTimeout(timer); search(); var first = results.querySelector("a"); if (first) first.click(); } });
  document.body.dataset.ready = "1";
})();
