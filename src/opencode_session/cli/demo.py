"""`ocs demo`: with no configuration at all, a scripted model on loopback works in a scratch project through the
embedded host, shown exactly as `ocs run` shows a session, and then how to use a real model is explained."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .asking import Policy
from .demo_model import DEMO_PROMPT, MODEL_ID, DemoModel
from .hosts import open_host
from .invocation import ocs_command
from .render import View
from .run import EXIT_OK, Interrupts, exit_code, make_view, run_command, run_turn

PROJECT = {
    "README.md": "# greeter\n\nA tiny greeting library.\n\n- `greet.py` greets people by name.\n\n## To do\n\n"
                 "- [ ] greet in French too\n- [ ] add tests for greet()\n",
    "greet.py": 'def greet(name: str) -> str:\n    return f"Hello, {name}!"\n\n\nif __name__ == "__main__":\n'
                '    print(greet("world"))\n',
    "LICENSE": "Public domain.\n",
}

# The demo must not wait for a key, so it answers the permission ask itself and says who answered.
DEMO_ANSWERS: tuple[Policy, str] = ("once", "answered by the demo; `ocs run` asks you: once, always or reject")

REAL_PROVIDER = """\
That was a scripted model on loopback working in a scratch project. To work with a real model:

- **OpenAI**: `export OPENAI_API_KEY=sk-...`, then `ocs run --model openai/gpt-4.1 "explain this project"`
- **Any OpenAI-compatible server** (Ollama, vLLM, llama.cpp, OpenRouter): describe it in `opencode.json` in your \
project, or in `~/.config/opencode/opencode.json`:

```json
{
  "model": "local/qwen3",
  "provider": {
    "local": {
      "npm": "@ai-sdk/openai-compatible",
      "options": { "baseURL": "http://127.0.0.1:11434/v1" },
      "models": { "qwen3": { "limit": { "context": 32768, "output": 8192 } } }
    }
  }
}
```

  then `ocs run "explain this project"` (a key, if the server wants one, goes in `options.apiKey` or `LOCAL_API_KEY`).

`ocs models` shows what is configured, `ocs` alone starts an interactive session, and `ocs serve` serves the same \
sessions over HTTP."""


def next_steps(ocs: str) -> str:
    """The epilogue, with each command spelled as it runs from where the user stands (`python3 run.py ocs run`)."""
    return REAL_PROVIDER.replace("`ocs", f"`{ocs}")


def demo_env(scratch: Path, base_url: str) -> dict[str, str]:
    """An environment that sees none of the user's own config: only the demo provider."""
    config = scratch / "config" / "opencode"
    config.mkdir(parents=True)
    (config / "opencode.json").write_text(json.dumps({
        "model": f"demo/{MODEL_ID}",
        "permission": {"bash": "ask"},  # so the demo shows the prompt `ocs run` would put to the user
        "provider": {"demo": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": base_url},
                              "models": {MODEL_ID: {"name": "Scripted demo model"}}}},
    }) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCODE_")}
    env.update(HOME=str(scratch / "home"), XDG_CONFIG_HOME=str(scratch / "config"),
               XDG_DATA_HOME=str(scratch / "data"))
    return env


async def _demo(view: View, interrupts: Interrupts, scratch: Path, pace: float) -> int:
    project = scratch / "greeter"
    for name, text in PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    (scratch / "home").mkdir()
    async with DemoModel(pace) as model:
        async with open_host(None, scratch / "sessions.db", project, demo_env(scratch, model.base_url)) as client:
            session = await client.session.create()
            view.info(f"ocs demo: a scripted model on {model.base_url}, the project {project}")
            view.user(DEMO_PROMPT)
            outcome = await run_turn(client, session.id, DEMO_PROMPT, "steer", view, interrupts, DEMO_ANSWERS)
            if outcome.status != "succeeded":
                return exit_code(outcome)
            await client.runtime.settle_background(5)  # type: ignore[attr-defined]
            done = await client.session.get(session.id)
            view.info(f"session {done.id} \"{done.title}\": {done.tokens.input + done.tokens.output} tokens")
    view.text_end("demo-epilogue", next_steps(ocs_command()))
    return EXIT_OK


def run_demo(keep: bool = False, pace: float | None = None) -> int:
    view = make_view()
    scratch = Path(tempfile.mkdtemp(prefix="ocs-demo-"))
    pace = pace if pace is not None else (0.04 if sys.stdout.isatty() else 0.0)
    try:
        return run_command(view, lambda v, i: _demo(v, i, scratch, pace))
    finally:
        if keep:
            print(f"the scratch project is kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
