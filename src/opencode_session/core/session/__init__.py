"""Sessions: create/get/list/switch, input admission and promotion, messages and the durable log.

`Sessions` is imported on first use: a submodule alone (`stats`, which `ocs stats` runs on a read-only connection)
does not load the service and everything it depends on."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .service import Sessions

__all__ = ["Sessions"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = globals()[name] = getattr(import_module(".service", __name__), name)  # looked up once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
