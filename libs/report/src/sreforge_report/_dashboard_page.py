"""The live dashboard's one page: runs in flight and finished, and the live event stream.

Plain HTML with a small script written here (no library, nothing fetched but this
server's own streams): each event updates its run's row (phase, elapsed time, verdict,
report link) and is appended to the stream below. When the recorder serves it (`live`),
the page also follows the whole bus (`/bus`) and draws the SLI of the run in grading
from `/runs/<id>/sli` as its samples are saved.
"""

from __future__ import annotations

from sreforge_report._html import STYLE

__all__ = ["dashboard_page"]

_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'"
)

_SCRIPT = r"""
const token = new URLSearchParams(location.search).get("token") || "";
const only = document.body.dataset.run || "";
const rows = new Map();
const colors = {passed:"#1e8449", failed:"#c0392b", rejected:"#d35400", aborted:"#7f8c8d",
                error:"#8e44ad"};
function cell(text) { const td = document.createElement("td"); td.textContent = text; return td; }
function row(id) {
  if (rows.has(id)) return rows.get(id);
  const tr = document.createElement("tr");
  tr.dataset.run = id;
  tr.append(cell(id), cell(""), cell(""), cell(""), cell(""), cell(""));
  document.getElementById("runs").prepend(tr);
  const state = {tr, first: null, last: null, done: false};
  rows.set(id, state);
  return state;
}
function seconds(a, b) { return ((Date.parse(b) - Date.parse(a)) / 1000).toFixed(1) + "s"; }
function show(ev) {
  const r = row(ev.run_id);
  const c = r.tr.children;
  r.first = r.first || ev.at;
  r.last = ev.at;
  if (ev.scenario) c[1].textContent = ev.scenario + (ev.agent ? " / " + ev.agent : "");
  c[2].textContent = ev.phase;
  c[3].textContent = seconds(r.first, r.last);
  if (ev.verdict) {
    r.done = true;
    c[4].innerHTML = "";
    const pill = document.createElement("span");
    pill.className = "pill verdict";
    pill.style.background = colors[ev.verdict] || "#555";
    pill.textContent = ev.verdict;
    c[4].append(pill);
    r.tr.className = "finished";
  }
  if (ev.type === "RecordWritten") {
    const a = document.createElement("a");
    a.href = "/runs/" + ev.run_id + "/report?token=" + encodeURIComponent(token);
    a.textContent = "report";
    a.className = "report-link";
    c[5].innerHTML = "";
    c[5].append(a);
  }
  const li = document.createElement("li");
  li.className = "event";
  li.textContent = ev.at.slice(11, 23) + "  " + ev.run_id + "  " + ev.type + "  " + ev.summary;
  const log = document.getElementById("stream");
  log.prepend(li);
  while (log.children.length > 300) log.lastChild.remove();
  document.getElementById("count").textContent = String(Number(
    document.getElementById("count").textContent) + 1);
}
const path = only ? "/runs/" + only + "/events" : "/events";
const source = new EventSource(path + "?token=" + encodeURIComponent(token));
source.onmessage = (message) => show(JSON.parse(message.data));
source.onopen = () => { document.getElementById("status").textContent = "live"; };
source.onerror = () => { document.getElementById("status").textContent = "reconnecting"; };
"""

