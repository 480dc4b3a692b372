// A textarea with a limit (the reason fields: LimitedTextarea in durable/console/fields.py) shows its count as
// it is typed. Over the limit, the count says by how much and the form refuses to submit, in the browser's
// own words and in ours. The browser's `maxlength` is lifted first: it would cut pasted text silently.
(function () {
  "use strict";
  const number = new Intl.NumberFormat("en");

  function prepare(root) {
    for (const area of root.querySelectorAll(".limited-text textarea[maxlength]")) {
      area.dataset.limit = area.getAttribute("maxlength");
      area.removeAttribute("maxlength");
      count(area);
    }
  }

  function count(area) {
    const hint = area.closest(".limited-text").querySelector(".text-limit");
    const limit = Number(area.dataset.limit);
    // Characters as the server counts them: code points, a line break one (the browser posts it as two).
    const length = [...area.value.replace(/\r\n/g, "\n")].length;
    const over = length - limit;
    const message = over > 0
      ? number.format(over) + (over === 1 ? " character" : " characters") + " over the limit of " +
        number.format(limit) + ": shorten it to send."
      : "";
    area.setCustomValidity(message);
    hint.textContent = message || number.format(length) + " / " + number.format(limit) + " characters";
    hint.classList.toggle("text-limit-over", over > 0);
  }

  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches(".limited-text textarea[data-limit]")) count(event.target);
  });
  document.addEventListener("DOMContentLoaded", function () { prepare(document); });
  // Panels htmx swaps in (a decision answered with its form again) bring their own textareas.
  document.addEventListener("htmx:load", function (event) { prepare(event.target); });
})();
