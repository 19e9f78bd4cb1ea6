/* xpuplan web page: shared helpers (translation, HTTP, formatting, result keys, charts). No framework. */
"use strict";

/* Every HTTP path the page calls, in one place. */
const API = {
  hardware: "/api/v1/hardware",
  hardwareOne: id => "/api/v1/hardware/" + encodeURIComponent(id),
  compare: ids => "/api/v1/hardware/compare?ids=" + ids.map(encodeURIComponent).join(","),
  models: "/api/v1/models",
  recommend: "/api/v1/recommend",
  simulate: "/api/v1/simulate",
  uploadModel: "/ui/models",
  recommendUploaded: "/ui/recommend",
  isUpload: model => String(model || "").startsWith("upload:"),
  i18n: lang => "/ui/i18n/" + lang + ".json",
  meta: "/ui/meta",
  roofline: "/ui/roofline",
  memoryTrain: "/ui/memory/train",
  memoryInfer: "/ui/memory/infer",
  scenarioYaml: "/ui/scenario.yaml",
  reportHtml: "/ui/report.html",
};

/* Every result key the page reads, in one place (result schema 2: SI units, the unit in the key;
   docs/schema.md). When a key is renamed only this object changes. Accessors return SI or null. */
const KEYS = {
  optionTimeS: o => num(o.time_s),
  optionLatencyS: o => num(o.latency_s),
  optionEnergyJ: o => num(o.energy_j),
  optionCostUsd: o => num(o.cost_usd),
  optionCostLines: o => o.cost_lines_usd || {},
  planMemoryBytes: p => num(p.memory_bytes_per_device),
  opAchievedFlopsPerS: o => num(o.achieved_flops_per_s ?? o.achieved_flops),
  /* the echo of the scenario's inputs keeps the input's own field names (ttft_ms, tpot_ms) */
  servingTtftS: s => s.ttft_s != null ? num(s.ttft_s) : (s.ttft_ms != null ? s.ttft_ms / 1e3 : null),
  servingTpotS: s => s.tpot_s != null ? num(s.tpot_s) : (s.tpot_ms != null ? s.tpot_ms / 1e3 : null),
  servingSlo: (s, ttftS, tpotS) => ("ttft_s" in s || "tpot_s" in s) ? {ttft_s: ttftS, tpot_s: tpotS}
    : {ttft_ms: ttftS == null ? null : ttftS * 1e3, tpot_ms: tpotS == null ? null : tpotS * 1e3},
  /* hw list rows */
  deviceMemBytes: d => num(d.memory_bytes),
  deviceBwBytesPerS: d => num(d.memory_bandwidth_bytes_per_s),
  deviceBf16Flops: d => num(d.dense_bf16_flops_per_s),
  /* a catalog figure (hw show, used.figures): value in SI, `unit` says which */
  figureValue: f => num(f.value),
};

function num(x) { return typeof x === "number" && isFinite(x) ? x : null; }

/* ---------------------------------------------------------------- translation */
const I18N = {lang: "en", msgs: {}, en: {}};

function t(key, params) {
  let s = I18N.msgs[key] ?? I18N.en[key] ?? key;
  if (params) s = s.replace(/\{(\w+)(:[^}]*)?\}/g, (m, k) => (k in params ? String(params[k]) : m));
  return s;
}

function currentLang() {
  const q = new URLSearchParams(location.search).get("lang");
  if (q === "en" || q === "zh") return q;
  const saved = localStorage.getItem("xpuplan.lang");
  if (saved === "en" || saved === "zh") return saved;
  return (navigator.language || "").toLowerCase().startsWith("zh") ? "zh" : "en";
}

async function loadLang(lang) {
  if (!Object.keys(I18N.en).length) I18N.en = await getJSON(API.i18n("en"));
  I18N.msgs = lang === "en" ? I18N.en : await getJSON(API.i18n(lang));
  I18N.lang = lang;
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  localStorage.setItem("xpuplan.lang", lang);
  document.querySelectorAll("[data-i18n]").forEach(el => { el.textContent = t(el.dataset.i18n); });
  document.querySelectorAll("[data-i18n-title]").forEach(el => { el.title = t(el.dataset.i18nTitle); });
  document.querySelectorAll(".lang button").forEach(b => b.classList.toggle("on", b.dataset.lang === lang));
  document.title = "xpuplan · " + t(document.body.dataset.page === "catalog" ? "web.nav.catalog" : "web.nav.recommend");
}

