// A panel marked data-answer-panel (the approval decision) answers with 400/403/409/503 on purpose:
// a missing reason, a refusal, a conflict. base.html's htmx-config makes htmx swap those in place.
// With DEBUG on, django-htmx's helper would instead replace the whole page with any 400/403 body,
// so keep this event from reaching it (capture phase runs first; htmx itself does not listen to it).
document.addEventListener("htmx:beforeOnLoad", function (event) {
  const target = event.detail.target;
  if (target && target.closest && target.closest("[data-answer-panel]")) {
    event.stopPropagation();
  }
}, true);
