"""What cutting secrets costs on the event path: the redactor's check of one event's JSON text (every durable event
takes it when secrets are configured), a live delta's streamed check, and a full redaction of a text that holds a
key, each in microseconds, beside the `json.dumps` the append path already does for the same event (the ratio is the
machine-independent number). Five provider keys and a password, as a server configured for several providers has.
"""

from __future__ import annotations

import json
import time

from _common import emit, median, reference_ms, spread, table

from opencode_session.core.redaction import Redactor

REPS = 7
RUNS = 20_000
SECRETS = ["sk-proj-" + "a1B2c3D4e5F6g7H8" * 3, "sk-ant-api03-" + "Zx9Yw8Vu7Ts6" * 7, "0123456789abcdef" * 2,
           "pw-Redact9QmZx7Lk", "AIzaSyD-" + "q1w2e3r4t5y6" * 3, "Us3rInfoPassw0rd"]
TEXT = "I will read the configuration and update the handler so that it retries with a back-off. "
EVENTS = {
    "step.started (ids only)": {"type": "session.step.started", "sessionID": "ses_01JD5QKX3M8N2P4R6T8V0W2Y4A",
                                "stepID": "stp_01JD5QKX3M8N2P4R6T8V0W2Y4B", "snapshot": "0f3c9a"},
    "text.ended (90 chars)": {"type": "session.text.ended", "sessionID": "ses_01JD5QKX3M8N2P4R6T8V0W2Y4A",
                              "stepID": "stp_01JD5QKX3M8N2P4R6T8V0W2Y4B", "ordinal": 0, "text": TEXT},
    "tool.success (4 KiB)": {"type": "session.tool.success", "sessionID": "ses_01JD5QKX3M8N2P4R6T8V0W2Y4A",
                             "callID": "call_1", "content": [{"type": "text", "text": TEXT * 45}]},
}


def _us(fn, runs: int = RUNS) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - started) / runs * 1e6


def main() -> None:
    redactor = Redactor(SECRETS)
    rows, results = [], {}
    for name, event in EVENTS.items():
        text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        runs = RUNS if len(text) < 1000 else RUNS // 20
        check = [_us(lambda t=text: redactor.found(t), runs) for _ in range(REPS)]
        dumps = [_us(lambda e=event: json.dumps(e, separators=(",", ":"), ensure_ascii=False), runs)
                 for _ in range(REPS)]
        ratio = median(check) / median(dumps)
        rows.append([name, len(text), f"{median(check):.2f}", spread(check), f"{median(dumps):.2f}", f"{ratio:.2f}"])
        results[name] = {"chars": len(text), "check_us": median(check), "dumps_us": median(dumps), "ratio": ratio}
    counter = iter(range(10**9))
    delta = [_us(lambda: redactor.delta(("s", next(counter) % 64), "a few words "), RUNS) for _ in range(REPS)]
    leak = TEXT + SECRETS[0][:20] + TEXT
    cut = [_us(lambda: redactor.text(leak), RUNS // 4) for _ in range(REPS)]
    rows.append(["live delta (12 chars, streamed)", 12, f"{median(delta):.2f}", spread(delta), "", ""])
    rows.append(["text with a key piece, cut", len(leak), f"{median(cut):.2f}", spread(cut), "", ""])
    print(table(["event", "chars", "check us", "spread", "json.dumps us", "ratio"], rows))
    emit("redaction", {"events": results, "delta_us": median(delta), "cut_us": median(cut),
                       "reference_ms": reference_ms()})


if __name__ == "__main__":
    main()
