"use strict";
// agentrl view: renders the embedded runs. Only what is on screen is built (one page of the
// episode list, the selected episode, one group), so large dumps stay responsive. Every
// piece of model or tool text goes through textContent, never through HTML parsing.
// The URL hash holds the view's state (tab, run, step, filters, episode), so a link or a
// headless browser can open the page on a given filter or episode.

const DATA = JSON.parse(document.getElementById("agentrl-data").textContent);
const PAGE_SIZE = 100;
const COLORS = ["#2f6fde", "#d9822b", "#1f8a4c", "#8e44ad", "#c8382b", "#16a2b8"];
const CHARTS = [
  ["Reward", [["train", "train", "reward/mean"], ["eval", "eval", "eval/reward"]]],
  ["Accuracy (exact match)", [["train", "train", "reward_detail/exact_match"],
    ["eval", "eval", "eval/exact_match"]]],
  ["KL to reference", [["train", "train", "policy/kl_ref"]]],
  ["Entropy", [["train", "train", "policy/entropy"]]],
  ["Clip fraction", [["train", "train", "policy/ratio_clip_frac"]]],
];
const DEFAULTS = { tab: "", run: "0", step: "all", min_reward: "", max_reward: "", term: "",
  term_min: "", errors: "any", finish: "any", result: "any", q: "", sort: "default",
  page: "0", episode: "", group: "", differ: "0", gap_min: "", tok: "lp" };
const state = Object.assign({}, DEFAULTS);
const runs = DATA.runs.map(indexRun);

// ------------------------------------------------------------------ helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function fmt(value, digits) {
  if (value === null || value === undefined || value === "") return "–";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(digits === undefined ? 3 : digits);
}

function num(text) {
  if (text === "" || text === null || text === undefined) return null;
  const value = Number(text);
  return Number.isFinite(value) ? value : null;
}

function firstUser(record) {
  const msg = (record.messages || []).find((m) => m.role === "user");
  return msg ? String(msg.content || "") : "";
}

function stepKey(record) {
  return (record.kind || "train") + ":" + record.step;
}

function stepLabel(key) {
  const [kind, step] = key.split(":");
  return kind === "eval" ? "eval @ step " + step : "step " + step;
}

// ------------------------------------------------------------------ data

function indexRun(run, r) {
  const rows = run.episodes.map((e, i) => {
    const calls = e.tool_calls || [];
    return {
      i, record: e, kind: e.kind || "train", step: e.step, key: stepKey(e),
      group: e.group, reward: typeof e.reward === "number" ? e.reward : null,
      advantage: typeof e.advantage === "number" ? e.advantage : null,
      finish: e.finish_reason || "", calls: calls.length,
      errors: calls.filter((c) => !c.ok).length,
      passed: e.kind === "eval" ? !!e.passed : null, task: firstUser(e), search: null,
    };
  });
  const keys = [...new Set(rows.map((x) => x.key))].sort((a, b) => {
    const [ka, sa] = a.split(":"), [kb, sb] = b.split(":");
    return ka === kb ? Number(sa) - Number(sb) : (ka === "train" ? -1 : 1);
  });
  const terms = new Set();
  for (const x of rows.slice(0, 2000)) {
    for (const [k, v] of Object.entries(x.record.reward_terms || {})) {
      if (typeof v === "number") terms.add(k);
    }
  }
  const finishes = [...new Set(rows.map((x) => x.finish))].sort();
  return { run, r, rows, keys, terms: [...terms].sort(), finishes };
}

function searchText(row) {
  if (row.search === null) {
    const parts = (row.record.messages || []).map((m) => String(m.content || ""));
    for (const c of row.record.tool_calls || []) parts.push(c.name, JSON.stringify(c.arguments));
    row.search = parts.join("\n").toLowerCase();
  }
  return row.search;
}

