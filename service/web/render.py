"""Turning the inbox's data into HTML: the Jinja2 environment (autoescape on for every
template), the security headers of every page, and the helpers templates call.

    page(request, "queue.html", status=200, **context)   an HTMLResponse with the headers below
    json_html(value)      pretty JSON as Markup; a string longer than FOLD_CHARS in a <details>
    json_diff(old, new)   [(kind, line)] of a unified diff of the two pretty JSON texts

Headers (OWASP Secure Headers): a Content-Security-Policy that allows scripts and styles only
from this origin (the files under /inbox/static; no inline script, no eval), forms posting only
here, and no framing; X-Frame-Options DENY for older browsers; Referrer-Policy no-referrer (a
request's URL names a run); Cache-Control no-store (pages show arguments).
"""

from __future__ import annotations

import difflib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ledger.clock import parse_ts

FOLD_CHARS = 160  # a string longer than this is shown folded (opened with one click), never cut

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                  autoescape=select_autoescape(default=True, default_for_string=True), trim_blocks=True,
                  lstrip_blocks=True)


def page(request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """Render `template` with `context` (plus `request` and `session`, when there is one)."""
    context.setdefault("session", getattr(request.state, "session", None))
    context.setdefault("principal", getattr(request.state, "principal", None))
    html = env.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def _json_html(value: Any, indent: int) -> str:
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f'{inner}<span class="k">{escape(json.dumps(k, ensure_ascii=False))}</span>: {_json_html(v, indent + 1)}'
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + _json_html(v, indent + 1) for v in value) + "\n" + pad + "]"
    text = json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        if len(value) > FOLD_CHARS:
            return (f'<details class="fold"><summary><span class="s">{escape(text[:FOLD_CHARS // 2])}</span>… '
                    f'({len(value):,} characters: open to read all)</summary><span class="s">{escape(text)}</span></details>')
        return f'<span class="s">{escape(text)}</span>'
    return f'<span class="n">{escape(text)}</span>'


def json_html(value: Any) -> Markup:
    """`value` as indented JSON in HTML (every piece escaped), long strings folded."""
    return Markup(_json_html(value, 0))


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def json_diff(old: Any, new: Any) -> list[tuple[str, str]]:
    """A unified diff (difflib) of the pretty JSON of `old` and `new`: [("add"|"del"|"hunk"|"same", line)]."""
    out = []
    for line in difflib.unified_diff(pretty(old).splitlines(), pretty(new).splitlines(), "original", "edited", lineterm="", n=3):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        out.append((kind, line))
    return out


def summary(args: Any, most: int = 120) -> str:
    """One line of the arguments for a queue row (the request's page shows them whole)."""
    if args is None:
        return "(not shown)"
    text = json.dumps(args, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= most else text[: most - 1] + "…"


def seconds_until(ts: str | None, now: datetime) -> float | None:
    if not ts:
        return None
    try:
        return (parse_ts(ts) - now).total_seconds()
    except ValueError:
        return None


def duration(seconds: float | None) -> str:
    """`1h 05m`, `3m 20s`, `12s`; `overdue` below zero."""
    if seconds is None:
        return "—"
    if seconds < 0:
        return "overdue"
    s = int(seconds)
    if s >= 86_400:
        return f"{s // 86_400}d {s % 86_400 // 3600:02d}h"
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


env.globals.update(json_html=json_html, summary=summary, duration=duration, pretty=pretty)
