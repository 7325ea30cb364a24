"""Log records as JSON, one object a line (`ocs serve --log-format json`), carrying the trace and span IDs of the
span current where the record was made (while tracing)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from .state import telemetry

# what every LogRecord has: the rest of its attributes are the caller's `extra=` fields
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        if telemetry.tracer is not None:
            from opentelemetry import trace

            context = trace.get_current_span().get_span_context()
            if context.is_valid:
                entry["trace_id"] = format(context.trace_id, "032x")
                entry["span_id"] = format(context.span_id, "016x")
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def log_json(level: int = logging.INFO) -> None:
    """Every log record of the process to stderr as a JSON line (records below `level` are dropped)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
