"""Execution: the process-wide coordinator of Session drains, the runner and its Steps, retry, restart."""
