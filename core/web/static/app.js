// unyo console: the theme switch, live alert updates (server-sent events)
// and actions without a reload. Every page reads without this script.
"use strict";
(function () {
  var root = document.documentElement;
  var stored = null;
  try { stored = localStorage.getItem("unyo-theme"); } catch (e) {}
  if (stored === "dark" || stored === "light") root.setAttribute("data-theme", stored);

  document.addEventListener("DOMContentLoaded", function () {
    var btn = document.getElementById("theme");
    if (btn) {
      btn.hidden = false;
      btn.addEventListener("click", function () {
        var dark = root.getAttribute("data-theme") === "dark" ||
          (!root.getAttribute("data-theme") && matchMedia("(prefers-color-scheme: dark)").matches);
        var next = dark ? "light" : "dark";
        root.setAttribute("data-theme", next);
        try { localStorage.setItem("unyo-theme", next); } catch (e) {}
      });
    }
    live();
    bulk();
    confirms();
    refresh();
  });

  function byId(id) { return document.getElementById(id); }

  // live keeps the alerts page current: the server sends the rows that
  // changed since the page was rendered, each after its predecessor.
  function live() {
    var status = byId("live-status");
    if (!status || !window.EventSource) return;
    var url = "/alerts/live?view=" + encodeURIComponent(status.dataset.view) + "&" + status.dataset.query;
    var es = new EventSource(url);
    status.textContent = "Connecting for live updates…";
    es.onopen = function () { status.textContent = "Live: changes appear as they happen."; };
    es.onerror = function () { status.textContent = "Live updates interrupted; reconnecting…"; };
    es.addEventListener("reload", function () { es.close(); location.reload(); });
    es.addEventListener("logout", function () { es.close(); location.href = "/login"; });
    es.addEventListener("problem", function (ev) { status.textContent = "Live: " + JSON.parse(ev.data); });
    es.addEventListener("alerts", function (ev) {
      apply(JSON.parse(ev.data));
      status.textContent = "Live: updated " + new Date().toLocaleTimeString() + ".";
    });
  }

  function apply(m) {
    var groups = byId("groups");
    (m.remove || []).forEach(function (k) { var r = byId("a-" + k); if (r) r.remove(); });
    var tpl = byId("group-template");
    function section(g) {
      var s = byId("g-" + g.key);
      if (s) return s;
      s = tpl.content.firstElementChild.cloneNode(true);
      s.id = "g-" + g.key;
      s.dataset.group = g.key;
      var h = s.querySelector("h2");
      h.id = "gh-" + g.key;
      s.setAttribute("aria-labelledby", h.id);
      var b = h.querySelector(".badge");
      b.className = "badge " + g["class"];
      b.textContent = g.label;
      groups.appendChild(s);
      return s;
    }
    var byKey = {};
    (m.groups || []).forEach(function (g) { byKey[g.key] = g; });
    (m.upsert || []).forEach(function (u) {
      var old = byId("a-" + u.key);
      // A row redrawn keeps the operator's selection.
      var picked = old && old.querySelector("input[name=sel]:checked");
      if (old) old.remove();
      var body = section(byKey[u.group] || { key: u.group, label: u.group, "class": "grp" }).querySelector("tbody");
      var t = document.createElement("template");
      t.innerHTML = u.html;
      var row = t.content.firstElementChild;
      if (picked) { var box = row.querySelector("input[name=sel]"); if (box) box.checked = true; }
      var after = u.after ? byId("a-" + u.after) : null;
      if (after && after.parentNode === body) after.after(row); else body.prepend(row);
    });
    // Groups in the server's order, with their counts; empty ones go.
    // Sections move only when out of order: moving one with thousands of
    // rows costs the browser a layout of all of them.
    var keep = {}, prev = null;
    (m.groups || []).forEach(function (g) {
      var s = section(g);
      s.querySelector("h2 .count").textContent = g.count;
      var want = prev ? prev.nextElementSibling : groups.firstElementChild;
      if (want !== s) groups.insertBefore(s, want);
      prev = s;
      keep[g.key] = true;
    });
    Array.prototype.slice.call(groups.children).forEach(function (s) {
      if (!keep[s.dataset.group]) s.remove();
    });
    byId("total").textContent = m.total;
    var none = byId("none");
    if (none) none.hidden = m.total > 0;
  }

  // bulk acknowledges or closes the selected alerts without leaving the
  // page; the live stream then shows the change.
  function bulk() {
    var form = byId("bulk");
    if (!form || !window.fetch) return;
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      // The rows' boxes belong to the form through form="bulk".
      var data = new URLSearchParams(new FormData(form));
      if (ev.submitter) data.set("action", ev.submitter.value);
      var out = byId("act-status");
      // getAttribute: form.action is the button named "action".
      fetch(form.getAttribute("action"), { method: "POST", body: data, credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRF-Token": form.elements.csrf.value } })
        .then(function (r) { return r.json(); })
        .then(function (j) {
          out.textContent = j.message;
          if (j.ok) {
            document.querySelectorAll('input[form=bulk][name=sel]:checked').forEach(function (c) { c.checked = false; });
            form.elements.reason.value = "";
          }
        })
        .catch(function (e) { out.textContent = "Failed: " + e; });
    });
  }

  // confirms asks for a second press before a form marked data-confirm
  // (cordon, drain, scale) is sent: the first shows what it will do. No
  // dialog, so that the page stays keyboard-friendly and testable.
  function confirms() {
    document.querySelectorAll("form[data-confirm]").forEach(function (f) {
      var note = null, timer = null;
      f.addEventListener("submit", function (ev) {
        if (note) return; // armed: this press confirms
        ev.preventDefault();
        note = document.createElement("span");
        note.className = "confirm";
        note.setAttribute("role", "alert");
        note.textContent = f.dataset.confirm + " Press again to confirm.";
        f.appendChild(note);
        timer = setTimeout(function () { note.remove(); note = null; }, 15000);
      });
    });
  }

  // refresh redraws the parts of a page marked data-refresh="SECONDS"
  // (a service's replicas) from the page as the server renders it now.
  function refresh() {
    if (!window.fetch || !window.DOMParser) return;
    document.querySelectorAll("[data-refresh][id]").forEach(function (el) {
      var every = (parseInt(el.dataset.refresh, 10) || 5) * 1000;
      setInterval(function () {
        if (document.hidden) return;
        fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html", "X-Unyo-Refresh": "1" } })
          .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
          .then(function (html) {
            if (!html) return;
            var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(el.id);
            if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
          })
          .catch(function () {});
      }, every);
    });
  }
})();
