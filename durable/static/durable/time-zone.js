// The operator's time zone defaults to their browser's. The login form carries it (a hidden field);
// an operator already logged in without one (the page says so with data-time-zone-url on <body>)
// sends it once, then sees this page again in it.
(function () {
  "use strict";
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (!zone) return;
  for (const field of document.querySelectorAll("input[data-browser-time-zone]")) field.value = zone;
  const url = document.body.dataset.timeZoneUrl;
  if (!url) return;
  const headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
  const body = new URLSearchParams({time_zone: zone, from_browser: "on"});
  fetch(url, {method: "POST", headers: headers, body: body, credentials: "same-origin"}).then(function (answer) {
    if (answer.status === 204) window.location.reload();
  });
})();
