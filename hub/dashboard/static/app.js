// The fleet dashboard: one EventSource carries the view for the current filter and pages; every
// "view" event redraws the sections in place. No data is ever inserted as HTML.
"use strict";

const statuses = ["Succeeded", "Progressing", "ToApply", "TimeOut", "Failed"];
const state = (() => {
  const p = new URLSearchParams(location.search);
  return { policy: p.get("policy") || "", q: p.get("q") || "", failing: p.get("failing") === "1",
    page: +p.get("page") || 0, ppage: +p.get("ppage") || 0 };
})();
let source = null;
let view = null;

function params() {
  const p = new URLSearchParams();
  if (state.policy) p.set("policy", state.policy);
  if (state.q) p.set("q", state.q);
  if (state.failing) p.set("failing", "1");
  if (state.page) p.set("page", state.page);
  if (state.ppage) p.set("ppage", state.ppage);
  return p.toString();
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function bar(counts, total) {
  const b = el("div", { class: "bar", title: statuses.map(s => `${s}: ${counts[s] || 0}`).join(", ") });
  for (const s of statuses) {
    const n = counts[s] || 0;
    if (n > 0) b.append(el("span", { class: "st-" + s, "data-status": s, "data-count": n }));
    if (n > 0) b.lastChild.style.width = (100 * n / total) + "%";
  }
  return b;
}

function countsText(counts) {
  return statuses.filter(s => counts[s]).map(s => `${s} ${counts[s]}`).join(" · ");
}

function connect() {
  if (source) source.close();
  const qs = params();
  history.replaceState(null, "", qs ? "?" + qs : location.pathname);
  const live = document.getElementById("live");
  live.dataset.state = "connecting";
  live.textContent = "connecting";
  source = new EventSource("/dashboard/events?" + qs);
  source.onopen = () => { live.dataset.state = "open"; live.textContent = "live"; };
  source.onerror = () => { live.dataset.state = "closed"; live.textContent = "reconnecting"; };
  source.addEventListener("view", ev => {
    view = JSON.parse(ev.data);
    document.body.dataset.updates = +document.body.dataset.updates + 1;
    render();
  });
  source.addEventListener("denied", ev => {
    source.close();
    live.dataset.state = "denied";
    live.textContent = "access ended: " + JSON.parse(ev.data);
  });
}

function render() {
  const v = view;
  document.getElementById("totals").textContent =
    `${v.totals.policies} policies · ${v.totals.clusters} clusters · ${v.totals.failing} failing`;
  document.getElementById("built").textContent = "as of " + new Date(v.built).toLocaleTimeString();
  renderRollouts(v);
  renderSelected(v.selected);
  renderHeat(v);
  renderClusters(v);
}

function renderRollouts(v) {
  const body = document.querySelector("#rollouts tbody");
  body.replaceChildren(...v.rollouts.items.map(r => {
    const tr = el("tr", { class: "rollout" + (v.selected && v.selected.key === r.key ? " selected" : ""),
      "data-policy": r.key, "data-status": r.rollout || "" },
      el("td", {}, r.key), el("td", {}, r.strategy),
      el("td", {}, el("span", { class: "badge st-" + r.rollout }, r.rollout || "—")),
      el("td", {}, bar(r.counts, r.total), el("small", {}, `${r.total} clusters`)),
      el("td", {}, r.waiting || ""));
    tr.onclick = () => { state.policy = r.key; connect(); };
    return tr;
  }));
  document.getElementById("ppage-info").textContent =
    `policies page ${v.rollouts.page + 1} of ${v.rollouts.pages} (${v.rollouts.total})`;
}

function renderSelected(d) {
  const groups = document.getElementById("groups");
  document.getElementById("selected-name").textContent = d ? d.key : "—";
  const badge = document.getElementById("selected-status");
  badge.textContent = d ? d.rollout : "";
  badge.className = "badge" + (d ? " st-" + d.rollout : "");
  document.getElementById("selected-waiting").textContent = d ? d.waiting || "" : "";
  if (!d) { groups.replaceChildren(); return; }
  groups.replaceChildren(...d.groups.map(g => {
    const cells = el("div", { class: "cells" }, ...g.cells.map(c => el("span", {
      class: "cell st-" + c.rollout, "data-cluster": c.cluster, "data-status": c.rollout,
      "data-compliance": c.compliance,
      title: `${c.cluster}: ${c.rollout}, ${c.compliance}` + (c.waits ? ` — waits for ${c.waits}` : ""),
    })));
    if (g.more > 0) cells.append(el("span", { class: "more", "data-more": g.more }, `+${g.more} more (narrow the filter)`));
    return el("div", { class: "group", "data-group": g.name, "data-index": g.index, "data-state": g.state },
      el("h3", {}, el("span", {}, `${g.name}`), el("span", { class: "state" }, g.state),
        el("span", { class: "counts" }, `${countsText(g.counts)} of ${g.total}`), bar(g.counts, g.total)),
      el("div", { class: "waiting" }, g.waiting || ""), cells);
  }));
}

function renderHeat(v) {
  const head = document.querySelector("#heat thead");
  head.replaceChildren(el("tr", {}, el("th", {}, "Policy"), el("th", {}, "All clusters"),
    ...v.heat.clusters.map(c => el("th", { class: "col", "data-cluster": c }, c))));
  document.querySelector("#heat tbody").replaceChildren(...v.heat.rows.map(r => el("tr", { "data-policy": r.policy },
    el("td", {}, r.policy),
    el("td", { class: "summary" }, Object.entries(r.counts).sort().map(([k, n]) => `${k} ${n}`).join(" · ")),
    ...r.cells.map((c, i) => el("td", { class: "hc" + (c ? " c-" + c : ""), "data-cluster": v.heat.clusters[i],
      "data-compliance": c, title: `${r.policy} on ${v.heat.clusters[i]}: ${c || "not placed"}` })))));
}

function renderClusters(v) {
  const p = v.clusters;
  document.querySelector("#clusters tbody").replaceChildren(...p.items.map(c => el("tr",
    { class: c.failing ? "failing" : "", "data-cluster": c.name },
    el("td", {}, c.name), el("td", {}, c.compliant), el("td", {}, c.noncompliant), el("td", {}, c.pending),
    el("td", {}, c.reports.pass), el("td", { "data-report": "fail" }, c.reports.fail), el("td", {}, c.reports.warn),
    el("td", {}, c.reports.error), el("td", {}, c.reports.skip),
    el("td", {}, ...(c.admission || []).map(a => el("div", {
      class: "admission" + (a.serving < a.newest ? " lagging" : ""), "data-name": a.name,
      "data-serving": a.serving, "data-newest": a.newest,
    }, `${a.kind}/${a.name} ${a.serving}/${a.newest} (${a.phase})`))))));
  document.getElementById("page-info").textContent =
    `clusters page ${p.page + 1} of ${p.pages} (${p.total} match)`;
}

document.addEventListener("DOMContentLoaded", () => {
  const filter = document.getElementById("filter");
  const failing = document.getElementById("failing");
  filter.value = state.q;
  failing.checked = state.failing;
  let typing = null;
  filter.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.q = filter.value.trim(); state.page = 0; connect(); }, 250);
  });
  failing.addEventListener("change", () => { state.failing = failing.checked; state.page = 0; connect(); });
  const step = (key, pages, d) => () => {
    if (!view) return;
    const n = state[key] + d;
    if (n >= 0 && n < pages()) { state[key] = n; connect(); }
  };
  document.getElementById("prev").onclick = step("page", () => view.clusters.pages, -1);
  document.getElementById("next").onclick = step("page", () => view.clusters.pages, 1);
  document.getElementById("pprev").onclick = step("ppage", () => view.rollouts.pages, -1);
  document.getElementById("pnext").onclick = step("ppage", () => view.rollouts.pages, 1);
  connect();
});
