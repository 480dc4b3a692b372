// The copy button of every JSON block ({% json_block %}): copies the block's JSON text, as shown.
// One listener on the document, so blocks htmx swaps in later copy too.
(function () {
  "use strict";

  function said(button, text) {
    button.textContent = text;
    setTimeout(function () { button.textContent = "Copy"; }, 2000);
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest("[data-copy-json]");
    if (!button) return;
    const code = button.parentElement.querySelector("pre.json");
    if (!code || !navigator.clipboard) {
      said(button, "Select and copy");
      return;
    }
    navigator.clipboard.writeText(code.textContent).then(
      function () { said(button, "Copied"); },
      function () { said(button, "Select and copy"); });
  });
})();