function initLangToggle(onChange) {
  document.querySelectorAll(".lang button").forEach(b => b.addEventListener("click", async () => {
    if (b.dataset.lang === I18N.lang) return;
    await loadLang(b.dataset.lang);
    onChange(b.dataset.lang);
  }));
}

/* ---------------------------------------------------------------- HTTP */
class ApiError extends Error {
  constructor(status, body) {
    super(body && body.error ? body.error : "HTTP " + status);
    this.status = status; this.body = body || {};
  }
}

/* Bearer token: a server bound beyond loopback requires one on every data call (docs/web.md). The
   page asks for it once, in a small dialog, when a call gets 401, keeps it in sessionStorage (gone
   when the tab closes) and sends it on every call. Concurrent 401s share one dialog. */
const TOKEN_KEY = "xpuplan.token";
let tokenAsk = null;

function tokenDialog(wrong) {
  if (tokenAsk) return tokenAsk;
  tokenAsk = new Promise(resolve => {
    const d = document.createElement("dialog");
    d.id = "token-dialog";
    d.innerHTML = `<form method="dialog" class="token-form">
      <h3>${esc(t("web.auth.title"))}</h3>
      <p>${esc(t(wrong ? "web.auth.wrong" : "web.auth.prompt"))}</p>
      <label><span>${esc(t("web.auth.token"))}</span>
        <input type="password" id="token-input" name="token" autocomplete="off" required></label>
      <p class="buttons"><button type="submit" id="token-ok" value="ok">${esc(t("web.auth.ok"))}</button>
        <button type="button" id="token-cancel">${esc(t("web.auth.cancel"))}</button></p></form>`;
    document.body.appendChild(d);
    const done = value => { d.close(); d.remove(); tokenAsk = null; resolve(value); };
    d.querySelector("form").addEventListener("submit", ev => {
      ev.preventDefault();
      const v = d.querySelector("#token-input").value.trim();
      if (v) done(v);
    });
    d.querySelector("#token-cancel").addEventListener("click", () => done(null));
    d.addEventListener("cancel", ev => { ev.preventDefault(); done(null); });
    d.showModal();
  });
  return tokenAsk;
}

/* fetch() with the bearer token; on 401 ask for the token (again, when the one sent was wrong) and
   retry; cancelling the dialog returns the 401 response. */
async function authFetch(url, opt) {
  opt = Object.assign({}, opt || {});
  for (;;) {
    const tok = sessionStorage.getItem(TOKEN_KEY);
    const headers = Object.assign({}, opt.headers || {});
    if (tok) headers["Authorization"] = "Bearer " + tok;
    const r = await fetch(url, Object.assign({}, opt, {headers}));
    if (r.status !== 401) return r;
    const sent = tok;
    const fresh = await tokenDialog(!!sent);
    if (fresh == null) return r;
    /* another call may have stored a new token meanwhile: keep the one typed last */
    sessionStorage.setItem(TOKEN_KEY, fresh);
  }
}

async function request(method, url, body) {
  const opt = {method, headers: {"Accept": "application/json"}};
  if (body !== undefined) { opt.headers["Content-Type"] = "application/json"; opt.body = JSON.stringify(body); }
  const r = await authFetch(url, opt);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = {error: text.slice(0, 300)}; }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}
const getJSON = url => request("GET", url);
const postJSON = (url, body) => request("POST", url, body);

