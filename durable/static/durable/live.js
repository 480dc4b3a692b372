// Live regions (durable/console/live.py): an element marked data-live polls its page with htmx and sends the
// version it shows as If-None-Match; the server answers 304 (base.html's htmx-config: no swap) while nothing
// changed. Every answer is no-store, so the browser never sends that header by itself.
// A poll waits while the operator is busy with a form (a field focused or changed, an action opened), so a
// reason being typed is never replaced, and while the tab is hidden.
(function () {
  "use strict";
  const TYPING = "textarea, select, input:not([type=checkbox]):not([type=radio]):not([type=submit])" +
    ":not([type=button]):not([type=hidden])";

  function changed(field) {
    if (!field.matches("input, textarea, select") || field.type === "hidden") return false;  // buttons have no default
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    if (field.tagName === "SELECT") return Array.from(field.options).some((o) => o.selected !== o.defaultSelected);
    return field.value !== field.defaultValue;
  }

  function busy() {
    const main = document.querySelector("main") || document.body;
    const active = document.activeElement;
    if (active && main.contains(active) && active.matches(TYPING) && active.closest("form[method=post]")) return true;
    if (main.querySelector("details[open] form[method=post]")) return true;
    return Array.from(main.querySelectorAll("form[method=post]")).some(
      (form) => Array.from(form.elements).some(changed));
  }

  document.addEventListener("htmx:configRequest", function (event) {
    const elt = event.detail.elt;
    if (!elt.hasAttribute("data-live") || event.detail.verb !== "get") return;
    if (document.hidden || Date.now() < actingUntil || busy()) {
      event.preventDefault();
      return;
    }
    if (elt.dataset.version) event.detail.headers["If-None-Match"] = elt.dataset.version;
    if (elt.hasAttribute("data-live-location")) event.detail.path = location.pathname + location.search;
  });

  // An action from inside a region (a decision, a cancel) answers with the region as it is after the action. A
  // poll answered first would replace the region the action's answer is aimed at, and the outcome would be lost:
  // so a poll in flight is abandoned, and none is sent until the action's answer is in (or 10 s have passed).
  let actingUntil = 0;
  document.addEventListener("htmx:beforeRequest", function (event) {
    const elt = event.detail.elt;
    const region = elt.closest && elt.closest("[data-live]");
    if (region && region !== elt && event.detail.requestConfig.verb !== "get") {
      actingUntil = Date.now() + 10000;
      htmx.trigger(region, "htmx:abort");
    }
  });
  document.addEventListener("htmx:load", function (event) {
    if (event.detail.elt.hasAttribute && event.detail.elt.hasAttribute("data-live")) actingUntil = 0;
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    const elt = event.detail.elt;
    if (elt.hasAttribute("data-live") && !elt.isConnected) event.detail.shouldSwap = false;  // replaced meanwhile
  });

  // A region that keeps its element (its rows swapped inside it) learns its new version from the answer's ETag;
  // one swapped whole carries it in its new data-version.
  document.addEventListener("htmx:afterRequest", function (event) {
    const target = event.detail.target;
    const etag = event.detail.xhr && event.detail.xhr.getResponseHeader("ETag");
    if (etag && target && target.isConnected && target.hasAttribute("data-live")) target.dataset.version = etag;
  });
})();
