"use strict";
// agentrl view: the token view of one episode. A dump record's `token_view` holds its token
// ids and, per token in the loss, quantised behaviour log-probs, trainer-minus-behaviour
// log-probs, entropies and advantages (agentrl/observability/token_view.py). They are parsed
// only when an episode is shown: a page with ten thousand episodes parses none of them.

const TOKEN_QUANTITIES = [
  ["lp", "behaviour log-prob"], ["tlp", "trained log-prob"], ["ratio", "ratio"],
  ["adv", "advantage"], ["ent", "entropy"],
];
const TOKEN_SCALES = { lp: 10, dlp: 100, ent: 10, adv: 1000 };

function splitInts(text) {
  if (!text) return [];
  return text.split(",").map(Number);
}

function valueRuns(text, scale) {
  const out = [];
  if (!text) return out;
  for (const part of text.split(",")) {
    const [value, count] = part.split(":").map(Number);
    for (let k = 0; k < count; k++) out.push(value / scale);
  }
  return out;
}

const tokenBlocks = new Map();

function jsonBlock(id) {
  if (!tokenBlocks.has(id)) {
    const node = document.getElementById(id);
    tokenBlocks.set(id, node ? JSON.parse(node.textContent) : null);
  }
  return tokenBlocks.get(id);
}

// An episode's token view: in the record (a dump read as is), or in the page's block of
// token views that the record points at (`tv`: [block, index]), parsed on first use.
function recordView(run, record) {
  if (record.token_view) return record.token_view;
  if (!record.tv) return null;
  const block = jsonBlock("agentrl-tokens-" + run.r + "-" + record.tv[0]);
  return block ? block[record.tv[1]] : null;
}

// The run's decoded vocabulary: the page's table for the run, or the dumps' own tables.
function runVocab(run) {
  if (!run.vocab) {
    run.vocab = Object.assign({}, jsonBlock("agentrl-vocab-" + run.r) || {});
    for (const x of run.rows) if (x.record.vocab) Object.assign(run.vocab, x.record.vocab);
  }
  return run.vocab;
}

// The ids of an episode, its prompt taken from the episode it refers to (same group).
function viewIds(run, row) {
  const view = recordView(run, row.record);
  const own = splitInts(view.ids);
  if (view.prompt_ref === undefined || view.prompt_ref === null) return own;
  const source = run.rows.find((x) => x.key === row.key && x.record.episode === view.prompt_ref);
  const shared = source ? recordView(run, source.record) : null;
  if (!shared) return null;
  return splitInts(shared.ids).slice(0, view.prompt).concat(own);
}

// Per token: {id, text, loss, lp, tlp, ratio, adv, ent} (values null outside the loss).
function decodeTokens(run, row) {
  const view = recordView(run, row.record);
  const ids = viewIds(run, row);
  if (!ids) return null;
  const vocab = runVocab(run);
  const inLoss = new Array(ids.length).fill(false);
  let at = 1, on = false;
  for (const n of splitInts(view.loss)) {
    for (let k = 0; k < n && at < ids.length; k++) inLoss[at++] = on;
    on = !on;
  }
  const lp = splitInts(view.lp), dlp = splitInts(view.dlp), ent = splitInts(view.ent);
  const adv = valueRuns(view.adv, TOKEN_SCALES.adv);
  const tokens = [];
  let j = 0;
  for (let t = 0; t < ids.length; t++) {
    const tok = { id: ids[t], text: vocab[String(ids[t])] ?? "\u27e8" + ids[t] + "\u27e9",
      loss: inLoss[t], lp: null, tlp: null, ratio: null, adv: null, ent: null,
      prompt: t < view.prompt };
    if (inLoss[t]) {
      tok.lp = lp[j] / TOKEN_SCALES.lp;
      if (dlp.length) {
        tok.tlp = tok.lp + dlp[j] / TOKEN_SCALES.dlp;
        tok.ratio = Math.exp(dlp[j] / TOKEN_SCALES.dlp);
      }
      if (ent.length) tok.ent = ent[j] / TOKEN_SCALES.ent;
      if (adv.length) tok.adv = adv[j];
      j += 1;
    }
    tokens.push(tok);
  }
  return tokens;
}

// Background colour of a value: red for low log-probs, blue/red around 1 for the ratio and
// around 0 for advantages, purple for high entropy.
function tokenColor(quantity, value, spread) {
  if (value === null || value === undefined) return "";
  let t, hue;
  if (quantity === "lp" || quantity === "tlp") { t = Math.min(1, -value / 5); hue = 0; }
  else if (quantity === "ent") { t = Math.min(1, value / 4); hue = 275; }
  else if (quantity === "ratio") {
    const r = Math.log(Math.max(value, 1e-6));
    t = Math.min(1, Math.abs(r) / 0.2); hue = r >= 0 ? 215 : 0;
  } else { t = Math.min(1, Math.abs(value) / Math.max(spread, 1e-6)); hue = value >= 0 ? 140 : 0; }
  return `hsl(${hue} 75% ${Math.round(97 - 42 * t)}%)`;
}

function tokenTitle(tok) {
  const parts = ["token " + tok.id + " " + JSON.stringify(tok.text)];
  if (!tok.loss) parts.push(tok.prompt ? "prompt (not trained)" : "outside the loss");
  const show = [["behaviour log-prob", tok.lp], ["trained log-prob", tok.tlp],
    ["ratio", tok.ratio], ["advantage", tok.adv], ["entropy", tok.ent]];
  for (const [label, value] of show) if (value !== null) parts.push(label + " " + value.toFixed(4));
  return parts.join("\n");
}

function tokenView(run, row, quantity, onQuantity) {
  const box = el("div", { class: "token-view", "data-quantity": quantity });
  const view = recordView(run, row.record);
  if (!view) {
    box.append(el("p", { class: "muted", text: "No token view in this dump (written before " +
      "dumps kept one)." }));
    return box;
  }
  const tokens = decodeTokens(run, row);
  if (!tokens) {
    box.append(el("p", { class: "muted", text: "The episode holding this prompt is missing." }));
    return box;
  }
  const picker = el("select", { name: "tok", onchange: (ev) => onQuantity(ev.target.value) });
  for (const [value, label] of TOKEN_QUANTITIES) {
    const opt = el("option", { value, text: label });
    if (value === quantity) opt.selected = true;
    picker.append(opt);
  }
  const trained = tokens.filter((t) => t.loss).length;
  const gap = row.record.logp_gap_max;
  box.append(el("div", { class: "meta" }, el("label", {}, "colour by ", picker),
    el("span", { text: tokens.length + " tokens, " + trained + " in the loss" }),
    typeof gap === "number" ? el("span", { text: "max |trained − behaviour| " + gap.toFixed(3) })
      : null));
  const spread = Math.max(1e-6, ...tokens.map((t) => Math.abs(t.adv ?? 0)));
  const text = el("div", { class: "tokens" });
  tokens.forEach((tok, t) => {
    const value = tok[quantity];
    const attrs = { class: "tok" + (tok.loss ? "" : " masked") + (tok.prompt ? " prompt" : ""),
      "data-t": String(t), "data-id": String(tok.id), title: tokenTitle(tok),
      text: tok.text };
    if (tok.loss) {
      attrs["data-v"] = value === null ? "" : value.toFixed(4);
      attrs.style = "background:" + tokenColor(quantity, value, spread);
    }
    text.append(el("span", attrs));
  });
  box.append(text);
  return box;
}
