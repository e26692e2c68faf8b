// The chat page of pipe serve: streams a chat from /v1/chat/completions and
// draws the engine's telemetry (the chunks' "pipe" field) as it comes.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { messages: [], abort: null, history: [], layers: 0, totals: null };

function apiKey() { return localStorage.getItem("pipe-api-key") || ""; }

function headers() {
  const h = { "Content-Type": "application/json" };
  if (apiKey()) h["Authorization"] = "Bearer " + apiKey();
  return h;
}

async function loadModel() {
  try {
    const r = await fetch("/props", { headers: headers() });
    if (r.status === 401) { askKey(); return loadModel(); }
    const p = await r.json();
    $("model").textContent = p.model_alias + " · context " + p.default_generation_settings.n_ctx + " tokens";
  } catch (e) {
    $("model").textContent = "(no model info: " + e.message + ")";
  }
}

function askKey() {
  const k = prompt("This server needs its API key (--api-key):", apiKey());
  if (k !== null) localStorage.setItem("pipe-api-key", k.trim());
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("log").appendChild(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function showError(msg) {
  $("error").textContent = msg;
  $("error").hidden = !msg;
}

function resetTelemetry() {
  state.totals = { tokens: 0, hits: 0, lookups: 0, stall: 0, mib: 0, lastRate: null, first: null };
  state.history = [];
  for (const id of ["tel-toks", "tel-hit", "tel-stall", "tel-mib", "tel-tokens"]) $(id).textContent = "–";
}

function fmt(v, digits) { return v.toFixed(digits); }

// telemetry takes one chunk's "pipe" field.
function telemetry(p) {
  const t = state.totals;
  t.tokens = p.tokens;
  t.stall += p.stall_ms;
  t.mib += p.read_MiB;
  let hits = 0, misses = 0;
  for (const [h, m] of p.layers) { hits += h; misses += m; }
  if (!p.prompt) { t.hits += hits; t.lookups += hits + misses; }
  if (p.tok_s !== null && p.tok_s !== undefined) t.lastRate = p.tok_s;
  $("tel-toks").textContent = t.lastRate === null ? "–" : fmt(t.lastRate, 1);
  $("tel-hit").textContent = t.lookups ? fmt(100 * t.hits / t.lookups, 1) + " %" : "–";
  $("tel-stall").textContent = fmt(t.stall, 1) + " ms";
  $("tel-mib").textContent = fmt(t.mib, 1) + " MiB";
  $("tel-tokens").textContent = String(t.tokens);
  if (!p.prompt) drawStrip(p.layers);
}

function drawStrip(layers) {
  const strip = $("strip");
  if (strip.children.length !== layers.length) {
    strip.replaceChildren(...layers.map((_, i) => {
      const c = document.createElement("div");
      c.className = "cell";
      c.title = "layer " + i;
      return c;
    }));
  }
  layers.forEach(([h, m], i) => {
    const c = strip.children[i];
    c.dataset.hits = h;
    c.dataset.misses = m;
    c.title = "layer " + i + ": " + h + " hit, " + m + " miss";
    c.style.background = color(h, m);
  });
  state.history.push(layers);
  drawHistory();
}

function color(h, m) {
  if (h + m === 0) return "#ddd";
  const f = h / (h + m); // 1: all hits (green) … 0: all misses (red)
  const r = Math.round(210 + (46 - 210) * f), g = Math.round(69 + (157 - 69) * f), b = Math.round(47 + (82 - 47) * f);
  return "rgb(" + r + "," + g + "," + b + ")";
}

function drawHistory() {
  const cv = $("history"), ctx = cv.getContext("2d");
  const cols = state.history.slice(-cv.width / 3);
  const n = cols.length ? cols[0].length : 1;
  const cellH = cv.height / n;
  ctx.clearRect(0, 0, cv.width, cv.height);
  cols.forEach((layers, x) => layers.forEach(([h, m], y) => {
    ctx.fillStyle = color(h, m);
    ctx.fillRect(x * 3, y * cellH, 3, Math.max(cellH, 1));
  }));
}

// stream posts the chat and calls onEvent for every parsed data payload.
async function stream(body, signal, onEvent) {
  const r = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body), signal });
  if (r.status === 401) { askKey(); throw new Error("the server needs an API key (set, try again)"); }
  if (!r.ok) {
    let msg = r.status + " " + r.statusText;
    try { msg = (await r.json()).error.message; } catch (_) { /* keep the status */ }
    throw new Error(msg);
  }
  const reader = r.body.getReader(), dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of ev.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        onEvent(JSON.parse(data));
      }
    }
  }
}

async function send(text) {
  showError("");
  state.messages.push({ role: "user", content: text });
  addMessage("user", text);
  const out = addMessage("assistant", "");
  out.classList.add("streaming");
  resetTelemetry();
  state.abort = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  let reply = "";
  try {
    const body = { messages: state.messages, stream: true, max_tokens: Number($("max-tokens").value) || 256,
      temperature: Number($("temperature").value) };
    await stream(body, state.abort.signal, (c) => {
      if (c.error) throw new Error(c.error.message);
      const ch = c.choices && c.choices[0];
      if (ch && ch.delta && ch.delta.content) {
        reply += ch.delta.content;
        out.textContent = reply;
        out.scrollIntoView({ block: "end" });
      }
      if (c.pipe) telemetry(c.pipe);
      if (ch && ch.finish_reason) out.dataset.finish = ch.finish_reason;
    });
  } catch (e) {
    if (e.name !== "AbortError") showError(e.message);
  } finally {
    out.classList.remove("streaming");
    out.dataset.done = "true";
    state.messages.push({ role: "assistant", content: reply });
    state.abort = null;
    $("send").disabled = false;
    $("stop").disabled = true;
  }
}

$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || state.abort) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => state.abort && state.abort.abort());
$("clear").addEventListener("click", () => {
  if (state.abort) state.abort.abort();
  state.messages = [];
  $("log").replaceChildren();
  resetTelemetry();
  $("strip").replaceChildren();
  drawHistory();
});
resetTelemetry();
loadModel();

// installable as an app (sw.js); a browser without a secure context refuses it
if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => {});
