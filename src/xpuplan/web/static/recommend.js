/* The recommend page: scenario form -> POST /api/v1/recommend -> ranked table and charts. */
"use strict";
(function () {
  const {API, KEYS, t, esc, fmtNum, fmtInt, fmtUsd, fmtTime, fmtBytes, fmtEnergy, fmtPct, sourceHtml, trustTag,
    plot, emptyChart, getJSON, postJSON} = window.XP;
  const $ = id => document.getElementById(id);
  const S = {meta: null, hardware: [], models: [], result: null, weightsDirty: false, groups: {}, running: false};
  const ROLE_COLOURS = {train: "#1f4e79", serve: "#2e75b6", complex: "#7030a0", standard: "#70ad47"};
  const CHART_OPTIONS = 10;

  /* ------------------------------------------------------------ form <-> scenario */
  const presetOf = () => S.meta.presets[$("f-preset").value];
  const val = id => { const v = $(id).value.trim(); return v === "" ? null : v; };
  const numVal = id => { const v = val(id); if (v == null) return null; const x = Number(v); return isFinite(x) ? x : NaN; };
  const setVal = (id, v) => { $(id).value = v == null ? "" : String(v); };

  function fillPresetOptions() {
    const sel = $("f-preset"), keep = sel.value;
    sel.innerHTML = Object.keys(S.meta.presets).map(p =>
      `<option value="${esc(p)}">${esc(t("web.preset." + p))}</option>`).join("");
    if (keep) sel.value = keep;
  }

  function fillModels() {
    $("f-model").innerHTML = S.models.map(m => `<option value="${esc(m.id)}">${esc(m.name)} (${esc(m.id)})</option>`).join("");
  }

  function fillHardware(selected) {
    const all = selected === "all" || !selected;
    const sel = new Set(all ? [] : selected);
    const byVendor = [...S.hardware].sort((a, b) => (a.vendor + a.name).localeCompare(b.vendor + b.name));
    $("f-hardware").innerHTML = byVendor.map(d => `<label class="check"><input type="checkbox" value="${esc(d.id)}"
      ${all || sel.has(d.id) ? "checked" : ""}> <span>${esc(d.name)} <span class="muted">${esc(d.origin_country || "")}</span></span></label>`).join("");
  }

  function fillForm(sc) {
    const P = S.meta.presets[sc.scenario] || presetOf();
    const w = sc.workload || {};
    $("f-preset").value = sc.scenario;
    $("preset-title").textContent = (XP.I18N.lang === "zh" ? P.scenario.title_zh : P.scenario.title) || "";
    if (![...$("f-model").options].some(o => o.value === sc.model)) {
      $("f-model").insertAdjacentHTML("beforeend", `<option value="${esc(sc.model)}">${esc(sc.model)}</option>`);
    }
    $("f-model").value = sc.model;
    fillHardware(sc.hardware);
    const tr = w.training, sv = w.serving;
    $("fs-training").hidden = !tr;
    $("fs-serving").hidden = !sv;
    if (tr) { setVal("f-devices", tr.devices); setVal("f-tokens", tr.train_tokens != null ? Number(tr.train_tokens).toExponential().replace("e+", "e") : ""); setVal("f-seq", tr.seq_len); }
    if (sv) {
      const batch = sv.requests != null;
      document.querySelectorAll("#fs-serving .online").forEach(e => { e.hidden = batch; });
      document.querySelectorAll("#fs-serving .batch").forEach(e => { e.hidden = !batch; });
      setVal("f-qps", sv.qps); setVal("f-requests", sv.requests); setVal("f-window", sv.window_hours);
      // the form edits fixed lengths; a distribution (from the API or a file) shows its mean
      const len = v => (v && typeof v === "object") ? v.mean : v;
      setVal("f-in", len(sv.input_len)); setVal("f-out", len(sv.output_len));
      // a dataset gives the lengths of one pool's requests; the routed presets give each pool its own
      const routed = !!(w.routing || (P.scenario.workload || {}).routing);
      $("f-lengths").querySelector("option[value='sharegpt']").disabled = routed;
      $("f-lengths").value = (!routed && sv.dataset) || "";
      syncLengths();
      const ttft = KEYS.servingTtftS(sv), tpot = KEYS.servingTpotS(sv);
      setVal("f-ttft", ttft == null ? null : +(ttft * 1e3).toPrecision(6));
      setVal("f-tpot", tpot == null ? null : +(tpot * 1e3).toPrecision(6));
    }
    const c = sc.constraints || {};
    $("f-region").value = c.region || "any";
    $("f-trust").value = c.min_trust || "";
    $("f-domestic").checked = !!c.domestic_only;
    setVal("f-power", c.max_power_w_per_device); setVal("f-budget", c.max_budget_usd);
    setVal("f-deadline", c.deadline_days); setVal("f-maxdev", c.max_devices);
    $("f-costmode").value = (sc.cost && sc.cost.mode) || "owned";
    setGroupsFromLeaves(sc.weights && Object.keys(sc.weights).length === Object.keys(P.weights).length ? sc.weights : P.weights);
    S.weightsDirty = !!(sc.weights && Object.keys(sc.weights).length);
  }

  /* criterion weights: one slider per group; leaves keep their split within the group */
  function groupTotals(leaves) {
    const out = {};
    for (const [g, ls] of Object.entries(S.meta.groups)) out[g] = ls.reduce((a, l) => a + (leaves[l] || 0), 0);
    return out;
  }
  function setGroupsFromLeaves(leaves) {
    const g = groupTotals(leaves);
    for (const k of Object.keys(g)) S.groups[k] = Math.round(g[k] * 10) / 10;
    renderWeights();
  }
  function renderWeights() {
    $("weights").innerHTML = Object.keys(S.meta.groups).map(g => `<div class="weight">
      <span title="${esc(S.meta.groups[g].map(l => t("criterion." + l)).join(", "))}">${esc(t("group." + g))}</span>
      <input type="range" min="0" max="100" step="1" value="${S.groups[g]}" data-group="${g}" aria-label="${esc(t("group." + g))}">
      <output>${fmtNum(S.groups[g], 3)}</output></div>`).join("");
    $("weights").querySelectorAll("input").forEach(inp => inp.addEventListener("input", () => {
      S.groups[inp.dataset.group] = Number(inp.value);
      inp.nextElementSibling.textContent = inp.value;
      S.weightsDirty = true;
      updateWeightSum();
    }));
    updateWeightSum();
  }
  function updateWeightSum() {
    const sum = Object.values(S.groups).reduce((a, b) => a + b, 0);
    $("weights-sum").textContent = t("web.form.weights_sum", {sum: fmtNum(sum, 4)}) +
      (Math.abs(sum - 100) > 1e-6 && sum > 0 ? " " + t("web.form.weights_scaled") : "");
  }
  function leafWeights() {
    const base = presetOf().weights, out = {};
    for (const [g, ls] of Object.entries(S.meta.groups)) {
      const gp = ls.reduce((a, l) => a + base[l], 0);
      for (const l of ls) out[l] = gp > 0 ? base[l] * S.groups[g] / gp : S.groups[g] / ls.length;
    }
    const total = Object.values(out).reduce((a, b) => a + b, 0);
    if (total <= 0) return null;
    let big = null;
    for (const l of Object.keys(out)) { out[l] = Math.round(out[l] * 100 / total * 1e4) / 1e4; if (big == null || out[l] > out[big]) big = l; }
    out[big] = Math.round((out[big] + 100 - Object.values(out).reduce((a, b) => a + b, 0)) * 1e6) / 1e6;
    return out;
  }

  function syncLengths() {  // a dataset's lengths replace the fixed token counts
    const ds = !!$("f-lengths").value;
    $("f-in").disabled = ds; $("f-out").disabled = ds;
  }

  function buildScenario() {
    const P = presetOf().scenario;
    const sc = {scenario: $("f-preset").value, title: null, title_zh: null, model: $("f-model").value,
      hardware: [...document.querySelectorAll("#f-hardware input:checked")].map(i => i.value),
      workload: {kind: P.workload.kind}};
    if (P.workload.training) {
      sc.workload.training = {train_tokens: numVal("f-tokens"), devices: numVal("f-devices"), seq_len: numVal("f-seq")};
    }
    if (P.workload.serving) {
      const batch = P.workload.serving.requests != null;
      const ttft = numVal("f-ttft"), tpot = numVal("f-tpot");
      const dataset = $("f-lengths").value;
      sc.workload.serving = Object.assign(batch ? {requests: numVal("f-requests"), window_hours: numVal("f-window")}
        : {qps: numVal("f-qps")}, dataset ? {dataset} : {input_len: numVal("f-in"), output_len: numVal("f-out")},
        KEYS.servingSlo(P.workload.serving, ttft == null ? null : ttft / 1e3, tpot == null ? null : tpot / 1e3));
      for (const [k, v] of Object.entries(sc.workload.serving)) if (v == null) delete sc.workload.serving[k];
    }
    sc.constraints = {region: $("f-region").value, domestic_only: $("f-domestic").checked,
      min_trust: val("f-trust"), max_power_w_per_device: numVal("f-power"), max_budget_usd: numVal("f-budget"),
      deadline_days: numVal("f-deadline"), max_devices: numVal("f-maxdev")};
    sc.cost = {mode: $("f-costmode").value};
    sc.monte_carlo = {samples: numVal("f-samples") ?? 0, seed: numVal("f-seed") ?? 0};
    if (S.weightsDirty) { const w = leafWeights(); if (w) sc.weights = w; }
    return sc;
  }

  /* ------------------------------------------------------------ shareable state (URL hash) */
  function encodeState(sc) {
    const bytes = new TextEncoder().encode(JSON.stringify(sc));
    let bin = ""; bytes.forEach(b => { bin += String.fromCharCode(b); });
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function decodeState(s) {
    try {
      const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
      return JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, c => c.charCodeAt(0))));
    } catch (e) { return null; }
  }
  function stateFromUrl() {
    const m = location.hash.match(/^#s=([A-Za-z0-9_-]+)/);
    if (!m) return null;
    const sc = decodeState(m[1]);
    return sc && typeof sc === "object" && S.meta.presets[sc.scenario] ? sc : null;
  }
  function mergePreset(sc) {
    const P = JSON.parse(JSON.stringify(S.meta.presets[sc.scenario].scenario));
    const merge = (a, b) => { for (const [k, v] of Object.entries(b)) {
      if (v && typeof v === "object" && !Array.isArray(v) && a[k] && typeof a[k] === "object") merge(a[k], v); else a[k] = v; } return a; };
    return merge(P, sc);
  }

  /* ------------------------------------------------------------ run */
  async function run(ev) {
    if (ev) ev.preventDefault();
    if (S.running) return;
    clearError();
    const sc = buildScenario();
    const bad = [...document.querySelectorAll("#scenario-form input[type=number], #scenario-form input[type=text]")]
      .filter(i => !i.closest("[hidden]") && i.value.trim() !== "" && !isFinite(Number(i.value)));
    document.querySelectorAll("#scenario-form .invalid").forEach(i => i.classList.remove("invalid"));
    if (bad.length) { bad.forEach(i => i.classList.add("invalid")); showError({error: t("web.error.number")}); return; }
    history.replaceState(null, "", location.pathname + location.search + "#s=" + encodeState(sc));
    S.running = true; $("run").disabled = true; $("progress").hidden = false;
    const t0 = performance.now();
    const tick = setInterval(() => { $("elapsed").textContent = ((performance.now() - t0) / 1e3).toFixed(1) + " s"; }, 100);
    try {
      const body = {scenario: sc, lang: XP.I18N.lang, samples: sc.monte_carlo.samples, seed: sc.monte_carlo.seed};
      if (sc.weights) body.weights = sc.weights;
      S.result = await postJSON(API.isUpload(sc.model) ? API.recommendUploaded : API.recommend, body);
      S.scenario = sc;
      render();
      $("download-report").disabled = false;
    } catch (e) {
      showError(e.body || {error: String(e)});
    } finally {
      clearInterval(tick); S.running = false; $("run").disabled = false; $("progress").hidden = true;
    }
  }

  function clearError() { $("error").hidden = true; $("error").innerHTML = ""; }
  function showError(b) {
    const reasons = (b.reasons || []).map(r => `<li>${esc(r)}</li>`).join("");
    $("error").innerHTML = `<b>${esc(t("web.error.title"))}</b>${esc(b.error || "")}` +
      (b.field ? ` <span class="muted">(${esc(t("web.error.field"))}: <code>${esc(b.field)}</code>)</span>` : "") +
      (b.hint ? `<p class="hint">${esc(b.hint)}</p>` : "") + (reasons ? `<ul>${reasons}</ul>` : "");
    $("error").hidden = false;
    if (b.field) {
      const name = String(b.field).split(".").pop();
      const inp = document.querySelector(`#scenario-form [name="${CSS.escape(name)}"]`);
      if (inp) { inp.classList.add("invalid"); inp.focus(); }
    }
  }

  /* ------------------------------------------------------------ render */
  /* the model the page's helper requests name: an upload by its server reference, else the result's id */
  const modelRef = r => (S.scenario && API.isUpload(S.scenario.model) ? S.scenario.model : r.model);
  const shortLabel = o => o.mix ? [...new Set(Object.values(o.mix))].join(" + ") : (o.hardware || o.key);
  const roleName = r => t("role." + r);

  function render() {
    const r = S.result;
    $("intro").hidden = true; $("out").hidden = false;
    $("res-title").textContent = r.title || t("web.preset." + r.scenario) + " · " + r.model;
    $("res-summary").textContent = r.explanation.summary;
    const e = r.explanation;
    $("res-explain").innerHTML = [["report.why", e.why], ["report.what_would_change", e.what_would_change],
      ["report.benchmark_first", e.benchmark_first], ["report.caveats", e.caveats]]
      .filter(([, l]) => l && l.length)
      .map(([k, l]) => `<div><h3>${esc(t(k))}</h3><ul>${l.map(x => `<li>${esc(x)}</li>`).join("")}</ul></div>`).join("");
    renderTable(r);
    renderRejected(r);
    renderSensitivity(r);
    renderFigures(r);
    renderCharts(r);
    $("res-footer").textContent = t("report.generated") + " " + t("web.elapsed", {s: fmtNum(r.elapsed_s || 0, 2)});
  }

  function rangeText(u, f) {
    return u ? `<span class="range">${esc(f(u.p10))} – ${esc(f(u.p90))}</span>` : "";
  }

  function renderTable(r) {
    const colours = S.meta.colours.criteria;
    const head = ["report.rank", "report.option", "report.score", "report.devices", "report.time", "report.cost",
      "report.energy", "report.p_first", "report.trust"];
    const numeric = new Set(["report.rank", "report.score", "report.devices", "report.time", "report.cost", "report.energy", "report.p_first"]);
    let h = "<thead><tr>" + head.map(k => `<th class="${numeric.has(k) ? "num" : "left"}">${esc(t(k))}</th>`).join("") + "</tr></thead><tbody>";
    for (const o of r.options) {
      const u = o.uncertainty || null;
      const bar = Object.entries(o.criteria).filter(([, c]) => c.points > 0).map(([k, c]) =>
        `<i style="width:${(c.points / 100 * 160).toFixed(1)}px;background:${colours[k] || "#999"}" title="${esc(t("criterion." + k))}: ${c.points.toFixed(1)}"></i>`).join("");
      const parts = o.parts.map(p => `${esc(roleName(p.role))}: ${fmtInt(p.devices)} × ${esc(p.hardware)}`).join(" · ");
      h += `<tr class="${o.rank === 1 ? "win" : ""}"><td class="num">${o.rank}</td>
        <td class="left opt"><b>${esc(shortLabel(o))}</b><span class="range">${parts}</span></td>
        <td class="num">${o.score.toFixed(1)}<div class="scorebar">${bar}</div></td>
        <td class="num">${fmtInt(o.devices)}</td>
        <td class="num">${esc(fmtTime(KEYS.optionTimeS(o)))}${rangeText(u && u.time_s, fmtTime)}</td>
        <td class="num">${esc(fmtUsd(KEYS.optionCostUsd(o)))}${rangeText(u && u.cost_usd, fmtUsd)}</td>
        <td class="num">${esc(fmtEnergy(KEYS.optionEnergyJ(o)))}</td>
        <td class="num">${u ? fmtPct(u.p_rank_first) : "–"}</td>
        <td class="left">${trustTag(o.min_trust)}</td></tr>`;
    }
    $("ranking").innerHTML = h + "</tbody>";
  }

  function renderRejected(r) {
    if (!r.rejected.length) { $("rejected").innerHTML = ""; return; }
    $("rejected").innerHTML = `<h2 style="margin-top:16px">${esc(t("report.rejected"))}</h2><div class="table-wrap"><table class="data">
      <thead><tr><th class="left">${esc(t("report.option"))}</th><th class="left">${esc(t("report.constraint"))}</th><th class="left">${esc(t("report.reasons"))}</th></tr></thead><tbody>` +
      r.rejected.map(x => `<tr><td class="left">${esc(x.key)}</td><td class="left"><code>${esc(x.constraint)}</code></td><td class="wrap">${esc(x.reasons.join("; "))}</td></tr>`).join("") +
      "</tbody></table></div>";
  }

  function renderSensitivity(r) {
    $("sensitivity").innerHTML = `<thead><tr><th class="left">${esc(t("report.criterion"))}</th><th class="num">${esc(t("report.weight"))}</th>
      <th class="num">${esc(t("report.change"))}</th><th class="left">${esc(t("report.new_winner"))}</th></tr></thead><tbody>` +
      r.sensitivity.map(x => `<tr><td class="left">${esc(t("criterion." + x.criterion))}</td><td class="num">${x.weight.toFixed(1)}</td>
      <td class="num">${x.change_points == null ? "–" : (x.change_points >= 0 ? "+" : "") + x.change_points.toFixed(1)}</td>
      <td class="left">${esc(x.new_winner || "–")}</td></tr>`).join("") + "</tbody>";
  }

  function renderFigures(r) {
    const w = r.options[0];
    $("figures").innerHTML = `<thead><tr><th class="left">${esc(t("web.col.device"))}</th><th class="left">${esc(t("web.col.figure"))}</th>
      <th class="num">${esc(t("web.col.value"))}</th><th class="left">${esc(t("report.trust"))}</th><th class="left">${esc(t("web.col.source"))}</th></tr></thead><tbody>` +
      w.figures.map(f => `<tr><td class="left"><a href="/catalog#${encodeURIComponent(f.device)}">${esc(f.device)}</a></td><td class="left"><code>${esc(f.path)}</code></td>
      <td class="num">${fmtNum(KEYS.figureValue(f), 4)} ${esc(f.unit)}</td><td class="left">${trustTag(f.trust)}</td>
      <td class="src">${sourceHtml(f.source)}</td></tr>`).join("") + "</tbody>";
  }

  /* ------------------------------------------------------------ charts */
  function renderCharts(r) {
    const shown = r.options.slice(0, CHART_OPTIONS);
    const ys = shown.map(o => `${o.rank}. ${shortLabel(o)}`).reverse();
    const rev = [...shown].reverse();
    const colours = S.meta.colours.criteria;
    const height = n => Math.max(260, 34 * n + 110);

    // criterion contributions
    const leaves = Object.keys(r.weights);
    plot("ch-contrib", leaves.map(k => ({type: "bar", orientation: "h", name: t("criterion." + k), y: ys,
      x: rev.map(o => o.criteria[k].points), marker: {color: colours[k]},
      customdata: rev.map(o => [fmtNum(o.criteria[k].raw, 4), o.criteria[k].raw_unit, o.criteria[k].known ? "" : " (?)"]),
      hovertemplate: `%{y}<br>${esc(t("criterion." + k))}: %{x:.1f} ${esc(t("web.points"))}<br>%{customdata[0]} %{customdata[1]}%{customdata[2]}<extra></extra>`})),
    {barmode: "stack", height: height(ys.length), margin: {l: 210, r: 20, t: 10, b: 40},
      xaxis: {title: {text: t("web.axis.points")}, range: [0, 100]}});

    // time vs cost with P10-P90 bands, Pareto front
    const pts = shown.map(o => ({o, x: KEYS.optionTimeS(o), y: KEYS.optionCostUsd(o), u: o.uncertainty}))
      .filter(p => p.x != null && p.y != null && p.x > 0 && p.y > 0);
    if (pts.length) {
      const tu = XP.timeUnit(Math.max(...pts.map(p => p.x)));
      const front = [...pts].sort((a, b) => a.x - b.x || a.y - b.y).reduce((acc, p) => {
        if (!acc.length || p.y < acc[acc.length - 1].y) acc.push(p); return acc; }, []);
      const err = (get, key, f) => ({type: "data", symmetric: false, color: "#9aa5b1", thickness: 1.2, width: 4,
        array: pts.map(p => p.u && p.u[key] ? Math.max(0, p.u[key].p90 - get(p)) / f : 0),
        arrayminus: pts.map(p => p.u && p.u[key] ? Math.max(0, get(p) - p.u[key].p10) / f : 0)});
      const axisType = vals => (Math.max(...vals) / Math.min(...vals) > 30 ? "log" : "linear");
      plot("ch-pareto", [
        {type: "scatter", mode: "lines", name: t("web.chart.front"), x: front.map(p => p.x / tu.f), y: front.map(p => p.y / 1e6),
          line: {color: "#bf8f00", dash: "dot", width: 2}, hoverinfo: "skip"},
        {type: "scatter", mode: "markers+text", name: t("web.chart.options_p10_p90"), x: pts.map(p => p.x / tu.f), y: pts.map(p => p.y / 1e6),
          text: pts.map(p => String(p.o.rank)), textposition: "top right", textfont: {size: 11},
          error_x: err(p => p.x, "time_s", tu.f), error_y: err(p => p.y, "cost_usd", 1e6),
          marker: {size: pts.map(p => p.o.rank === 1 ? 16 : 10), color: pts.map(p => p.o.rank === 1 ? "#c55a11" : "#1f4e79"),
            symbol: pts.map(p => p.o.rank === 1 ? "star" : "circle")},
          customdata: pts.map(p => [p.o.rank + ". " + shortLabel(p.o), fmtTime(p.x), fmtUsd(p.y)]),
          hovertemplate: "%{customdata[0]}<br>%{customdata[1]} · %{customdata[2]}<extra></extra>"}],
      {height: 380, xaxis: {type: axisType(pts.map(p => p.x)), title: {text: t("web.axis.time") + " (" + tu.label + ")"}, rangemode: "tozero"},
        yaxis: {type: axisType(pts.map(p => p.y)), title: {text: t("web.axis.cost_musd")}, rangemode: "tozero"}});
    } else emptyChart("ch-pareto", t("web.chart.no_cost"));

    // TCO stacked bars
    const lines = [...new Set(shown.flatMap(o => Object.keys(KEYS.optionCostLines(o))))];
    plot("ch-tco", lines.map((k, i) => ({type: "bar", orientation: "h", name: t("web.cost_line." + k.replace(/_usd$/, "")),
      y: ys, x: rev.map(o => KEYS.optionCostLines(o)[k] || 0), marker: {color: S.meta.colours.lines[i % S.meta.colours.lines.length]},
      hovertemplate: "%{y}<br>" + esc(t("web.cost_line." + k.replace(/_usd$/, ""))) + ": $%{x:,.0f}<extra></extra>"})),
    {barmode: "stack", height: height(ys.length), margin: {l: 210, r: 20, t: 10, b: 40},
      xaxis: {title: {text: t("web.axis.cost_usd")}}});

    // fleet: devices per role
    const roles = [...new Set(shown.flatMap(o => o.parts.map(p => p.role)))];
    plot("ch-fleet", roles.map(role => ({type: "bar", orientation: "h", name: roleName(role), y: ys,
      x: rev.map(o => o.parts.filter(p => p.role === role).reduce((a, p) => a + p.devices, 0)),
      text: rev.map(o => o.parts.filter(p => p.role === role).map(p => p.hardware).join(" + ")),
      textposition: "inside", insidetextanchor: "middle", textfont: {size: 10, color: "#fff"},
      marker: {color: ROLE_COLOURS[role] || "#5b9bd5"},
      hovertemplate: "%{y}<br>" + esc(roleName(role)) + ": %{x:,} × %{text}<extra></extra>"})),
    {barmode: "stack", height: height(ys.length), margin: {l: 210, r: 20, t: 10, b: 40},
      xaxis: {title: {text: t("web.axis.devices")}}});

    renderCdf(r).catch(e => emptyChart("ch-cdf", e.message));
    renderMemory(r).catch(e => emptyChart("ch-memory", e.message));
    renderRoofline(r).catch(e => emptyChart("ch-roofline", e.message));
  }

  /* plan key of a training plan: tp2-pp2-vpp8-dp128-cp2-ep1-sp1-z1-rnone-mb4-ga2-bf16, "-epo" at the end when the
     MoE all-to-all overlap is on (train/plan.py), then "-rm:ln+act" when a selective plan's modules are named and
     "-off:fc1+act" when modules are offloaded (train/estimate.py; the plan's recompute_modules and offload_modules
     name them) */
  function parseTrainKey(key) {
    const m = /^tp(\d+)-pp(\d+)-vpp(\d+)-dp(\d+)-cp(\d+)-ep(\d+)-sp(\d)-z(\d)-r(none|sel|full|off|loff|part)-mb(\d+)-ga(\d+)-([a-z0-9]+)(-epo)?(-rm:[a-z0-9+]+)?(-off:[a-z0-9+]+)?$/.exec(key || "");
    if (!m) return null;
    return {tp: +m[1], pp: +m[2], vpp: +m[3], dp: +m[4], cp: +m[5], ep: +m[6], zero: +m[8],
      recompute: {none: "none", sel: "selective", full: "full", off: "offload", loff: "layer_offload", part: "partial"}[m[9]], micro_batch: +m[10], grad_accum: +m[11], precision: m[12],
      ep_overlap: !!m[13]};
  }

  async function memoryOf(r, p) {
    const w = r.workload;
    if (p.plan.kind === "training") {
      const k = parseTrainKey(p.plan.key);
      if (!k) return null;
      const res = await postJSON(API.memoryTrain, {model: modelRef(r), hw: p.hardware, seq: w.training.seq_len,
        micro_batch: k.micro_batch, grad_accum: k.grad_accum, tp: k.tp, pp: k.pp, dp: k.dp, cp: k.cp, ep: k.ep, vpp: k.vpp, zero: k.zero,
        recompute: k.recompute, method: w.training.method, ep_overlap: k.ep_overlap,
        recompute_modules: k.recompute === "selective" && p.plan.recompute_modules ? p.plan.recompute_modules.join(",") : undefined,
        offload_modules: p.plan.offload_modules ? p.plan.offload_modules.join(",") : undefined});
      const b = res.bytes_per_device;
      return {segments: {weights: b.weights, gradients: b.gradients, master_weights: b.master_weights,
        optimizer_states: b.optimizer_states, activations: b.activations, workspace: b.workspace},
      capacity: res.device_memory_bytes, host: b.host_activations || 0};
    }
    const sv = p.plan;
    const res = await postJSON(API.memoryInfer, {model: modelRef(r), hw: p.hardware, tp: sv.tp, pp: sv.pp || 1,
      dtype: sv.dtype || "bf16", context: (sv.input_len || 2048) + (sv.output_len || 256)});
    const m = res.serving_memory;
    return {segments: {weights: m.weights_bytes, activations: m.activation_bytes, workspace: m.workspace_bytes,
      kv_cache: m.kv_budget_bytes, reserve: m.device_bytes - m.usable_bytes}, capacity: m.device_bytes};
  }

  async function renderMemory(r) {
    const rows = [];
    for (const o of r.options.slice(0, 6)) for (const p of o.parts) rows.push({o, p});
    const mems = await Promise.all(rows.map(x => memoryOf(r, x.p).catch(() => null)));
    const ok = rows.map((x, i) => ({...x, m: mems[i]})).filter(x => x.m).reverse();
    if (!ok.length) { emptyChart("ch-memory", t("web.chart.no_memory")); return; }
    // an offloaded plan keeps activations in host memory (layer inputs, or whole layers): not device memory, so named beside the bar
    const ys = ok.map(x => `${x.o.rank}. ${x.p.hardware} · ${roleName(x.p.role)}` +
      (x.m.host ? `<br>${t("web.mem.host_suffix", {gb: (x.m.host / 1e9).toFixed(1)})}` : ""));
    const segs = [...new Set(ok.flatMap(x => Object.keys(x.m.segments)))];
    const colours = {weights: "#1f4e79", gradients: "#2e75b6", master_weights: "#5b9bd5", optimizer_states: "#9dc3e6",
      activations: "#70ad47", workspace: "#a5a5a5", kv_cache: "#ffc000", reserve: "#e7e6e6"};
    const traces = segs.map(s => ({type: "bar", orientation: "h", name: t("web.mem." + s), y: ys,
      x: ok.map(x => (x.m.segments[s] || 0) / 1e9), marker: {color: colours[s] || "#999"},
      hovertemplate: "%{y}<br>" + esc(t("web.mem." + s)) + ": %{x:.1f} GB<extra></extra>"}));
    traces.push({type: "scatter", mode: "markers", name: t("web.mem.capacity"), y: ys, x: ok.map(x => x.m.capacity / 1e9),
      marker: {symbol: "line-ns", size: 22, line: {width: 3, color: "#c00000"}}, hovertemplate: "%{y}<br>" + esc(t("web.mem.capacity")) + ": %{x:.0f} GB<extra></extra>"});
    plot("ch-memory", traces, {barmode: "stack", height: Math.max(260, 36 * ys.length + 120),
      margin: {l: ok.some(x => x.m.host) ? 330 : 230, r: 20, t: 10, b: 40},
      xaxis: {title: {text: t("web.axis.memory_gb")}}});
  }

  async function renderRoofline(r) {
    const w = r.options[0], p = w.parts[0], wl = r.workload;
    const sets = [];
    if (p.plan.kind === "training") {
      const k = parseTrainKey(p.plan.key) || {tp: 1, micro_batch: 1, precision: "bf16"};
      const seq = wl.training.seq_len;
      sets.push({name: t("web.roof.train", {mb: k.micro_batch, seq, tp: k.tp}),
        q: {hw: p.hardware, model: modelRef(r), batch: k.micro_batch, q_len: seq, kv_len: seq, tp: k.tp, dtype: k.precision === "fp8" ? "fp8" : "bf16"}});
    } else {
      const inl = p.plan.input_len || 2048, out = p.plan.output_len || 256, dt = p.plan.dtype || "bf16";
      sets.push({name: t("web.roof.prefill", {n: inl}), q: {hw: p.hardware, model: modelRef(r), batch: 1, q_len: inl, kv_len: inl, tp: p.plan.tp, dtype: dt}});
      sets.push({name: t("web.roof.decode", {n: inl + out}), q: {hw: p.hardware, model: modelRef(r), batch: 1, q_len: 1, kv_len: inl + out, tp: p.plan.tp, dtype: dt}});
    }
    const res = await Promise.all(sets.map(s => getJSON(API.roofline + "?" + new URLSearchParams(s.q))));
    const figs = res[0].used ? res[0].used.figures : [];
    const peak = (figs.find(f => f.path.startsWith("dense_tflops.")) || {}).value;
    const bw = (figs.find(f => f.path === "memory.bandwidth_gb_per_s") || {}).value;
    const ops = res.flatMap(x => x.ops);
    const xs = ops.map(o => o.intensity_flop_per_byte).filter(v => v > 0);
    const lo = Math.min(0.1, ...xs) / 2, hi = Math.max(1e4, ...xs) * 2;
    const traces = [];
    if (peak && bw) {
      const ridge = peak / bw, grid = [lo, ridge, hi];
      traces.push({type: "scatter", mode: "lines", name: t("web.roof.roof"), x: grid, y: grid.map(i => Math.min(peak, bw * i)),
        line: {color: "#1f2328", width: 2}, hovertemplate: "%{x:.3g} FLOP/B → %{y:.3s}FLOP/s<extra></extra>"});
    }
    const markers = ["circle", "diamond"], colours = ["#2e75b6", "#c55a11"];
    res.forEach((x, i) => traces.push({type: "scatter", mode: "markers", name: sets[i].name,
      x: x.ops.map(o => o.intensity_flop_per_byte), y: x.ops.map(o => KEYS.opAchievedFlopsPerS(o)),
      marker: {size: 10, symbol: markers[i % 2], color: colours[i % 2], line: {width: 1, color: "#fff"}},
      customdata: x.ops.map(o => [o.name, t("web.roof.bound_" + o.bound), fmtTime(o.time_s)]),
      hovertemplate: "%{customdata[0]}<br>%{x:.3g} FLOP/B · %{y:.3s}FLOP/s<br>%{customdata[1]} · %{customdata[2]}<extra></extra>"}));
    plot("ch-roofline", traces, {height: 360, xaxis: {type: "log", dtick: 1, title: {text: t("web.axis.intensity")}},
      yaxis: {type: "log", dtick: 1, tickformat: "~s", title: {text: t("web.axis.flops")}},
      annotations: [{xref: "paper", yref: "paper", x: 0, y: 1.05, showarrow: false, xanchor: "left",
        text: esc(p.hardware + " · " + r.model), font: {size: 11, color: "#57606a"}}]});
  }

  /* Request-level simulation of the winner's serving deployment: latency CDFs per request class.
     Pools and traffic are the recommendation's (replicas, tp, engine, rate and lengths of each part). */
  const SIM_DURATION_S = 60;
  function simScenario(r) {
    const w = r.options[0];
    if (!w.parts.length || !w.parts.every(p => p.plan.kind === "serving" && p.plan.qps > 0)) return null;
    const sv = (r.workload && r.workload.serving) || {};
    const ttft = KEYS.servingTtftS(sv), tpot = KEYS.servingTpotS(sv);
    const slo = {};
    if (ttft != null) slo.ttft_ms = ttft * 1e3;
    if (tpot != null) slo.tpot_ms = tpot * 1e3;
    const pools = w.parts.map(p => ({name: p.role, hardware: p.hardware, model: r.model, replicas: p.plan.replicas,
      tp: p.plan.tp, pp: p.plan.pp || 1, dtype: p.plan.dtype || "bf16",
      engine: String(p.plan.replica || "").split(":").pop() || null}));
    pools.forEach(p => { if (!p.engine) delete p.engine; });
    const classes = w.parts.map(p => ({name: p.role, rate_rps: p.plan.qps,
      input_len: p.plan.input_dist || {mean: p.plan.input_len}, output_len: p.plan.output_dist || {mean: p.plan.output_len}, slo}));
    const sc = {model: r.model, duration_s: SIM_DURATION_S, pools, classes};
    if (pools.length > 1) sc.routing = {policy: "class_based", rules: Object.fromEntries(pools.map(p => [p.name, p.name]))};
    return {sc, slo};
  }

  async function renderCdf(r) {
    const sim = simScenario(r);
    $("cdf-panel").hidden = !sim;
    if (!sim) return;
    if (API.isUpload(modelRef(r))) { emptyChart("ch-cdf", t("web.sim.catalog_only")); return; }
    emptyChart("ch-cdf", t("web.chart.simulating"));
    const res = await postJSON(API.simulate, {scenario: sim.sc, seed: 1});
    if (S.result !== r) return;
    const pct = Array.from({length: 101}, (_, i) => i);
    const dash = ["solid", "dash", "dot"], traces = [];
    Object.entries(res.quantiles).forEach(([cls, q], i) => {
      [["ttft_s", "x", "TTFT"], ["tpot_s", "x2", "TPOT"]].forEach(([key, ax, lab]) => {
        if (!q[key] || !q[key].length) return;
        traces.push({type: "scatter", mode: "lines", name: roleName(cls), legendgroup: cls, showlegend: ax === "x",
          x: q[key].map(v => v * 1e3), y: pct,
          xaxis: ax, yaxis: "y", line: {color: ROLE_COLOURS[cls] || "#1f4e79", dash: dash[i % 3], width: 2},
          hovertemplate: `${esc(roleName(cls))} ${lab}: P%{y} = %{x:.1f} ms<extra></extra>`});
      });
    });
    const shapes = [];
    if (sim.slo.ttft_ms) shapes.push({type: "line", xref: "x", yref: "paper", x0: sim.slo.ttft_ms, x1: sim.slo.ttft_ms, y0: 0, y1: 1, line: {color: "#c00000", dash: "dot"}});
    if (sim.slo.tpot_ms) shapes.push({type: "line", xref: "x2", yref: "paper", x0: sim.slo.tpot_ms, x1: sim.slo.tpot_ms, y0: 0, y1: 1, line: {color: "#c00000", dash: "dot"}});
    const att = res.slo_attainment == null ? "" : " · " + t("web.sim.attainment", {p: fmtPct(res.slo_attainment)});
    plot("ch-cdf", traces, {height: 400, shapes, margin: {l: 60, r: 20, t: 40, b: 50},
      xaxis: {domain: [0, 0.46], rangemode: "tozero", title: {text: t("web.axis.ttft_ms")}},
      xaxis2: {domain: [0.54, 1], rangemode: "tozero", anchor: "y", title: {text: t("web.axis.tpot_ms")}},
      yaxis: {title: {text: t("web.axis.percentile")}, range: [0, 100]},
      annotations: [{xref: "paper", yref: "paper", x: 0, y: 1.08, showarrow: false, xanchor: "left", font: {size: 11, color: "#57606a"},
        text: esc(t("web.sim.caption", {s: SIM_DURATION_S, n: fmtInt(res.completed)}) + att)}]});
  }

  /* ------------------------------------------------------------ uploaded config.json */
  async function uploadConfig() {
    const f = $("f-config").files[0];
    if (!f) return;
    $("config-status").textContent = "…";
    try {
      const r = await XP.authFetch(API.uploadModel + "?name=" + encodeURIComponent(f.name), {method: "POST", headers: {"Content-Type": "application/json"}, body: await f.text()});
      const data = await r.json();
      if (!r.ok) throw new XP.ApiError(r.status, data);
      const m = data.model;
      const label = `${m.name || m.id} (${t("web.form.uploaded")})`;
      $("f-model").insertAdjacentHTML("beforeend", `<option value="${esc(data.id)}">${esc(label)}</option>`);
      $("f-model").value = data.id;
      const params = m.total_params;
      $("config-status").textContent = t("web.form.upload_ok", {id: m.id}) + (params ? " · " + fmtNum(params / 1e9, 3) + "B " + t("web.form.params") : "");
    } catch (e) {
      $("config-status").textContent = "";
      showError(e.body || {error: String(e)});
    }
  }

  /* ------------------------------------------------------------ YAML and link */
  async function download(url, body, type, name) {
    const r = await XP.authFetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    if (!r.ok) throw new Error((await r.json()).error);
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([await r.text()], {type})); a.download = name;
    document.body.appendChild(a); a.click(); a.remove();
  }
  async function downloadYaml() {
    try {
      await download(API.scenarioYaml, buildScenario(), "application/x-yaml", ($("f-preset").value || "scenario") + ".yaml");
      $("share-status").textContent = t("web.form.downloaded");
    } catch (e) { showError({error: e.message}); }
  }
  async function downloadReport() {
    if (!S.result) return;
    try {
      await download(API.reportHtml, S.result, "text/html", (S.result.scenario || "recommendation") + "-report.html");
      $("share-status").textContent = t("web.form.report_saved");
    } catch (e) { showError({error: e.message}); }
  }
  async function copyLink() {
    const url = location.origin + location.pathname + "?lang=" + XP.I18N.lang + "#s=" + encodeState(buildScenario());
    history.replaceState(null, "", url);
    try { await navigator.clipboard.writeText(url); $("share-status").textContent = t("web.form.copied"); }
    catch (e) { $("share-status").textContent = url; }
  }

  /* ------------------------------------------------------------ start */
  async function start() {
    await XP.loadLang(XP.currentLang());
    const [meta, hw, models] = await Promise.all([getJSON(API.meta), getJSON(API.hardware), getJSON(API.models)]);
    S.meta = meta; S.hardware = hw.devices; S.models = models.models;
    fillPresetOptions(); fillModels();
    const fromUrl = stateFromUrl();
    fillForm(fromUrl ? mergePreset(fromUrl) : S.meta.presets[S.meta.presets.pretraining ? "pretraining" : Object.keys(S.meta.presets)[0]].scenario);
    $("f-preset").addEventListener("change", () => fillForm(S.meta.presets[$("f-preset").value].scenario));
    $("scenario-form").addEventListener("submit", run);
    $("download-yaml").addEventListener("click", downloadYaml);
    $("copy-link").addEventListener("click", copyLink);
    $("download-report").addEventListener("click", downloadReport);
    $("f-config").addEventListener("change", uploadConfig);
    $("f-lengths").addEventListener("change", syncLengths);
    const tick = on => document.querySelectorAll("#f-hardware input").forEach(i => { i.checked = on; });
    $("hw-all").addEventListener("click", () => tick(true));
    $("hw-none").addEventListener("click", () => tick(false));
    $("hw-preset").addEventListener("click", () => fillHardware(presetOf().scenario.hardware));
    $("weights-guide").addEventListener("click", () => { setGroupsFromLeaves(S.meta.default_weights); S.weightsDirty = true; });
    $("weights-preset").addEventListener("click", () => { setGroupsFromLeaves(presetOf().weights); S.weightsDirty = false; });
    XP.initLangToggle(() => {
      fillPresetOptions(); renderWeights();
      $("preset-title").textContent = (XP.I18N.lang === "zh" ? presetOf().scenario.title_zh : presetOf().scenario.title) || "";
      if (S.result) run();
    });
    document.body.dataset.ready = "1";
    if (fromUrl) run();
  }
  document.addEventListener("DOMContentLoaded", () => start().catch(e => showError({error: e.message})));
})();
