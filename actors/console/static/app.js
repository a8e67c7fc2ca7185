// rocketrio console page: renders what the server pushes over /ws (protocol v1, see
// actors/console/protocol.py) and sends token-carrying actions. No framework, no build step;
// every value from the cluster is set as text, never as HTML.
"use strict";

const PROTOCOL = 1;
const state = { sections: {}, points: [], feed: [], hello: null, ws: null, nextId: 1, pending: {}, historyMs: 300000 };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else e[k] = v;
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}

function num(n) { return typeof n === "number" ? n.toLocaleString("en-US") : String(n); }
function bytes(n) {
  if (n < 1024) return n + " B";
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n, i = -1;
  do { v /= 1024; i++; } while (v >= 1024 && i < units.length - 1);
  return v.toFixed(1) + " " + units[i];
}
function fill(tbody, rows) { tbody.replaceChildren(...rows); }
function td(v, cls) { return el("td", cls ? { class: cls } : {}, v); }

// ---- sections -------------------------------------------------------------------------------

const render = {
  namesrvs(data) {
    fill(document.querySelector("#namesrvs tbody"), data.map(n => el("tr", { "data-addr": n.addr },
      td(n.addr), td(n.ok ? "up" : n.error, n.ok ? "ok" : "bad"), td(n.clusters, "num"), td(n.brokers, "num"))));
  },
  controllers(data) {
    document.getElementById("mode").textContent = data.length ? "controller mode" : "";
    fill(document.querySelector("#controllers tbody"), data.map(c => el("tr", { "data-addr": c.addr, class: c.role === "leader" ? "leader" : "" },
      td(c.selfId || "?"), td(c.addr), td(c.ok ? c.role : c.error, c.ok ? (c.role === "leader" ? "ok" : "") : "bad"),
      td(c.term, "num"), td(c.leaderId ? c.leaderId + " (" + c.leaderAddr + ")" : "none"), td(num(c.commitIndex), "num"))));
  },
  brokerSets(data) {
    const root = document.getElementById("brokerSets");
    if (!data.length) { root.replaceChildren(el("p", { class: "muted" }, "no broker registered")); return; }
    root.replaceChildren(...data.map(s => {
      const master = s.masterId === null ? "none" : "brokerId " + s.masterId + " at " + s.masterAddr;
      const facts = el("div", { class: "facts" },
        el("span", {}, "master ", el("b", { class: "master" + (s.masterId === null ? " bad" : "") }, master)),
        s.controllerMode ? el("span", {}, "masterEpoch ", el("b", { class: "master-epoch" }, s.masterEpoch)) : null,
        s.controllerMode ? el("span", {}, "SyncStateSet ", el("b", { class: "sync-state-set" }, "{" + s.syncStateSet.join(",") + "}"),
          " at epoch ", el("b", { class: "sss-epoch" }, s.syncStateSetEpoch)) : el("span", { class: "muted" }, "no controller"));
      const rows = s.replicas.map(r => el("tr", { "data-broker-id": r.brokerId, "data-addr": r.addr },
        td(r.brokerId, "num"), td(r.addr),
        td(r.ok ? r.role : (r.alive ? "not answering" : "dead"), r.ok ? (r.brokerId === s.masterId ? "ok" : "") : "bad"),
        td(s.controllerMode ? (r.inSync ? "in sync" : "not in sync") : "", r.inSync ? "ok" : "warn"),
        td(r.ok ? num(r.maxOffset) : "", "num"), td(r.ok && r.confirmOffset >= 0 ? num(r.confirmOffset) : "", "num"),
        td(r.ok ? bytes(r.lagBytes) : "", "num"), td(r.ok ? (r.lagMs / 1000).toFixed(1) + " s" : "", "num"),
        td(r.ok ? r.putTps.toFixed(0) : "", "num"), td(r.ok ? r.getTps.toFixed(0) : "", "num")));
      const table = el("table", {},
        el("thead", {}, el("tr", {}, ["id", "address", "role", "state", "max offset", "confirmOffset", "lag", "lag time", "put/s", "get/s"].map(h => el("th", {}, h)))),
        el("tbody", {}, rows));
      return el("div", { class: "set", "data-broker-name": s.brokerName },
        el("h3", {}, s.brokerName, " ", el("span", { class: "muted" }, s.cluster)), facts, table);
    }));
  },
  topics(data) {
    const showSystem = document.getElementById("show-system").checked;
    fill(document.querySelector("#topics tbody"), data.filter(t => showSystem || !t.system).map(t => {
      const total = t.queues.reduce((a, q) => a + (q.maxOffset - q.minOffset), 0);
      const del = el("button", { type: "button", class: "del", onclick: () => {
        const cluster = document.getElementById("topic-cluster").value || "DefaultCluster";
        if (confirm("Delete topic " + t.topic + " in " + cluster + "?")) act("deleteTopic", { topic: t.topic, cluster });
      } }, "delete");
      return el("tr", { "data-topic": t.topic },
        td(t.topic + (t.system ? " (system)" : "")), td(t.queues.length, "num"), td(num(total), "num"),
        el("td", { class: "wrap" }, t.error ? el("span", { class: "bad" }, t.error) : t.queues.map(q => q.brokerName + "/" + q.queueId + ":" + q.maxOffset).join("  ")),
        el("td", {}, t.system ? "" : del));
    }));
  },
  groups(data) {
    fill(document.querySelector("#groups tbody"), data.map(g => el("tr", { "data-group": g.group },
      td(g.group), td(num(g.totalLag), "num lag"), td(g.consumeTps.toFixed(1), "num"),
      el("td", { class: "wrap" }, g.queues.map(q => q.topic + "/" + q.brokerName + "/" + q.queueId + ": " + q.lag).join("  ")))));
  },
};

