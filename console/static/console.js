// minibroker console: draws the pictures the server pushes (server-sent events). Plain DOM, no library.
"use strict";

const $ = (id) => document.getElementById(id);
let source = null;
let selectedTopic = new URLSearchParams(location.search).get("topic") || "";
let last = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else if (key === "style") node.style.cssText = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fmt(n) {
  return n === null || n === undefined || n < 0 ? "–" : Number(n).toLocaleString("en");
}

// Bytes as kafka-log-dirs.sh users read them: B, KiB, MiB, GiB.
function fmtBytes(n) {
  if (n === null || n === undefined || n < 0) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

function connect() {
  if (source) source.close();
  source = new EventSource("/api/stream" + (selectedTopic ? "?topic=" + encodeURIComponent(selectedTopic) : ""));
  source.onmessage = (message) => {
    last = JSON.parse(message.data);
    $("link").className = "link live";
    draw(last);
  };
  source.onerror = () => { $("link").className = "link down"; };
}

function draw(p) {
  drawSummary(p);
  drawCluster(p);
  drawTopicSelect(p);
  drawPartitions(p);
  drawTimeline(p);
  drawTopics(p);
  drawGroups(p);
  const errors = $("errors");
  errors.replaceChildren(...p.errors.map((e) => el("div", {}, e)));
}

function drawSummary(p) {
  const c = p.cluster;
  const zk = p.zookeeper || {};
  const epoch = zk.controller_epoch !== undefined && zk.controller_epoch !== null ? ` (epoch ${zk.controller_epoch})` : "";
  $("summary").replaceChildren(
    el("span", {}, `cluster ${c.cluster_id || "?"}`),
    el("span", {}, `controller ${c.controller_id}${epoch}`),
    el("span", {}, `${(c.brokers || []).length} brokers`),
    el("span", { class: c.offline_partitions ? "bad" : "" }, `${c.offline_partitions} offline`),
    el("span", { class: c.under_replicated_partitions ? "warn" : "", id: "urp" },
       `${c.under_replicated_partitions} under-replicated`),
  );
}

function drawCluster(p) {
  // Rebuilt only when something in it changed, so a fault button is never replaced under the pointer.
  const c = p.cluster;
  const zk = p.zookeeper || {};
  const procs = Object.fromEntries((p.processes || []).map((x) => [x.name, x]));
  const brokerIds = new Set((c.brokers || []).map((b) => b.id));
  for (const name of Object.keys(procs)) if (name.startsWith("broker-")) brokerIds.add(Number(name.slice(7)));
  const rows = [...brokerIds].sort((a, b) => a - b).map((id) => {
    const b = (c.brokers || []).find((x) => x.id === id);
    const proc = procs[`broker-${id}`];
    let state = proc ? proc.state : "running";
    if (!b) state += ", not registered";
    else if (!b.answering) state += ", not answering";
    // One line per listener it advertises (the address this console reached it at until they are known).
    const listeners = b ? (b.listeners && b.listeners.length ? b.listeners : [b.address]) : [];
    return { name: `broker ${id}`, id, detail: b && b.rack ? `rack ${b.rack}` : "", lines: listeners, state };
  });
  const others = (p.processes || []).filter((x) => !x.name.startsWith("broker-"));
  for (const x of others) {
    const server = (zk.servers || []).find((s) => s.name === x.name);
    const role = server ? `mode ${server.mode}` : (x.name === `controller-${zk.controller_id}` ? "active" : "standby");
    rows.push({ name: x.name, detail: `pid ${x.pid || "–"}, ${role}`, state: x.state, active: role === "active" });
  }
  if (!others.length) {
    // No process list (--bootstrap-server): ZooKeeper's members and the active controller, as the controller tells.
    for (const s of zk.servers || []) {
      rows.push({ name: s.name, detail: `mode ${s.mode}`, state: s.mode === "none" ? "not-answering" : "running" });
    }
    if (zk.controller_id !== undefined && zk.controller_id !== null && zk.controller_id >= 0) {
      rows.push({ name: `controller-${zk.controller_id}`, detail: "active", state: "running" });
    }
  }
  const key = JSON.stringify([rows, p.faults_allowed]);
  const box = $("cluster");
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  const buttons = (r) => {
    if (!p.faults_allowed) return null;
    if (r.id !== undefined) {
      return el("div", { class: "faults" }, ...[["sigstop", "STOP"], ["sigcont", "CONT"], ["sigkill", "KILL"], ["restart", "restart"]]
        .map(([f, label]) => el("button", { id: `fault-${f}-${r.id}`, class: `fault ${f}`, title: f === "restart" ? "start it again on its logs" : f.toUpperCase(),
          onclick: () => fault(`broker/${r.id}/${f}`) }, label)));
    }
    return r.active ? el("div", { class: "faults" }, el("button", { id: "fault-kill-controller", class: "fault sigkill",
      title: "SIGKILL the active controller", onclick: () => fault("controller/kill") }, "KILL")) : null;
  };
  box.replaceChildren(el("table", { class: "cluster" }, ...rows.map((r) => el("tr", { "data-process": r.name },
    el("td", {}, el("div", {}, r.name), r.detail ? el("div", { class: "hint" }, r.detail) : null,
      ...(r.lines || []).map((line) => el("div", { class: "hint listener" }, line))),
    el("td", { class: `proc ${r.state.split(",")[0]}` }, r.state), el("td", {}, buttons(r))))));
  $("faults-hint").hidden = !p.faults_allowed;
}

async function fault(path) {
  // The header proves the request comes from this page (console/server.py refuses a POST without it).
  const response = await fetch(`/api/faults/${path}`,
    { method: "POST", headers: { "X-Requested-By": "minibroker-console" } });
  const body = await response.json();
  $("fault-result").textContent = body.done || body.error;
}

function drawTopicSelect(p) {
  const select = $("topic");
  const names = p.topics.filter((t) => !t.internal).map((t) => t.name).concat(
    p.topics.filter((t) => t.internal).map((t) => t.name));
  const key = names.join(",");
  if (select.dataset.key !== key) {
    select.dataset.key = key;
    select.replaceChildren(el("option", { value: "" }, "(all topics)"),
      ...names.map((n) => el("option", { value: n, selected: n === selectedTopic }, n)));
  }
}

function drawPartitions(p) {
  const box = $("partitions");
  if (!p.partitions.length) {
    box.replaceChildren(el("p", { class: "hint" }, "No partitions yet: create a topic and produce to it."));
    return;
  }
  box.replaceChildren(...p.partitions.map(partitionCard));
}

function partitionCard(part) {
  // One axis for every replica: the whole log (lowest log start to highest log end offset), or its tail, where
  // the replicas differ: from a little before the lowest high watermark, last stable offset or log end offset.
  const starts = part.bars.filter((b) => b.log_start_offset >= 0).map((b) => b.log_start_offset);
  const ends = part.bars.filter((b) => b.log_end_offset >= 0).map((b) => b.log_end_offset);
  const marks = part.bars.flatMap((b) => [b.log_end_offset, b.high_watermark, b.last_stable_offset]).filter((o) => o !== undefined && o >= 0);
  const start = starts.length ? Math.min(...starts) : 0;
  const hi = Math.max(start + 1, ...ends);
  let lo = start;
  if (!$("whole-log").checked && marks.length) {
    const low = Math.min(...marks);
    lo = Math.max(start, low - Math.max(10, Math.round((hi - low) * 0.5)));
  }
  const x = (offset) => `${(100 * (offset - lo)) / (hi - lo)}%`;
  const name = `${part.topic}-${part.partition}`;
  const head = el("div", { class: "part-head" },
    el("strong", {}, name),
    el("span", {}, `leader ${part.leader < 0 ? "none" : part.leader}`),
    el("span", { class: "epoch" }, `epoch ${part.leader_epoch}`),
    el("span", { class: "isr" }, `ISR [${part.isr.join(",")}]`),
    el("span", {}, `HW ${fmt(part.high_watermark)}`),
    el("span", { class: part.last_stable_offset < part.high_watermark ? "lso open" : "lso" },
       `LSO ${fmt(part.last_stable_offset)}`),
    el("span", {}, `LEO ${fmt(part.log_end_offset)}`),
    part.replica_lag_time_max_ms ? el("span", { class: "hint" }, `replica.lag.time.max.ms ${part.replica_lag_time_max_ms}`) : null,
    el("span", { class: "hint axis" }, `axis ${fmt(lo)} → ${fmt(hi)}`));
  const rows = part.bars.map((b) => {
    const hasLog = b.log_end_offset !== undefined && b.log_end_offset >= 0;
    const track = el("div", { class: "track" },
      hasLog ? el("div", { class: "log", style: `left:${x(Math.max(lo, b.log_start_offset))};width:calc(${x(Math.max(lo, b.log_end_offset))} - ${x(Math.max(lo, b.log_start_offset))})` }) : null,
      b.high_watermark !== undefined && b.high_watermark >= 0 ? el("div", { class: "hw", style: `left:${x(b.high_watermark)}`, title: `HW ${b.high_watermark}` }) : null,
      // The last stable offset, where an open transaction holds READ_COMMITTED readers: drawn when below the HW.
      b.last_stable_offset !== undefined && b.last_stable_offset < b.high_watermark ? el("div", { class: "lso", style: `left:${x(Math.max(lo, b.last_stable_offset))}`, title: `LSO ${b.last_stable_offset}` }) : null);
    let lagText = "";
    let meter = null;
    if (!b.leader) {
      const since = b.caught_up_ago_ms;
      lagText = `${b.lag_offsets !== undefined ? fmt(b.lag_offsets) + " behind" : ""}` +
        (since !== undefined && since !== null ? `, caught up ${(since / 1000).toFixed(1)} s ago` : "");
      if (part.replica_lag_time_max_ms && since !== undefined && since !== null) {
        // The caught-up clock against replica.lag.time.max.ms, the line it must not cross (at 2/3 of the meter).
        const scale = part.replica_lag_time_max_ms * 1.5;
        meter = el("div", { class: "meter", title: "time since last caught up vs replica.lag.time.max.ms" },
          el("div", { class: "fill", style: `width:${Math.min(100, (100 * since) / scale)}%` }),
          el("div", { class: "limit", style: `left:${(100 / 1.5).toFixed(2)}%` }));
      }
    }
    return el("div", {
      class: `replica ${b.state}`, "data-broker": b.broker, "data-state": b.state,
      "data-leo": hasLog ? b.log_end_offset : -1, "data-hw": b.high_watermark ?? -1,
      "data-lso": b.last_stable_offset ?? -1, "data-in-isr": b.in_isr,
      "data-size": b.size_bytes ?? -1,
    },
      el("div", { class: "who" }, el("span", { class: "dot " + b.state }), `broker ${b.broker}`, b.leader ? " · leader" : ""),
      el("div", { class: "bar" }, track, meter),
      el("div", { class: "nums" },
        `${fmt(b.log_start_offset)} → ${fmt(b.log_end_offset)}, HW ${fmt(b.high_watermark)}` +
          (b.last_stable_offset !== undefined && b.last_stable_offset < b.high_watermark ? `, LSO ${fmt(b.last_stable_offset)}` : "") +
          (b.size_bytes !== undefined ? `, ${fmtBytes(b.size_bytes)}` : ""),
        el("span", { class: "state" }, ` ${b.state}`), lagText ? el("div", { class: "lag" }, lagText) : null));
  });
  const epochs = part.epochs.length ? el("div", { class: "hint epochs" },
    "leader epochs: " + part.epochs.map(([e, s]) => `${e}@${s}`).join("  ")) : null;
  return el("div", { class: "partition", "data-partition": name, "data-hw": part.high_watermark ?? -1,
    "data-lso": part.last_stable_offset ?? -1,
    "data-leo": part.log_end_offset ?? -1 }, head, ...rows, epochs);
}

function drawTimeline(p) {
  const only = $("only-topic").checked && selectedTopic;
  const events = p.events.filter((e) => !only || !e.topic || e.topic === selectedTopic).slice(-200).reverse();
  $("timeline").replaceChildren(...events.map((e) => el("li", { class: `event ${e.kind}`, "data-kind": e.kind,
    "data-topic-partition": e.topic ? `${e.topic}-${e.partition}` : "" },
    el("time", {}, new Date(e.time_ms).toLocaleTimeString("en-GB", { hour12: false }) +
      "." + String(e.time_ms % 1000).padStart(3, "0")),
    el("span", { class: "kind" }, e.kind),
    el("span", { class: "where" }, e.topic ? `${e.topic}-${e.partition}` : "", ` ${e.source}`),
    el("div", { class: "detail" }, e.detail))));
}

function drawTopics(p) {
  $("topics").replaceChildren(
    el("tr", {}, ...["topic", "partitions", "RF", "records", "bytes", "configs set"].map((h) => el("th",
      h === "bytes" ? { title: "on disk, all replicas (DescribeLogDirs)" } : {}, h))),
    ...p.topics.map((t) => el("tr", { class: t.internal ? "internal" : "", "data-topic": t.name,
      "data-bytes": t.bytes ?? -1 },
      el("td", {}, el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); pick(t.name); } }, t.name)),
      el("td", {}, t.partitions), el("td", {}, t.replication_factor), el("td", {}, fmt(t.records)),
      el("td", {}, fmtBytes(t.bytes)),
      el("td", { class: "configs" }, Object.entries(t.configs).map(([k, v]) => `${k}=${v}`).join(" ")))));
}

