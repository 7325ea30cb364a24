"""The cyclic garbage collector over an `ocs` process's start-up. While a command imports its modules and builds its
host or server it makes several hundred thousand long-lived objects (modules, classes, pydantic schemas) and next to
no cyclic garbage, and the collector's passes over them were about a tenth of `ocs run`'s CPU: it is off until the
command has started, then on again with everything made so far frozen out of its sight, so that the collections of a
long-running server or session do not walk the start-up's objects again."""

from __future__ import annotations

import gc


def defer() -> None:
    """At the entry point, before the command loads anything."""
    gc.disable()


def started() -> None:
    """The host or server is up: later collections see only what is made from here on. Does nothing when `defer`
    did not run (a command called in-process, by tests or an embedding program, keeps its collector as it was)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
