"""Compaction: the token budget of a Step's request, and the rolling summary plus recent tail that replace older
Session History when it no longer fits."""
