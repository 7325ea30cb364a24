"""The model catalog: the bundled OpenAI and Anthropic models (models.json, models.dev's shape) overridden and
extended by opencode.json `provider.*`; resolves a `ModelRef` (or the configured default, and a variant) to a
callable `ResolvedModel` with its protocol, limits, prices and capabilities, lists what is known, and prices a Step."""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from opencode_session.schema.common import ModelRef

from ..config import Config, ModelConfig, ProviderConfig, merge_config, parse_model_string
from ..redaction import userinfo_secrets, without_userinfo
from .errors import ModelNotFoundError, NoModelConfiguredError, ProviderError
from .model import Capabilities, ModelCost, ResolvedModel, Usage
from .options import PartitionedOptions, partition

# The provider entry's `npm` picks the wire protocol, as in OpenCode: the adapter registered for that package.
from .providers import ANTHROPIC_NPM, OPENAI_COMPATIBLE_NPM, OPENAI_NPM, adapter_packages, protocol_of_npm

# Packages whose wire protocol this runtime does not speak.
_UNSUPPORTED_NPM = {
    "@ai-sdk/google": "Google Gemini",
    "@ai-sdk/google-vertex": "Google Vertex",
    "@ai-sdk/amazon-bedrock": "Amazon Bedrock",
}
DEFAULT_VARIANT = "default"


@functools.cache
def bundled() -> Mapping[str, Mapping[str, Any]]:
    """The bundled catalog, by provider ID (read once)."""
    text = resources.files(__package__).joinpath("models.json").read_text(encoding="utf-8")
    data: dict[str, Mapping[str, Any]] = json.loads(text)
    return data


def provider_entry(config: Config, provider_id: str) -> ProviderConfig | None:
    """The provider as the bundled catalog knows it with the configuration's entry merged over it."""
    base = bundled().get(provider_id)
    cfg = config.provider.get(provider_id)
    if base is None:
        return cfg
    if cfg is None:
        return ProviderConfig.model_validate(base)
    # a configured npm that is not the bundled one makes it another provider: the bundled models do not apply
    if cfg.npm not in (None, base.get("npm")):
        return cfg
    return ProviderConfig.model_validate(merge_config(dict(base), cfg.model_dump(by_alias=True, exclude_unset=True)))


def undeclared(config: Config, ref: ModelRef) -> ProviderError | None:
    """Why the configuration's provider entry and the bundled catalog do not declare this model and variant, or
    None when they do."""
    provider = provider_entry(config, ref.providerID)
    entry = provider.models.get(ref.id) if provider is not None else None
    if provider is None or entry is None:
        return ModelNotFoundError(ref.providerID, ref.id)
    if ref.variant and ref.variant != DEFAULT_VARIANT:
        known = variants(provider, entry)
        if ref.variant not in known:
            return VariantNotFoundError(ref, sorted(known))
    return None


def api_key_env_var(provider_id: str) -> str:
    """`my-llm` -> `MY_LLM_API_KEY`."""
    return re.sub(r"[^A-Za-z0-9]", "_", provider_id).upper() + "_API_KEY"


def api_key(provider_id: str, cfg: ProviderConfig | None, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The provider's key and where it came from: `options.apiKey`, else the first set variable of the provider's
    `env` list (as in OpenCode), else `<PROVIDER_ID>_API_KEY` (so `OPENAI_API_KEY` for `openai`)."""
    if cfg is not None and cfg.options.api_key:
        return cfg.options.api_key, "options.apiKey"
    for name in [*(cfg.env if cfg is not None else []), api_key_env_var(provider_id)]:
        if env.get(name):
            return env[name], name
    return None, None


_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|cookie", re.I)


def is_credential_header(name: str) -> bool:
    return bool(_CREDENTIAL_HEADER.search(name))


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
    secrets += [value for h in headers for name, value in h.items() if is_credential_header(name) and value]
    secrets += [s for provider in config.provider.values()
                for s in userinfo_secrets(provider.options.base_url or provider.api)]
    return secrets


def model_ref_from_string(value: str) -> ModelRef | None:
    parsed = parse_model_string(value)
    if parsed is None:
        return None
    return ModelRef(providerID=parsed[0], id=parsed[1])


def _cost(entry: ModelConfig) -> ModelCost | None:
    if entry.cost is None:
        return None
    c = entry.cost
    return ModelCost(
        input=c.input or 0.0, output=c.output or 0.0, cache_read=c.cache_read or 0.0, cache_write=c.cache_write or 0.0
    )


def capabilities(entry: ModelConfig) -> Capabilities:
    modalities = entry.modalities
    return Capabilities(
        tools=entry.tool_call if entry.tool_call is not None else True,
        reasoning=bool(entry.reasoning),
        attachments=bool(entry.attachment),
        temperature=entry.temperature if entry.temperature is not None else True,
        input=tuple(modalities.input) if modalities is not None and modalities.input else ("text",),
        output=tuple(modalities.output) if modalities is not None and modalities.output else ("text",),
    )


def variants(provider: ProviderConfig, entry: ModelConfig) -> dict[str, dict[str, Any]]:
    """The model's variants: the catalog's reasoning variants for a reasoning model, then the entry's own (an entry
    with `disabled: true` removes one)."""
    template = (provider.model_extra or {}).get("reasoning_variants") if entry.reasoning else None
    merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (template or {}).items()}
    for name, value in (entry.variants or {}).items():
        merged[name] = {**merged.get(name, {}), **value}
    return {name: {k: v for k, v in value.items() if k != "disabled"}
            for name, value in merged.items() if not value.get("disabled")}


def _timeout_seconds(value: Any) -> float | None:
    """OpenCode's `options.timeout` is milliseconds, or `false` for none. None here = adapter default."""
    if value is False:
        return 0.0  # sentinel: no timeout
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and value > 0:
        return float(value) / 1000.0
    return None