function filteredRows() {
  const run = runs[Number(state.run)] || runs[0];
  const minR = num(state.min_reward), maxR = num(state.max_reward), termMin = num(state.term_min);
  const gapMin = num(state.gap_min);
  const q = state.q.trim().toLowerCase();
  let out = run.rows.filter((x) => {
    if (state.step !== "all" && x.key !== state.step) return false;
    if (minR !== null && (x.reward === null || x.reward < minR)) return false;
    if (maxR !== null && (x.reward === null || x.reward > maxR)) return false;
    if (state.term && termMin !== null) {
      const v = (x.record.reward_terms || {})[state.term];
      if (typeof v !== "number" || v < termMin) return false;
    }
    if (state.errors === "with" && x.errors === 0) return false;
    if (state.errors === "without" && x.errors > 0) return false;
    if (state.errors === "calls" && x.calls === 0) return false;
    if (state.errors === "nocalls" && x.calls > 0) return false;
    if (state.finish !== "any" && x.finish !== state.finish) return false;
    if (state.result === "pass" && x.passed !== true) return false;
    if (state.result === "fail" && x.passed !== false) return false;
    if (q && !searchText(x).includes(q)) return false;
    if (gapMin !== null && !(x.record.logp_gap_max >= gapMin)) return false;
    return true;
  });
  const sorters = {
    default: (a, b) => a.i - b.i,
    reward_desc: (a, b) => (b.reward ?? -Infinity) - (a.reward ?? -Infinity),
    reward_asc: (a, b) => (a.reward ?? Infinity) - (b.reward ?? Infinity),
    adv_desc: (a, b) => (b.advantage ?? -Infinity) - (a.advantage ?? -Infinity),
    adv_asc: (a, b) => (a.advantage ?? Infinity) - (b.advantage ?? Infinity),
    errors_desc: (a, b) => b.errors - a.errors || a.i - b.i,
    calls_desc: (a, b) => b.calls - a.calls || a.i - b.i,
    term_desc: (a, b) => termOf(b) - termOf(a),
    term_asc: (a, b) => termOf(a) - termOf(b),
  };
  out = out.slice().sort(sorters[state.sort] || sorters.default);
  return out;
}

function termOf(row) {
  const v = (row.record.reward_terms || {})[state.term];
  return typeof v === "number" ? v : -Infinity;
}

// ------------------------------------------------------------------ state and hash

function readHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  for (const k of Object.keys(DEFAULTS)) state[k] = params.has(k) ? params.get(k) : DEFAULTS[k];
  if (!state.tab) state.tab = state.episode ? "episodes" : (state.group ? "group" : "summary");
  normaliseLink();
}

// A link may name what these dumps do not have: a step that was never dumped, a run, term
// or choice that does not exist, a number that is not one. A bare step number becomes the
// dump of that step; anything else unknown is dropped, and the page says what it dropped
// (instead of an empty list under a picker that reads "all steps").
let linkNotes = [];

const LINK_CHOICES = {
  errors: ["any", "with", "without", "calls", "nocalls"],
  result: ["any", "pass", "fail"],
  sort: ["default", "reward_desc", "reward_asc", "adv_desc", "adv_asc", "errors_desc",
    "calls_desc", "term_desc", "term_asc"],
};

function normaliseLink() {
  linkNotes = [];
  const drop = (key, what) => {
    linkNotes.push(`the link's ${what} matches nothing here, ignored`);
    state[key] = DEFAULTS[key];
  };
  if (!/^\d+$/.test(state.run) || !runs[Number(state.run)]) {
    drop("run", `run "${state.run}" (${runs.length} input(s))`);
  }
  const run = runs[Number(state.run)] || runs[0];
  if (state.step !== "all" && !run.keys.includes(state.step)) {
    const bare = ["train:" + state.step, "eval:" + state.step].find((k) => run.keys.includes(k));
    if (bare) state.step = bare;
    else {
      const dumped = run.keys.map(stepLabel).join(", ") || "none";
      drop("step", `step "${state.step}" (steps dumped: ${dumped})`);
    }
  }
  if (state.term && !run.terms.includes(state.term)) drop("term", `reward term "${state.term}"`);
  if (state.finish !== "any" && !run.finishes.includes(state.finish)) {
    drop("finish", `finish "${state.finish}"`);
  }
  for (const [key, values] of Object.entries(LINK_CHOICES)) {
    if (!values.includes(state[key])) drop(key, `${key} "${state[key]}"`);
  }
  const tabs = ["summary", "episodes", "group", ...(runs.length > 1 ? ["compare"] : [])];
  if (!tabs.includes(state.tab)) {
    drop("tab", `tab "${state.tab}"`);
    state.tab = "summary";
  }
  for (const key of ["min_reward", "max_reward", "term_min", "gap_min"]) {
    if (state[key] && num(state[key]) === null) drop(key, `${key} "${state[key]}"`);
  }
  if (linkNotes.length) writeHash();
}

