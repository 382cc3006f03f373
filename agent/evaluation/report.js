/* pyql report: filters, search and paging of the question list (vanilla JS, no network).
   Without JS every question is shown and each one still expands (<details>). */
(function () {
  "use strict";
  var list = document.getElementById("q-list");
  var toolbar = document.getElementById("q-toolbar");
  if (!list || !toolbar) { return; }
  document.documentElement.classList.add("js");

  var items = Array.prototype.slice.call(list.querySelectorAll("details.q"));
  var search = document.getElementById("q-search");
  var group = document.getElementById("q-group");
  var hints = document.getElementById("q-hints");
  var count = document.getElementById("q-count");
  var pager = document.getElementById("q-pager");
  var buttons = Array.prototype.slice.call(toolbar.querySelectorAll(".seg button"));
  var pageSize = parseInt(list.getAttribute("data-page-size"), 10) || 50;
  var status = "";
  var page = 0;
  var matched = items;

  function matches(el, terms) {
    if (status && el.getAttribute("data-status") !== status) { return false; }
    if (group && group.value && el.getAttribute("data-group") !== group.value) { return false; }
    if (hints && hints.checked && el.getAttribute("data-hints") === "0") { return false; }
    var text = el.getAttribute("data-search") || "";
    for (var i = 0; i < terms.length; i++) {
      if (text.indexOf(terms[i]) < 0) { return false; }
    }
    return true;
  }

  function button(label, target, disabled) {
    var b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.disabled = disabled;
    b.addEventListener("click", function () { page = target; render(); });
    return b;
  }

  function render() {
    var pages = Math.max(1, Math.ceil(matched.length / pageSize));
    if (page >= pages) { page = pages - 1; }
    var lo = page * pageSize, hi = lo + pageSize;
    var shown = {};
    for (var i = lo; i < hi && i < matched.length; i++) { shown[matched[i].id] = true; }
    for (var j = 0; j < items.length; j++) {
      items[j].style.display = shown[items[j].id] ? "" : "none";
    }
    count.setAttribute("data-count", String(matched.length));
    count.textContent = matched.length === items.length
      ? items.length.toLocaleString() + " questions"
      : matched.length.toLocaleString() + " of " + items.length.toLocaleString() + " questions";
    pager.textContent = "";
    if (pages > 1) {
      pager.appendChild(document.createTextNode(
        "page " + (page + 1) + " of " + pages + " "));
      pager.appendChild(button("‹ prev", page - 1, page === 0));
      pager.appendChild(button("next ›", page + 1, page >= pages - 1));
    }
  }

  function apply() {
    var terms = (search ? search.value : "").toLowerCase().split(/\s+/).filter(Boolean);
    matched = items.filter(function (el) { return matches(el, terms); });
    page = 0;
    render();
  }

  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      status = b.getAttribute("data-status") || "";
      buttons.forEach(function (o) { o.setAttribute("aria-pressed", String(o === b)); });
      apply();
    });
  });
  if (search) { search.addEventListener("input", apply); }
  if (group) { group.addEventListener("change", apply); }
  if (hints) { hints.addEventListener("change", apply); }
  function setOpen(open) {
    items.forEach(function (el) { if (el.style.display !== "none") { el.open = open; } });
  }
  document.getElementById("q-expand").addEventListener("click", function () { setOpen(true); });
  document.getElementById("q-collapse").addEventListener("click", function () { setOpen(false); });

  function reset() {
    status = "";
    buttons.forEach(function (o) {
      o.setAttribute("aria-pressed", String(!o.getAttribute("data-status")));
    });
    if (search) { search.value = ""; }
    if (group) { group.value = ""; }
    if (hints) { hints.checked = false; }
    apply();
  }

  // a link to #q-N opens that question on its page
  function reveal() {
    var id = window.location.hash.slice(1);
    var target = id && document.getElementById(id);
    if (!target || items.indexOf(target) < 0) { return; }
    if (matched.indexOf(target) < 0) { reset(); }
    page = Math.floor(matched.indexOf(target) / pageSize);
    render();
    target.open = true;
    target.scrollIntoView();
  }
  window.addEventListener("hashchange", reveal);

  apply();
  reveal();
  toolbar.setAttribute("data-ready", "1");
})();
