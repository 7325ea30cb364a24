"""OpenCode's V1 HTTP API as a compatibility layer (`opencode run --attach`): routes at the V1 paths over the same
core (`routes.py`'s `V1_ROUTES`), answering in V1 shapes derived from the session projections (`shapes.py`, typed in
`wire.py`) and V1 bus events (`events.py`)."""