function writeHash() {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) if (v !== DEFAULTS[k]) params.set(k, v);
  try {
    history.replaceState(null, "", "#" + params.toString());
  } catch (err) {
    // file:// pages in some browsers refuse replaceState; the view works without it.
  }
}

let filtersFresh = false; // the filter inputs show the state (no rebuild while typing)

function setState(changes, keepPage, fromFilter) {
  Object.assign(state, changes);
  if (!keepPage) state.page = "0";
  if (!fromFilter) filtersFresh = false;
  writeHash();
  render();
}

// ------------------------------------------------------------------ tabs

function renderTabs() {
  const nav = document.getElementById("tabs");
  nav.textContent = "";
  const tabs = [["summary", "Summary"], ["episodes", "Episodes"], ["group", "Group"]];
  if (runs.length > 1) tabs.push(["compare", "Compare"]);
  for (const [id, label] of tabs) {
    nav.append(el("button", { class: state.tab === id ? "active" : "", "data-tab": id,
      text: label, onclick: () => setState({ tab: id }, true) }));
  }
  if (runs.length > 1) {
    nav.append(el("span", { class: "muted", text: " run: " }));
    runs.forEach((run, r) => nav.append(el("button", {
      class: String(r) === state.run ? "active" : "", text: run.run.name,
      onclick: () => setState({ run: String(r), step: "all", episode: "", group: "" }),
    })));
  }
  for (const section of document.querySelectorAll(".tab")) {
    section.classList.toggle("shown", section.id === "tab-" + state.tab);
  }
}

// ------------------------------------------------------------------ summary

function renderSummary() {
  const root = document.getElementById("tab-summary");
  root.textContent = "";
  for (const run of runs) {
    const episodes = run.rows.length;
    const evals = run.rows.filter((x) => x.kind === "eval");
    const passed = evals.filter((x) => x.passed).length;
    const train = run.run.metrics.filter((m) => m.kind === "train");
    const box = el("div", { class: "run-summary" },
      el("h2", { text: run.run.name + (run.run.kind === "dump" ? " (episode dump)" : "") }),
      el("div", { class: "meta" },
        el("span", { text: run.run.path }),
        el("span", { text: train.length + " training steps logged" }),
        el("span", { text: episodes + " episodes dumped in " + run.keys.length + " dumps" }),
        evals.length ? el("span", { text: "eval: " + passed + "/" + evals.length + " passed (" +
          (100 * passed / evals.length).toFixed(1) + "%)" }) : null));
    if (run.run.config) {
      box.append(el("details", { class: "config" }, el("summary", { text: "config" }),
        el("pre", { text: run.run.config })));
    }
    root.append(box);
  }
  const charts = el("div", { class: "charts" });
  for (const [title, lines] of CHARTS) charts.append(chart(title, lines));
  root.append(el("h2", { text: "Curves" }), charts);
}

function series(metrics, kind, key) {
  const points = [];
  for (const m of metrics) {
    if (m.kind === kind && typeof m[key] === "number") points.push([m.step, m[key]]);
  }
  return points;
}

