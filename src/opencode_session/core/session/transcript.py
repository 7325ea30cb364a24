"""Export and import of a session's projected transcript (`info`, `messages`): what `sanitize` removes before a
transcript leaves the machine, and recreating a session from one at a Location in one transaction."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ...schema import events as ev
from ...schema import session_errors
from ...schema.common import LocationRef
from ...schema.errors import ConflictError, InvalidRequestError
from ...schema.lifecycle import SessionTranscript
from ...schema.session import SessionV2Info
from ..location import Location, resolve_location
from ..store import Reader, Store, Tx, now_ms
from ..store.codec import decode
from .service import require_session

REDACTED = "[redacted]"
# Credentials by their well-known shapes: provider and service keys, bearer tokens, private key blocks.
_KEY_SHAPES = re.compile(
    r"(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{30,}|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|(?<=Bearer )[A-Za-z0-9._~+/\-]{16,}=*"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----)",
    re.S,
)
# Environment variables whose values are secrets by their name.
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
_MIN_SECRET = 8  # shorter values are too likely to be ordinary words


class Sanitizer:
    """Rewrites a transcript's JSON for another machine: strings lose credentials (known key shapes, and the values
    of secret-named environment variables) and the absolute home directory (`~` instead); attachments given as
    `data:` URIs lose their bytes (their MIME type stays); tool calls lose the paths of their Managed Tool Output
    Files (`outputPaths`)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        home = env.get("HOME") or os.path.expanduser("~")
        self.home = home.rstrip("/") if home not in ("", "/") else None
        self.secrets = sorted({v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET},
                              key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, REDACTED)
        value = _KEY_SHAPES.sub(REDACTED, value)
        if self.home is not None:
            value = re.sub(re.escape(self.home) + r"(?=/|\b|$)", "~", value)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key == "outputPaths":
                    continue
                if key == "uri" and isinstance(item, str) and item.startswith("data:"):
                    out[key] = item.split(",", 1)[0].split(";", 1)[0] + ","  # the MIME type, no bytes
                    continue
                out[key] = self.value(item)
            return out
        return value


def _without_task_link(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    if metadata is None or "task" not in metadata:
        return metadata
    return {k: v for k, v in metadata.items() if k != "task"}


UNFINISHED_CALL = ("This {name} call was left unfinished in the imported transcript: it did not run here, and it may "
                   "or may not have taken effect where it ran.")
UNFINISHED_STEP = "This Step was left unfinished in the imported transcript"


def _settled(message: dict[str, Any], now: int) -> dict[str, Any]:
    """An imported message with nothing left open: a tool call the file left streaming or running fails (this
    runtime re-runs only calls it recorded itself, never one a file hands it), and an open Step fails."""
    if message.get("type") != "assistant":
        return message
    for part in message.get("content", []):
        state = part.get("state") if part.get("type") == "tool" else None
        if state is None or state.get("status") not in ("streaming", "running"):
            continue
        given = state.get("input")
        part["state"] = {"status": "error", "input": given if isinstance(given, dict) else {},
                         "error": {"type": session_errors.TOOL_STALE,
                                   "message": UNFINISHED_CALL.format(name=part.get("name", "tool"))}}
        part.setdefault("time", {})["completed"] = part["time"].get("completed") or now
    time = message.setdefault("time", {})
    if time.get("completed") is None:
        time["completed"] = now
        if message.get("error") is None:
            message["error"] = {"type": session_errors.IMPORT_UNFINISHED, "message": UNFINISHED_STEP}
    return message


async def export(store: Store, session_id: str, *, sanitize: bool = False,
                 env: Mapping[str, str] = os.environ) -> SessionTranscript:
    """The session's record and every projected message, oldest first (sanitized on request)."""

    def _read(reader: Reader) -> SessionTranscript:
        info = require_session(reader, session_id)
        messages = [decode(row.data) for row in reader.messages.window(session_id, -1, -1)]
        return SessionTranscript(info=info, messages=messages)

    transcript = await store.read(_read)
    if not sanitize:
        return transcript
    return SessionTranscript.model_validate(Sanitizer(env).value(transcript.wire()))


async def import_transcript(store: Store, transcript: SessionTranscript, location: LocationRef | None,
                            default: Location) -> SessionV2Info:
    """Recreate an exported session at `location` (else at the default Location: the importing server's), in one
    transaction with one `session.imported` event: ConflictError when its ID (or one of its messages' IDs) exists,
    SessionNotFoundError when its parent is not here (import parents first). The file's own permission rules and
    its `task` link (`metadata.task`) are dropped: an import brings no authority."""
    info = transcript.info
    if location is not None:
        loc = resolve_location(location.directory, location.workspaceID)
        if not loc.directory.is_dir():
            raise InvalidRequestError(f"Location directory does not exist: {location.directory}", kind="body",
                                      field="location.directory")
    else:  # never where the file says it was: that directory is the file's choice, not the user's
        loc = default
    ids = [m.id for m in transcript.messages]
    if len(set(ids)) != len(ids):
        raise InvalidRequestError("Invalid body: messages: two messages have the same ID", kind="body",
                                  field="messages")
    placed = info.model_copy(update={
        "projectID": loc.project_id, "revert": None,
        "location": LocationRef(directory=str(loc.directory), workspaceID=loc.workspace_id),
        "subpath": None,
        # a file carries content, never authority: the rules it grants itself are not this user's, and a child it
        # says a `task` call made is not one a parent's model may continue (`subagents.Delegation`)
        "permissions": None,
        "metadata": _without_task_link(info.metadata),
    })
    wired = [_settled(m.wire(), now_ms()) for m in transcript.messages]

    def _import(tx: Tx) -> SessionV2Info:
        if tx.sessions.load(info.id) is not None:
            raise ConflictError(f"Session {info.id} already exists", resource=info.id)
        if info.parentID is not None:
            require_session(tx, info.parentID)
        for message_id in ids:
            if tx.messages.placement(message_id) is not None:
                raise ConflictError(f"Message {message_id} already exists", resource=message_id)
        tx.append(ev.Imported(sessionID=info.id, info=placed, messages=wired), created=info.time.created)
        return require_session(tx, info.id)

    return await store.write(_import)
