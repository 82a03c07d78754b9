// Leasegate console: refresh the pool grid every 2 s without reloading the page.
// No tokens here: the session is an HttpOnly cookie the browser sends by itself.
(function () {
  "use strict";
  var grid = document.getElementById("pool-grid");
  if (!grid) { return; }
  var status = document.getElementById("refresh-state");
  var url = grid.getAttribute("data-refresh");
  var busy = false;

  function say(text) { if (status && status.textContent !== text) { status.textContent = text; } }

  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" }, redirect: "follow" })
      .then(function (response) {
        if (response.redirected) { window.location.assign(response.url); return null; }
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        grid.innerHTML = html;
        grid.setAttribute("data-refreshed", String(Date.now()));
        say("");
      })
      .catch(function () { say("Refresh failed; retrying."); })
      .finally(function () { busy = false; });
  }

  window.setInterval(refresh, 2000);
})();