class VariantNotFoundError(ProviderError):
    error_type = ModelNotFoundError.error_type

    def __init__(self, ref: ModelRef, known: list[str]) -> None:
        names = ", ".join(known) if known else "none"
        super().__init__(f"Model {ref.providerID}/{ref.id} has no variant {ref.variant!r} (variants: {names})")


def _unusable(provider_id: str, model_id: str, cfg: ProviderConfig | None, base_url: str | None) -> str | None:
    """Why the provider cannot be called at all, or None."""
    npm = cfg.npm or OPENAI_COMPATIBLE_NPM if cfg is not None else None
    if cfg is None:
        return (f"Provider {provider_id!r} (from model {provider_id}/{model_id}) is not configured: "
                f"add provider.{provider_id} with npm, options.baseURL and models to opencode.json")
    if npm in _UNSUPPORTED_NPM:
        return (f"Provider {provider_id!r} uses {npm} ({_UNSUPPORTED_NPM[npm]}), which is not supported yet; "
                "use an OpenAI-compatible endpoint instead")
    if npm is None or protocol_of_npm(npm) is None:
        *others, last = [repr(known) for known in adapter_packages()]
        return f"Provider {provider_id!r} is not usable: set its npm to {', '.join(others)} or {last}"
    if not base_url:
        return f"Provider {provider_id!r} is missing options.baseURL (the server's /v1 address)"
    return None


def resolve_model(config: Config, ref: ModelRef | None = None, env: Mapping[str, str] = os.environ) -> ResolvedModel:
    """The model to call: `ref`, else the config's `model`, with its variant applied. Raises NoModelConfiguredError
    naming what is missing, ModelNotFoundError for a model neither the catalog nor the config declares."""
    if ref is None:
        if not config.model:
            raise NoModelConfiguredError("No model is configured")
        ref = model_ref_from_string(config.model)
        if ref is None:
            raise NoModelConfiguredError(
                f"The configured model {config.model!r} is not of the form \"provider/model\""
            )
    provider_id, model_id = ref.providerID, ref.id
    cfg = provider_entry(config, provider_id)
    base_url = (cfg.options.base_url or cfg.api) if cfg is not None else None
    problem = _unusable(provider_id, model_id, cfg, base_url)
    if problem is not None:
        raise NoModelConfiguredError(problem)
    protocol = protocol_of_npm(cfg.npm or OPENAI_COMPATIBLE_NPM) if cfg is not None else None
    assert cfg is not None and base_url is not None and protocol is not None
    key = api_key(provider_id, cfg, env)[0]
    if not key and provider_id in bundled() and cfg.options.base_url is None:
        raise NoModelConfiguredError(
            f"Model {provider_id}/{model_id} needs an API key: set the {api_key_env_var(provider_id)} environment "
            f"variable or provider.{provider_id}.options.apiKey"
        )
    entry = cfg.models.get(model_id)
    if entry is None:
        raise ModelNotFoundError(provider_id, model_id)
    chosen = partition(entry.options)
    known = variants(cfg, entry)
    if ref.variant and ref.variant != DEFAULT_VARIANT:
        if ref.variant not in known:
            raise VariantNotFoundError(ref, sorted(known))
        chosen = chosen.then(partition(known[ref.variant]))
    return _resolved(provider_id, model_id, cfg, entry, chosen, base_url=base_url, api_key=key,
                     variant=ref.variant, protocol=protocol)


