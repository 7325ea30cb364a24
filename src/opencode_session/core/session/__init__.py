"""Sessions: create/get/list/switch, input admission and promotion, messages and the durable log."""

from .service import Sessions

__all__ = ["Sessions"]