function chart(title, lines) {
  const all = [];
  let color = 0;
  for (const run of runs) {
    for (const [label, kind, key] of lines) {
      const points = series(run.run.metrics, kind, key);
      const name = runs.length > 1 ? run.run.name + " " + label : label;
      if (points.length) all.push({ name, kind, points, color: COLORS[color % COLORS.length] });
      color += 1;
    }
  }
  const box = el("div", { class: "chart", "data-chart": title }, el("h3", { text: title }));
  const W = 400, H = 180, L = 46, R = 8, T = 8, B = 22;
  const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none" });
  box.append(plot);
  if (!all.length) {
    const t = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#6b7785" });
    t.textContent = "no data";
    plot.append(t);
    return box;
  }
  const xs = all.flatMap((s) => s.points.map((p) => p[0]));
  const ys = all.flatMap((s) => s.points.map((p) => p[1]));
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) x1 = x0 + 1;
  if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
  const sx = (x) => L + (W - L - R) * (x - x0) / (x1 - x0);
  const sy = (y) => H - B - (H - B - T) * (y - y0) / (y1 - y0);
  for (let k = 0; k <= 3; k++) {
    const y = y0 + (y1 - y0) * k / 3;
    plot.append(svg("line", { x1: L, x2: W - R, y1: sy(y), y2: sy(y), stroke: "#e4e7eb" }));
    const t = svg("text", { x: L - 4, y: sy(y) + 3, "text-anchor": "end", "font-size": 9,
      fill: "#6b7785" });
    t.textContent = Math.abs(y1 - y0) < 0.01 ? y.toExponential(1) : y.toPrecision(3);
    plot.append(t);
  }
  for (const [x, anchor] of [[x0, "start"], [x1, "end"]]) {
    const t = svg("text", { x: sx(x), y: H - 6, "text-anchor": anchor, "font-size": 9,
      fill: "#6b7785" });
    t.textContent = "step " + x;
    plot.append(t);
  }
  const legend = el("div", { class: "legend" });
  for (const s of all) {
    const path = s.points.map((p) => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" ");
    plot.append(svg("polyline", { points: path, fill: "none", stroke: s.color,
      "stroke-width": s.kind === "eval" ? 1.5 : 1, "stroke-dasharray": s.kind === "eval" ? "4 3" : "",
      "vector-effect": "non-scaling-stroke" }));
    if (s.kind === "eval") {
      for (const p of s.points) {
        plot.append(svg("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.5, fill: s.color }));
      }
    }
    const last = s.points[s.points.length - 1][1];
    legend.append(el("span", {}, el("i", { style: "background:" + s.color }),
      s.name + " (last " + fmt(last) + ")"));
  }
  box.append(legend);
  return box;
}

// ------------------------------------------------------------------ episode list

function field(label, input) {
  return el("label", {}, label, input);
}

function select(name, options) {
  const node = el("select", { name,
    onchange: (ev) => setState({ [name]: ev.target.value }, false, true) });
  for (const [value, label] of options) {
    const opt = el("option", { value, text: label });
    if (value === state[name]) opt.selected = true;
    node.append(opt);
  }
  return node;
}

function input(name, type, placeholder) {
  const node = el("input", { name, type, placeholder: placeholder || "", value: state[name] });
  if (type === "number") node.step = "any";
  node.addEventListener(type === "number" ? "change" : "input",
    (ev) => setState({ [name]: ev.target.value }, false, true));
  return node;
}

function renderFilters() {
  const run = runs[Number(state.run)] || runs[0];
  const root = document.getElementById("filters");
  root.textContent = "";
  const steps = [["all", "all steps"], ...run.keys.map((k) => [k, stepLabel(k)])];
  root.append(
    field("step", select("step", steps)),
    field("reward ≥", input("min_reward", "number")),
    field("reward ≤", input("max_reward", "number")),
    field("reward term", select("term", [["", "(any)"], ...run.terms.map((t) => [t, t])])),
    field("term ≥", input("term_min", "number")),
    field("tool calls", select("errors", [["any", "any"], ["with", "with a tool error"],
      ["without", "no tool error"], ["calls", "some calls"], ["nocalls", "no calls"]])),
    field("finish", select("finish", [["any", "any"], ...run.finishes.map((f) => [f, f])])),
    field("eval result", select("result", [["any", "any"], ["pass", "pass"], ["fail", "fail"]])),
    field("search", input("q", "search", "text in messages or calls")),
    field("log-prob gap ≥", input("gap_min", "number")),
    field("sort", select("sort", [["default", "step, episode"], ["reward_desc", "reward ↓"],
      ["reward_asc", "reward ↑"], ["adv_desc", "advantage ↓"], ["adv_asc", "advantage ↑"],
      ["errors_desc", "tool errors ↓"], ["calls_desc", "tool calls ↓"],
      ["term_desc", "term ↓"], ["term_asc", "term ↑"]])),
    el("button", { text: "reset", onclick: () => setState({ step: "all", min_reward: "",
      max_reward: "", term: "", term_min: "", errors: "any", finish: "any", result: "any",
      q: "", sort: "default", gap_min: "" }) }));
}

const COLUMNS = [["#", "default"], ["step", "default"], ["group", null], ["reward", "reward"],
  ["adv.", "adv"], ["finish", null], ["tools", "errors"], ["result", null], ["task", null]];

function renderList() {
  const rows = filteredRows();
  const run = runs[Number(state.run)] || runs[0];
  document.getElementById("count").textContent = String(rows.length);
  document.getElementById("count-of").textContent =
    rows.length === run.rows.length ? "" : " of " + run.rows.length;
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  const page = Math.min(Math.max(0, Number(state.page) || 0), pages - 1);
  document.getElementById("page").textContent = "page " + (page + 1) + " / " + pages;
  document.getElementById("prev").onclick = () => setState({ page: String(page - 1) }, true);
  document.getElementById("next").onclick = () => setState({ page: String(page + 1) }, true);
  const head = document.querySelector("#episode-table thead tr");
  head.textContent = "";
  for (const [label, sort] of COLUMNS) {
    head.append(el("th", { text: label, onclick: () => {
      if (!sort) return;
      const next = sort === "default" ? "default" :
        (state.sort === sort + "_desc" ? sort + "_asc" : sort + "_desc");
      setState({ sort: next });
    } }));
  }
  const body = document.getElementById("episode-rows");
  body.textContent = "";
  for (const x of rows.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)) {
    const result = x.passed === null ? "" : (x.passed ? "pass" : "fail");
    const tr = el("tr", { class: "episode-row" + (String(x.i) === state.episode ? " selected" : ""),
      "data-episode": String(x.i), "data-reward": String(x.reward),
      onclick: () => setState({ episode: String(x.i) }, true) },
      el("td", { class: "num", text: String(x.record.episode ?? x.i) }),
      el("td", { class: "nowrap", text: stepLabel(x.key) }),
      el("td", { class: "num", text: fmt(x.group) }),
      el("td", { class: "num", text: fmt(x.reward) }),
      el("td", { class: "num " + (x.advantage > 0 ? "pos" : (x.advantage < 0 ? "neg" : "")),
        text: fmt(x.advantage) }),
      el("td", { text: x.finish }),
      el("td", { class: "nowrap" }, String(x.calls) + " ", x.errors ? el("span", { class: "badge err",
        text: x.errors + " err" }) : null),
      el("td", {}, result ? el("span", { class: "badge " + result, text: result }) : null),
      el("td", { class: "text", text: x.task.slice(0, 200), title: x.task.slice(0, 500) }));
    body.append(tr);
  }
}

