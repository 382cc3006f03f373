// The Ask page: submit a question, then render each step the moment its event arrives.
"use strict";
(() => {
  const {el, post, setHighlighted, json} = pyql;
  const data = json("ask-data");
  const $ = (id) => document.getElementById(id);
  const form = $("ask-form");
  let source = null;
  let current = null;
  let seen = -1;
  let ticker = null;  // the time so far, ticking while the model thinks

  // -- the form ---------------------------------------------------------------------------------
  function showOptions() {
    const box = $("options");
    box.replaceChildren();
    const strategy = data.strategies.find((s) => s.name === $("strategy").value);
    for (const option of (strategy ? strategy.options : [])) {
      box.append(el("label", {title: option.help}, option.name + " ",
        el("input", {"data-option": option.name, placeholder: option.type})));
    }
  }
  $("strategy").addEventListener("change", showOptions);
  showOptions();
  const example = $("example");
  function fill() {
    if (example.value === "") return;  // "(type your own)"
    const chosen = data.examples[Number(example.value)];
    if (!chosen) return;
    $("question").value = chosen.question;
    $("program").value = chosen.program;
    if ($("entities")) {
      $("entities").value = Object.entries(chosen.entities).map(([m, i]) => `${m}=${i}`).join("\n");
    }
    if ($("table") && chosen.table) $("table").value = chosen.table;
  }
  if (example) {
    example.addEventListener("change", fill);
    $("question").addEventListener("input", () => {  // one's own question: no example chosen
      const chosen = example.value === "" ? null : data.examples[Number(example.value)];
      if (chosen && $("question").value !== chosen.question) example.value = "";
    });
    example.value = "0";  // the first example is filled in: one click answers it
    fill();
  }

  function request() {
    const options = {};
    for (const input of document.querySelectorAll("[data-option]")) {
      if (input.value.trim() !== "") options[input.dataset.option] = input.value.trim();
    }
    return {
      question: $("question").value, strategy: $("strategy").value, llm: $("llm").value,
      program: $("program").value, max_steps: $("max_steps").value, mode: $("mode").value,
      guidelines: $("guidelines").checked, options,
      entities: $("entities") ? $("entities").value : "",
      table: $("table") ? $("table").value : "",
    };
  }

  // -- the live view -----------------------------------------------------------------------------
  function tick(startMs) {
    clearInterval(ticker);
    ticker = setInterval(() => {
      $("n-seconds").textContent = ((Date.now() - startMs) / 1000).toFixed(1);
    }, 100);
  }

  function setState(state) {
    if (state !== "running" && state !== "starting") clearInterval(ticker);
    $("live").dataset.state = state;
    const pill = $("run-state");
    pill.textContent = state;
    pill.className = "pill " + state;
    const running = state === "running" || state === "starting";
    $("ask-button").disabled = running;
    $("cancel-button").disabled = !running;
  }

  function usage(u) {
    if (!u) return;
    $("n-calls").textContent = u.calls;
    $("n-tokens").textContent = u.tokens;
    $("n-queries").textContent = u.kb_queries;
    $("n-seconds").textContent = Number(u.seconds).toFixed(1);
  }

  function field(label, value, cls) {
    if (!value) return null;
    return el("div", {class: "field " + (cls || "")}, el("span", {class: "label", text: label}),
      el("span", {class: "value", text: value}));
  }

  function renderStep(event) {
    const s = event.step;
    const hint = event.hint;
    const item = el("li", {
      class: "step " + (hint ? "hint" : s.accepted ? "ok" : "error"),
      "data-n": s.n, "data-server-ms": event.server_ms, "data-status": s.status,
      "data-hint": hint ? hint.code : null,
    },
      el("div", {class: "step-head"}, el("b", {text: `Step ${s.n}`}),
        el("span", {class: "pill " + s.status, text: s.status}),
        s.kind !== "action" ? el("span", {class: "muted", text: s.kind}) : null,
        event.rolled_back ? el("span", {class: "pill rollback", text: "rolled back"}) : null),
      field("Thought", s.thought, "thought"),
      field("Call", s.action, "call mono"),
      hint ? el("div", {class: "field hint-line"}, el("span", {class: "label", text: "Hint"}),
        el("a", {class: "hint-code", href: hint.link, target: "_blank", text: hint.code}),
        el("span", {class: "hint-name", text: hint.name})) : null,
      field(hint ? "Feedback" : "Observation", s.observation, "observation"),
      s.error ? field("Error", s.error, "error-text") : null);
    $("steps").append(item);
    item.dataset.shownMs = String(performance.timeOrigin + performance.now());  // wall clock, sub-ms
    $("n-steps").textContent = String(s.n);
    $("program-so-far").textContent = event.program;
    if (event.query_html) setHighlighted($("query-so-far"), event.query_html);
    usage(event.usage);
  }

  function finish(event) {
    usage(event.usage);
    if (event.type === "done") {
      const list = $("answers");
      list.replaceChildren(...event.answers.map((a) => el("li", {class: "answer", text: a})));
      if (!event.answers.length) list.append(el("li", {class: "muted", text: "(none)"}));
      $("answers-box").hidden = false;
      $("program-so-far").textContent = event.program;
      if (event.query_html) setHighlighted($("query-so-far"), event.query_html);
    } else if (event.type === "error") {
      $("run-error").hidden = false;
      $("run-error").textContent = `${event.error.type}: ${event.error.message}`;
    } else if (event.type === "cancelled") {
      $("run-error").hidden = false;
      $("run-error").textContent = `Cancelled (${event.reason})`;
    }
    setState(event.type);
    $("live").dataset.endedMs = String(Date.now());
  }

  function handle(message) {
    const event = JSON.parse(message.data);
    if (event.seq <= seen) return;  // a reconnect replays from the start
    seen = event.seq;
    if (event.type === "start") {
      const names = Object.entries(event.entities).map(([m, i]) => `${m} → ${i}`).join(", ");
      $("entities-used").textContent = names ? `Entities${event.linked ? " (linked)" : ""}: ${names}` : "";
      setState("running");
      tick(event.server_ms);
    } else if (event.type === "ready") {
      $("model-used").textContent = `model: ${event.model}`;
    } else if (event.type === "step") {
      renderStep(event);
    } else {
      if (source) source.close();
      source = null;
      finish(event);
    }
  }

  form.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    $("form-error").textContent = "";
    if (source) source.close();
    $("steps").replaceChildren();
    $("model-used").textContent = "";
    $("answers-box").hidden = true;
    $("run-error").hidden = true;
    $("program-so-far").textContent = "";
    $("query-so-far").replaceChildren();
    $("n-steps").textContent = "0";
    usage({calls: 0, tokens: 0, kb_queries: 0, seconds: 0});
    seen = -1;
    setState("starting");
    try {
      current = await post("/api/ask", request());
    } catch (failure) {
      setState("idle");
      $("form-error").textContent = failure.message;
      $("form-error").dataset.field = (failure.info && failure.info.field) || "";
      return;
    }
    $("permalink").href = current.permalink;
    $("permalink").hidden = false;
    $("live").dataset.runId = current.id;
    source = new EventSource(current.events);
    for (const kind of ["start", "ready", "step", "done", "error", "cancelled"]) {
      source.addEventListener(kind, handle);
    }
  });

  $("cancel-button").addEventListener("click", async () => {
    if (!current) return;
    $("cancel-button").disabled = true;
    try { await post(current.cancel); } catch (failure) { $("form-error").textContent = failure.message; }
  });
})();
