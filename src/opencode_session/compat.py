"""Every place this program reaches into a dependency's private names, in one module below all layers (core and the
client both use it), each checked against the version it was written for: the first use of a patch refuses any other
installed version of its package with IncompatibleDependencyError, naming it, so an upgrade revisits these few lines
instead of silently losing what they do. Nothing is imported or read until a patch is first used."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

# The packages patched below and the versions the patches were written for (requirements.lock pins the same).
WRITTEN_FOR: Mapping[str, str] = {
    "httpx2": "2.16.2",  # AsyncHTTPTransport._pool
    "httpcore2": "2.16.2",  # AsyncConnectionPool._network_backend
    "openai": "3.51.0",  # the client's _client, _make_status_error_from_response, _custom_headers; AsyncStream(...)
    "anthropic": "2.10.0",  # the same, _credential_headers, and the auth_headers its client subclass overrides
}
_checked: set[str] = set()


class IncompatibleDependencyError(ImportError):
    """An installed package is not the version a patch of it was written for."""


def check_versions(expected: Mapping[str, str] = WRITTEN_FOR) -> None:
    """Raise IncompatibleDependencyError for the first package installed at another version (or not installed)."""
    for package, version in expected.items():
        try:
            installed = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            found = "is not installed" if installed is None else f"is installed at {installed}"
            raise IncompatibleDependencyError(
                f"{package} {found}, but opencode_session.compat patches {package} {version}: install "
                f"{package}=={version} (requirements.lock), or review those patches for the new version")


def _require(*packages: str) -> None:
    """Check the installed versions of `packages`, once each per process."""
    if not _checked.issuperset(packages):
        check_versions({package: WRITTEN_FOR[package] for package in packages})
        _checked.update(packages)


# --- httpx2 / httpcore2 ---------------------------------------------------------------------------------------


def set_network_backend(transport: Any, backend: Any) -> None:
    """Have an httpx2.AsyncHTTPTransport's connections made by `backend` (an httpcore2.AsyncNetworkBackend): httpx
    takes no backend argument, its connection pool does."""
    _require("httpx2", "httpcore2")
    pool = transport._pool
    if not hasattr(pool, "_network_backend"):
        raise IncompatibleDependencyError("httpcore2's connection pool no longer has a _network_backend")
    pool._network_backend = backend


# --- the openai and anthropic SDK clients ---------------------------------------------------------------------


def _sdk(client: Any) -> None:
    _require("anthropic" if type(client).__module__.startswith("anthropic") else "openai")


def sdk_http_client(client: Any) -> Any:
    """The httpx2.AsyncClient an SDK client sends through."""
    _sdk(client)
    return client._client


def sdk_status_error(client: Any, response: Any) -> Exception:
    """The SDK's own error for a failed HTTP response, as its `post` would raise it."""
    _sdk(client)
    error: Exception = client._make_status_error_from_response(response)
    return error


def sdk_stream(stream_cls: Any, client: Any, response: Any) -> Any:
    """The SDK's stream over a response sent outside its `post` (items decoded as JSON, not into models)."""
    _sdk(client)
    return stream_cls(cast_to=object, response=response, client=client)


def sdk_custom_headers(client: Any) -> Mapping[str, str]:
    """The custom headers an SDK client sends (after `pin_sdk_headers`: exactly the provider entry's)."""
    _sdk(client)
    headers: Mapping[str, str] = client._custom_headers
    return headers


def pin_sdk_headers(client: Any, headers: Mapping[str, str], *, drop_credential_headers: bool = False) -> None:
    """Send exactly `headers` as the client's custom headers: the SDKs merge in ones from the environment
    (OPENAI_CUSTOM_HEADERS, ANTHROPIC_CUSTOM_HEADERS, a profile's) whatever server they talk to. Anthropic's client
    also keeps credential headers of its own, which `drop_credential_headers` clears."""
    _sdk(client)
    client._custom_headers = dict(headers)
    if drop_credential_headers:
        client._credential_headers = {}


__all__ = ["WRITTEN_FOR", "IncompatibleDependencyError", "check_versions", "pin_sdk_headers", "sdk_custom_headers",
           "sdk_http_client", "sdk_status_error", "sdk_stream", "set_network_backend"]
