"""opencode-session: a Python implementation of the OpenCode V2 Session Runtime.

The public face is three packages: `opencode_session.sdk` (the embedded host, `OpenCode`, and what a tool or a Python
plugin is made of), `opencode_session.client` (the network client, `OpenCodeClient`, and the errors its calls raise)
and `opencode_session.schema` (its modules: the shapes and events both answer with). Import from those; everything
else (core, server, protocol, cli, compat, and the submodules of sdk and client) is internal and may change without
notice. `tests/test_public_face.py` holds the README, docs/ and examples/ to this."""

__version__ = "0.1.0"
