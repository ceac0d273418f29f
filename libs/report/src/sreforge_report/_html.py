"""The page shell every report shares: one self-contained HTML document, styles inline."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

__all__ = ["STYLE", "VERDICT_COLORS", "page", "pill", "section", "table"]

VERDICT_COLORS = {
    "passed": "#1e8449",
    "failed": "#c0392b",
    "rejected": "#d35400",
    "aborted": "#7f8c8d",
    "error": "#8e44ad",
}

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
background:#f4f5f7}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
header{background:#1f2a36;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px}header p{margin:4px 0 0;color:#c8d0d8}
section{background:#fff;border:1px solid #dde1e6;border-radius:6px;margin:16px 0;padding:12px 16px}
section h2{font-size:16px;margin:0 0 8px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #e5e8eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f7f8fa;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pill{display:inline-block;border-radius:10px;padding:1px 9px;color:#fff;font-weight:600}
pre{background:#f7f8fa;border:1px solid #e5e8eb;padding:8px;overflow:auto;max-height:480px;
font-size:12px;white-space:pre-wrap;word-break:break-word}
.diff .add{color:#1e8449}.diff .del{color:#c0392b}.diff .hunk{color:#2471a3}
svg.chart{width:100%;height:auto;display:block;margin:6px 0}
.muted{color:#6b7580}.ok{color:#1e8449}.bad{color:#c0392b}
.timeline .kind{font-weight:600;white-space:nowrap}
details summary{cursor:pointer}
"""


def page(title: str, subtitle: str, sections: Iterable[str]) -> str:
    """A whole HTML document; nothing in it loads from anywhere else."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>"
        f"<main>{''.join(sections)}</main></body></html>\n"
    )


def section(title: str, body: str, *, css: str = "") -> str:
    """One titled card of the page."""
    klass = f' class="{css}"' if css else ""
    return f"<section{klass}><h2>{escape(title)}</h2>{body}</section>"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, css: str = "") -> str:
    """A table whose cells are already HTML (escape text before passing it in);
    a cell starting with `\\x00num` is right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    head = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(_cell(cell) for cell in row) + "</tr>" for row in rows)
    klass = f' class="{css}"' if css else ""
    return f"<table{klass}>{head}<tbody>{body}</tbody></table>"


def pill(verdict: str) -> str:
    """A coloured verdict badge."""
    color = VERDICT_COLORS.get(verdict, "#555")
    return f'<span class="pill verdict" style="background:{color}">{escape(verdict)}</span>'


def _cell(cell: str) -> str:
    if cell.startswith("\x00num"):
        return f'<td class="num">{cell[4:]}</td>'
    return f"<td>{cell}</td>"
