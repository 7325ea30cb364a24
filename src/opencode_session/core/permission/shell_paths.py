"""The paths a shell command line names, so `bash` can ask for `external_directory` before running it: arguments,
redirection targets and `cd` targets, found with tree-sitter's bash grammar (the one OpenCode parses commands with).

Only what is written literally is known: `~` and `$HOME` are expanded, a word with any other expansion (`$DIR/x`,
`$(pwd)/x`) is skipped, and the commands inside `$(...)`, `<(...)` and backticks are scanned too. It is a best-effort
guard, not a sandbox: a program can still open any file it computes at run time."""

from __future__ import annotations

import codecs
import os
import re
from functools import cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter

# Not anyone's files: writing to /dev/null or reading /dev/stdin leaves no directory touched.
DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout",
                     "/dev/stderr", "/dev/tty", "/dev/fd"})
_CHANGES_DIRECTORY = frozenset({"cd", "pushd"})
# Each runs in a subshell: a `cd` inside does not move the commands after it.
_SUBSHELLS = frozenset({"subshell", "command_substitution", "process_substitution"})
# Nodes that never hold a path: comments, names, operators of `[[ ]]`, descriptors, the delimiters of `<<`.
_OPAQUE = frozenset({"comment", "heredoc_start", "heredoc_end", "variable_name", "test_operator", "regex",
                     "file_descriptor"})
# Text fed to a command's input, not a path; only the commands substituted into it run.
_INPUT_TEXT = frozenset({"heredoc_body", "herestring_redirect"})
_WORDS = frozenset({"word", "string", "raw_string", "ansi_c_string", "concatenation", "number",
                    "simple_expansion", "expansion"})
_UNESCAPE = re.compile(r"\\(.)", re.DOTALL)
_UNESCAPE_QUOTED = re.compile(r"\\([\\\"$`])")  # inside double quotes only these are escapes


@cache
def _language() -> tree_sitter.Language:
    import tree_sitter  # loaded with the first shell command checked, not at start-up
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


def command_paths(command: str, cwd: str, home: str | None) -> list[str]:
    """The absolute paths (not yet resolved) that `command` names when it starts in `cwd`, in order, without
    repeats. A relative path is taken in the directory the shell is in at that point: after the `cd`s before it,
    where a `cd` in a subshell or a pipeline does not outlast it, and after a `cd` to somewhere unknown relative
    paths are not known either."""
    import tree_sitter

    tree = tree_sitter.Parser(_language()).parse(command.encode("utf-8", "surrogatepass"))
    scan = _Scan(home)
    scan.visit(tree.root_node, cwd)
    return list(dict.fromkeys(scan.found))


