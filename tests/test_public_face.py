"""The public face: what the README, docs/ and examples/ show a user importing is `opencode_session.sdk`,
`opencode_session.client` or a module of `opencode_session.schema` (the shapes the client answers with), never an
internal module (core, server, protocol, cli, compat, or a submodule of sdk or client), which may change without
notice. The package docstring of `opencode_session` declares the same rule."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import opencode_session

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_PACKAGES = ("opencode_session.sdk", "opencode_session.client")
PUBLIC_PREFIX = "opencode_session.schema"
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "examples").rglob("*.md"))]
PYTHON_FENCE = re.compile(r"^```(?:python|py)\s*$")


def is_public(module: str) -> bool:
    return module in PUBLIC_PACKAGES or module == PUBLIC_PREFIX or module.startswith(PUBLIC_PREFIX + ".")


def python_blocks(text: str) -> list[str]:
    """The page's fenced Python code blocks."""
    blocks: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if current is None:
            if PYTHON_FENCE.match(line.strip()):
                current = []
        elif line.strip().startswith("```"):
            blocks.append("\n".join(current))
            current = None
        else:
            current.append(line)
    return blocks


def imported(source: str) -> list[str]:
    """Every module of this package the code imports (absolute imports only: examples are not in the package)."""
    modules = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
    return [m for m in modules if m == "opencode_session" or m.startswith("opencode_session.")]


def sources() -> list[tuple[str, str]]:
    found = [(f"{page.relative_to(ROOT)} block {n}", block) for page in PAGES
             for n, block in enumerate(python_blocks(page.read_text()), 1)]
    found += [(str(path.relative_to(ROOT)), path.read_text()) for path in sorted((ROOT / "examples").rglob("*.py"))]
    return found


def test_the_pages_and_examples_import_only_the_public_face():
    shown = sources()
    assert any("opencode_session.sdk" in imported(code) for _, code in shown)  # the check sees what it should
    internal = [(where, module) for where, code in shown for module in imported(code) if not is_public(module)]
    assert internal == []


def test_the_package_declares_its_public_face():
    declared = opencode_session.__doc__ or ""
    for name in (*PUBLIC_PACKAGES, PUBLIC_PREFIX):
        assert f"`{name}`" in declared
