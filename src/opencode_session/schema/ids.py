"""Time-sortable prefixed identifiers (`ses_` newest-first, `msg_`, `evt_`, ...) and their types."""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from typing import Annotated

from pydantic import StringConstraints

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MASK64 = (1 << 64) - 1
_lock = threading.Lock()
_last_ms = 0
_counter = 0


def _stamp() -> int:
    global _last_ms, _counter
    with _lock:
        now = int(time.time() * 1000)
        if now > _last_ms:
            _last_ms, _counter = now, 0
        else:
            _counter += 1
            if _counter >= 0x1000:  # borrow the next millisecond rather than wrap
                _last_ms, _counter = _last_ms + 1, 0
        return (_last_ms * 0x1000 + _counter) & _MASK64


def _random(n: int = 12) -> str:
    """`n` random base-62 characters from one read of the system's randomness (128 bits: the bias of the modulo
    over 62**12 values is below 1e-17)."""
    value = int.from_bytes(secrets.token_bytes(16), "big")
    chars = []
    for _ in range(n):
        value, digit = divmod(value, 62)
        chars.append(_BASE62[digit])
    return "".join(chars)


def ascending(prefix: str) -> str:
    """An ID that sorts after every ID made before it in this process."""
    return f"{prefix}_{_stamp():016x}{_random()}"


def descending(prefix: str) -> str:
    """An ID that sorts before every ID made before it (newest first)."""
    return f"{prefix}_{(~_stamp()) & _MASK64:016x}{_random()}"


def session_id() -> str:
    return descending("ses")


def message_id() -> str:
    return ascending("msg")


def event_id() -> str:
    return ascending("evt")


def permission_id() -> str:
    return ascending("per")


def question_id() -> str:
    return ascending("que")


def pty_id() -> str:
    return ascending("pty")


def message_id_from_event(event_id_: str) -> str:
    """A message created from an event takes that event's ID with the prefix swapped."""
    assert event_id_.startswith("evt_")
    return "msg_" + event_id_[4:]


def derived_message_id(seed: str, source: str) -> str:
    """A message ID made from `source` for the copy `seed` names (a fork's copy of a parent's message): the same
    every time, so replaying the fork copies under the same IDs, and time-sorted like the source where it is."""
    digest = hashlib.sha256(f"{seed}\0{source}".encode()).digest()
    value = int.from_bytes(digest[:16], "big")
    chars = []
    for _ in range(12):
        value, digit = divmod(value, 62)
        chars.append(_BASE62[digit])
    stamp = source[4:20]
    if len(stamp) != 16 or any(c not in "0123456789abcdef" for c in stamp):
        stamp = digest[16:24].hex()
    return f"msg_{stamp}{''.join(chars)}"


# The shape of an ID a client or a file chooses for what it creates (a session, a message, a permission request; an
# imported transcript's sessions and messages): its prefix, `_`, then letters, digits and `_` only (this runtime's
# and OpenCode's IDs are base 62), at most 128 characters in all; so no such ID carries a path separator, a dot, a
# space or markup into a URL, a file name or a page. The looser types below read what is already stored, and IDs that
# only look something up (one that is not there is a 404).
_SHAPE = r"_[0-9A-Za-z][0-9A-Za-z_]{0,118}$"


def well_formed(prefix: str, value: str) -> bool:
    """Whether `value` is an ID of `prefix`'s exact shape (`ses`, `msg`, `per`, ...)."""
    return re.fullmatch(f"{prefix}{_SHAPE}", value) is not None


SessionIDIn = Annotated[str, StringConstraints(pattern=f"^ses{_SHAPE}")]
MessageIDIn = Annotated[str, StringConstraints(pattern=f"^msg{_SHAPE}")]
PermissionIDIn = Annotated[str, StringConstraints(pattern=f"^per{_SHAPE}")]

SessionID = Annotated[str, StringConstraints(pattern=r"^ses", min_length=4, max_length=128)]
MessageID = Annotated[str, StringConstraints(pattern=r"^msg_", min_length=5, max_length=128)]
EventID = Annotated[str, StringConstraints(pattern=r"^evt_", min_length=5, max_length=128)]
WorkspaceID = Annotated[str, StringConstraints(pattern=r"^wrk")]
PermissionID = Annotated[str, StringConstraints(pattern=r"^per", min_length=4, max_length=128)]
QuestionID = Annotated[str, StringConstraints(pattern=r"^que", min_length=4, max_length=128)]
PtyID = Annotated[str, StringConstraints(pattern=r"^pty", min_length=4, max_length=128)]
