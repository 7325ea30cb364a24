"""opencode-session: a Python implementation of the OpenCode V2 Session Runtime."""

__version__ = "0.1.0"