// ------------------------------------------------------------------ one episode

function highlightCalls(text) {
  const out = el("pre", {});
  const pattern = /<tool_call>[\s\S]*?(<\/tool_call>|$)/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) out.append(document.createTextNode(text.slice(last, match.index)));
    out.append(el("mark", { class: "toolcall", text: match[0] }));
    last = match.index + match[0].length;
    if (match[0].length === 0) break;
  }
  if (last < text.length) out.append(document.createTextNode(text.slice(last)));
  return out;
}

function callLine(call) {
  const args = JSON.stringify(call.arguments ?? {});
  const outcome = call.ok ? JSON.stringify(call.result) : "error: " + call.error;
  const time = typeof call.seconds === "number" ? " · " + (1000 * call.seconds).toFixed(1) + " ms"
    : "";
  return el("div", { class: "call" + (call.ok ? "" : " failed") },
    el("b", { text: call.name || "(no name)" }), "(" + args + ") → " + outcome + time);
}

function messages(record, compact) {
  const box = el("div", { class: "messages" });
  const calls = record.tool_calls || [];
  let tool = 0;
  for (const m of record.messages || []) {
    if (compact && (m.role === "system")) continue;
    const node = el("div", { class: "msg " + m.role + (m.role === "tool" && m.ok === false
      ? " failed" : "") });
    let role = m.role;
    if (m.role === "tool") role += " · " + (m.name || "") + (m.ok === false ? " · error" : "");
    if (m.role === "assistant" && m.tool_calls) role += " · " + m.tool_calls + " tool call(s)";
    node.append(el("div", { class: "role", text: role }));
    const content = String(m.content ?? "");
    if (m.role === "tool" && calls[tool]) {
      node.append(callLine(calls[tool]));
      tool += 1;
    } else if (m.role === "assistant") {
      node.append(highlightCalls(content));
    } else {
      node.append(el("pre", { text: compact ? content.slice(0, 600) : content }));
    }
    box.append(node);
  }
  return box;
}

function termsTable(record) {
  const box = el("div", { class: "terms" });
  const terms = Object.entries(record.reward_terms || {});
  terms.sort((a, b) => (a[0] === "reward" ? -1 : b[0] === "reward" ? 1 : a[0].localeCompare(b[0])));
  for (const [name, value] of terms) {
    box.append(el("div", { class: "term" + (value ? " nonzero" : ""), "data-term": name },
      el("span", { text: name }), el("b", { text: fmt(value, 4) })));
  }
  return box;
}

