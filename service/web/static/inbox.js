// countersign inbox: the only script of the web inbox, written for it (no library, nothing
// fetched from elsewhere; the Content-Security-Policy allows scripts from /inbox/static only).
//
// 1. The queue refreshes itself: every 2 s it fetches /inbox/queue/rows (the same rows the
//    server rendered) and swaps them in. Polling rather than server-sent events because the
//    service streams events per run (a queue spans runs and groups), a 2 s poll of a small
//    fragment costs the server one queue read, survives proxies and restarts without
//    reconnection logic, and keeps working when the tab sleeps and wakes.
// 2. Keyboard: j / ArrowDown and k / ArrowUp move between rows, Enter opens the focused one.
// 3. Deadlines count down each second from the seconds left when the server rendered them.
// 4. The edit form checks that its text is a JSON object before sending (the server checks
//    again: this is only a convenience).
(function () {
  "use strict";
  var POLL_MS = 2000;
  var loadedAt = Date.now();

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("tr.row")); }

  function duration(s) {
    if (s < 0) return "overdue";
    s = Math.floor(s);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    if (s >= 86400) return Math.floor(s / 86400) + "d " + two(Math.floor(s % 86400 / 3600)) + "h";
    if (s >= 3600) return Math.floor(s / 3600) + "h " + two(Math.floor(s % 3600 / 60)) + "m";
    if (s >= 60) return Math.floor(s / 60) + "m " + two(s % 60) + "s";
    return s + "s";
  }

  function tick() {
    var gone = (Date.now() - loadedAt) / 1000;
    document.querySelectorAll("[data-seconds-left]").forEach(function (el) {
      var left = el.getAttribute("data-seconds-left");
      if (left === "") return;
      var base = parseFloat(el.getAttribute("data-base") || "0");
      el.textContent = duration(parseFloat(left) - (gone - base));
    });
  }

  function poll(box) {
    var url = box.getAttribute("data-rows");
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } }).then(function (r) {
      if (!r.ok || r.redirected) return null;
      return r.text();
    }).then(function (html) {
      if (html === null || html === undefined) return;
      var focused = document.activeElement && document.activeElement.getAttribute("data-request");
      var doc = new DOMParser().parseFromString(html, "text/html");
      var table = doc.querySelector("table.queue");
      var note = doc.querySelector("p.hidden-note");
      if (!table) return;
      var base = String((Date.now() - loadedAt) / 1000);
      table.querySelectorAll("[data-seconds-left]").forEach(function (el) { el.setAttribute("data-base", base); });
      box.replaceChildren(document.adoptNode(table), document.adoptNode(note));
      if (focused) {
        var again = box.querySelector('tr.row[data-request="' + focused + '"]');
        if (again) again.focus();
      }
      tick();
    }).catch(function () { /* the next poll tries again */ });
  }

  function typing(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  }

  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
    var list = rows();
    if (!list.length) return;
    var at = list.indexOf(document.activeElement);
    if (e.key === "j" || e.key === "ArrowDown") {
      list[Math.min(at + 1, list.length - 1)].focus();
      e.preventDefault();
    } else if (e.key === "k" || e.key === "ArrowUp") {
      list[Math.max(at - 1, 0)].focus();
      e.preventDefault();
    } else if (e.key === "Enter" && at >= 0) {
      window.location.assign(list[at].getAttribute("data-href"));
      e.preventDefault();
    }
  });

  document.addEventListener("click", function (e) {
    var row = e.target.closest && e.target.closest("tr.row");
    if (row && !e.target.closest("a")) window.location.assign(row.getAttribute("data-href"));
  });

  function checkJson(form) {
    var field = form.querySelector("textarea[name=" + form.getAttribute("data-json-field") + "]");
    var error = form.querySelector(".json-error");
    var problem = null;
    try {
      var value = JSON.parse(field.value);
      if (value === null || typeof value !== "object" || Array.isArray(value)) problem = "The arguments must be a JSON object ({...}).";
    } catch (err) {
      problem = "Not JSON: " + err.message;
    }
    error.textContent = problem || "";
    error.hidden = !problem;
    field.setAttribute("aria-invalid", problem ? "true" : "false");
    return !problem;
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("queue");
    if (box) {
      setInterval(function () { poll(box); }, POLL_MS);
      var first = rows()[0];
      if (first && !typing(document.activeElement)) first.focus();
    }
    setInterval(tick, 1000);
    document.querySelectorAll("form[data-json-field]").forEach(function (form) {
      form.addEventListener("submit", function (e) { if (!checkJson(form)) e.preventDefault(); });
      form.querySelector("textarea").addEventListener("input", function () { checkJson(form); });
    });
  });
})();