// ---- charts ---------------------------------------------------------------------------------

function polyline(points, key, max, t0, span, cls) {
  const pts = points.map(p => ((p.t - t0) / span * 300).toFixed(1) + "," + (88 - (max ? p[key] / max * 84 : 0)).toFixed(1));
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", pts.join(" "));
  line.setAttribute("stroke", getComputedStyle(document.documentElement).getPropertyValue("--" + cls));
  return line;
}

function drawCharts() {
  const pts = state.points;
  if (!pts.length) return;
  const t1 = pts[pts.length - 1].t, t0 = Math.max(pts[0].t, t1 - state.historyMs), span = Math.max(1, t1 - t0);
  const shown = pts.filter(p => p.t >= t0);
  const tpsMax = Math.max(1, ...shown.map(p => Math.max(p.putTps, p.getTps)));
  document.getElementById("chart-tps").replaceChildren(polyline(shown, "putTps", tpsMax, t0, span, "put"), polyline(shown, "getTps", tpsMax, t0, span, "get"));
  const lagMax = Math.max(1, ...shown.map(p => p.consumerLag)), replMax = Math.max(1, ...shown.map(p => p.replicationLagBytes));
  document.getElementById("chart-lag").replaceChildren(polyline(shown, "consumerLag", lagMax, t0, span, "lag"), polyline(shown, "replicationLagBytes", replMax, t0, span, "repl"));
  const last = pts[pts.length - 1];
  document.getElementById("tps-now").textContent = "now " + last.putTps.toFixed(0) + " / " + last.getTps.toFixed(0) + " (max " + tpsMax.toFixed(0) + ")";
  document.getElementById("lag-now").textContent = "now " + num(last.consumerLag) + " / " + bytes(last.replicationLagBytes);
  document.getElementById("chart-span").textContent = "last " + Math.round(span / 1000) + " s";
}

// ---- feed -----------------------------------------------------------------------------------

function addFeed(items, dropped) {
  const ol = document.getElementById("feed");
  if (dropped) ol.prepend(el("li", { class: "muted" }, dropped + " events missed (this page was too slow)"));
  for (const it of items) {
    const time = new Date(it.t).toLocaleTimeString("en-GB", { hour12: false }) + "." + String(it.t % 1000).padStart(3, "0");
    ol.prepend(el("li", { class: it.kind, "data-kind": it.kind }, time + "  " + it.text));
  }
  while (ol.children.length > 300) ol.lastChild.remove();
}

// ---- actions --------------------------------------------------------------------------------

function status(text, ok) {
  const s = document.getElementById("action-status");
  s.textContent = text;
  s.className = ok === undefined ? "muted" : ok ? "ok" : "bad";
}

function act(action, args) {
  return new Promise(resolve => {
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) { status("not connected", false); return resolve(null); }
    const id = String(state.nextId++);
    state.pending[id] = resolve;
    status(action + " …");
    state.ws.send(JSON.stringify({ v: PROTOCOL, type: "action", id, action, args, token: document.getElementById("token").value }));
  });
}

