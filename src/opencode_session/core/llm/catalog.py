"""The model catalog: resolves a `ModelRef` (or the configured default) to a callable `ResolvedModel`,
lists what the configuration knows, hands out the protocol adapter for a model, and prices one Step's usage."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opencode_session.schema.common import ModelRef

from ..config import Config, ModelConfig, ProviderConfig, parse_model_string
from .errors import ModelNotFoundError, NoModelConfiguredError, ProviderError
from .model import ModelCost, Provider, ResolvedModel, Usage
from .openai_chat import DEFAULT_TIMEOUT, OPENAI_BASE_URL, OpenAIChatProvider

OPENAI_COMPATIBLE_NPM = "@ai-sdk/openai-compatible"
OPENAI_NPM = "@ai-sdk/openai"
# Packages whose wire protocol this runtime does not speak yet.
_UNSUPPORTED_NPM = {
    "@ai-sdk/anthropic": "Anthropic Messages",
    "@ai-sdk/google": "Google Gemini",
    "@ai-sdk/google-vertex": "Google Vertex",
    "@ai-sdk/amazon-bedrock": "Amazon Bedrock",
}


# What this runtime knows of OpenAI's chat models without a models.dev snapshot; a config's
# provider.openai.models declares more.
OPENAI_MODELS = frozenset({
    "gpt-3.5-turbo", "gpt-4", "gpt-4-turbo", "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano",
    "o1", "o1-mini", "o3", "o3-mini", "o3-pro", "o4-mini", "gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-5-codex",
    "gpt-5.1", "gpt-5.1-codex", "codex-mini-latest",
})


def model_declared(config: Config, ref: ModelRef) -> bool:
    """Whether the configuration's provider entry, or the built-in catalog, declares this model."""
    cfg = config.provider.get(ref.providerID)
    if cfg is not None and ref.id in cfg.models:
        return True
    builtin_openai = ref.providerID == "openai" and (cfg is None or cfg.npm in (None, OPENAI_NPM))
    return builtin_openai and ref.id in OPENAI_MODELS


def api_key_env_var(provider_id: str) -> str:
    """`my-llm` -> `MY_LLM_API_KEY`."""
    return re.sub(r"[^A-Za-z0-9]", "_", provider_id).upper() + "_API_KEY"


