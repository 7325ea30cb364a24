"""Tagged domain errors: each is an exception whose wire body is `{"_tag": <name>, "message": ..., ...}`."""

from __future__ import annotations

import secrets
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model


class TaggedError(Exception):
    """Base of every declared failure. Subclasses declare extra string fields as annotations."""

    status: ClassVar[int] = 500
    fields: ClassVar[tuple[str, ...]] = ()
    optional: ClassVar[tuple[str, ...]] = ()
    body_model: ClassVar[type[BaseModel]]
    message: str

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        spec: dict[str, Any] = {
            "tag_": (Literal[cls.__name__], Field(cls.__name__, alias="_tag")),
            "message": (str, ...),
        }
        for name in cls.fields:
            spec[name] = (str, ...)
        for name in cls.optional:
            spec[name] = (str | None, None)
        cls.body_model = create_model(
            cls.__name__,
            __config__=ConfigDict(extra="forbid", populate_by_name=True, defer_build=True),
            **spec,
        )
        REGISTRY[cls.__name__] = cls

    def __init__(self, message: str | None = None, **values: Any) -> None:
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise TypeError(f"{type(self).__name__} needs {missing}")
        self.values = {k: v for k, v in values.items() if v is not None}
        self.message = message if message is not None else self.default_message()
        super().__init__(self.message)

    @property
    def tag(self) -> str:
        return type(self).__name__

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    def default_message(self) -> str:
        return self.tag

    def body(self) -> dict[str, Any]:
        return {"_tag": self.tag, "message": self.message, **self.values}

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> TaggedError:
        err = REGISTRY.get(str(body.get("_tag")))
        if err is None:
            raise KeyError(body.get("_tag"))
        values = {k: v for k, v in body.items() if k not in ("_tag", "message")}
        inst = err.__new__(err)
        inst.values = values
        inst.message = str(body.get("message", ""))
        Exception.__init__(inst, inst.message)
        return inst

    def __repr__(self) -> str:
        return f"{self.tag}({self.body()!r})"


REGISTRY: dict[str, type[TaggedError]] = {}


class InvalidRequestError(TaggedError):
    status = 400
    optional = ("kind", "field")

    def default_message(self) -> str:
        return "Invalid request"


class InvalidCursorError(TaggedError):
    status = 400

    def default_message(self) -> str:
        return "Invalid cursor"


class UnauthorizedError(TaggedError):
    status = 401

    def default_message(self) -> str:
        return "Unauthorized"


class ForbiddenError(TaggedError):
    """A request the server refuses whoever sends it: a Host or browser Origin that is not allowed."""

    status = 403

    def default_message(self) -> str:
        return "Forbidden"


class SessionNotFoundError(TaggedError):
    status = 404
    fields = ("sessionID",)

    def default_message(self) -> str:
        return f"Session not found: {self.values['sessionID']}"


class ProviderNotFoundError(TaggedError):
    status = 404
    fields = ("providerID",)

    def default_message(self) -> str:
        return f"Provider not found: {self.values['providerID']}"


class MessageNotFoundError(TaggedError):
    status = 404
    fields = ("sessionID", "messageID")

    def default_message(self) -> str:
        return f"Message not found: {self.values['messageID']}"


class StepContextNotFoundError(TaggedError):
    """An assistant message with no recorded Model Context: its Step sent no request (it failed before), or ran
    before this server recorded what Steps send."""

    status = 404
    fields = ("sessionID", "messageID")

    def default_message(self) -> str:
        return f"No Model Context recorded for {self.values['messageID']}"


class PermissionNotFoundError(TaggedError):
    status = 404
    fields = ("requestID",)

    def default_message(self) -> str:
        return f"Permission request not found: {self.values['requestID']}"


class QuestionNotFoundError(TaggedError):
    status = 404
    fields = ("requestID",)

    def default_message(self) -> str:
        return f"Question not found: {self.values['requestID']}"


class PtyNotFoundError(TaggedError):
    status = 404
    fields = ("ptyID",)

    def default_message(self) -> str:
        return f"PTY session not found: {self.values['ptyID']}"


class ConflictError(TaggedError):
    status = 409
    optional = ("resource",)

    def default_message(self) -> str:
        return "Conflict"


class SessionBusyError(TaggedError):
    status = 409
    fields = ("sessionID",)

    def default_message(self) -> str:
        return f"Session is busy: {self.values['sessionID']}"


class SessionExecutionFailedError(TaggedError):
    """The session's latest execution failed (`type` and `message` are its error, as the log's
    `session.execution.failed` has them): what `wait` answers when asked for the outcome."""

    status = 422
    fields = ("sessionID", "type")

    def default_message(self) -> str:
        return f"The execution of session {self.values['sessionID']} failed: {self.values['type']}"


class TooManyAttemptsError(TaggedError):
    """A client that sent too many wrong passwords in a row: no password of it is judged for `retryAfter` seconds."""

    status = 429
    fields = ("retryAfter",)

    def default_message(self) -> str:
        return f"Too many wrong passwords: try again in {self.values['retryAfter']} s"


class ServiceUnavailableError(TaggedError):
    status = 503
    optional = ("service",)

    def default_message(self) -> str:
        return "Service unavailable"


class NotFoundError(TaggedError):
    """No route has this path: what the API answers a path it does not serve (OpenCode's own server answers one
    with its web app; its SDK reads `message` of a JSON error body)."""

    status = 404
    fields = ("method", "path")

    def default_message(self) -> str:
        return f"No route for {self.values['method']} {self.values['path']}"


class UnknownError(TaggedError):
    """An unexpected server failure; `ref` correlates with the server log."""

    status = 500
    optional = ("ref",)

    def default_message(self) -> str:
        return "Unexpected server error. Check server logs for details."

    @classmethod
    def with_ref(cls) -> UnknownError:
        return cls(ref="err_" + secrets.token_hex(4))