// What reward functions wrote about the episode (the judge's score and reasoning).
function notesBlock(record) {
  const box = el("div", { class: "notes" });
  for (const [name, note] of Object.entries(record.notes || {})) {
    const score = note && typeof note === "object" ? note.score : undefined;
    box.append(el("h4", { text: name + (score === undefined ? "" : " · score " + fmt(score, 3)) }));
    const text = note && typeof note === "object" && typeof note.reasoning === "string"
      ? note.reasoning : JSON.stringify(note, null, 1);
    box.append(el("pre", { text: text || "(no reasoning)" }));
  }
  return box;
}

function metaLine(record) {
  const t = record.tokens || {};
  const items = [
    ["kind", record.kind], ["step", record.step], ["group", record.group],
    ["episode", record.episode], ["reward", fmt(record.reward, 4)],
    ["advantage", fmt(record.advantage, 4)], ["finish", record.finish_reason],
    ["policy v", record.policy_version], ["trainer v", record.trainer_version],
    ["staleness", record.staleness], ["turns", record.turns],
    ["tokens", `${t.prompt ?? "?"} prompt / ${t.generated ?? "?"} gen / ${t.observation ?? "?"} obs`],
    ["time", typeof record.seconds === "number" ? record.seconds.toFixed(2) + " s" : "–"],
  ];
  if (record.kind === "eval") items.push(["result", record.passed ? "pass" : "fail"]);
  if (record.gt && record.gt.length) items.push(["expected", record.gt.join(", ")]);
  return el("div", { class: "meta" }, ...items.map(([k, v]) =>
    el("span", {}, el("span", { class: "muted", text: k + " " }), fmt(v))));
}

function renderEpisode() {
  const root = document.getElementById("episode");
  root.textContent = "";
  const run = runs[Number(state.run)] || runs[0];
  const row = run.rows[Number(state.episode)];
  if (state.episode === "" || !row) {
    root.append(el("p", { class: "muted", text: "Select an episode." }));
    return;
  }
  const record = row.record;
  const groupKey = row.key + ":" + record.group;
  root.append(
    el("h2", { text: "Episode " + (record.episode ?? row.i) + " · " + stepLabel(row.key) }),
    metaLine(record),
    el("button", { text: "show its group side by side", onclick: () =>
      setState({ tab: "group", group: groupKey }, true) }),
    el("h3", { text: "Reward, term by term" }), termsTable(record));
  if (record.notes && Object.keys(record.notes).length) {
    root.append(el("h3", { text: "Notes of the reward functions" }), notesBlock(record));
  }
  root.append(el("h3", { text: "Conversation" }), messages(record, false));
  root.append(el("h3", { text: "Tokens" }),
    tokenView(run, row, state.tok, (tok) => setState({ tok }, true)));
}

// ------------------------------------------------------------------ group

function renderGroup() {
  const root = document.getElementById("group");
  root.textContent = "";
  const run = runs[Number(state.run)] || runs[0];
  if (!state.group) {
    root.append(el("p", { class: "muted",
      text: "Open an episode and choose \u201cshow its group\u201d: the G episodes of its prompt." }));
    return;
  }
  const cut = state.group.lastIndexOf(":");
  const key = state.group.slice(0, cut), group = Number(state.group.slice(cut + 1));
  const members = run.rows.filter((x) => x.key === key && x.group === group);
  const rewards = members.map((x) => x.reward).filter((v) => v !== null);
  const mean = rewards.reduce((a, b) => a + b, 0) / Math.max(rewards.length, 1);
  root.append(el("h2", { text: stepLabel(key) + " · group " + group + " · " + members.length +
    " episodes · mean reward " + fmt(mean) }),
    el("p", {}, members.length ? el("span", { class: "muted", text: "Task: " }) : null,
      members.length ? members[0].task : "no episodes in this group"));
  const grid = el("div", { class: "group-grid" });
  for (const x of members) {
    const r = x.record;
    const terms = r.reward_terms || {};
    const key3 = ["exact_match", "answer_cov", "tool_success_rate"].filter((k) => k in terms);
    grid.append(el("div", { class: "group-col", "data-episode": String(x.i) },
      el("h3", {}, el("a", { href: "#", text: "episode " + (r.episode ?? x.i), onclick: (ev) => {
        ev.preventDefault();
        setState({ tab: "episodes", episode: String(x.i) }, true);
      } })),
      el("div", { class: "meta" },
        el("span", { text: "reward " + fmt(r.reward) }),
        el("span", { class: r.advantage > 0 ? "pos" : (r.advantage < 0 ? "neg" : ""),
          text: "advantage " + fmt(r.advantage) }),
        el("span", { text: r.finish_reason }),
        ...key3.map((k) => el("span", { text: k + " " + fmt(terms[k]) }))),
      messages(r, true)));
  }
  root.append(grid);
}

