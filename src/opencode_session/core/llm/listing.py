"""The catalog in its public shapes (the model and provider routes): models newest first, providers by ID. Keys and
credential-looking headers are left out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opencode_session.schema import catalog as pub

from ..config import Config
from .catalog import OPENAI_COMPATIBLE_NPM, CatalogModel, CatalogProvider, catalog, is_credential_header

_STATUSES = ("alpha", "beta", "deprecated", "active")


def _public(options: Mapping[str, Any]) -> dict[str, Any]:
    """An option object without anything that looks like a credential (an `apiKey`, a header value)."""
    return {k: v for k, v in options.items() if not is_credential_header(k)}


def _model(provider: CatalogProvider, model: CatalogModel) -> pub.ModelV2Info:
    model_id = model.ref.split("/", 1)[1]
    c = model.capabilities
    cost = [] if model.cost is None else [pub.ModelCost(
        input=model.cost.input, output=model.cost.output,
        cache=pub.CostCache(read=model.cost.cache_read, write=model.cost.cache_write))]
    return pub.ModelV2Info(
        id=model_id, providerID=provider.id, family=model.family, name=model.name or model_id,
        api=pub.ModelApiAISDK(type="aisdk", id=model.api_id or model_id, package=provider.npm or OPENAI_COMPATIBLE_NPM,
                         url=provider.base_url),
        capabilities=pub.ModelCapabilities(tools=c.tools, input=list(c.input), output=list(c.output)),
        request=pub.ModelRequest(headers=dict(provider.headers), body=_public(model.body)),
        variants=[pub.ModelVariant(id=name, headers={}, body=_public(body)) for name, body in model.variants.items()],
        time=pub.ModelTime(released=model.released), cost=cost,
        status=model.status if model.status in _STATUSES else "active",  # type: ignore[arg-type]
        enabled=provider.problem is None,
        limit=pub.ModelLimit(context=model.context or 0, input=model.input, output=model.output or 0),
    )


def _provider(provider: CatalogProvider) -> pub.ProviderV2Info:
    return pub.ProviderV2Info(
        id=provider.id, name=provider.name or provider.id, disabled=provider.problem is not None,
        api=pub.ProviderAISDK(type="aisdk", package=provider.npm or OPENAI_COMPATIBLE_NPM, url=provider.base_url),
        request=pub.ProviderRequest(headers=dict(provider.headers), body={}),
    )


def models(config: Config, env: Mapping[str, str]) -> list[pub.ModelV2Info]:
    listed = [_model(p, m) for p in catalog(config, env) for m in p.models]
    return sorted(listed, key=lambda m: (-m.time.released, m.providerID, m.id))


def providers(config: Config, env: Mapping[str, str]) -> list[pub.ProviderV2Info]:
    return [_provider(p) for p in catalog(config, env)]


__all__ = ["models", "providers"]
