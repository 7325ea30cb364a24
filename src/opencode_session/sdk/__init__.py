"""The Embedded host: the same client API served in process by the same router, plus embedded-only capabilities."""

from .embedded import OpenCode

__all__ = ["OpenCode"]
