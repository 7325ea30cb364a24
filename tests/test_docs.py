"""The README is a short front page and docs/ holds the reference: every docs page opens with a table of contents
whose links reach its headings, every relative link in the README and docs/ reaches a file that exists, and what
the pages show that can be checked offline holds (the `ocs` commands and options named, the model configuration)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> list[str]:
    """The page's lines outside fenced code blocks (a `# comment` in a shell block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation (backticks too) dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(lines: list[str]) -> list[tuple[int, str]]:
    return [(len(m.group(1)), m.group(2)) for line in lines if (m := re.match(r"(#{1,6}) (.+)", line))]


def contents(lines: list[str]) -> list[str]:
    """The anchors the `## Contents` section links to."""
    start = lines.index("## Contents")
    section = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        section.append(line)
    return [m.group(1) for line in section for m in re.finditer(r"\]\(#([^)]+)\)", line)]


def test_there_are_docs_pages_for_every_topic():
    names = {page.name for page in DOCS}
    assert {"configuration.md", "http-api.md", "cli.md", "embedding.md", "security.md", "clustering.md",
            "observability.md", "architecture.md", "benchmarks.md", "testing.md"} <= names


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_docs_page_opens_with_a_table_of_contents_that_reaches_its_headings(page):
    lines = prose(page.read_text())
    found = headings(lines)
    assert found and found[0][0] == 1, "a page starts with its title"
    second = [text for level, text in found if level == 2]
    if page.name == "testing.md":  # written before the others: its list of links opens the page, untitled
        anchors = [m.group(1) for line in lines[:12] for m in re.finditer(r"\]\(#([^)]+)\)", line)]
    else:
        assert second[0] == "Contents", "the table of contents is the first section"
        second = second[1:]
        anchors = contents(lines)
    targets = {slug(text) for _, text in found}
    assert anchors, "the table of contents links to the sections"
    assert [a for a in anchors if a not in targets] == []  # every entry reaches a heading
    assert [h for h in second if slug(h) not in anchors] == []  # and every section is in it


def anchors_of(page: Path) -> set[str]:
    return {slug(text) for _, text in headings(prose(page.read_text()))}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_reaches_a_file_that_exists(page):
    text = "\n".join(prose(page.read_text()))
    broken = []
    for target in LINK.findall(text) + IMAGE.findall(text):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / unquote(path)).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors_of(file):
            broken.append(target)
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme():
    linked = set(LINK.findall(README.read_text()))
    assert [page.name for page in DOCS if f"docs/{page.name}" not in linked] == []


def test_the_readme_is_a_short_front_page_with_two_quick_start_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 220
    quick = text[text.index("## Quick start"):]
    quick = quick[:quick.index("\n## ", 1)]
    blocks = re.findall(r"```sh\n(.*?)```", quick, flags=re.S)
    assert len(blocks) == 1
    commands = [line.split("#")[0].strip() for line in blocks[0].splitlines() if line.strip()]
    assert commands == ["python3 run.py demo", "python3 run.py test"]
    assert "python3 run.py test --fast" in quick and "docs/testing.md" in quick


def test_the_readme_puts_a_newcomer_first():
    """The order of the front page: configuring a model right after the quick start, the reference last."""
    order = [text for level, text in headings(prose(README.read_text())) if level == 2]
    assert order[:2] == ["Quick start", "Configure a model"] and order[-1] == "Where to go next"
    assert "](docs/inspector.png)" in README.read_text()


def test_the_readmes_model_configuration_is_valid():
    """The opencode.json the README shows is one this runtime reads, declaring the model it names."""
    from opencode_session.core.config.model import Config

    [block] = re.findall(r"```json\n(.*?)```", README.read_text(), flags=re.S)
    data = json.loads(block)
    config = Config.model_validate(data)
    provider, _, model = data["model"].partition("/")
    assert config.provider is not None and model in config.provider[provider].models
    assert f"`{provider.upper()}_API_KEY`" in README.read_text()  # the variable its key goes in


def ocs_spans() -> list[tuple[Path, str]]:
    """Every inline code span and code line that starts with `ocs ` in the README and docs/."""
    found = []
    for page in PAGES:
        text = page.read_text()
        spans = re.findall(r"`(ocs [^`]*)`", text)
        spans += [line.split(" #")[0].strip() for line in re.findall(r"^ocs [^\n]*", text, flags=re.M)]
        found += [(page, span) for span in spans]
    return found


def test_every_ocs_command_the_docs_name_exists():
    from opencode_session.cli.main import COMMANDS, SESSION_ACTIONS, _root_parser

    listed = _root_parser().format_help()
    unknown = []
    for page, span in ocs_spans():
        words = span.split()
        if len(words) < 2 or not re.fullmatch(r"[a-z]+", words[1]):
            continue  # `ocs`, `ocs -h`, `ocs --version`, `ocs ...`, `ocs COMMAND -h`
        if words[1] not in COMMANDS or words[1] not in listed:
            unknown.append(f"{page.name}: {span}")
        elif words[1] == "sessions" and len(words) > 2 and re.fullmatch(r"[a-z]+", words[2]):
            if words[2] not in SESSION_ACTIONS:
                unknown.append(f"{page.name}: {span}")
    assert unknown == []
    assert {span.split()[1] for _, span in ocs_spans() if len(span.split()) > 1} >= set(COMMANDS)


def test_every_option_the_docs_give_an_ocs_command_exists():
    from opencode_session.cli.main import COMMANDS, SESSION_ACTIONS, _command_parser

    helps = {name: _command_parser(name).format_help() for name in COMMANDS}
    import argparse

    for action, (_function, arguments) in SESSION_ACTIONS.items():
        parser = argparse.ArgumentParser(add_help=False)
        arguments(parser)
        helps[f"sessions {action}"] = parser.format_help()
    unknown = []
    for page, span in ocs_spans():
        words = span.split()
        if len(words) < 2 or words[1] not in COMMANDS:
            continue
        name = words[1]
        if name == "sessions" and len(words) > 2 and words[2] in SESSION_ACTIONS:
            name = f"sessions {words[2]}"
        for option in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", span):
            if option not in ("-h", "--help") and not re.search(rf"(?<![\w-]){re.escape(option)}\b", helps[name]):
                unknown.append(f"{page.name}: {span} ({option})")
    assert unknown == []