def _resolved(provider_id: str, model_id: str, cfg: ProviderConfig, entry: ModelConfig, chosen: PartitionedOptions,
              *, base_url: str, api_key: str | None, variant: str | None, protocol: str) -> ResolvedModel:
    limit = entry.limit
    npm = cfg.npm or OPENAI_COMPATIBLE_NPM  # a custom provider without a package speaks Chat Completions
    return ResolvedModel(
        provider_id=provider_id,
        model_id=model_id,
        base_url=base_url.rstrip("/"),
        api_key=api_key or None,
        headers=dict(cfg.options.headers or {}),
        npm=npm,
        context_limit=limit.context if limit is not None else None,
        output_limit=limit.output if limit is not None else None,
        input_limit=limit.input if limit is not None else None,
        cost=_cost(entry),
        api_model_id=entry.id or None,
        timeout=_timeout_seconds(cfg.options.timeout),
        protocol=protocol,
        capabilities=capabilities(entry),
        options=chosen.options,
        controls=chosen.controls,
        body=chosen.body,
        variant=variant,
    )


# ---------------------------------------------------------------------------------------------
# Listing.


@dataclass(frozen=True)
class CatalogModel:
    ref: str  # "provider/model"
    name: str | None = None
    context: int | None = None
    output: int | None = None
    input: int | None = None
    family: str | None = None
    released: int = 0  # epoch ms of the release date, 0 when unknown
    status: str | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    cost: ModelCost | None = None
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)  # the model's own options (no credentials among them)
    api_id: str | None = None  # the server's name for the model, when the catalog's is an alias


@dataclass(frozen=True)
class CatalogProvider:
    """One provider: its models, and where its key comes from (None: no key found, which a local server may not
    need). Never holds the key itself."""

    id: str
    npm: str | None
    base_url: str | None
    credentials: str | None
    models: tuple[CatalogModel, ...]
    problem: str | None = None  # why it cannot be called, if it cannot
    name: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # the configured headers that are not credentials


def _released(value: str | None) -> int:
    if not value:
        return 0
    try:
        day = datetime.date.fromisoformat(value)
    except ValueError:
        return 0
    return int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp() * 1000)


def _catalog_model(provider_id: str, cfg: ProviderConfig, model_id: str, entry: ModelConfig) -> CatalogModel:
    limit = entry.limit
    return CatalogModel(
        ref=f"{provider_id}/{model_id}", name=entry.name,
        context=limit.context if limit else None, output=limit.output if limit else None,
        input=limit.input if limit else None, family=entry.family, released=_released(entry.release_date),
        status=entry.status, capabilities=capabilities(entry), cost=_cost(entry), variants=variants(cfg, entry),
        body=dict(entry.options or {}), api_id=entry.id)


def catalog(config: Config, env: Mapping[str, str] = os.environ) -> list[CatalogProvider]:
    """Every provider the bundled catalog or the configuration declares, in name order."""
    out = []
    for provider_id in sorted({*config.provider, *bundled()}):
        cfg = provider_entry(config, provider_id)
        assert cfg is not None
        models = tuple(_catalog_model(provider_id, cfg, model_id, entry)
                       for model_id, entry in sorted(cfg.models.items()))
        problem = None
        try:
            model_id = models[0].ref.split("/", 1)[1] if models else "<model>"
            resolve_model(config, ModelRef(providerID=provider_id, id=model_id), env)
        except ProviderError as unusable:
            problem = getattr(unusable, "detail", None) or unusable.message
        out.append(CatalogProvider(
            id=provider_id, npm=cfg.npm, base_url=without_userinfo(cfg.options.base_url or cfg.api),
            credentials=api_key(provider_id, cfg, env)[1], models=models, problem=problem, name=cfg.name,
            headers={k: v for k, v in (cfg.options.headers or {}).items() if not is_credential_header(k)}))
    return out


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
    "ANTHROPIC_NPM",
    "CatalogModel",
    "CatalogProvider",
    "ModelCost",
    "OPENAI_COMPATIBLE_NPM",
    "OPENAI_NPM",
    "ResolvedModel",
    "VariantNotFoundError",
    "api_key",
    "api_key_env_var",
    "bundled",
    "capabilities",
    "catalog",
    "configured_secrets",
    "is_credential_header",
    "undeclared",
    "model_ref_from_string",
    "provider_entry",
    "resolve_model",
    "step_cost",
    "variants",
]