/* ---------------------------------------------------------------- formatting */
function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function fmtNum(x, digits = 3) {
  if (x == null) return "–";
  const a = Math.abs(x);
  if (a !== 0 && (a >= 1e15 || a < 1e-3)) return x.toExponential(2);
  return x.toLocaleString(I18N.lang === "zh" ? "zh-CN" : "en-US", {maximumSignificantDigits: digits});
}
function fmtInt(x) { return x == null ? "–" : Math.round(x).toLocaleString("en-US"); }
function fmtUsd(x) {
  if (x == null) return "?";
  const a = Math.abs(x);
  if (a >= 1e9) return "$" + (x / 1e9).toFixed(2) + "B";
  if (a >= 1e6) return "$" + (x / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return "$" + (x / 1e3).toFixed(0) + "k";
  return "$" + x.toFixed(0);
}
function fmtTime(s) {
  if (s == null) return "–";
  const u = [[86400, "web.unit.days"], [3600, "web.unit.hours"], [60, "web.unit.min"], [1, "web.unit.s"], [1e-3, "web.unit.ms"]];
  for (const [f, k] of u) if (Math.abs(s) >= f || f === 1e-3) return fmtNum(s / f, 3) + " " + t(k);
}
/* A time axis in a readable unit: {f: seconds per unit, label: unit name}. */
function timeUnit(maxS) {
  if (maxS >= 2 * 86400) return {f: 86400, label: t("web.unit.days")};
  if (maxS >= 2 * 3600) return {f: 3600, label: t("web.unit.hours")};
  if (maxS >= 120) return {f: 60, label: t("web.unit.min")};
  if (maxS >= 2) return {f: 1, label: t("web.unit.s")};
  return {f: 1e-3, label: t("web.unit.ms")};
}
function fmtBytes(b) { return b == null ? "–" : fmtNum(b / 1e9, 3) + " GB"; }
function fmtEnergy(j) { return j == null ? "–" : (j >= 3.6e9 ? fmtNum(j / 3.6e9, 3) + " MWh" : fmtNum(j / 3.6e6, 3) + " kWh"); }
function fmtPct(p) { return p == null ? "–" : Math.round(p * 100) + "%"; }

/* A catalog figure's source line ends with its URL: split it so the page can link it. */
function sourceParts(src) {
  const m = String(src || "").match(/(https?:\/\/\S+?)[).,;]*$/);
  return m ? {text: src.slice(0, m.index).replace(/[,\s]+$/, ""), url: m[1]} : {text: src || "", url: null};
}
function sourceHtml(src) {
  const p = sourceParts(src);
  if (!p.url) return esc(p.text);
  return esc(p.text) + (p.text ? ", " : "") + `<a href="${esc(p.url)}" target="_blank" rel="noopener noreferrer">${esc(p.url.replace(/^https?:\/\//, "").slice(0, 60))}</a>`;
}
function trustTag(g) { return g ? `<span class="tag ${esc(g)}" title="${esc(t("web.trust." + g))}">${esc(g)}</span>` : "–"; }

/* ---------------------------------------------------------------- charts (Plotly from the installed package) */
const FONT = {family: 'Inter, "Segoe UI", "PingFang SC", "Noto Sans CJK SC", Helvetica, Arial, sans-serif', size: 12, color: "#1f2328"};

function plot(el, traces, layout) {
  if (typeof el === "string") el = document.getElementById(el);
  if (!el) return;
  if (typeof Plotly === "undefined") {
    el.innerHTML = `<p class="empty">${esc(t("web.chart.no_plotly"))}</p>`;
    return;
  }
  const base = {font: FONT, margin: {l: 60, r: 20, t: 10, b: 50}, paper_bgcolor: "#fff", plot_bgcolor: "#fff",
    hoverlabel: {font: {family: FONT.family}}, legend: {orientation: "v", x: 1.02, xanchor: "left", y: 1, font: {size: 11}}};
  Plotly.purge(el);
  el.innerHTML = "";
  const lay = Object.assign(base, layout || {});
  if (lay.showlegend !== false && lay.margin.r < 180) lay.margin = Object.assign({}, lay.margin, {r: 180});
  Plotly.react(el, traces, lay,
    {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"]});
  el.dataset.rendered = "1";
}
function emptyChart(el, msg) {
  if (typeof el === "string") el = document.getElementById(el);
  if (el) { if (typeof Plotly !== "undefined") Plotly.purge(el); el.innerHTML = `<p class="empty">${esc(msg)}</p>`; el.dataset.rendered = "0"; }
}

window.XP = {API, KEYS, I18N, t, loadLang, currentLang, initLangToggle, authFetch, getJSON, postJSON, ApiError, esc, fmtNum,
  fmtInt, fmtUsd, fmtTime, timeUnit, fmtBytes, fmtEnergy, fmtPct, sourceParts, sourceHtml, trustTag, plot, emptyChart, num};
