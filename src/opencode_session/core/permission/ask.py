"""What one tool call asks the user to allow (PermissionAsk, answered by an Asker), and checking a call's requirements
against its Step's rules: a `deny` refuses at once, the ones that `ask` go to the Asker, one ask per action; and how
a call's waits for the user's answer are recorded in its settlement (PermissionWait)."""

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

# The namespace of a local call's settlement metadata (`resultState` of session.tool.success / .failed, projected as
# the tool part's `provider.resultMetadata`, a map keyed by owner as the wire's LLMProviderMetadata is) under which
# the call's waits for the user are recorded. No provider adapter replays it for a call it did not run, and no
# OpenCode client shows it; the tool part's `time` and `state` admit no new field, and `structured` is the model's.
WAITS_KEY = "opencode-session"


@dataclass(frozen=True)
class PermissionWait:
    """One request a tool call made the user answer: when it was asked and answered (ms), and the reply (`reject`
    also when the call stopped waiting, interrupted)."""

    request_id: str
    asked: int
    replied: int
    reply: str

    def wire(self) -> dict[str, Any]:
        return {"id": self.request_id, "asked": self.asked, "replied": self.replied, "reply": self.reply}


# Hears of each wait of one call once it is answered.
Waited = Callable[[PermissionWait], None]


def waits_state(waits: Sequence[PermissionWait]) -> dict[str, Any] | None:
    """A settlement's `resultState` recording `waits` (None: the call asked nobody)."""
    return {WAITS_KEY: {"permission": [w.wire() for w in waits]}} if waits else None


def recorded_waits(state: Mapping[str, Any] | None) -> list[PermissionWait]:
    """The waits a settlement's `resultState` records (none for one that has no record, e.g. a hosted call's)."""
    found = ((state or {}).get(WAITS_KEY) or {}).get("permission") or []
    return [PermissionWait(str(w["id"]), int(w["asked"]), int(w["replied"]), str(w["reply"])) for w in found
            if isinstance(w, dict) and {"id", "asked", "replied", "reply"} <= w.keys()]


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
