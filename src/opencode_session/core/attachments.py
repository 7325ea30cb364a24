"""Prompt attachments under the Location authority: which local file a `files[].uri` names, whether the Session may
read it (checked when the prompt is admitted, and again whenever a Step reads it), and its bytes, read off the event
loop, regular files only, bounded in size."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..schema.errors import InvalidRequestError
from ..schema.prompt import PromptFileAttachment
from .agents import AgentNotFoundError, resolve_agent
from .config import ConfigError, ConfigSource
from .llm.model import FilePart, LLMMessage, TextPart, UserMessage
from .location import resolve_location
from .permission import DEFAULT_RULES, AccessRefused, Authority, effective_rules, read_regular_file

# One attachment, as OpenCode bounds inline media; and all the local attachments one request carries.
MAX_ATTACHMENT_BYTES = 5 * 1024 * 1024
MAX_REQUEST_ATTACHMENT_BYTES = 20 * 1024 * 1024


class AttachmentError(Exception):
    """A local attachment the Session cannot read; the message says why."""


def _is_local(uri: str) -> bool:
    return urlsplit(uri).scheme in ("file", "")


def local_path(uri: str) -> str | None:
    """The path a local attachment names (a `file:` URI, or a plain path taken in the Location); None for inline
    `data:` URIs and remote URLs, which are not read from this machine's disk."""
    if not _is_local(uri):
        return None
    parts = urlsplit(uri)
    if parts.scheme == "":
        return uri
    if parts.netloc not in ("", "localhost"):
        raise AttachmentError(f"the file URI names another host: {parts.netloc}")
    return unquote(parts.path)  # what url2pathname does on POSIX, without loading urllib.request (~14 ms)


def check_attachment(authority: Authority, uri: str) -> Path | None:
    """The path of a local attachment the Session may read: allowed by the authority, a regular file, within the
    size bound. None for attachments that are not local files. Raises AttachmentError."""
    raw = local_path(uri)
    if raw is None:
        return None
    try:
        path = authority.check("read", raw)
        info = path.stat()
    except AccessRefused as refused:
        raise AttachmentError(refused.message) from None
    except OSError as exc:
        raise AttachmentError(f"cannot read {raw}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise AttachmentError(f"not a regular file: {path}")
    if info.st_size > MAX_ATTACHMENT_BYTES:
        raise AttachmentError(f"{path} is {info.st_size} bytes; attachments may have at most {MAX_ATTACHMENT_BYTES}")
    return path


def read_attachment(authority: Authority, uri: str) -> bytes:
    """The bytes of a local attachment, re-checked now (the file may have changed since admission)."""
    path = check_attachment(authority, uri)
    if path is None:
        raise AttachmentError(f"not a local file: {uri}")
    return read_regular_file(path, MAX_ATTACHMENT_BYTES, AttachmentError)


def admission_authority(directory: str, agent: str | None, configs: ConfigSource,
                        env: Mapping[str, str]) -> Authority:
    """The authority a prompt for a Session in `directory` with `agent` is admitted under (blocking: it reads the
    configuration there). A broken config falls back to the default rules here: the drain then fails on it, and
    reading re-checks under the real rules anyway."""
    location = resolve_location(directory)
    try:
        config = configs.at_sync(location)
        rules = effective_rules(config.permission, resolve_agent(config, agent).permission, env)
    except (ConfigError, AgentNotFoundError):
        rules = DEFAULT_RULES
    return Authority(location.directory, rules)


def check_prompt_files(files: list[PromptFileAttachment], authority: Authority) -> None:
    """Every local attachment of a prompt is one the Session may read now, else a 400 naming the first that is not."""
    for index, attachment in enumerate(files):
        try:
            check_attachment(authority, attachment.uri)
        except AttachmentError as bad:
            field = f"prompt.files.{index}.uri"
            raise InvalidRequestError(f"Invalid body: {field}: attachment {attachment.uri!r}: {bad}", kind="body",
                                      field=field) from None


def _unread_local(part: object) -> bool:
    return isinstance(part, FilePart) and part.data is None and _is_local(part.uri)


def needs_loading(messages: list[LLMMessage]) -> bool:
    """Whether any local attachment still has to be read (a plain loop: it runs over all history every Step)."""
    for message in messages:
        if type(message) is UserMessage:
            for part in message.parts:
                if type(part) is FilePart and _unread_local(part):
                    return True
    return False


def load_attachments(messages: list[LLMMessage], authority: Authority) -> list[LLMMessage]:
    """`messages` with each local attachment's bytes loaded (the newest first, within the request's total bound);
    one that cannot be read becomes a note the model reads instead. Blocking: call it in a worker thread."""
    budget = MAX_REQUEST_ATTACHMENT_BYTES
    out = list(messages)
    for index in reversed(range(len(out))):
        message = out[index]
        if not (isinstance(message, UserMessage) and any(_unread_local(p) for p in message.parts)):
            continue
        parts: list[TextPart | FilePart] = []
        for part in message.parts:
            if not _unread_local(part):
                parts.append(part)
                continue
            assert isinstance(part, FilePart)
            label = part.name or os.path.basename(urlsplit(part.uri).path) or "file"
            try:
                data = read_attachment(authority, part.uri)
                if len(data) > budget:
                    raise AttachmentError("this request's attachments already fill their size bound")
            except AttachmentError as bad:
                parts.append(TextPart(f"[Attached file {label} could not be read: {bad}]"))
                continue
            budget -= len(data)
            parts.append(replace(part, data=data))
        out[index] = replace(message, parts=parts)
    return out