function drawGroups(p) {
  if (!p.groups.length) {
    $("groups").replaceChildren(el("p", { class: "hint" }, "No consumer groups."));
    return;
  }
  $("groups").replaceChildren(...p.groups.map((g) => el("div", { class: "group" },
    el("div", {}, el("strong", {}, g.group_id), ` ${g.state}, coordinator ${g.coordinator ?? "?"}, ${g.members.length} members`),
    el("div", { class: "scroll" }, el("table", {},
      el("tr", {}, ...["partition", "committed", "HW", "lag", "member"].map((h) => el("th", {}, h))),
      ...g.partitions.map((r) => {
        const member = g.members.find((m) => m.assignment.includes(`${r.topic}-${r.partition}`));
        return el("tr", {}, el("td", {}, `${r.topic}-${r.partition}`), el("td", {}, fmt(r.committed)),
          el("td", {}, fmt(r.high_watermark)), el("td", { class: r.lag ? "warn" : "" }, fmt(r.lag)),
          el("td", {}, member ? member.client_id : "–"));
      }))))));
}

function pick(topic) {
  selectedTopic = topic;
  history.replaceState(null, "", topic ? `?topic=${encodeURIComponent(topic)}` : location.pathname);
  connect();
}

$("topic").addEventListener("change", (ev) => pick(ev.target.value));
$("whole-log").addEventListener("change", () => last && drawPartitions(last));
$("only-topic").addEventListener("change", () => last && drawTimeline(last));
connect();