function onResult(msg) {
  const label = msg.ok ? "done" : msg.error;
  status((msg.ok ? "✔ " : "✘ ") + label, msg.ok);
  const resolve = state.pending[msg.id];
  delete state.pending[msg.id];
  if (resolve) resolve(msg);
}

function resetArgs() {
  const when = document.getElementById("reset-time").value;
  return { group: document.getElementById("reset-group").value, topic: document.getElementById("reset-topic").value,
    timestamp: when ? new Date(when).getTime() : -1, force: true };
}

function wireForms() {
  document.getElementById("form-topic").addEventListener("submit", ev => {
    ev.preventDefault();
    const n = parseInt(document.getElementById("topic-queues").value, 10) || 8;
    act("updateTopic", { topic: document.getElementById("topic-name").value, cluster: document.getElementById("topic-cluster").value,
      readQueueNums: n, writeQueueNums: n });
  });
  document.getElementById("form-group").addEventListener("submit", ev => {
    ev.preventDefault();
    act("updateSubGroup", { group: document.getElementById("group-name").value, cluster: document.getElementById("group-cluster").value,
      retryMaxTimes: parseInt(document.getElementById("group-retries").value, 10), consumeBroadcastEnable: document.getElementById("group-broadcast").checked });
  });
  document.getElementById("reset-preview").addEventListener("click", async () => {
    const res = await act("previewResetOffset", resetArgs());
    const out = document.getElementById("reset-result");
    if (!res || !res.ok) { out.replaceChildren(); return; }
    out.replaceChildren(el("p", {}, "lag now " + num(res.data.lagBefore) + " → after reset " + num(res.data.lagAfter)),
      el("table", {}, el("thead", {}, el("tr", {}, ["broker set", "queue", "committed", "new offset", "lag after"].map(h => el("th", {}, h)))),
        el("tbody", {}, res.data.queues.map(q => el("tr", {}, td(q.brokerName), td(q.queueId, "num"), td(q.consumerOffset, "num"), td(q.newOffset, "num"), td(q.lagAfter, "num"))))));
  });
  document.getElementById("form-reset").addEventListener("submit", ev => {
    ev.preventDefault();
    const a = resetArgs();
    if (confirm("Reset " + a.group + " on " + a.topic + "?")) act("resetOffset", a);
  });
  document.getElementById("form-elect").addEventListener("submit", ev => {
    ev.preventDefault();
    act("electMaster", { cluster: document.getElementById("elect-cluster").value, brokerName: document.getElementById("elect-set").value,
      brokerId: parseInt(document.getElementById("elect-id").value, 10) });
  });
  document.getElementById("clean-submit").addEventListener("click", () => {
    const args = { cluster: document.getElementById("elect-cluster").value, brokerName: document.getElementById("elect-set").value,
      brokerIds: document.getElementById("elect-id").value };
    if (confirm("Clean the controller's metadata of " + args.brokerName + " " + (args.brokerIds || "(whole set)") + "?")) act("cleanBrokerMetadata", args);
  });
  document.getElementById("show-system").addEventListener("change", () => state.sections.topics && render.topics(state.sections.topics));
}

// ---- connection -----------------------------------------------------------------------------

function connect() {
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  state.ws = ws;
  const conn = document.getElementById("conn-status");
  ws.onopen = () => { conn.textContent = "live"; conn.className = "status ok"; };
  ws.onclose = () => {
    conn.textContent = "disconnected, retrying…"; conn.className = "status bad";
    for (const resolve of Object.values(state.pending)) resolve(null);
    state.pending = {};
    setTimeout(connect, 1000);
  };
  ws.onmessage = ev => {
    const msg = JSON.parse(ev.data);
    if (msg.v !== PROTOCOL) { conn.textContent = "server speaks protocol " + msg.v; return; }
    switch (msg.type) {
      case "hello":
        state.hello = msg;
        state.historyMs = msg.historySeconds * 1000;
        document.getElementById("token").disabled = !msg.actions;
        if (!msg.actions) status("read-only console: started without a token file");
        break;
      case "section":
        state.sections[msg.name] = msg.data;
        if (render[msg.name]) render[msg.name](msg.data);
        break;
      case "samples":
        state.points.push(...msg.points);
        if (state.points.length > 2000) state.points.splice(0, state.points.length - 2000);
        drawCharts();
        break;
      case "feed":
        addFeed(msg.items, msg.dropped);
        break;
      case "actionResult":
        onResult(msg);
        break;
    }
  };
}

document.addEventListener("DOMContentLoaded", () => { wireForms(); connect(); });
