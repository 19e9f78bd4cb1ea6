/* The catalog page: device list, one device's figures with source/range/trust, side-by-side comparison. */
"use strict";
(function () {
  const {API, KEYS, t, esc, fmtNum, sourceHtml, trustTag, getJSON} = window.XP;
  const $ = id => document.getElementById(id);
  const S = {devices: [], selected: new Set(), detail: null, compare: null};

  /* SI value -> display unit */
  const DISPLAY = {"FLOP/s": [1e12, "TFLOP/s"], "OP/s": [1e12, "TOP/s"], "B": [1e9, "GB"], "B/s": [1e9, "GB/s"],
    "W": [1, "W"], "USD": [1, "USD"], "USD/h": [1, "USD/h"]};
  const displayUnit = (v, unit) => (unit === "B" && Math.abs(v) < 1e9 ? [1e6, "MB"] : (DISPLAY[unit] || [1, unit || ""]));
  function fmtSI(v, unit) {
    if (v == null) return "–";
    const [f, u] = displayUnit(v, unit);
    return fmtNum(v / f, 4) + " " + u;
  }
  function rangeOf(f) {
    const v = KEYS.figureValue(f);
    if (f.low == null || f.high == null || (f.low === v && f.high === v)) return "–";
    const [d] = displayUnit(v, f.unit);
    return fmtNum(f.low / d, 4) + " – " + fmtNum(f.high / d, 4);
  }

  function showError(msg) { $("error").textContent = msg; $("error").hidden = !msg; }

  function renderList() {
    const q = $("filter").value.trim().toLowerCase(), kind = $("kind").value, origin = $("origin").value;
    const rows = S.devices.filter(d => (!kind || d.kind === kind) && (!origin || d.origin_country === origin) &&
      (!q || [d.id, d.name, d.vendor, ...(d.aliases || [])].join(" ").toLowerCase().includes(q)));
    $("count").textContent = t("web.cat.count", {n: rows.length, total: S.devices.length});
    const cols = [["", "left"], ["web.cat.device", "left"], ["web.cat.vendor", "left"], ["web.cat.kind", "left"],
      ["web.cat.origin", "left"], ["web.cat.year", "num"], ["web.cat.bf16", "num"], ["web.cat.memory", "num"],
      ["web.cat.bandwidth", "num"], ["web.cat.tdp", "num"], ["web.cat.scale_up", "left"], ["web.cat.stack", "left"],
      ["report.trust", "left"]];
    $("devices").innerHTML = "<thead><tr>" + cols.map(([k, c]) => `<th class="${c}">${k ? esc(t(k)) : ""}</th>`).join("") +
      "</tr></thead><tbody>" + rows.map(d => `<tr>
        <td class="left"><input type="checkbox" data-id="${esc(d.id)}" ${S.selected.has(d.id) ? "checked" : ""} aria-label="${esc(d.name)}"></td>
        <td class="left name"><a href="#${encodeURIComponent(d.id)}" class="dev">${esc(d.name)}</a><span class="range">${esc(d.id)}</span></td>
        <td class="left">${esc(d.vendor)}</td><td class="left">${esc(d.kind)}</td><td class="left">${esc(d.origin_country || "")}</td>
        <td class="num">${d.launch_year ?? "–"}</td>
        <td class="num">${fmtNum(KEYS.deviceBf16Flops(d) == null ? null : KEYS.deviceBf16Flops(d) / 1e12, 4)}</td>
        <td class="num">${fmtNum(KEYS.deviceMemBytes(d) == null ? null : KEYS.deviceMemBytes(d) / 1e9, 4)}</td>
        <td class="num">${fmtNum(KEYS.deviceBwBytesPerS(d) == null ? null : KEYS.deviceBwBytesPerS(d) / 1e9, 4)}</td>
        <td class="num">${fmtNum(d.tdp_w, 4)}</td><td class="left wrapcell">${esc(d.scale_up || "–")}</td>
        <td class="left wrapcell">${esc(d.software_stack || "–")}</td><td class="left">${trustTag(d.min_trust)}</td></tr>`).join("") + "</tbody>";
    $("devices").querySelectorAll("input[type=checkbox]").forEach(cb => cb.addEventListener("change", () => {
      if (cb.checked) S.selected.add(cb.dataset.id); else S.selected.delete(cb.dataset.id);
      $("compare-btn").disabled = S.selected.size < 2;
    }));
    $("compare-btn").disabled = S.selected.size < 2;
  }

  function figuresTable(figs) {
    return `<div class="table-wrap"><table class="data figures"><thead><tr><th class="left">${esc(t("web.col.figure"))}</th>
      <th class="num">${esc(t("web.col.value"))}</th><th class="num">${esc(t("web.cat.range"))}</th><th class="left">${esc(t("report.trust"))}</th>
      <th class="left">${esc(t("web.col.source"))}</th></tr></thead><tbody>` +
      figs.map(f => `<tr><td class="left figure"><code>${esc(f.path)}</code>${f.note ? `<span class="range src">${esc(f.note)}</span>` : ""}</td>
        <td class="num">${esc(fmtSI(KEYS.figureValue(f), f.unit))}</td><td class="num">${esc(rangeOf(f))}</td>
        <td class="left">${trustTag(f.trust)}</td>
        <td class="src">${sourceHtml(f.source)}${f.source_kind ? ` <span class="tag">${esc(f.source_kind)}</span>` : ""}</td></tr>`).join("") +
      "</tbody></table></div>";
  }

  async function showDetail(id) {
    if (!id) { $("detail").hidden = true; return; }
    try {
      const d = (await getJSON(API.hardwareOne(id))).device;
      S.detail = d;
      renderDetail();
      $("detail").scrollIntoView({behavior: "smooth", block: "start"});
    } catch (e) { showError(e.message); }
  }
  function renderDetail() {
    const d = S.detail;
    if (!d) return;
    const eco = d.ecosystem || {}, av = d.availability || {};
    const kv = [["web.cat.vendor", d.vendor], ["web.cat.kind", d.kind], ["web.cat.origin", d.origin_country],
      ["web.cat.year", d.launch_year], ["web.cat.arch", d.architecture], ["web.cat.form", d.form_factor],
      ["web.cat.memory_type", d.memory_type], ["web.cat.scale_up", [d.scale_up, d.scale_up_topology].filter(Boolean).join(" — ")],
      ["web.cat.scale_out", d.scale_out], ["web.cat.stack", d.software_stack], ["web.cat.pytorch", eco.pytorch],
      ["web.cat.engines", (eco.serving_engines || []).join(", ")], ["web.cat.frameworks", (eco.training_frameworks || []).join(", ")],
      ["web.cat.maturity", eco.maturity != null ? eco.maturity + " / 5" : null], ["web.cat.export", av.export_control],
      ["web.cat.regions", av.regions], ["web.cat.aliases", (d.aliases || []).join(", ")]]
      .filter(([, v]) => v != null && v !== "");
    $("detail").innerHTML = `<h2>${esc(d.name)} <span class="muted">${esc(d.id)}</span></h2>
      <dl class="kv">${kv.map(([k, v]) => `<dt>${esc(t(k))}</dt><dd>${esc(v)}</dd>`).join("")}</dl>
      ${d.notes ? `<p class="hint">${esc(d.notes)}</p>` : ""}
      <h2 style="margin-top:14px">${esc(t("web.cat.figures"))}</h2>${figuresTable(Object.values(d.figures || {}))}`;
    $("detail").hidden = false;
  }

  async function showCompare() {
    const ids = [...S.selected];
    if (ids.length < 2) return;
    try {
      S.compare = (await getJSON(API.compare(ids))).devices;
      renderCompare();
      $("compare").scrollIntoView({behavior: "smooth", block: "start"});
    } catch (e) { showError(e.message); }
  }
  function renderCompare() {
    const devs = S.compare;
    if (!devs) return;
    const paths = [...new Set(devs.flatMap(d => Object.keys(d.figures || {})))].sort();
    const cell = (d, p) => {
      const f = (d.figures || {})[p];
      if (!f) return `<td class="num muted">–</td>`;
      const r = rangeOf(f);
      const src = XP.sourceParts(f.source);
      return `<td class="num">${src.url ? `<a href="${esc(src.url)}" target="_blank" rel="noopener noreferrer" title="${esc(f.source)}">${esc(fmtSI(KEYS.figureValue(f), f.unit))}</a>` : esc(fmtSI(KEYS.figureValue(f), f.unit))}
        ${trustTag(f.trust)}${r !== "–" ? `<span class="range">${esc(r)}</span>` : ""}</td>`;
    };
    $("compare").innerHTML = `<h2>${esc(t("web.cat.comparison"))}</h2><p class="hint">${esc(t("web.cat.compare_hint"))}</p>
      <div class="table-wrap"><table class="data"><thead><tr><th class="left">${esc(t("web.col.figure"))}</th>` +
      devs.map(d => `<th class="num">${esc(d.name)}</th>`).join("") + "</tr></thead><tbody>" +
      [["web.cat.vendor", d => d.vendor], ["web.cat.origin", d => d.origin_country], ["web.cat.stack", d => d.software_stack],
        ["web.cat.scale_up", d => d.scale_up]].map(([k, f]) => `<tr><td class="left">${esc(t(k))}</td>${devs.map(d => `<td class="num">${esc(f(d) || "–")}</td>`).join("")}</tr>`).join("") +
      paths.map(p => `<tr><td class="left"><code>${esc(p)}</code></td>${devs.map(d => cell(d, p)).join("")}</tr>`).join("") +
      "</tbody></table></div>";
    $("compare").hidden = false;
  }

  async function start() {
    await XP.loadLang(XP.currentLang());
    S.devices = (await getJSON(API.hardware)).devices;
    const origins = [...new Set(S.devices.map(d => d.origin_country).filter(Boolean))].sort();
    $("origin").insertAdjacentHTML("beforeend", origins.map(o => `<option>${esc(o)}</option>`).join(""));
    ["filter", "kind", "origin"].forEach(id => $(id).addEventListener("input", renderList));
    $("compare-btn").addEventListener("click", showCompare);
    window.addEventListener("hashchange", () => showDetail(decodeURIComponent(location.hash.slice(1))));
    XP.initLangToggle(() => { renderList(); renderDetail(); renderCompare(); });
    renderList();
    if (location.hash.length > 1) await showDetail(decodeURIComponent(location.hash.slice(1)));
    document.body.dataset.ready = "1";
  }
  document.addEventListener("DOMContentLoaded", () => start().catch(e => showError(e.message)));
})();
