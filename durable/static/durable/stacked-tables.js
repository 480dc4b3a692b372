// On a phone, console.css stacks each table row into a card; every cell then shows its column's heading,
// which this copies from the table's <thead> into the cell's data-label. Rows htmx swaps in are labelled too.
(function () {
  "use strict";

  function headings(table) {
    const labels = [];
    for (const th of table.tHead.rows[0].cells) {
      for (let i = 0; i < th.colSpan; i++) labels.push(th.textContent.trim());
    }
    return labels;
  }

  function label(table) {
    if (!table.tHead || !table.tHead.rows.length) return;
    const labels = headings(table);
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        let column = 0;
        for (const cell of row.cells) {
          // A cell across the whole row (an empty list's note, "next page") needs no heading.
          if (cell.colSpan < labels.length && labels[column]) cell.dataset.label = labels[column];
          column += cell.colSpan;
        }
      }
    }
  }

  function labelWithin(root) {
    const table = root.closest && root.closest("table");
    for (const each of table ? [table] : root.querySelectorAll("table")) label(each);
  }

  document.addEventListener("DOMContentLoaded", function () { labelWithin(document); });
  document.addEventListener("htmx:load", function (event) { labelWithin(event.target); });
})();
