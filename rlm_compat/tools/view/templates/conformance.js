(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("conformance-data").textContent);
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function distinct(key) { var seen = []; data.columns.forEach(function (c) { if (seen.indexOf(c[key]) < 0) seen.push(c[key]); }); return seen; }
  var groups = { implementation: distinct("name"), profile: distinct("profile"), python: distinct("python"), status: data.statuses };
  var chosen = {};
  var filters = document.getElementById("filters");
  var text = document.getElementById("case-filter");
  Object.keys(groups).forEach(function (g) {
    chosen[g] = {};
    var fs = el("fieldset");
    fs.appendChild(el("legend", "", g));
    groups[g].forEach(function (v) {
      chosen[g][v] = true;
      var label = el("label");
      var box = el("input");
      box.type = "checkbox"; box.checked = true; box.name = g; box.value = v;
      box.addEventListener("change", function () { chosen[g][v] = box.checked; apply(); });
      label.appendChild(box);
      label.appendChild(document.createTextNode(" " + v));
      fs.appendChild(label);
    });
    filters.insertBefore(fs, text);
  });
  text.addEventListener("input", apply);

  var table = document.getElementById("matrix");
  var headRow = el("tr");
  headRow.appendChild(el("th", "", "case"));
  var colHeads = data.columns.map(function (c) {
    var th = el("th", "col", c.name + " \u00b7 py" + c.python);
    th.title = "profile " + c.profile;
    headRow.appendChild(th);
    return th;
  });
  table.tHead.appendChild(headRow);
  var body = table.tBodies[0];
  var legend = el("p", "muted", data.statuses.map(function (s) { return data.symbols[s] + " " + s; }).join("   "));
  table.parentNode.insertBefore(legend, table);
  var rows = data.cases.map(function (c, i) {
    var tr = el("tr", "case");
    tr.dataset.case = c.id;
    var name = el("td", "mono", c.id);
    tr.appendChild(name);
    tr.cells_ = data.columns.map(function (col, j) {
      var r = data.cells[j][c.id];
      var status = r ? r.status : "";
      var td = el("td", "cell st-" + status, r ? data.symbols[status] || status : "");
      td.title = status + (r && r.detail ? ": " + r.detail : "");
      td.dataset.status = status;
      tr.appendChild(td);
      return td;
    });
    tr.addEventListener("click", function () { toggle(tr, c); });
    body.appendChild(tr);
    return tr;
  });

  function colVisible(col) { return chosen.implementation[col.name] && chosen.profile[col.profile] && chosen.python[col.python]; }
  function apply() {
    var visible = data.columns.map(colVisible);
    colHeads.forEach(function (th, j) { th.classList.toggle("hidden", !visible[j]); });
    var q = text.value.toLowerCase(), shown = 0;
    rows.forEach(function (tr) {
      var any = false;
      tr.cells_.forEach(function (td, j) {
        td.classList.toggle("hidden", !visible[j]);
        if (visible[j] && td.dataset.status && chosen.status[td.dataset.status]) any = true;
      });
      var show = any && (!q || tr.dataset.case.toLowerCase().indexOf(q) >= 0);
      tr.classList.toggle("hidden", !show);
      if (tr.detail) { tr.detail.classList.toggle("hidden", !show); tr.detail.firstChild.colSpan = 1 + visible.filter(Boolean).length; }
      if (show) shown++;
    });
    document.getElementById("shown-count").textContent = shown + " of " + rows.length + " cases shown";
  }

  function panel(title, parts) {
    var d = el("div");
    d.appendChild(el("h5", "", title));
    parts.forEach(function (p) {
      if (p[1] === null || p[1] === undefined) return;
      d.appendChild(el("div", "label", p[0]));
      d.appendChild(el("pre", p[2] || "", p[1]));
    });
    return d;
  }
  function toggle(tr, c) {
    if (tr.detail) { tr.detail.remove(); tr.detail = null; return; }
    var visible = data.columns.map(colVisible);
    var row = el("tr", "detail");
    var td = el("td");
    td.colSpan = 1 + visible.filter(Boolean).length;
    var side = el("div", "side");
    var recordings = [];  // identical recordings (one per Python, often the same) are shown once
    data.columns.forEach(function (col, j) {
      var file = col.fixtures[c.kind];
      if (!visible[j] || !data.cells[j][c.id] || !file) return;
      var rec = (data.recorded[file] || {})[c.id];
      var key = rec ? rec.input + "\u0000" + rec.expected : "missing " + file;
      var same = recordings.filter(function (x) { return x.key === key; })[0];
      if (same) { if (same.files.indexOf(file) < 0) same.files.push(file); }
      else recordings.push({ key: key, rec: rec, files: [file], oracle: col.oracle });
    });
    recordings.forEach(function (x) {
      side.appendChild(panel("recorded " + (x.oracle === "cpython" ? "CPython" : "upstream") + " (" + x.files.join(", ") + ")", x.rec ? x.rec.texts.map(function (t) { return [t[0], t[1], "code"]; }).concat([["input", x.rec.input], ["outcome", x.rec.expected]]) : [["outcome", "(fixture file not available here)"]]));
    });
    data.columns.forEach(function (col, j) {
      if (!visible[j]) return;
      var r = data.cells[j][c.id];
      if (!r) return;  // this column did not run the case
      var dev = r.deviation === undefined ? null : col.oracle === "cpython"
        ? "R" + r.deviation + " (restriction): " + (data.restrictions[String(r.deviation)] || "")
        : "#" + r.deviation + " (" + r.deviation_kind + "): " + (data.deviations[String(r.deviation)] || "");
      var actual = r.actual !== undefined ? r.actual : r.status === "pass" || r.status === "unexpected-pass" ? "same as recorded" : null;
      side.appendChild(panel(col.name + " \u00b7 py" + col.python + " \u00b7 " + col.profile, [["status", r.status, "st-" + r.status], ["difference", r.detail], ["registered deviation", dev], ["actual outcome", actual]]));
    });
    td.appendChild(side);
    row.appendChild(td);
    tr.parentNode.insertBefore(row, tr.nextSibling);
    tr.detail = row;
  }
  apply();
  document.body.dataset.ready = "1";
})();
