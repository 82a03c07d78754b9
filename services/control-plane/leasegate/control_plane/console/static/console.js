// Leasegate console: refresh the pool grid every 2 s without reloading the page.
// No tokens here: the session is an HttpOnly cookie the browser sends by itself.
(function () {
  "use strict";
  var grid = document.getElementById("pool-grid");
  if (!grid) { return; }
  var status = document.getElementById("refresh-state");
  var url = grid.getAttribute("data-refresh");
  var busy = false;
  var last = grid.innerHTML;

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
        grid.setAttribute("data-refreshed", String(Date.now()));
        say("");
        if (html === last) { return; }  // nothing changed: leave the DOM (and focus) alone
        var wrap = grid.querySelector(".table-wrap");
        var scroll = wrap ? wrap.scrollLeft : 0;
        var focused = wrap !== null && document.activeElement === wrap;
        grid.innerHTML = html;
        last = html;
        wrap = grid.querySelector(".table-wrap");
        if (wrap) {
          wrap.scrollLeft = scroll;
          if (focused) { wrap.focus({ preventScroll: true }); }
        }
      })
      .catch(function () { say("Refresh failed; retrying."); })
      .finally(function () { busy = false; });
  }

  window.setInterval(refresh, 2000);
})();
