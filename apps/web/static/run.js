// A run's question table: rows from the page's JSON, filtered by outcome, hint code, hops and
// text, drawn a page at a time (so a run of any size opens and filters at once); a live run
// (pyql eval still writing it) is followed: new rows are fetched as they come.
"use strict";
(() => {
  const {el, get, json} = pyql;
  const data = json("run-data");
  const $ = (id) => document.getElementById(id);
  const PAGE = 100;
  const body = $("q-body");
  const rows = [];  // in file order; a question run again keeps its place
  const byId = new Map();
  const options = {status: new Set(), hint: new Set(), hops: new Set()};
  let matches = [];
  let drawn = PAGE;

  function addOption(kind, value) {
    if (value === "" || options[kind].has(value)) return;
    options[kind].add(value);
    const select = $("f-" + kind);
    const chosen = select.value;
    const sorted = [...options[kind]].sort((a, b) => String(a).localeCompare(String(b), undefined, {numeric: true}));
    const keep = [...select.options].filter((o) => o.value === "" || o.value === "-");
    select.replaceChildren(...keep, ...sorted.map((v) => el("option", {value: v, text: v})));
    select.value = chosen;
  }

  function makeRow(row) {
    const link = `/question?key=${encodeURIComponent(data.key)}&id=${encodeURIComponent(row.id)}`;
    return el("tr", {"data-id": row.id, "data-status": row.status, "data-hops": row.hops,
                     "data-hints": row.hints.join(" ")},
      el("td", {class: "num", text: row.index + 1}),
      el("td", {}, el("a", {href: link, text: row.question || row.id}),
        el("div", {class: "muted small", text: row.id})),
      el("td", {}, el("span", {class: "pill " + row.status, text: row.status})),
      el("td", {class: "num", text: row.score === null ? "—" : Number(row.score).toFixed(2)}),
      el("td", {class: "num", text: row.steps}),
      el("td", {class: "mono", text: row.hints.join(" ")}),
      el("td", {class: "num", text: row.hops}),
      el("td", {class: "small", text: row.predicted.join(", ")}));
  }

  function add(list) {
    for (const row of list) {
      row.search = [row.id, row.question, ...row.predicted, ...row.hints].join(" ").toLowerCase();
      const old = byId.get(row.id);
      row.index = old ? old.index : rows.length;
      if (old) rows[old.index] = row;
      else rows.push(row);
      byId.set(row.id, row);
      addOption("status", row.status);
      row.hints.forEach((h) => addOption("hint", h));
      addOption("hops", row.hops);
    }
  }

  function draw() {
    const shown = matches.slice(0, drawn);
    body.replaceChildren(...shown.map(makeRow));
    const more = $("q-more");
    more.hidden = matches.length <= drawn;
    more.textContent = `Show ${Math.min(PAGE * 5, matches.length - drawn)} more`;
  }

  function filter() {
    const status = $("f-status").value;
    const hint = $("f-hint").value;
    const hops = $("f-hops").value;
    const text = $("f-text").value.trim().toLowerCase();
    matches = rows.filter((row) => (!status || row.status === status)
      && (!hint || (hint === "-" ? row.hints.length === 0 : row.hints.includes(hint)))
      && (!hops || row.hops === hops)
      && (!text || row.search.includes(text)));
    drawn = PAGE;
    draw();
    const counter = $("q-shown");
    counter.textContent = `${matches.length} of ${rows.length}`;
    counter.dataset.shown = String(matches.length);
    counter.dataset.total = String(rows.length);
  }

  for (const id of ["f-status", "f-hint", "f-hops"]) $(id).addEventListener("change", filter);
  $("f-text").addEventListener("input", filter);
  $("q-more").addEventListener("click", () => { drawn += PAGE * 5; draw(); });
  add(data.rows);
  filter();
  document.body.dataset.ready = "1";

  // -- following a live run ---------------------------------------------------------------------
  let last = data.last;
  async function follow() {
    try {
      const update = await get(`/api/run/rows?key=${encodeURIComponent(data.key)}&after=${last}`);
      if (update.rows.length) {
        add(update.rows);
        const keep = drawn;
        filter();
        drawn = Math.max(keep, PAGE);
        draw();
        const response = await fetch(`/api/run/summary?key=${encodeURIComponent(data.key)}`);
        if (response.ok) {
          const template = document.createElement("template");
          template.innerHTML = await response.text();  // the server's template, autoescaped
          $("summary-part").replaceChildren(template.content);
        }
      }
      last = update.last;
      if (update.live) {
        setTimeout(follow, 1000);
      } else {
        const pill = $("live-pill");
        if (pill) { pill.textContent = "finished"; pill.className = "pill done"; }
        document.body.dataset.following = "0";
      }
    } catch (failure) {
      setTimeout(follow, 3000);
    }
  }
  if (data.live) {
    document.body.dataset.following = "1";
    setTimeout(follow, 1000);
  }
})();