// ------------------------------------------------------------------ compare

function compareSet(run) {
  // The latest evaluation's episodes, or else the latest dump's: one episode per task.
  const evalKeys = run.keys.filter((k) => k.startsWith("eval:"));
  const key = evalKeys.length ? evalKeys[evalKeys.length - 1] : run.keys[run.keys.length - 1];
  const byTask = new Map();
  for (const x of run.rows) if (x.key === key && !byTask.has(x.task)) byTask.set(x.task, x);
  return { key, byTask };
}

function outcome(x) {
  if (!x) return "–";
  return fmt(x.reward) + (x.passed === null ? "" : (x.passed ? " pass" : " fail"));
}

function renderCompare() {
  const root = document.getElementById("compare");
  root.textContent = "";
  if (runs.length < 2) return;
  const [a, b] = runs.map(compareSet);
  const tasks = [...a.byTask.keys()].filter((t) => b.byTask.has(t));
  const differ = (t) => {
    const x = a.byTask.get(t), y = b.byTask.get(t);
    return x.passed !== y.passed || x.reward !== y.reward;
  };
  const shown = state.differ === "1" ? tasks.filter(differ) : tasks;
  root.append(el("p", {}, `${runs[0].run.name} (${stepLabel(a.key)}) vs ${runs[1].run.name} ` +
    `(${stepLabel(b.key)}): ${tasks.length} tasks in both, ${tasks.filter(differ).length} differ. `,
    el("label", {}, el("input", { type: "checkbox", ...(state.differ === "1" ? { checked: "" } : {}),
      onchange: (ev) => setState({ differ: ev.target.checked ? "1" : "0" }, true) }),
    " only tasks that differ")));
  const table = el("table", { id: "compare-table" }, el("tr", {}, el("th", { text: "task" }),
    el("th", { text: runs[0].run.name }), el("th", { text: runs[1].run.name })));
  for (const t of shown.slice(0, 500)) {
    table.append(el("tr", { class: "episode-row compare-row",
      onclick: () => renderCompareDetail(a.byTask.get(t), b.byTask.get(t)) }, el("td", { class: "text", text: t.slice(0, 160) }),
      el("td", { text: outcome(a.byTask.get(t)) }), el("td", { text: outcome(b.byTask.get(t)) })));
  }
  root.append(table, el("div", { id: "compare-detail", class: "compare-grid" }));
}

function renderCompareDetail(x, y) {
  const box = document.getElementById("compare-detail");
  box.textContent = "";
  for (const [row, run] of [[x, runs[0]], [y, runs[1]]]) {
    box.append(el("div", { class: "group-col" }, el("h3", { text: run.run.name }),
      metaLine(row.record), termsTable(row.record), messages(row.record, true)));
  }
}

// ------------------------------------------------------------------ main

function render() {
  const began = performance.now();
  renderTabs();
  if (state.tab === "summary") renderSummary();
  if (state.tab === "episodes") {
    if (!filtersFresh) renderFilters();
    filtersFresh = true;
    renderList();
    renderEpisode();
  }
  if (state.tab === "group") renderGroup();
  if (state.tab === "compare") renderCompare();
  const total = runs.reduce((n, run) => n + run.rows.length, 0);
  document.getElementById("status").textContent =
    `${runs.length} input(s), ${total} episodes · generated ${DATA.generated}` +
    linkNotes.map((note) => " · " + note).join("");
  // Timings for whoever measures the page: since navigation, and of this render alone.
  document.body.setAttribute("data-ready", "1");
  document.body.setAttribute("data-loaded-ms", performance.now().toFixed(0));
  document.body.setAttribute("data-render-ms", (performance.now() - began).toFixed(0));
}

window.addEventListener("hashchange", () => {
  readHash();
  filtersFresh = false;
  render();
});
readHash();
render();
