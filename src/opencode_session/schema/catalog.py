"""The public shapes of the model catalog: models (limits, costs, capabilities, variants) and providers, as the
model and provider routes answer them. Credentials never appear in them."""

from __future__ import annotations

from typing import Any, Literal

from .base import Struct
from .location import LocationInfo


class ModelApiAISDK(Struct):
    """How the model is called: the provider package (which picks the wire protocol), the server's name for the
    model and its address."""

    id: str
    type: Literal["aisdk"]
    package: str
    url: str | None = None
    settings: dict[str, Any] | None = None


class ModelApiNative(Struct):
    id: str
    type: Literal["native"]
    url: str | None = None
    settings: dict[str, Any]


ModelApi = ModelApiAISDK | ModelApiNative


class ModelCapabilities(Struct):
    tools: bool
    input: list[str]
    output: list[str]


class ModelRequest(Struct):
    headers: dict[str, str]
    body: dict[str, Any]
    variant: str | None = None


class ModelVariant(Struct):
    id: str
    headers: dict[str, str]
    body: dict[str, Any]


class ModelTime(Struct):
    released: float


class CostCache(Struct):
    read: float
    write: float


class CostTier(Struct):
    type: Literal["context"]
    size: int


class ModelCost(Struct):
    """USD per million tokens (`tier`: the price from a context size on)."""

    tier: CostTier | None = None
    input: float
    output: float
    cache: CostCache


class ModelLimit(Struct):
    context: int
    input: int | None = None
    output: int


class ModelV2Info(Struct):
    id: str
    providerID: str
    family: str | None = None
    name: str
    api: ModelApi
    capabilities: ModelCapabilities
    request: ModelRequest
    variants: list[ModelVariant]
    time: ModelTime
    cost: list[ModelCost]
    status: Literal["alpha", "beta", "deprecated", "active"]
    enabled: bool
    limit: ModelLimit


class ProviderAISDK(Struct):
    type: Literal["aisdk"]
    package: str
    url: str | None = None
    settings: dict[str, Any] | None = None


class ProviderNative(Struct):
    type: Literal["native"]
    url: str | None = None
    settings: dict[str, Any]


class ProviderRequest(Struct):
    headers: dict[str, str]
    body: dict[str, Any]


class ProviderV2Info(Struct):
    id: str
    integrationID: str | None = None
    name: str
    disabled: bool | None = None  # true when it cannot be called (no key, no address, an unsupported package)
    api: ProviderAISDK | ProviderNative
    request: ProviderRequest


class ModelList(Struct):
    location: LocationInfo
    data: list[ModelV2Info]


class ProviderList(Struct):
    location: LocationInfo
    data: list[ProviderV2Info]


class ProviderAnswer(Struct):
    location: LocationInfo
    data: ProviderV2Info


__all__ = [
    "CostCache",
    "ModelApi",
    "ModelApiAISDK",
    "ModelApiNative",
    "CostTier",
    "ModelCapabilities",
    "ModelCost",
    "ModelLimit",
    "ModelList",
    "ModelRequest",
    "ModelTime",
    "ModelV2Info",
    "ModelVariant",
    "ProviderAISDK",
    "ProviderAnswer",
    "ProviderList",
    "ProviderNative",
    "ProviderRequest",
    "ProviderV2Info",
]
