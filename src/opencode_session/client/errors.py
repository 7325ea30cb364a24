"""ClientError: the one infrastructure failure a client call raises besides the operation's declared TaggedErrors."""

from __future__ import annotations

from typing import Literal

Reason = Literal["Transport", "UnexpectedStatus", "UnsupportedContentType", "MalformedResponse"]

_DEFAULT_MESSAGES: dict[str, str] = {
    "Transport": "the request could not be completed",
    "UnexpectedStatus": "the server answered with a status the operation does not declare",
    "UnsupportedContentType": "the server answered a stream request with something other than text/event-stream",
    "MalformedResponse": "the server's response could not be decoded",
}


class ClientError(Exception):
    """Transport failure, undeclared status, wrong stream content type, or an undecodable response.

    `status` is the HTTP status when a response arrived; `cause` is the underlying exception, if any.
    """

    def __init__(
        self,
        reason: Reason,
        message: str | None = None,
        *,
        status: int | None = None,
        cause: BaseException | None = None,
    ) -> None:
        self.reason: Reason = reason
        self.status = status
        self.cause = cause
        text = message or _DEFAULT_MESSAGES[reason]
        if status is not None:
            text = f"{text} (HTTP {status})"
        super().__init__(text)

    def __repr__(self) -> str:
        return f"ClientError(reason={self.reason!r}, status={self.status!r}, message={str(self)!r})"
