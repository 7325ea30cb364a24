"""Execution: the process-wide coordinator of Session drains, the runner in its parts (drain state, boundary sampling,
Model Context, compaction around Steps, orphan reconciliation), one Step's stream, titles and restart suspension."""
