// Live countdowns: every <time data-expires-at="ISO"> shows the time left, updated each second.
// Rows htmx swaps in later are picked up too, since each tick looks the elements up again.
(function () {
  "use strict";
  const SOON_MS = 60 * 60 * 1000;

  function pad(n) {
    return String(n).padStart(2, "0");
  }

  function timeLeft(ms) {
    const seconds = Math.floor(ms / 1000);
    const days = Math.floor(seconds / 86400);
    const clock = pad(Math.floor(seconds % 86400 / 3600)) + ":" + pad(Math.floor(seconds % 3600 / 60)) + ":" +
      pad(seconds % 60);
    return (days > 0 ? days + "d " : "") + clock;
  }

  function tick() {
    const now = Date.now();
    for (const element of document.querySelectorAll("time[data-expires-at]")) {
      const left = Date.parse(element.dataset.expiresAt) - now;
      if (Number.isNaN(left)) continue;
      element.textContent = left > 0 ? timeLeft(left) : "expired";
      element.classList.toggle("countdown-soon", left > 0 && left < SOON_MS);
      element.classList.toggle("countdown-expired", left <= 0);
    }
  }

  tick();
  setInterval(tick, 1000);
})();