def api_key(provider_id: str, cfg: ProviderConfig | None, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The provider's key and where it came from: `options.apiKey`, else the first set variable of the provider's
    `env` list (as in OpenCode), else `<PROVIDER_ID>_API_KEY` (so `OPENAI_API_KEY` for `openai`, and only there)."""
    if cfg is not None and cfg.options.api_key:
        return cfg.options.api_key, "options.apiKey"
    for name in [*(cfg.env if cfg is not None else []), api_key_env_var(provider_id)]:
        if env.get(name):
            return env[name], name
    return None, None


_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|cookie", re.I)


def configured_secrets(config: Config, env: Mapping[str, str], model: ResolvedModel | None = None) -> list[str]:
    """Every credential the configuration could send to a provider: API keys from the config and from
    `<PROVIDER>_API_KEY` variables, and the values of credential-looking headers (for redacting error text)."""
    secrets = [v for k, v in env.items() if k.endswith("_API_KEY") and v]
    headers: list[Mapping[str, str]] = []
    for provider in config.provider.values():
        if provider.options.api_key:
            secrets.append(provider.options.api_key)
        headers.append(provider.options.headers or {})
    if model is not None:
        secrets += [model.api_key] if model.api_key else []
        headers.append(model.headers)
    secrets += [value for h in headers for name, value in h.items() if _CREDENTIAL_HEADER.search(name) and value]
    return secrets


def model_ref_from_string(value: str) -> ModelRef | None:
    parsed = parse_model_string(value)
    if parsed is None:
        return None
    return ModelRef(providerID=parsed[0], id=parsed[1])


def _cost(entry: ModelConfig | None) -> ModelCost | None:
    if entry is None or entry.cost is None:
        return None
    c = entry.cost
    return ModelCost(
        input=c.input or 0.0, output=c.output or 0.0, cache_read=c.cache_read or 0.0, cache_write=c.cache_write or 0.0
    )


def _timeout_seconds(value: Any) -> float | None:
    """OpenCode's `options.timeout` is milliseconds, or `false` for none. None here = adapter default."""
    if value is False:
        return 0.0  # sentinel: no timeout
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and value > 0:
        return float(value) / 1000.0
    return None


def _resolved(
    provider_id: str,
    model_id: str,
    cfg: ProviderConfig | None,
    *,
    base_url: str,
    api_key: str | None,
) -> ResolvedModel:
    entry = cfg.models.get(model_id) if cfg is not None else None
    limit = entry.limit if entry is not None else None
    return ResolvedModel(
        provider_id=provider_id,
        model_id=model_id,
        base_url=base_url.rstrip("/"),
        api_key=api_key or None,
        headers=dict(cfg.options.headers or {}) if cfg is not None else {},
        npm=cfg.npm if cfg is not None else None,
        context_limit=limit.context if limit is not None else None,
        output_limit=limit.output if limit is not None else None,
        input_limit=limit.input if limit is not None else None,
        cost=_cost(entry),
        api_model_id=entry.id if entry is not None and entry.id else None,
        timeout=_timeout_seconds(cfg.options.timeout) if cfg is not None else None,
    )


def resolve_model(config: Config, ref: ModelRef | None = None, env: Mapping[str, str] = os.environ) -> ResolvedModel:
    """The model to call: `ref`, else the config's `model`. Raises NoModelConfiguredError naming what is
    missing. Keys come from `options.apiKey`, else `<PROVIDER_ID>_API_KEY` (OPENAI_API_KEY for openai)."""
    if ref is None:
        if not config.model:
            raise NoModelConfiguredError("No model is configured")
        ref = model_ref_from_string(config.model)
        if ref is None:
            raise NoModelConfiguredError(
                f"The configured model {config.model!r} is not of the form \"provider/model\""
            )
    provider_id, model_id = ref.providerID, ref.id
    cfg = config.provider.get(provider_id)
    npm = cfg.npm if cfg is not None else None
    base_url = cfg.options.base_url if cfg is not None else None
    key_var = api_key_env_var(provider_id)
    key = api_key(provider_id, cfg, env)[0]

    if npm in _UNSUPPORTED_NPM:
        raise NoModelConfiguredError(
            f"Provider {provider_id!r} uses {npm} ({_UNSUPPORTED_NPM[npm]}), which is not supported yet; "
            "use an OpenAI-compatible endpoint instead"
        )
    if provider_id == "openai" and (npm is None or npm == OPENAI_NPM):
        if not key:
            raise NoModelConfiguredError(
                f"Model openai/{model_id} needs an API key: set the {key_var} environment variable "
                "or provider.openai.options.apiKey"
            )
        if not model_declared(config, ref):
            raise ModelNotFoundError(provider_id, model_id)
        return _resolved(provider_id, model_id, cfg, base_url=base_url or OPENAI_BASE_URL, api_key=key)
    if cfg is None:
        if provider_id == "anthropic":
            raise NoModelConfiguredError(
                "Provider 'anthropic' is not supported yet; use an OpenAI-compatible endpoint instead"
            )
        raise NoModelConfiguredError(
            f"Provider {provider_id!r} (from model {provider_id}/{model_id}) is not configured: "
            f"add provider.{provider_id} with npm, options.baseURL and models to opencode.json"
        )
    if not base_url:
        if npm == OPENAI_COMPATIBLE_NPM:
            raise NoModelConfiguredError(
                f"Provider {provider_id!r} is missing options.baseURL (the server's /v1 address)"
            )
        if provider_id == "anthropic":
            raise NoModelConfiguredError(
                "Provider 'anthropic' is not supported yet; use an OpenAI-compatible endpoint instead"
            )
        raise NoModelConfiguredError(
            f"Provider {provider_id!r} is not usable: set its npm to {OPENAI_COMPATIBLE_NPM!r} "
            "and options.baseURL"
        )
    if not model_declared(config, ref):
        raise ModelNotFoundError(provider_id, model_id)
    return _resolved(provider_id, model_id, cfg, base_url=base_url, api_key=key)


@dataclass(frozen=True)
class CatalogModel:
    ref: str  # "provider/model"
    name: str | None = None
    context: int | None = None
    output: int | None = None


@dataclass(frozen=True)
class CatalogProvider:
    """One provider as the configuration declares it: its models, and where its key comes from (None: no key
    found, which a local server may not need)."""

    id: str
    npm: str | None
    base_url: str | None
    credentials: str | None
    models: tuple[CatalogModel, ...]
    problem: str | None = None  # why it cannot be called, if it cannot


def catalog(config: Config, env: Mapping[str, str] = os.environ) -> list[CatalogProvider]:
    """Every provider the configuration declares, plus the built-in `openai`, in name order."""
    ids = sorted({*config.provider, "openai"})
    out = []
    for provider_id in ids:
        cfg = config.provider.get(provider_id)
        declared = cfg.models if cfg else {}
        models = tuple(
            CatalogModel(f"{provider_id}/{model_id}", entry.name, entry.limit.context if entry.limit else None,
                         entry.limit.output if entry.limit else None)
            for model_id, entry in sorted(declared.items()))
        if provider_id == "openai":  # the built-in provider also knows OpenAI's own models
            models += tuple(CatalogModel(f"openai/{m}") for m in sorted(OPENAI_MODELS - set(declared)))
        problem = None
        try:
            model_id = models[0].ref.split("/", 1)[1] if models else "<model>"
            resolve_model(config, ModelRef(providerID=provider_id, id=model_id), env)
        except ProviderError as unusable:
            problem = getattr(unusable, "detail", None) or unusable.message
        out.append(CatalogProvider(
            id=provider_id, npm=cfg.npm if cfg else None,
            base_url=(cfg.options.base_url if cfg else None) or (OPENAI_BASE_URL if provider_id == "openai" else None),
            credentials=api_key(provider_id, cfg, env)[1], models=models, problem=problem))
    return out


# ---------------------------------------------------------------------------------------------
# Adapters. The SDK's connection pool belongs to the event loop that first used it, so clients are
# cached per running loop as well as per endpoint and credentials.

_ClientKey = tuple[str, str | None, tuple[tuple[str, str], ...], float | None]
_providers: weakref.WeakKeyDictionary[Any, dict[_ClientKey, OpenAIChatProvider]] = weakref.WeakKeyDictionary()
_no_loop: dict[_ClientKey, OpenAIChatProvider] = {}
_lock = threading.Lock()


def provider_for(model: ResolvedModel) -> Provider:
    key: _ClientKey = (model.base_url, model.api_key, tuple(sorted(model.headers.items())), model.timeout)
    try:
        loop: Any = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    with _lock:
        cache = _no_loop if loop is None else _providers.setdefault(loop, {})
        provider = cache.get(key)
        if provider is None:
            if model.timeout is None:
                timeout: Any = DEFAULT_TIMEOUT
            else:
                timeout = None if model.timeout == 0 else model.timeout
            provider = OpenAIChatProvider(model.base_url, model.api_key, headers=model.headers, timeout=timeout)
            cache[key] = provider
    return provider


def step_cost(usage: Usage, cost: ModelCost | None) -> float:
    """USD for one Step: non-cached input, output plus reasoning, cache reads and writes, per million."""
    if cost is None:
        return 0.0
    total = (
        usage.input * cost.input
        + (usage.output + usage.reasoning) * cost.output
        + usage.cache_read * cost.cache_read
        + usage.cache_write * cost.cache_write
    )
    return total / 1_000_000


__all__ = [
    "CatalogModel",
    "CatalogProvider",
    "ModelCost",
    "OPENAI_COMPATIBLE_NPM",
    "ResolvedModel",
    "api_key",
    "api_key_env_var",
    "catalog",
    "model_declared",
    "model_ref_from_string",
    "provider_for",
    "resolve_model",
    "step_cost",
]