class _Scan:
    def __init__(self, home: str | None) -> None:
        self.home = home
        self.found: list[str] = []

    def visit(self, node: tree_sitter.Node, cwd: str | None) -> str | None:
        """Scan `node`; returns the directory the shell is in after it (None: unknown)."""
        kind = node.type
        if kind in _OPAQUE or not node.is_named and node.child_count == 0:
            return cwd
        if kind == "command":
            return self._command(node, cwd)
        if kind in _WORDS:
            self._word(node, cwd)
            return cwd
        if kind == "file_redirect":
            destination = node.child_by_field_name("destination")
            if destination is not None and destination.type != "number":  # `>&2` names a descriptor
                self._word(destination, cwd)
            return cwd
        if kind == "variable_assignment":
            value = node.child_by_field_name("value")
            if value is not None:
                self._word(value, cwd, absolute_only=True)  # `X=build` is rarely a path; `X=/etc` may become one
            return cwd
        if kind in _INPUT_TEXT:
            self._substitutions(node, cwd)
            return cwd
        if kind == "pipeline":
            for child in node.children:
                self.visit(child, cwd)  # each part of a pipeline runs in a subshell of its own
            return cwd
        if kind in _SUBSHELLS:
            inner = cwd
            for child in node.children:
                inner = self.visit(child, inner)
            return cwd
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            # The grammar puts `a && b > f` in one statement: the redirection is b's, so a runs first.
            while body is not None and body.type == "list" and body.named_child_count:
                *before, body = body.named_children
                for command in before:
                    cwd = self.visit(command, cwd)
            # the redirections are opened before the command runs, in the directory the shell is in then
            for redirect in node.children_by_field_name("redirect"):
                self.visit(redirect, cwd)
            return cwd if body is None else self.visit(body, cwd)
        if kind == "function_definition":
            body = node.child_by_field_name("body")  # runs when called, from wherever that is: scanned from here
            if body is not None:
                self.visit(body, cwd)
            return cwd
        for child in node.children:
            cwd = self.visit(child, cwd)
        return cwd

    def _command(self, node: tree_sitter.Node, cwd: str | None) -> str | None:
        name_node = node.child_by_field_name("name")
        word = name_node.named_children[0] if name_node is not None and name_node.named_child_count == 1 else None
        name = self._literal(word) if word is not None else None
        arguments = node.children_by_field_name("argument")
        for child in node.children:
            if child.type in ("variable_assignment", "file_redirect", "herestring_redirect"):
                self.visit(child, cwd)
            elif child == name_node and name is None:
                self.visit(child, cwd)  # `$(which rm) x`: the substitution runs too
        if name in _CHANGES_DIRECTORY:
            return self._change_directory(arguments, cwd)
        for argument in arguments:
            if argument.type in _WORDS:
                self._word(argument, cwd)
            else:
                self.visit(argument, cwd)
        return None if name == "popd" else cwd

    def _change_directory(self, arguments: list[tree_sitter.Node], cwd: str | None) -> str | None:
        """Where `cd ARGS` moves the shell, once its target is recorded as a path the command names."""
        words = list(arguments)
        while words and (text := self._literal(words[0])) is not None and text.startswith("-") and text != "-":
            words.pop(0)
            if text == "--":
                break
        if not words:
            target = self.home  # `cd` alone goes home
        elif (value := self._value(words[0])) is None or value == "-":
            for word in words:
                self.visit(word, cwd)
            return None  # `cd "$DIR"`, `cd -`: somewhere this scan cannot know
        else:
            target = value
        if target is None:
            return None
        path = _join(cwd, target)
        if path is not None:
            self.found.append(path)
        return path

    def _word(self, node: tree_sitter.Node, cwd: str | None, absolute_only: bool = False) -> None:
        """Record the path a word names, if it is known and could be one; scan the commands it substitutes."""
        self._substitutions(node, cwd)
        value = self._value(node)
        if value is None:
            return
        if value.startswith("-"):
            # an option: `--output=/tmp/x` names a path after its `=`, `-rf` none
            _, equals, value = value.partition("=")
            if not equals or not value.startswith("/"):
                return
        if not value or absolute_only and not value.startswith("/"):
            return
        path = _join(cwd, value)
        if path is not None and not _is_device(path):
            self.found.append(path)

    def _substitutions(self, node: tree_sitter.Node, cwd: str | None) -> None:
        """Scan the commands substituted anywhere inside `node` (`$(...)`, backticks, `<(...)`)."""
        for child in node.children:
            if child.type in _SUBSHELLS:
                self.visit(child, cwd)
            else:
                self._substitutions(child, cwd)

    def _value(self, node: tree_sitter.Node) -> str | None:
        """The word as the shell passes it on, with a leading `~` expanded when unquoted; None when unknown."""
        text = self._literal(node)
        if text is None or not text.startswith("~"):
            return text
        first = node.children[0] if node.type == "concatenation" and node.children else node
        if first.type != "word":
            return text  # a quoted "~" is a name like any other
        user, slash, rest = text[1:].partition("/")
        if not user:
            return None if self.home is None else self.home + slash + rest
        expanded = os.path.expanduser("~" + user)
        return None if expanded.startswith("~") else expanded + slash + rest

    def _literal(self, node: tree_sitter.Node) -> str | None:
        """The text a word node stands for once quotes and escapes are removed; None when it holds an expansion
        whose value is not known here."""
        text = _text(node)
        kind = node.type
        if kind == "word":
            return _UNESCAPE.sub(r"\1", text.replace("\\\n", ""))
        if kind == "number":
            return text
        if kind == "raw_string":
            return text[1:-1]
        if kind == "ansi_c_string":
            try:
                return codecs.decode(text[2:-1].encode("latin-1", "backslashreplace"), "unicode_escape")
            except (UnicodeDecodeError, ValueError):
                return None
        if kind in ("simple_expansion", "expansion"):
            names = [c for c in node.children if c.is_named]
            is_home = len(names) == 1 and names[0].type == "variable_name" and _text(names[0]) == "HOME"
            return self.home if is_home else None
        if kind == "string":
            parts: list[str] = []
            for child in node.children:
                if child.type == "string_content":
                    parts.append(_UNESCAPE_QUOTED.sub(r"\1", _text(child).replace("\\\n", "")))
                elif child.is_named:
                    if (part := self._literal(child)) is None:
                        return None
                    parts.append(part)
            return "".join(parts)
        if kind == "concatenation":
            joined: list[str] = []
            for child in node.children:
                if (part := self._literal(child)) is None:
                    return None
                joined.append(part)
            return "".join(joined)
        return None


def _text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


def _join(cwd: str | None, value: str) -> str | None:
    if value.startswith("/"):
        return value
    return None if cwd is None else os.path.join(cwd, value)


def _is_device(path: str) -> bool:
    normal = os.path.normpath(path)
    return normal in DEVICES or PurePosixPath(normal).parent == PurePosixPath("/dev/fd")
