"""Secrets cut from what the runtime stores, streams and logs: each configured secret (provider keys, the server's
password), whole or any piece of at least PIECE characters, in any letter case, URL-encoded, JSON-escaped or
base64-encoded, found in one Aho-Corasick pass built once per change of the set of secrets."""

from __future__ import annotations

import base64
import json
import logging
import threading
import traceback
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

import ahocorasick  # type: ignore[import-not-found]  # no type information shipped

REDACTED = "[REDACTED]"
# The shortest piece of a secret that counts as the secret: shorter ones are too likely to be ordinary text.
PIECE = 8
STREAMS = 1024  # delta streams whose recent text is remembered (to find a secret split across deltas)


def _forms(secret: str) -> set[str]:
    """The spellings of `secret` an echo may take (letter case is handled by matching lowercased text)."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), json.dumps(secret)[1:-1]}
    raw = secret.encode("utf-8", "surrogatepass")
    for offset in range(3):  # base64 of the secret at each alignment in the encoded stream: its stable middle
        part = raw[offset:]
        part = part[: len(part) // 3 * 3]
        encoded = base64.b64encode(part).decode("ascii")
        forms.update({encoded, encoded.replace("+", "-").replace("/", "_")})
    return {form for form in forms if len(form) >= PIECE}


def _lowered(text: str) -> str:
    """`text` in lower case, character for character (the few characters whose lower case is longer stay)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def without_userinfo(url: str | None) -> str | None:
    """`url` with any `user:password@` replaced by REDACTED (a provider's baseURL may carry credentials)."""
    if not url or "@" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{REDACTED}@{host}"))


def userinfo_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries in its user info (the password, and user:password), to be cut wherever seen."""
    if not url or "@" not in url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    return [s for s in (userinfo, parts.password or "") if s]


class Redactor:
    """The set of secrets only grows (`add`); matching is safe from any thread."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._automaton: Any = None
        self._longest = PIECE  # the longest form of any secret: how much of a stream's text is kept
        self._streams: OrderedDict[tuple[Any, ...], tuple[str, bool]] = OrderedDict()
        self.add(secrets)

    @property
    def active(self) -> bool:
        return self._automaton is not None

    def add(self, secrets: Iterable[str]) -> None:
        """Cut these too from now on (values shorter than PIECE are not secrets enough to cut)."""
        new = {s for s in secrets if isinstance(s, str) and len(s) >= PIECE} - self._secrets
        if not new:
            return
        with self._lock:
            every = self._secrets | new
            automaton = ahocorasick.Automaton()
            forms = {form for secret in every for form in _forms(secret)}
            for form in forms:
                low = _lowered(form)
                for start in range(len(low) - PIECE + 1):
                    automaton.add_word(low[start:start + PIECE], PIECE)
            automaton.make_automaton()
            self._secrets, self._automaton = every, automaton
            self._longest = max(len(form) for form in forms)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """The merged character ranges of `text` that are pieces of a secret."""
        automaton = self._automaton
        if automaton is None or len(text) < PIECE:
            return []
        spans: list[tuple[int, int]] = []
        for end, length in automaton.iter(_lowered(text)):
            start = end + 1 - length
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], end + 1)
            else:
                spans.append((start, end + 1))
        return spans

    def found(self, text: str) -> bool:
        automaton = self._automaton
        return automaton is not None and len(text) >= PIECE and next(automaton.iter(_lowered(text)), None) is not None

    def text(self, text: str) -> str:
        spans = self._spans(text)
        if not spans:
            return text
        out, at = [], 0
        for start, end in spans:
            out += [text[at:start], REDACTED]
            at = end
        out.append(text[at:])
        return "".join(out)

    def value(self, value: Any) -> Any:
        """`value` (JSON-like) with every string redacted; the same object when nothing in it needed to be."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            pairs = [(self.text(k) if isinstance(k, str) else k, self.value(v)) for k, v in value.items()]
            same = all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items(), strict=True))
            return value if same else dict(pairs)
        if isinstance(value, list):
            items = [self.value(v) for v in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        return value

    def delta(self, stream: tuple[Any, ...], delta: str) -> str:
        """One more piece of a streamed text, redacted with what came before it in mind: a secret split across
        deltas is cut from the delta that makes a piece of it whole onwards (a run of cut deltas says so once)."""
        if self._automaton is None:
            return delta
        with self._lock:
            tail, cut = self._streams.pop(stream, ("", False))
        window = tail + delta
        spans = [(max(s, len(tail)), e) for s, e in self._spans(window) if e > len(tail)]
        if spans:
            out, at = [], len(tail)
            for start, end in spans:
                out.append(window[at:start])
                # a secret the previous delta already ended cut goes on: cut, but not said again
                out.append("" if cut and start == len(tail) else REDACTED)
                at = end
            out.append(window[at:])
            cleaned, cut = "".join(out), spans[-1][1] == len(window)
        else:
            cleaned, cut = delta, False
        longest = self._longest
        with self._lock:
            self._streams[stream] = (window[-longest:], cut)
            while len(self._streams) > STREAMS:
                self._streams.popitem(last=False)
        return cleaned


_LOGGED: weakref.WeakSet[Redactor] = weakref.WeakSet()  # the redactors every log record of the process goes through
_factory_installed = False


def redact_logs(redactor: Redactor) -> None:
    """Cut `redactor`'s secrets from every log record the process makes from now on (any logger, any handler),
    while `redactor` lives."""
    global _factory_installed
    _LOGGED.add(redactor)
    if _factory_installed:
        return
    _factory_installed = True
    previous = logging.getLogRecordFactory()
    scrub = RedactingFilter(None)

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        for active in list(_LOGGED):
            scrub.redactor = active
            scrub.filter(record)
        return record

    logging.setLogRecordFactory(factory)


class RedactingFilter(logging.Filter):
    """Cuts the runtime's secrets from every log record's message (and its exception text) before it is written."""

    def __init__(self, redactor: Redactor | None) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if self.redactor is None or not self.redactor.active:
            return True
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: the handler reports that as it always does
            return True
        if self.redactor.found(message):
            record.msg, record.args = self.redactor.text(message), None
        if record.exc_info and record.exc_info[1] is not None:
            text = "".join(traceback.format_exception(*record.exc_info))
            if self.redactor.found(text):
                record.exc_info, record.exc_text = None, self.redactor.text(text)
        return True


__all__ = ["PIECE", "REDACTED", "RedactingFilter", "Redactor", "redact_logs", "userinfo_secrets", "without_userinfo"]
