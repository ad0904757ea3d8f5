// zkconsumer monitor page: reads /v1/groups (overview) or /v1/groups/NAME (a group), draws
// tables and SVG charts, and refreshes itself every few seconds without reloading the page.
// No framework, no build step, no network access beyond the monitor itself.
"use strict";

const REFRESH_MS = 5000;
const COLORS = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#ad1457",
                "#5d4037", "#827717", "#283593"];
const SVG_NS = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function fmt(n) {
  if (n === null || n === undefined) return "-";
  return Number(n).toLocaleString("en-US");
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n, u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return (u === 0 ? v : v.toFixed(1)) + " " + units[u];
}

function badge(status) { return el("span", {"class": "badge s-" + status}, status); }

function ago(t) {
  if (!t) return "never";
  const s = Math.max(0, Date.now() / 1000 - t);
  return s < 90 ? Math.round(s) + " s ago" : Math.round(s / 60) + " min ago";
}

function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }

// A line chart of one or more series [[t, value], ...] as SVG (value null = gap).
function lineChart(series, opts) {
  const W = opts.width || 560, H = opts.height || 200, L = 64, R = 10, T = 10, B = 24;
  const pts = series.flatMap(s => s.points.filter(p => p[1] !== null));
  const root = svg("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, "class": "lag-chart",
                           role: "img", "aria-label": opts.label || "lag over time"});
  root.append(svg("title", {}, opts.label || "lag over time"));
  if (!pts.length) {
    root.append(svg("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, "no samples yet"));
    return root;
  }
  const t0 = Math.min(...pts.map(p => p[0])), t1 = Math.max(...pts.map(p => p[0]));
  const vmax = Math.max(1, ...pts.map(p => p[1]));
  const x = t => L + (t1 === t0 ? (W - L - R) / 2 : (t - t0) / (t1 - t0) * (W - L - R));
  const y = v => H - B - v / vmax * (H - T - B);
  root.append(svg("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}));
  root.append(svg("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}));
  for (const f of [0, 0.5, 1]) {
    const v = vmax * f;
    root.append(svg("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, bytes(Math.round(v))));
    if (f > 0) root.append(svg("line", {x1: L, y1: y(v), x2: W - R, y2: y(v), stroke: "#eee"}));
  }
  root.append(svg("text", {x: L, y: H - 6}, clock(t0)));
  root.append(svg("text", {x: W - R, y: H - 6, "text-anchor": "end"}, clock(t1)));
  series.forEach((s, i) => {
    let d = "", pen = false;
    for (const [t, v] of s.points) {
      if (v === null) { pen = false; continue; }
      d += (pen ? "L" : "M") + x(t).toFixed(1) + "," + y(v).toFixed(1);
      pen = true;
    }
    const color = s.color || COLORS[i % COLORS.length];
    root.append(svg("path", {d, fill: "none", stroke: color, "stroke-width": 2,
                             "class": "series", "data-series": s.name},
                    svg("title", {}, s.name)));
  });
  return root;
}

function sparkline(points) {
  const W = 120, H = 24;
  const root = svg("svg", {width: W, height: H, "class": "sparkline", role: "img",
                           "aria-label": "total lag trend"});
  if (!points || points.length < 2) return root;
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const vmax = Math.max(1, ...points.map(p => p[1]));
  const d = points.map((p, i) => (i ? "L" : "M") +
      ((p[0] - t0) / Math.max(t1 - t0, 1e-9) * (W - 2) + 1).toFixed(1) + "," +
      (H - 2 - p[1] / vmax * (H - 4)).toFixed(1)).join("");
  root.append(svg("path", {d, fill: "none", stroke: "#1565c0", "stroke-width": 1.5}));
  return root;
}

function trendCell(trend) {
  if (!trend) return el("td", {"class": "num"}, "=");
  return el("td", {"class": "num " + (trend > 0 ? "trend-up" : "trend-down")},
            (trend > 0 ? "\u2191 +" : "\u2193 ") + bytes(trend));
}

// Worst first, so the group that needs a look is at the top (the monitor's severity order).
const SEVERITY = ["OK", "NOTFOUND", "WARN", "REWIND", "STALL", "STOP", "ERR"];

function renderOverview(groups) {
  groups = [...groups].sort((a, b) => SEVERITY.indexOf(b.status) - SEVERITY.indexOf(a.status)
                                      || (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
  const counts = {};
  for (const g of groups) counts[g.status] = (counts[g.status] || 0) + 1;
  document.getElementById("summary").textContent = groups.length + " group(s): " +
      Object.entries(counts).map(([s, n]) => n + " " + s).join(", ");
  const rows = groups.map(g => el("tr", {"data-group": g.group},
      el("td", {}, el("a", {href: "/groups/" + encodeURIComponent(g.group)}, g.group),
         g.kind === "bridge" ? el("span", {"class": "muted"}, " (Kafka \u2192 0.7 bridge)") : null),
      el("td", {}, badge(g.status)),
      el("td", {"class": "num"}, g.members.length),
      el("td", {"class": "num"}, g.partitions.length),
      el("td", {"class": "num"}, bytes(g.total_lag)),
      trendCell(g.trend),
      el("td", {}, sparkline(g.history)),
      el("td", {"class": "why"}, g.status === "OK" ? "" : (g.reasons[0] || ""))));
  return [el("h1", {}, "Consumer groups"),
          el("table", {id: "groups"},
             el("thead", {}, el("tr", {}, el("th", {}, "group"), el("th", {}, "status"),
                                el("th", {"class": "num"}, "members"),
                                el("th", {"class": "num"}, "partitions"),
                                el("th", {"class": "num"}, "total lag"),
                                el("th", {"class": "num"}, "trend"), el("th", {}, "lag"),
                                el("th", {}, "why"))),
             el("tbody", {}, ...rows)),
          groups.length ? null : el("p", {"class": "muted"}, "No consumer groups in /consumers.")];
}

function renderGroup(g) {
  document.getElementById("summary").textContent = "group " + g.group + ": " + g.status;
  const members = g.members.map(m => el("tr", {},
      el("td", {}, m.consumer_id), el("td", {}, m.error ? "UNREADABLE: " + m.error : m.registration),
      el("td", {}, Object.entries(m.threads).map(([t, ids]) => t + ": " + ids.join(", ")).join("; "))));
  const bridge = g.kind === "bridge";  // rows are 0.7 partitions the bridge writes
  const sources = p => Object.entries(p.sources || {}).map(([s, o]) => s + " @ " + fmt(o)).join(", ");
  const parts = g.partitions.map(p => el("tr", {},
      el("td", {}, p.topic), el("td", {}, p.partition), el("td", {}, p.owner || "-"),
      el("td", {"class": "num"}, fmt(p.offset)), el("td", {"class": "num"}, fmt(p.log_end)),
      bridge ? el("td", {}, sources(p) || "-") : el("td", {"class": "num"}, fmt(p.lag)),
      el("td", {}, badge(p.status)),
      el("td", {"class": "why"}, p.status === "OK" ? "" : p.reason)));
  const perPartition = Object.entries(g.partition_history || {}).map(([name, pts]) =>
      ({name, points: pts}));
  const legend = el("div", {"class": "legend"}, ...perPartition.map((s, i) =>
      el("span", {}, el("i", {style: "background:" + COLORS[i % COLORS.length]}), s.name)));
  return [
    el("p", {}, el("a", {href: "/"}, "\u2190 all groups")),
    el("h1", {}, bridge ? "Bridge " : "Group ", g.group, " ", badge(g.status)),
    bridge ? el("p", {"class": "muted"}, "A modern Kafka \u2192 0.7 bridge: per 0.7 partition, " +
        "the target progress (written up to, against the log end) and the source progress " +
        "(the next source offset per source partition).") : null,
    g.reasons.length ? el("ul", {"class": "reasons"}, ...g.reasons.slice(0, 20).map(r => el("li", {}, r))) : null,
    el("p", {}, "Total lag ", el("strong", {}, bytes(g.total_lag)), " (", fmt(g.total_lag),
       " bytes), trend over the window: ", g.trend > 0 ? "+" : "", bytes(g.trend), "."),
    g.unregistered_topics.length ? el("p", {}, "Topic not registered: " + g.unregistered_topics.join(", ")) : null,
    g.target ? renderTarget(g.target) : null,
    el("div", {"class": "charts"},
       el("div", {"class": "chart"}, el("h2", {}, "Total lag over time"),
          lineChart([{name: "total lag", points: g.history || []}], {label: "total lag of " + g.group})),
       el("div", {"class": "chart"}, el("h2", {}, "Lag per partition"),
          lineChart(perPartition, {label: "lag per partition of " + g.group}), legend)),
    el("h2", {}, "Members (" + g.members.length + ")"),
    g.members.length ? el("table", {id: "members"}, el("thead", {}, el("tr", {},
        el("th", {}, "consumer id"), el("th", {}, "registration"), el("th", {}, "threads"))),
        el("tbody", {}, ...members)) : el("p", {"class": "muted"}, "No live members."),
    el("h2", {}, "Partitions (" + g.partitions.length + ")"),
    el("table", {id: "partitions"}, el("thead", {}, el("tr", {},
        el("th", {}, "topic"), el("th", {}, "partition"),
        el("th", {}, bridge ? "batch in flight" : "owner"),
        el("th", {"class": "num"}, bridge ? "written up to" : "offset"),
        el("th", {"class": "num"}, "log end"),
        bridge ? el("th", {}, "source positions") : el("th", {"class": "num"}, "lag"),
        el("th", {}, "status"), el("th", {}, "why"))),
       el("tbody", {}, ...parts)),
  ];
}

// A mirror's target side (--mirror GROUP=URL), from the mirror process's own /metrics.
function renderTarget(t) {
  if (t.error) return el("p", {id: "target"}, "Mirror target: " + t.error);
  return el("p", {id: "target"}, "Mirror target (", el("a", {href: t.url}, "metrics"), "): ",
            el("strong", {}, fmt(t.messages)), " messages (" + bytes(t.bytes) + ") acknowledged, ",
            fmt(t.in_flight), " in flight, end-to-end lag ", fmt(t.lag_messages), " messages, ",
            fmt(t.target_errors), " target errors",
            t.healthy === 0 ? " \u2014 the target does not accept writes" : "", ".");
}

async function getJSON(url) {
  const resp = await fetch(url, {cache: "no-store"});
  const body = await resp.json();
  if (!resp.ok) throw new Error(body.error || resp.statusText);
  return body;
}

async function refresh() {
  const main = document.getElementById("main");
  const path = decodeURIComponent(location.pathname);
  try {
    const mon = await getJSON("/v1/monitor");
    document.getElementById("polled").textContent = mon.polled_at
        ? "polled " + ago(mon.polled_at) + " in " + mon.poll_duration.toFixed(2) + " s"
        : "waiting for the first poll" + (mon.last_error ? ": " + mon.last_error : "");
    let content;
    if (path.startsWith("/groups/")) {
      const name = path.slice("/groups/".length);
      document.title = name + " - zkconsumer monitor";
      content = renderGroup(await getJSON("/v1/groups/" + encodeURIComponent(name)));
    } else {
      content = renderOverview(await getJSON("/v1/groups?history=1"));
    }
    main.replaceChildren(...content.filter(c => c !== null));
    main.setAttribute("data-updated", String(Date.now()));
  } catch (err) {
    main.replaceChildren(el("p", {"class": "error"}, "Cannot read the monitor: " + err.message));
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
