// The Playground: a Session of one's own; calls typed by hand, completed from what the
// environment knows (functions, variables, entities, relations at the current node, columns).
"use strict";
(() => {
  const {el, post, get, setHighlighted} = pyql;
  const $ = (id) => document.getElementById(id);
  let pad = null;
  let known = {functions: [], variables: [], entities: [], relations: [], columns: []};

  function showState(state) {
    $("pad-program").textContent = state.program.join("\n");
    if (state.query_html) setHighlighted($("pad-query"), state.query_html);
    else $("pad-query").replaceChildren();
    $("pad-undo").disabled = state.program.length === 0;
  }

  async function refreshKnown() {
    known = await get(`/api/playground/${pad}/complete`);
    const parts = [];
    if (known.node) parts.push(`at ${known.node}: ${known.relations.length} relations`);
    if (known.variables.length) parts.push(`variables ${known.variables.join(", ")}`);
    if (known.entities.length) parts.push(`entities ${known.entities.join(", ")}`);
    if (known.columns.length) parts.push(`columns ${known.columns.join(", ")}`);
    $("pad-known").textContent = parts.join(" · ");
  }

  // the word being typed and what may complete it
  function candidates() {
    const input = $("pad-input");
    const text = input.value.slice(0, input.selectionStart);
    const match = /([A-Za-z0-9_:.?\- ]*)$/.exec(text.includes("(") ? text.split(/[(,]/).pop() : text);
    const word = (match ? match[1] : "").trimStart();
    const inCall = text.includes("(");
    const pool = inCall
      ? [...known.variables, ...known.entities, ...known.relations, ...known.columns]
      : known.functions.map((f) => f.name);
    const lower = word.toLowerCase();
    return {word, items: pool.filter((c) => c.toLowerCase().startsWith(lower)).slice(0, 30)};
  }

  function suggest() {
    const {items} = candidates();
    const list = $("pad-suggestions");
    list.replaceChildren(...items.map((item) => {
      const fn = known.functions.find((f) => f.name === item);
      return el("li", {"data-value": item}, el("span", {class: "mono", text: item}),
        fn ? el("span", {class: "muted small", text: " " + fn.signature}) : null);
    }));
  }

  function complete(value) {
    const input = $("pad-input");
    const {word} = candidates();
    const before = input.value.slice(0, input.selectionStart - word.length);
    const after = input.value.slice(input.selectionStart);
    const isFunction = known.functions.some((f) => f.name === value) && !before.includes("(");
    input.value = before + value + (isFunction ? "(" : "") + after;
    input.focus();
    suggest();
  }

  $("pad-suggestions").addEventListener("click", (e) => {
    const li = e.target.closest("li");
    if (li) complete(li.dataset.value);
  });
  $("pad-input").addEventListener("input", suggest);
  $("pad-input").addEventListener("keydown", (e) => {
    if (e.key === "Tab") {
      const {items} = candidates();
      if (items.length) { e.preventDefault(); complete(items[0]); }
    }
  });

  $("pad-open").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("pad-error").textContent = "";
    try {
      const state = await post("/api/playground", {
        entities: $("pad-entities") ? $("pad-entities").value : "",
        table: $("pad-table") ? $("pad-table").value : "",
        guidelines: $("pad-guidelines").checked,
      });
      pad = state.id;
      $("pad-log").replaceChildren();
      $("pad-input").disabled = false;
      $("pad-run").disabled = false;
      showState(state);
      await refreshKnown();
      $("pad-input").focus();
      document.body.dataset.pad = pad;
    } catch (failure) {
      $("pad-error").textContent = failure.message;
    }
  });

  $("pad-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!pad) return;
    $("pad-error").textContent = "";
    const action = $("pad-input").value;
    try {
      const state = await post(`/api/playground/${pad}/run`, {action});
      const o = state.observation;
      $("pad-log").append(el("li", {class: "step " + (o.hint ? "hint" : o.ok ? "ok" : "error"),
                                    "data-status": o.status, "data-hint": o.hint ? o.hint.code : null},
        el("div", {class: "step-head"}, el("b", {class: "mono", text: o.action}),
          el("span", {class: "pill " + o.status, text: o.status}),
          o.hint ? el("a", {class: "hint-code", href: o.hint.link, text: o.hint.code}) : null),
        el("div", {class: "field observation"}, el("span", {class: "value", text: o.text}))));
      if (o.ok || o.hint) $("pad-input").value = "";
      showState(state);
      await refreshKnown();
      suggest();
    } catch (failure) {
      $("pad-error").textContent = failure.message;
    }
  });

  $("pad-undo").addEventListener("click", async () => {
    if (!pad) return;
    const state = await post(`/api/playground/${pad}/undo`);
    $("pad-log").append(el("li", {class: "step undo", text: `undo ${state.undone || ""}`}));
    showState(state);
    await refreshKnown();
  });
})();
