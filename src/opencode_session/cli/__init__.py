"""The `ocs` command line: serve, run a prompt, inspect sessions and events."""
