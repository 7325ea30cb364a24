"""Provider connections: each integration (a provider this runtime can reach), how it can be connected (a key, an
environment variable, OAuth) and which connections it has. Credentials themselves never appear here."""

from __future__ import annotations

from typing import Literal

from .base import Struct


class IntegrationWhen(Struct):
    key: str
    op: Literal["eq", "neq"]
    value: str


class IntegrationTextPrompt(Struct):
    type: Literal["text"]
    key: str
    message: str
    placeholder: str | None = None
    when: IntegrationWhen | None = None


class IntegrationSelectOption(Struct):
    label: str
    value: str
    hint: str | None = None


class IntegrationSelectPrompt(Struct):
    type: Literal["select"]
    key: str
    message: str
    options: list[IntegrationSelectOption]
    when: IntegrationWhen | None = None


class IntegrationOAuthMethod(Struct):
    id: str
    type: Literal["oauth"]
    label: str
    prompts: list[IntegrationTextPrompt | IntegrationSelectPrompt] | None = None


class IntegrationKeyMethod(Struct):
    type: Literal["key"]
    label: str | None = None


class IntegrationEnvMethod(Struct):
    type: Literal["env"]
    names: list[str]


IntegrationMethod = IntegrationOAuthMethod | IntegrationKeyMethod | IntegrationEnvMethod


class ConnectionCredentialInfo(Struct):
    type: Literal["credential"]
    id: str
    label: str


class ConnectionEnvInfo(Struct):
    type: Literal["env"]
    name: str


ConnectionInfo = ConnectionCredentialInfo | ConnectionEnvInfo


class IntegrationInfo(Struct):
    id: str
    name: str
    methods: list[IntegrationMethod]
    connections: list[ConnectionInfo]


class AttemptTime(Struct):
    created: float  # epoch ms
    expires: float


class IntegrationAttempt(Struct):
    attemptID: str
    url: str
    instructions: str
    mode: Literal["auto", "code"]
    time: AttemptTime


class AttemptPending(Struct):
    status: Literal["pending"]
    time: AttemptTime


class AttemptComplete(Struct):
    status: Literal["complete"]
    time: AttemptTime


class AttemptFailed(Struct):
    status: Literal["failed"]
    message: str
    time: AttemptTime


class AttemptExpired(Struct):
    status: Literal["expired"]
    time: AttemptTime


IntegrationAttemptStatus = AttemptPending | AttemptComplete | AttemptFailed | AttemptExpired
