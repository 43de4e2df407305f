// Filters of the run list and problem list: rows stay in the page, only hidden or shown, so
// the same page filters when served and when opened from disk.
(function () {
  function value(id) { var el = document.getElementById(id); return el ? el.value.trim() : ""; }
  function apply() {
    var pipeline = value("pipeline-filter"), status = value("status-filter");
    var reason = value("reason-filter"), task = value("task-search").toLowerCase();
    var shown = 0, rows = document.querySelectorAll("tr[data-pipeline], tr[data-task]");
    rows.forEach(function (row) {
      var ok = (!pipeline || row.dataset.pipeline === pipeline) &&
        (!status || row.dataset.status === status) && (!reason || row.dataset.reason === reason) &&
        (!task || (row.dataset.task || "").toLowerCase().indexOf(task) >= 0);
      row.style.display = ok ? "" : "none";
      if (ok) { shown += 1; }
    });
    var counter = document.getElementById("shown");
    if (counter) { counter.textContent = shown + " shown"; }
  }
  ["pipeline-filter", "status-filter", "reason-filter", "task-search"].forEach(function (id) {
    var el = document.getElementById(id);
    if (el) { el.addEventListener("input", apply); el.addEventListener("change", apply); }
  });
  apply();
})();
