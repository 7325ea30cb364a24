"""Stored provider credentials: API keys (and OAuth tokens) connected through the API, kept in `credentials.json`
beside the database, mode 0600 and replaced atomically, or only in memory for an in-memory database. A stored
credential reaches Steps as the provider's `options.apiKey` when its configuration sets none, so it is used (and cut
from error text like any configured key) without editing opencode.json, and its removal counts from the next Step.
Nothing here ever returns or logs a secret."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from ..schema.ids import ascending
from .child_env import withheld
from .config import Config, ConfigSource, ProviderConfig, ProviderOptions
from .config.trust import Trust
from .location import Location
from .redaction import Redactor
from .store import now_ms

CREDENTIALS_FILE = "credentials.json"


@dataclass(frozen=True)
class Credential:
    id: str
    integration: str  # the provider ID
    label: str
    type: Literal["key", "oauth"]
    secret: str  # the API key, or the OAuth access token
    created: int  # epoch ms
    refresh: str | None = None
    expires: int | None = None  # epoch ms, for an OAuth token

    def __repr__(self) -> str:  # a credential printed by accident shows no secret
        return f"Credential(id={self.id!r}, integration={self.integration!r}, label={self.label!r})"


class CredentialStore:
    """`path` None keeps credentials in memory only. Methods are thread-safe and do their file I/O inline: the file
    is small and written only when a credential is added, renamed or removed."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._items: list[Credential] = self._load()

    def _load(self) -> list[Credential]:
        if self._path is None or not self._path.exists():
            return []
        try:
            data = json.loads(self._path.read_text(encoding="utf-8"))
            return [Credential(**item) for item in data.get("credentials", [])]
        except (OSError, ValueError, TypeError, AttributeError):
            return []  # an unreadable file holds nothing usable; the next change rewrites it

    def _save(self) -> None:
        if self._path is None:
            return
        self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        text = json.dumps({"version": 1, "credentials": [asdict(c) for c in self._items]}, indent=2)
        fd, temp = tempfile.mkstemp(dir=self._path.parent, prefix=".credentials.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self._path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def list(self, integration: str | None = None) -> list[Credential]:
        """Newest first."""
        with self._lock:
            items = [c for c in self._items if integration is None or c.integration == integration]
        return sorted(items, key=lambda c: c.created, reverse=True)

    def add(self, integration: str, secret: str, label: str | None, *, type: Literal["key", "oauth"] = "key",
            refresh: str | None = None, expires: int | None = None, name: str | None = None) -> Credential:
        """Store a credential; without a label it is named after the provider (`name`), numbered if taken."""
        with self._lock:
            if label is None:
                taken = {c.label for c in self._items if c.integration == integration}
                base = name or integration
                label = next(candidate for n in range(1, len(taken) + 2)
                             if (candidate := base if n == 1 else f"{base} {n}") not in taken)
            credential = Credential(id=ascending("crd"), integration=integration, label=label, type=type,
                                    secret=secret, created=now_ms(), refresh=refresh, expires=expires)
            self._items.append(credential)
            self._save()
        return credential

    def rename(self, id: str, label: str) -> bool:
        with self._lock:
            for index, credential in enumerate(self._items):
                if credential.id == id:
                    self._items[index] = Credential(**{**asdict(credential), "label": label})
                    self._save()
                    return True
        return False

    def remove(self, id: str) -> None:
        with self._lock:
            kept = [c for c in self._items if c.id != id]
            if len(kept) != len(self._items):
                self._items = kept
                self._save()

    def secret_for(self, integration: str) -> str | None:
        """The newest credential's secret for a provider, if any."""
        newest = self.list(integration)
        return newest[0].secret if newest else None

    def apply(self, config: Config) -> Config:
        """`config` with each provider that has a stored credential and no `options.apiKey` given one: how Steps
        (and listings) see connected keys. The cached config itself is never changed."""
        with self._lock:
            integrations = {c.integration for c in self._items}
        if not integrations:
            return config
        providers = dict(config.provider)
        for integration in integrations:
            current = providers.get(integration)
            if current is not None and current.options.api_key:
                continue
            secret = self.secret_for(integration)
            if secret is None:
                continue
            if current is None:
                providers[integration] = ProviderConfig(options=ProviderOptions(api_key=secret))
            else:
                options = current.options.model_copy(update={"api_key": secret})
                providers[integration] = current.model_copy(update={"options": options})
        return config.model_copy(update={"provider": providers})


class ConnectedConfig(ConfigSource):
    """The runtime's configuration source with the stored credentials applied to what it serves (its cache holds
    the files' configuration; the credentials are applied on each read, so a removal counts at the next one)."""

    def __init__(self, env: Mapping[str, str], credentials: CredentialStore, redactor: Redactor | None = None,
                 trust: Trust | None = None) -> None:
        super().__init__(env, trust)
        self.credentials = credentials
        self.redactor = redactor  # told every secret a configuration read names, so none reaches an event or a log

    def at_sync(self, location: Location) -> Config:
        config = self.credentials.apply(super().at_sync(location))
        if self.redactor is not None:
            self.redactor.add(withheld(self.env, config))
        return config
