"""What a shell command asks permission for: the simple commands it runs (each checked on its own, so an allowed
`git *` cannot carry `&& rm -rf ~` along) and the arity-aware prefixes an `always` reply saves.

Arity: how many leading words name what a program does. `git push origin main` is saved as `git push *`, because
for git the subcommand is the action; `ls -la src` is saved as `ls *`. Programs not in the table have arity 1."""

from __future__ import annotations

import re
import shlex

# Words (program and subcommands) that name the action, by command prefix; the longest matching prefix wins.
ARITY: dict[str, int] = {
    **{tool: 2 for tool in (
        "git", "npm", "pnpm", "yarn", "bun", "deno", "cargo", "go", "pip", "pip3", "uv", "poetry", "docker",
        "podman", "kubectl", "helm", "terraform", "make", "brew", "apt", "apt-get", "dnf", "yum", "systemctl",
        "gh", "gcloud", "aws", "az", "dotnet", "mvn", "gradle", "composer", "gem", "bundle", "rustup", "conda",
        "nix", "just", "rake", "mix", "swift", "flutter", "dart",
    )},
    **{prefix: 3 for prefix in (
        "npm run", "pnpm run", "yarn run", "bun run", "docker compose", "git remote", "git stash", "git config",
        "gh pr", "gh issue", "gh repo", "kubectl config", "python -m", "python3 -m", "uv run", "poetry run",
    )},
}
_OPERATORS = frozenset({"&&", "||", ";", "|", "|&", "&", ";;"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SUBSTITUTION = re.compile(r"[$<>]\(([^()]*)\)|`([^`]*)`")  # $(...), <(...), >(...), `...`


def simple_commands(command: str) -> list[str]:
    """The simple commands of a command line, split at `&&`, `||`, `;`, `|`, `&` and newlines; the contents of
    `$(...)`, `<(...)`, `>(...)` and backticks count as commands too; `( ... )` subshells are looked into.
    Unparseable text (an open quote) is one command as written."""
    found: list[str] = []
    for inner in _SUBSTITUTION.finditer(command):
        found += simple_commands(inner.group(1) if inner.group(1) is not None else inner.group(2))
    try:
        lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return [command.strip(), *found] if command.strip() else found
    current: list[str] = []
    for token in [*tokens, ";"]:
        if token in _OPERATORS or set(token) <= set(";&|"):
            if simple := _unwrap(" ".join(current)):
                found.append(simple)
            current = []
        else:
            current.append(token)
    return list(dict.fromkeys(found))


def _unwrap(simple: str) -> str:
    """A command without the parentheses of the subshell around it (`(cd a` and `pwd)` from `(cd a && pwd)`)."""
    simple = simple.strip().lstrip("(").lstrip()
    while simple.endswith(")") and simple.count(")") > simple.count("("):
        simple = simple[:-1].rstrip()
    return simple


def save_pattern(simple: str) -> str:
    """The rule an `always` reply saves for one simple command: its arity prefix followed by ` *`."""
    words = simple.split()
    while len(words) > 1 and _ASSIGNMENT.match(words[0]):
        words = words[1:]  # `FOO=1 git push` saves `git push *`
    arity = 1
    for length in range(min(len(words), 3), 0, -1):
        if (known := ARITY.get(" ".join(words[:length]))) is not None:
            arity = known
            break
    return " ".join(words[:arity]) + " *"
