"""Location authority: whether a Session may touch a path a tool call or prompt attachment names. The path is resolved
first (`~`, relative to the Location, `..`, symlinks); outside the Location it needs the `external_directory`
permission, and the action's own rules apply everywhere, so a `deny` always holds. Also AccessRefused, the one
refusal of the permission package, and the one safe way to open such a file (regular files only, never blocking on a
FIFO or device) and to read one whole within a bound."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ...schema import session_errors
from .rules import DEFAULT_RULES, Effect, Ruleset, evaluate, evaluate_explicit


class AccessRefused(Exception):
    """What was asked for may not be had: a rule denies it (`permission.rejected`), it needs a permission nobody can
    grant here (`permission.required`), the user refused it (`permission.rejected` with their feedback, or
    `permission.declined`), or the path is not usable at all (`tool.execution`). `type` is the failure type a tool
    call settles with; the message is written for the model or the client to act on."""

    def __init__(self, message: str, type: str) -> None:
        super().__init__(message)
        self.message = message
        self.type = type


class Correction(AccessRefused):
    """The user refused a call's permission and said what to do instead (`feedback`): the model reads it and goes
    on, and the calls of the same Step that have not started yet are not run (`elsewhere`)."""

    def __init__(self, message: str, feedback: str) -> None:
        super().__init__(message, session_errors.PERMISSION_REJECTED)
        self.feedback = feedback

    def elsewhere(self) -> AccessRefused:
        """What another call of the Step fails with instead of asking or running."""
        return AccessRefused(f"Not run: the user rejected another tool call of this step and said: {self.feedback}",
                             session_errors.PERMISSION_REJECTED)


@dataclass(frozen=True)
class Requirement:
    """One permission a path access needs: `action` on `resource`, as the rules match it."""

    action: str
    resource: str
    absolute: str | None = None  # the absolute form of a Location-relative resource, for absolute rule patterns
    # a configuration file: only a rule naming it allows it (`evaluate_explicit`); a blanket allow asks
    explicit: bool = False

    def effect(self, rules: Ruleset) -> Effect:
        if self.explicit:
            return evaluate_explicit(rules, self.action, self.resource, self.absolute)
        return evaluate(rules, self.action, self.resource, self.absolute)


@dataclass(frozen=True)
class Authority:
    """The rules one Step (or one admission) runs under, rooted at the Session's Location directory.

    `managed_roots` are directories outside the Location whose files need no `external_directory` permission:
    where Managed Tool Output Files are kept. `configuration` says whether a resolved path is a configuration file
    (or inside a configuration folder): changing one (`edit`) is allowed only by a rule that names it.
    """

    directory: Path
    rules: Ruleset = DEFAULT_RULES
    managed_roots: tuple[Path, ...] = ()
    configuration: Callable[[Path], bool] | None = None
    root: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", _real(self.directory))

    def resolve(self, raw: str) -> Path:
        """The real absolute path `raw` names; relative paths are taken in the Location directory."""
        try:
            path = Path(raw).expanduser()
            return Path(os.path.realpath(path if path.is_absolute() else self.root / path))
        except (ValueError, RuntimeError, OSError) as exc:  # NUL byte, unknown ~user, name too long
            raise AccessRefused(f"Not a usable path: {raw!r} ({exc})", session_errors.TOOL_EXECUTION) from None

    def requirements(self, action: str, raw: str) -> tuple[Path, list[Requirement]]:
        """The resolved path `raw` names and the permissions `action` on it needs, in the order they are checked:
        `external_directory` for the outside directory (e.g. "/etc/*" for /etc/hostname) unless the path is inside
        the Location or a managed root, then `action` itself. Inside the Location the rules see the path relative
        to it (absolute rule patterns see the absolute path)."""
        path = self.resolve(raw)
        needs: list[Requirement] = []
        if not any(_within(path, root) for root in (self.root, *map(_real, self.managed_roots))):
            scope = path if path.is_dir() else path.parent
            needs.append(Requirement("external_directory", str(scope / "*")))
        explicit = action == "edit" and self.configuration is not None and self.configuration(path)
        if _within(path, self.root):
            needs.append(Requirement(action, str(path.relative_to(self.root)), str(path), explicit))
        else:
            needs.append(Requirement(action, str(path), str(path), explicit))
        return path, needs

    def locate(self, raw: str) -> tuple[Path, list[Requirement]]:
        """The resolved path `raw` names and what merely reaching it needs (`external_directory` when outside)."""
        path, needs = self.requirements("", raw)
        return path, needs[:-1]

    def check(self, action: str, raw: str) -> Path:
        """The resolved path when `action` (e.g. "read") may touch what `raw` names without asking anyone; else
        AccessRefused. For callers nobody can answer a question for, such as prompt attachments."""
        path, needs = self.requirements(action, raw)
        for need in needs:
            self.require(need.action, need.resource, need.absolute)
        return path

    def effect_on(self, action: str, path: Path) -> Effect:
        """What the rules say of `action` on an already resolved `path` (relative inside the Location, as
        `requirements` gives it), asking nobody: for a tool that returns many files' content, such as grep."""
        if _within(path, self.root):
            return Requirement(action, str(path.relative_to(self.root)), str(path)).effect(self.rules)
        return Requirement(action, str(path)).effect(self.rules)

    def require(self, action: str, resource: str, absolute: str | None = None) -> None:
        """AccessRefused unless the rules allow `action` on `resource`."""
        effect = Requirement(action, resource, absolute).effect(self.rules)
        if effect == "deny":
            raise AccessRefused(f"Permission denied: {action} {resource}", session_errors.PERMISSION_REJECTED)
        if effect == "ask":
            raise AccessRefused(
                f"Permission required: {action} {resource}. This needs the user's approval, which cannot be asked for "
                f"here; the user can allow it under \"permission\".\"{action}\" in opencode.json.",
                session_errors.PERMISSION_REQUIRED)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class NotRegularFileError(OSError):
    """The path names a directory, FIFO, device or socket: nothing a Session reads as a file."""


def open_regular_file(path: Path) -> BinaryIO:
    """Open `path` for reading if, once open, it is a regular file (else NotRegularFileError). O_NONBLOCK keeps a
    FIFO swapped in after any earlier check from blocking the open; O_NOFOLLOW refuses a swapped-in symlink."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(f"Not a regular file: {path}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: Path, limit: int, error: Callable[[str], Exception], name: object = None) -> bytes:
    """The whole of the regular file at `path`, at most `limit` bytes; else `error(message)`, the message naming the
    file as `name` (`path` by default) and saying why: missing, not a regular file, unreadable or over `limit`."""
    shown = path if name is None else name
    try:
        with open_regular_file(path) as file:
            data = file.read(limit + 1)
    except (FileNotFoundError, NotADirectoryError):
        raise error(f"File not found: {shown}") from None
    except NotRegularFileError:
        raise error(f"Not a regular file: {shown}") from None
    except OSError as exc:
        raise error(f"Cannot read {shown}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error(f"{shown} is larger than {limit / (1024 * 1024):g} MiB")
    return data
