// A run's stream on its console page: an EventSource on GET /api/runs/{id}/stream/ (the same session), text
// chunks appended to the text, other kinds listed newest first. The browser reconnects by itself with
// Last-Event-ID when a response ends (DURABLE_STREAM_MAX_SECONDS) or the network drops; the `end` event (the run
// ended or waits) closes it. The page's live region then shows the run's new status.
(function () {
  "use strict";
  const KEEP_EVENTS = 200;

  function follow(panel) {
    const text = panel.querySelector(".stream-text");
    const list = panel.querySelector(".stream-events");
    const state = panel.querySelector(".stream-state");
    const source = new EventSource(panel.dataset.streamUrl);
    let received = 0;

    function chunk(event) {
      const body = JSON.parse(event.data);
      received += 1;
      state.textContent = "Following: " + received + " chunk(s) received, the newest from " + body.step + ".";
      if (event.type === "text") {
        text.textContent += body.data === null ? "" : body.data;
        return;
      }
      const item = document.createElement("li");
      item.textContent = event.type + " (" + body.step + "): " + JSON.stringify(body.data);
      list.prepend(item);
      while (list.children.length > KEEP_EVENTS) list.lastElementChild.remove();
    }

    source.onopen = function () {
      if (!received) state.textContent = "Following: nothing published yet.";
    };
    for (const kind of ["text", "progress", "data"]) source.addEventListener(kind, chunk);
    source.onmessage = chunk; // an event without a name
    source.addEventListener("end", function (event) {
      const body = JSON.parse(event.data);
      source.close();
      state.textContent = (received ? received + " chunk(s) received. " : "Nothing published. ") +
        "The stream ended: the run is " + body.status + ".";
    });
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) state.textContent = "The stream could not be followed.";
    };
  }

  for (const panel of document.querySelectorAll("[data-stream-url]")) follow(panel);
})();
