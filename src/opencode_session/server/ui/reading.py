"""Reading comfort on the inspector's pages: code highlighted on the server (Pygments, so nothing is vendored and
no script colours text), code blocks with a copy button, a tool card's one-line name of what it did, and numbers
with thousands separators. Template filters; routes.py registers them. Pygments and markdown-it load with the first
text they render, not when the server starts."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from pygments.formatter import Formatter
    from pygments.lexer import Lexer

HIGHLIGHT_MAX = 200_000  # characters: a longer text is shown plain (highlighting it would slow every re-render)
LABEL_MAX = 80  # characters of a tool card's name of what it did
CODE_KEPT = 2048  # highlighted texts kept: a settled part never changes, and every re-render shows it again
# the input field that names what a call did, most telling first (bash's command, a file tool's path, ...)
LABEL_FIELDS = ("command", "path", "filePath", "pattern", "url", "query", "description", "name", "label")
_NUMBERED = re.compile(r"\d{5,}\| ")  # the read tool's line numbers


def thousands(value: Any) -> str:
    """`12345` as `12,345` (a value that is not a number as it is)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    return f"{value:,}" if isinstance(value, int) or value.is_integer() else f"{value:,.1f}"


@lru_cache(maxsize=1)
def _formatter() -> Formatter:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True)  # bare <span class="k">; ui.css colours the classes, light and dark


def _lexer(language: str | None, filename: str | None) -> Lexer | None:
    from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        if language:
            return get_lexer_by_name(language, stripnl=False)
        if filename:
            return get_lexer_for_filename(filename, stripnl=False)
    except ClassNotFound:
        return None
    return None


@lru_cache(maxsize=CODE_KEPT)
def highlighted(text: str, language: str | None = None, filename: str | None = None) -> Markup:
    """`text` as HTML, its tokens in classed spans when a lexer for `language` (or `filename`'s kind) is known and
    it is not too long; else escaped as it is."""
    lexer = _lexer(language, filename) if len(text) <= HIGHLIGHT_MAX else None
    if lexer is None:
        return escape(text)
    from pygments import highlight

    out = highlight(text, lexer, _formatter())
    return Markup(out[:-1] if out.endswith("\n") and not text.endswith("\n") else out)


def code_block(text: str, language: str | None = None, filename: str | None = None) -> Markup:
    """A code block with its copy button: the button copies the block's text, not the button's."""
    return Markup('<div class="code"><button type="button" class="copy" aria-label="Copy">Copy</button>'
                  f'<pre><code class="hl">{highlighted(text, language, filename)}</code></pre></div>')


def numbered_output(text: str, filename: str | None) -> Markup:
    """The read tool's output (`00001| line` lines, then a note): the file's lines highlighted as its kind, their
    numbers apart, the note as it is."""
    lines = text.split("\n")
    numbered = 0
    while numbered < len(lines) and _NUMBERED.match(lines[numbered]):
        numbered += 1
    if not numbered or filename is None or _lexer(None, filename) is None:
        return highlighted(text)
    numbers = [m.group() for line in lines[:numbered] if (m := _NUMBERED.match(line))]
    code = str(highlighted("\n".join(line[len(n):] for n, line in zip(numbers, lines, strict=False)), None,
                           filename)).split("\n")
    shown = [f'<span class="ln">{n}</span>{line}' for n, line in zip(numbers, code, strict=False)]
    return Markup("\n".join([*shown, *(str(escape(line)) for line in lines[numbered:])]))


def tool_output(part: dict[str, Any]) -> Markup:
    """A settled call's output as a code block (an attachment by its kind and name), highlighted where the call
    names the file it shows."""
    text = "".join(c["text"] if c.get("type") == "text" else f"[{c.get('mime')}] {c.get('name') or c.get('uri')}\n"
                   for c in part.get("state", {}).get("content") or ())
    tool_input = part.get("state", {}).get("input")
    path = tool_input.get("path") if isinstance(tool_input, dict) else None
    if part.get("name") == "read" and isinstance(path, str):
        body = numbered_output(text, os.path.basename(path))
    else:
        body = highlighted(text)
    return Markup('<div class="code"><button type="button" class="copy" aria-label="Copy output">Copy</button>'
                  f'<pre class="output"><code class="hl">{body}</code></pre></div>')


def tool_label(part: dict[str, Any], directory: str | None = None) -> str:
    """What a tool call did, in one line: its name and the telling field of its input (`bash python3 greet.py`,
    `write src/a.py`, a path under the session's `directory` relative to it)."""
    name = str(part.get("name") or "tool")
    tool_input = part.get("state", {}).get("input")
    if not isinstance(tool_input, dict):
        return name
    value = next((v for f in LABEL_FIELDS if isinstance(v := tool_input.get(f), str) and v.strip()), None)
    if value is None:
        return name
    if directory and os.path.isabs(value) and value.startswith(directory.rstrip("/") + "/"):
        value = value[len(directory.rstrip("/")) + 1:]
    one_line = " ".join(value.split())
    if len(one_line) > LABEL_MAX:
        one_line = one_line[:LABEL_MAX - 1] + "…"
    return f"{name} {one_line}"


def _fence(self: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    language = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else None
    return code_block(token.content, language) + "\n"


def markdown() -> MarkdownIt:
    """CommonMark with tables; raw HTML escaped, javascript: links refused; fenced code highlighted, with a copy
    button."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("js-default")
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", lambda self, tokens, idx, options, env: code_block(tokens[idx].content) + "\n")
    return md