_LIVE_SCRIPT = r"""
const bus = new EventSource("/bus?token=" + encodeURIComponent(token));
bus.onmessage = (message) => {
  const m = JSON.parse(message.data);
  const li = document.createElement("li");
  li.className = "bus-message";
  li.textContent = (m.at || "").slice(11, 23) + "  " + m.subject + "  " + m.type +
    (m.run_id ? "  " + m.run_id : "") + (m.summary ? "  " + m.summary : "");
  const log = document.getElementById("bus");
  log.prepend(li);
  while (log.children.length > 300) log.lastChild.remove();
  document.getElementById("bus-count").textContent = String(Number(
    document.getElementById("bus-count").textContent) + 1);
};
const NS = "http://www.w3.org/2000/svg";
let sliRun = null, sliSource = null, samples = [];
function drawSli() {
  const svg = document.getElementById("sli");
  svg.replaceChildren();
  const w = 640, h = 200, pad = 30;
  const points = samples.filter((s) => s.sli !== null && s.sli !== undefined);
  const xs = samples.map((s) => s.offset_seconds);
  const xmax = Math.max(1, ...xs);
  const ymax = Math.max(1e-9, ...points.map((s) => s.sli),
                        ...samples.map((s) => s.objective || 0)) * 1.1;
  const x = (v) => pad + (w - 2 * pad) * v / xmax;
  const y = (v) => h - pad - (h - 2 * pad) * v / ymax;
  for (const s of samples) {
    if (s.target_state === "inactive") continue;
    const band = document.createElementNS(NS, "rect");
    band.setAttribute("x", x(s.offset_seconds)); band.setAttribute("y", pad);
    band.setAttribute("width", 3); band.setAttribute("height", h - 2 * pad);
    band.setAttribute("fill", s.target_state === "firing" ? "#f5b7b1" : "#fad7a0");
    svg.append(band);
  }
  const axis = document.createElementNS(NS, "path");
  axis.setAttribute("d", `M${pad},${pad}V${h - pad}H${w - pad}`);
  axis.setAttribute("stroke", "#999"); axis.setAttribute("fill", "none");
  svg.append(axis);
  const line = document.createElementNS(NS, "polyline");
  line.setAttribute("class", "sli-line");
  line.setAttribute("points", points.map((s) => x(s.offset_seconds) + "," + y(s.sli)).join(" "));
  line.setAttribute("fill", "none"); line.setAttribute("stroke", "#2471a3");
  line.setAttribute("stroke-width", "2");
  svg.append(line);
  const label = document.createElementNS(NS, "text");
  label.setAttribute("x", pad); label.setAttribute("y", 16); label.setAttribute("font-size", 12);
  const last = points.length ? points[points.length - 1].sli.toPrecision(3) : "none";
  label.textContent = `${sliRun}: ${samples.length} samples, SLI now ${last}, ` +
    `${xmax.toFixed(0)} s into grading`;
  svg.append(label);
  document.getElementById("sli-count").textContent = String(samples.length);
}
function followSli(id) {
  if (sliRun === id) return;
  if (sliSource) sliSource.close();
  sliRun = id; samples = [];
  document.getElementById("sli-run").textContent = id;
  sliSource = new EventSource("/runs/" + id + "/sli?token=" + encodeURIComponent(token));
  sliSource.onmessage = (message) => { samples.push(JSON.parse(message.data)); drawSli(); };
}
if (only) followSli(only);
source.addEventListener("message", (message) => {
  const ev = JSON.parse(message.data);
  if (ev.type === "Deployed" && !only) followSli(ev.run_id);
});
"""


_LIVE_SECTIONS = (
    '<section><h2>SLI in grading: <span id="sli-run">none yet</span></h2>'
    '<p><span id="sli-count">0</span> samples (the oracle saves them as it grades)</p>'
    '<svg id="sli" width="640" height="200" role="img" aria-label="SLI in grading"></svg>'
    '</section><section><h2>The whole bus: <span id="bus-count">0</span> messages</h2>'
    '<ul id="bus"></ul></section>'
)


def dashboard_page(run_id: str | None = None, *, live: bool = False) -> str:
    """The page; `run_id` narrows it to one run's stream; `live` adds the whole bus and
    the SLI chart (served by the recorder)."""
    title = f"SREForge run {run_id}" if run_id else "SREForge dashboard"
    data = f' data-run="{run_id}"' if run_id else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f"<title>{title}</title><style>{STYLE}"
        "tr.finished td{color:#555}#stream{font:12px monospace;list-style:none;padding:0;"
        "max-height:420px;overflow:auto}#bus{font:12px monospace;list-style:none;padding:0;"
        "max-height:300px;overflow:auto}</style></head>"
        f'<body{data}><header><h1>{title}</h1><p>stream: <span id="status">connecting'
        '</span> · <span id="count">0</span> events</p></header><main>'
        "<section><h2>Runs</h2><table><thead><tr><th>run</th><th>scenario / agent</th>"
        "<th>phase</th><th>elapsed</th><th>verdict</th><th></th></tr></thead>"
        '<tbody id="runs"></tbody></table></section>'
        f"{_LIVE_SECTIONS if live else ''}"
        '<section><h2>Event stream</h2><ul id="stream"></ul></section>'
        f"</main><script>{_SCRIPT}{_LIVE_SCRIPT if live else ''}</script></body></html>\n"
    )
