(function () {
  "use strict";
  // Click a column heading of a table.sortable to sort its rows by that column (again: reverse).
  function key(cell) {
    var text = (cell ? cell.textContent : "").trim();
    var number = parseFloat(text.replace(/[%,+]| pt$/g, ""));
    return isNaN(number) ? text.toLowerCase() : number;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, column) {
      th.classList.add("sort");
      th.title = "sort by this column";
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var down = th.dataset.sorted !== "asc";
        table.querySelectorAll("thead th").forEach(function (h) { delete h.dataset.sorted; });
        th.dataset.sorted = down ? "asc" : "desc";
        Array.prototype.slice.call(body.rows).sort(function (a, b) {
          var x = key(a.cells[column]), y = key(b.cells[column]);
          var order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : typeof x === "number" ? -1 : 1;
          return down ? order : -order;
        }).forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  document.body.dataset.ready = "1";
})();
