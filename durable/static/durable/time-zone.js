// The operator's time zone defaults to their browser's: when they have none yet (the page says so with
// data-time-zone-url on <body>), send it once, then show this page again in it.
(function () {
  "use strict";
  const url = document.body.dataset.timeZoneUrl;
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (!url || !zone) return;
  const headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
  const body = new URLSearchParams({time_zone: zone, from_browser: "on"});
  fetch(url, {method: "POST", headers: headers, body: body, credentials: "same-origin"}).then(function (answer) {
    if (answer.status === 204) window.location.reload();
  });
})();
