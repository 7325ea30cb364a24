"""Core domain: session behaviour that depends only on the schema leaf and third-party libraries.

It exports nothing itself: the layers above (server, sdk, cli) import the module that owns each name, and an embedded
host's tools and plugins take theirs from `opencode_session.sdk`. Importing one submodule loads only what it needs."""
