"""What one tool call asks the user to allow (PermissionAsk, answered by an Asker), and checking a call's requirements
against its Step's rules: a `deny` refuses at once, the ones that `ask` go to the Asker, one ask per action."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...schema import session_errors
from .authority import AccessRefused, Requirement
from .rules import Ruleset


@dataclass(frozen=True)
class PermissionAsk:
    """What one tool call asks the user to allow: `action` on `resources`; `save` are the patterns an `always`
    reply remembers for the project (e.g. `git push *` for the command `git push origin main`)."""

    action: str
    resources: tuple[str, ...]
    save: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    # a configuration file among the resources: only a saved rule naming it (no wildcard) answers for the user
    explicit: bool = False


# Asks the user and returns once they allow; raises AccessRefused when they refuse.
Asker = Callable[[PermissionAsk], Awaitable[None]]


async def satisfy(rules: Ruleset, asker: Asker | None, needs: Sequence[Requirement],
                  metadata: dict[str, Any] | None = None, save: Mapping[str, Sequence[str]] | None = None) -> None:
    """Return once every requirement is allowed; else AccessRefused. A `deny` refuses before anything is asked; the
    ones that `ask` are asked per action, in order, `save` holding an action's patterns an `always` remembers (by
    default the resources asked). Without an asker (nobody can answer) an `ask` is refused as
    `permission.required`."""
    asking: dict[str, list[str]] = {}
    explicit: set[str] = set()
    for need in needs:
        effect = need.effect(rules)
        if effect == "deny":
            raise AccessRefused(f"Permission denied: {need.action} {need.resource}", session_errors.PERMISSION_REJECTED)
        if effect == "ask":
            asking.setdefault(need.action, []).append(need.resource)
            if need.explicit:
                explicit.add(need.action)
    for action, resources in asking.items():
        if asker is None:
            raise AccessRefused(
                f"Permission required: {action} {', '.join(resources)}. Nobody can approve it here; the user "
                f"can allow it under \"permission\".\"{action}\" in opencode.json.",
                session_errors.PERMISSION_REQUIRED)
        saved = (save or {}).get(action, resources)
        await asker(PermissionAsk(action, tuple(resources), tuple(saved), dict(metadata or {}),
                                  explicit=action in explicit))
