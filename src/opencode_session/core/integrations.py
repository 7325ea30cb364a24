"""Provider connections: which providers this runtime can reach (the bundled catalog's and the configured), how
each can be connected (a key; the environment variables it reads; OAuth where its configuration declares an
authorization endpoint) and which connections it has; connecting with a key; and OAuth attempts (authorization
code with PKCE, `code` mode: the user brings the code back) from start to a stored credential."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from ..schema.errors import InvalidRequestError
from ..schema.ids import ascending
from ..schema.integration import (
    AttemptComplete,
    AttemptExpired,
    AttemptFailed,
    AttemptPending,
    AttemptTime,
    ConnectionCredentialInfo,
    ConnectionEnvInfo,
    IntegrationAttempt,
    IntegrationAttemptStatus,
    IntegrationEnvMethod,
    IntegrationInfo,
    IntegrationKeyMethod,
    IntegrationOAuthMethod,
)
from .config import Config, ProviderConfig
from .credentials import CredentialStore
from .llm.catalog import api_key_env_var, bundled, provider_entry
from .store import now_ms

ATTEMPT_LIFETIME_MS = 10 * 60 * 1000
TERMINAL_RETENTION_MS = 60 * 1000  # a settled attempt stays visible this long
OAUTH_METHOD = "oauth"
TOKEN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class OAuthSettings:
    """`provider.<id>.oauth` in opencode.json: the endpoints and client of the provider's authorization server."""

    authorize: str
    token: str
    client_id: str
    redirect: str
    scopes: tuple[str, ...] = ()
    label: str = "Sign in"


def oauth_settings(cfg: ProviderConfig | None) -> OAuthSettings | None:
    raw = (cfg.model_extra or {}).get("oauth") if cfg is not None else None
    if not isinstance(raw, Mapping):
        return None
    authorize, token, client = raw.get("authorize"), raw.get("token"), raw.get("client_id")
    if not all(isinstance(v, str) and v for v in (authorize, token, client)):
        return None
    scopes = raw.get("scopes")
    redirect, label = raw.get("redirect"), raw.get("label")
    return OAuthSettings(authorize=str(authorize), token=str(token), client_id=str(client),
                         redirect=redirect if isinstance(redirect, str) else "urn:ietf:wg:oauth:2.0:oob",
                         scopes=tuple(s for s in scopes if isinstance(s, str)) if isinstance(scopes, list) else (),
                         label=label if isinstance(label, str) else "Sign in")


def _bad(message: str, field_name: str) -> InvalidRequestError:
    return InvalidRequestError(message, kind="integration", field=field_name)


def _code_and_state(pasted: str) -> tuple[str, str | None]:
    """The code and the `state` it came with, from what the user pasted: the redirect URL (`...?code=C&state=S`),
    `C#S` (as some providers show it), or the bare code (no state to check: PKCE's verifier still binds it)."""
    text = pasted.strip()
    if "code=" in text:
        query = parse_qs(urlsplit(text).query or text.lstrip("?"))
        if query.get("code"):
            states = query.get("state")
            return query["code"][0], states[0] if states else None
    if "#" in text:
        code, _, state = text.partition("#")
        return code, state or None
    return text, None


@dataclass
class _Attempt:
    id: str
    integration: str
    name: str
    settings: OAuthSettings
    verifier: str
    state: str
    label: str | None
    created: int
    expires: int
    status: str = "pending"
    message: str | None = None
    settled: int | None = None  # when it stopped being pending
    completing: bool = False

    def time(self) -> AttemptTime:
        return AttemptTime(created=self.created, expires=self.expires)


