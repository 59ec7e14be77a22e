/* aci-evidence console: live updates without harm. Plain JavaScript, no dependency, nothing
 * fetched but this console's own fragments and events.
 *
 * - One EventSource on the page's [data-live-events] URL. Each event's id is the stream entry
 *   id; the browser resends it as Last-Event-ID when it reconnects, and this script passes it
 *   as ?after= when it reopens the stream itself (after a pause, or when the tab is shown).
 * - On events (at most once a second) the [data-live-fragment] element's HTML is refetched and
 *   swapped: a fragment, never the page. [data-live-interval] refreshes it on a timer too.
 *   A fragment that took T ms to fetch is not fetched again for 4 T (a 10,000-call session's
 *   timeline costs its server ~0.4 s: one tab keeps it busy a fifth of the time at most).
 * - Pause button; paused while the tab is hidden. Bar geometry is applied from data-*
 *   attributes (the content security policy allows no inline style).
 */
(function () {
  "use strict";
  var control = document.querySelector("[data-live-events]");
  var toggle = document.getElementById("live-toggle");
  var label = document.getElementById("live-state");
  var feed = document.getElementById("live-feed");
  var source = null;
  var lastId = null;
  var paused = false;
  var timer = null;
  var lastSwap = 0;
  var gap = 1000;
  var retry = 2000;
  var retryTimer = null;
  var inFlight = false;

  function geometry(root) {
    var nodes = root.querySelectorAll("[data-left], [data-width]");
    for (var i = 0; i < nodes.length; i++) {
      var n = nodes[i];
      if (n.hasAttribute("data-left")) { n.style.left = n.getAttribute("data-left") + "%"; }
      if (n.hasAttribute("data-width")) { n.style.width = n.getAttribute("data-width") + "%"; }
    }
  }

  function target() { return document.querySelector("[data-live-fragment]"); }

  function say(text) {
    if (label) { label.textContent = text; }
    document.body.setAttribute("data-live", text);
  }

  function swap() {
    timer = null;
    var t = target();
    if (!t || paused || document.hidden || inFlight) { return; }
    inFlight = true;
    var started = Date.now();
    fetch(t.getAttribute("data-live-fragment"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        inFlight = false;
        lastSwap = Date.now();
        // Slow answers space the next fetch out; a failed one (Redis down: 503) doubles it.
        gap = html === null ? Math.min(30000, gap * 2) : Math.max(1000, 4 * (lastSwap - started));
        document.body.setAttribute("data-live-gap", String(gap));
        if (html === null || paused) { return; }
        t.innerHTML = html;
        geometry(t);
        document.body.setAttribute("data-swaps", String(Number(document.body.getAttribute("data-swaps") || "0") + 1));
      })
      .catch(function () { inFlight = false; lastSwap = Date.now(); gap = Math.min(30000, gap * 2); });
  }

  function schedule() {
    if (timer !== null || paused) { return; }
    timer = setTimeout(swap, Math.max(0, gap - (Date.now() - lastSwap)));
  }

  function show(data) {
    if (!feed) { return; }
    var item = document.createElement("li");
    item.textContent = [data.status, data.evidence_status || "", data.tool || "",
      String(data.session) + " / " + String(data.tool_call_id)].join(" ");
    feed.insertBefore(item, feed.firstChild);
    if (feed.parentNode && feed.parentNode.hidden) { feed.parentNode.hidden = false; }
    while (feed.children.length > 20) { feed.removeChild(feed.lastChild); }
  }

  function onEvent(ev) {
    if (ev.lastEventId) { lastId = ev.lastEventId; }
    var data = null;
    try { data = JSON.parse(ev.data); } catch (e) { return; }
    show(data);
    schedule();
  }

  function open() {
    if (!control || source || paused || document.hidden) { return; }
    var url = control.getAttribute("data-live-events");
    if (lastId) { url += (url.indexOf("?") < 0 ? "?" : "&") + "after=" + encodeURIComponent(lastId); }
    source = new EventSource(url, { withCredentials: true });
    source.addEventListener("lifecycle", onEvent);
    source.addEventListener("unavailable", function () { say("Redis unreachable, retrying"); });
    source.onopen = function () { retry = 2000; say("live"); };
    source.onerror = function () {
      // A refused stream (503: too many open, or Redis down) is closed for good by
      // EventSource: reopen it ourselves, waiting longer each time (up to a minute).
      if (source && source.readyState === 2) {
        source = null;
        if (retryTimer === null) {
          retryTimer = setTimeout(function () { retryTimer = null; open(); }, retry);
          retry = Math.min(60000, retry * 2);
        }
      }
      say("reconnecting");
    };
  }

  function close(why) {
    if (source) { source.close(); source = null; }
    if (timer !== null) { clearTimeout(timer); timer = null; }
    if (retryTimer !== null) { clearTimeout(retryTimer); retryTimer = null; }
    say(why);
  }

  function setPaused(value) {
    paused = value;
    if (toggle) {
      toggle.textContent = paused ? "Resume" : "Pause";
      toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    }
    if (paused) { close("paused"); } else { open(); schedule(); }
  }

  geometry(document);
  if (toggle) { toggle.addEventListener("click", function () { setPaused(!paused); }); }
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { close("paused while hidden"); } else if (!paused) { open(); schedule(); }
  });
  var t = target();
  var every = t ? Number(t.getAttribute("data-live-interval") || "0") : 0;
  setInterval(function () {
    var now = target();
    if (!now || paused || document.hidden) { return; }
    if (every || now.querySelector(".inflight")) { schedule(); }
  }, every || 2000);
  if (control) { open(); }
}());
