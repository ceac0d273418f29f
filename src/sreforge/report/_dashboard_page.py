"""The live dashboard's one page: runs in flight and finished, and the live event stream.

Plain HTML with a small script written here (no library, nothing fetched but this
server's own `/events` stream): each event updates its run's row (phase, elapsed time,
verdict, report link) and is appended to the stream below.
"""

from __future__ import annotations

from sreforge.report._html import STYLE

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


def dashboard_page(run_id: str | None = None) -> str:
    """The page; `run_id` narrows it to one run's stream."""
    title = f"SREForge run {run_id}" if run_id else "SREForge dashboard"
    data = f' data-run="{run_id}"' if run_id else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f"<title>{title}</title><style>{STYLE}"
        "tr.finished td{color:#555}#stream{font:12px monospace;list-style:none;padding:0;"
        "max-height:420px;overflow:auto}</style></head>"
        f'<body{data}><header><h1>{title}</h1><p>stream: <span id="status">connecting'
        '</span> · <span id="count">0</span> events</p></header><main>'
        "<section><h2>Runs</h2><table><thead><tr><th>run</th><th>scenario / agent</th>"
        "<th>phase</th><th>elapsed</th><th>verdict</th><th></th></tr></thead>"
        '<tbody id="runs"></tbody></table></section>'
        '<section><h2>Event stream</h2><ul id="stream"></ul></section>'
        f"</main><script>{_SCRIPT}</script></body></html>\n"
    )