@dataclass
class Integrations:
    """The runtime's integrations service over its credential store."""

    credentials: CredentialStore
    _attempts: dict[str, _Attempt] = field(default_factory=dict, init=False)

    # --- listing ----------------------------------------------------------------------------------------------

    def list(self, config: Config, env: Mapping[str, str]) -> list[IntegrationInfo]:
        return [self._info(provider_id, config, env) for provider_id in sorted({*config.provider, *bundled()})]

    def get(self, provider_id: str, config: Config, env: Mapping[str, str]) -> IntegrationInfo:
        if provider_entry(config, provider_id) is None:
            raise _bad(f"No provider named {provider_id!r} is known here", "integrationID")
        return self._info(provider_id, config, env)

    def _info(self, provider_id: str, config: Config, env: Mapping[str, str]) -> IntegrationInfo:
        cfg = provider_entry(config, provider_id)
        names = [*dict.fromkeys([*(cfg.env if cfg is not None else []), api_key_env_var(provider_id)])]
        methods: list[Any] = [IntegrationKeyMethod(type="key", label="API key"),
                              IntegrationEnvMethod(type="env", names=names)]
        oauth = oauth_settings(cfg)
        if oauth is not None:
            methods.insert(0, IntegrationOAuthMethod(id=OAUTH_METHOD, type="oauth", label=oauth.label))
        connections: list[Any] = [ConnectionCredentialInfo(type="credential", id=c.id, label=c.label)
                                  for c in self.credentials.list(provider_id)]
        connections += [ConnectionEnvInfo(type="env", name=n) for n in names if env.get(n)]
        return IntegrationInfo(id=provider_id, name=(cfg.name if cfg is not None else None) or provider_id,
                               methods=methods, connections=connections)

    # --- keys -------------------------------------------------------------------------------------------------

    def connect_key(self, provider_id: str, key: str, label: str | None, config: Config) -> None:
        if provider_entry(config, provider_id) is None:
            raise _bad(f"No provider named {provider_id!r} is known here", "integrationID")
        cfg = provider_entry(config, provider_id)
        self.credentials.add(provider_id, key, label, name=(cfg.name if cfg is not None else None) or provider_id)

    # --- OAuth ------------------------------------------------------------------------------------------------

    def begin(self, provider_id: str, method_id: str, label: str | None, config: Config) -> IntegrationAttempt:
        cfg = provider_entry(config, provider_id)
        if cfg is None:
            raise _bad(f"No provider named {provider_id!r} is known here", "integrationID")
        settings = oauth_settings(cfg)
        if settings is None or method_id != OAUTH_METHOD:
            raise _bad(f"Provider {provider_id!r} has no OAuth method {method_id!r}"
                       + ("" if settings is not None else ": it connects with a key or an environment variable"),
                       "methodID")
        self._sweep()
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        created = now_ms()
        attempt = _Attempt(id=ascending("att"), integration=provider_id, name=cfg.name or provider_id,
                           settings=settings, verifier=verifier, state=secrets.token_urlsafe(24), label=label,
                           created=created, expires=created + ATTEMPT_LIFETIME_MS)
        self._attempts[attempt.id] = attempt
        query = {"response_type": "code", "client_id": settings.client_id, "redirect_uri": settings.redirect,
                 "state": attempt.state, "code_challenge": challenge, "code_challenge_method": "S256"}
        if settings.scopes:
            query["scope"] = " ".join(settings.scopes)
        separator = "&" if "?" in settings.authorize else "?"
        return IntegrationAttempt(
            attemptID=attempt.id, url=settings.authorize + separator + urlencode(query), mode="code",
            instructions="Open the URL, sign in and authorize access, then paste the code you are shown.",
            time=attempt.time())

    def _attempt(self, attempt_id: str) -> _Attempt:
        self._sweep()
        attempt = self._attempts.get(attempt_id)
        if attempt is None:
            raise _bad(f"No OAuth attempt {attempt_id!r} is known", "attemptID")
        return attempt

    def _sweep(self) -> None:
        now = now_ms()
        for attempt in list(self._attempts.values()):
            if attempt.status == "pending" and now >= attempt.expires and not attempt.completing:
                attempt.status, attempt.settled = "expired", now
            if attempt.settled is not None and now - attempt.settled > TERMINAL_RETENTION_MS:
                del self._attempts[attempt.id]

    def status(self, attempt_id: str) -> IntegrationAttemptStatus:
        attempt = self._attempt(attempt_id)
        if attempt.status == "complete":
            return AttemptComplete(status="complete", time=attempt.time())
        if attempt.status == "failed":
            return AttemptFailed(status="failed", message=attempt.message or "Authorization failed",
                                 time=attempt.time())
        if attempt.status == "expired":
            return AttemptExpired(status="expired", time=attempt.time())
        return AttemptPending(status="pending", time=attempt.time())

    def cancel(self, attempt_id: str) -> None:
        self._attempts.pop(attempt_id, None)

    async def complete(self, attempt_id: str, code: str | None) -> None:
        """Exchange `code` at the token endpoint and store the credential; a refused exchange fails the attempt."""
        attempt = self._attempt(attempt_id)
        if attempt.status != "pending" or attempt.completing:
            raise _bad(f"The OAuth attempt is {attempt.status}, not pending", "attemptID")
        if not code:
            raise _bad("This attempt needs the code the provider showed", "code")
        code, state = _code_and_state(code)
        if state is not None and not hmac.compare_digest(state, attempt.state):
            # a code from another authorization (someone else's, or an older attempt): never exchanged
            raise _bad("The code belongs to another authorization attempt (its state does not match)", "code")
        attempt.completing = True
        try:
            token = await self._exchange(attempt, code)
        except _Refused as refused:
            attempt.status, attempt.message, attempt.settled = "failed", refused.reason, now_ms()
            raise _bad(f"The provider did not accept the code: {refused.reason}", "code") from None
        finally:
            attempt.completing = False
        expires_in = token.get("expires_in")
        self.credentials.add(attempt.integration, str(token["access_token"]), attempt.label, type="oauth",
                             refresh=token.get("refresh_token") if isinstance(token.get("refresh_token"), str)
                             else None, name=attempt.name,
                             expires=now_ms() + int(expires_in * 1000) if isinstance(expires_in, int | float)
                             else None)
        attempt.status, attempt.settled = "complete", now_ms()

    async def _exchange(self, attempt: _Attempt, code: str) -> dict[str, Any]:
        import httpx2  # only here: the server starts without the HTTP client loaded

        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": attempt.settings.redirect,
                "client_id": attempt.settings.client_id, "code_verifier": attempt.verifier}
        try:
            async with httpx2.AsyncClient(timeout=TOKEN_TIMEOUT_S) as http:
                response = await http.post(attempt.settings.token, data=form, headers={"Accept": "application/json"})
        except httpx2.HTTPError as exc:
            raise _Refused(f"the token endpoint could not be reached ({type(exc).__name__})") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
            error = body.get("error") if isinstance(body, dict) else None
            # OAuth's error codes are short identifiers; anything else is not repeated
            known = isinstance(error, str) and re.fullmatch(r"[a-z_]{1,64}", error)
            raise _Refused(f"HTTP {response.status_code}" + (f", {error}" if known else ""))
        return body


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # never the response body: it may echo what was sent
