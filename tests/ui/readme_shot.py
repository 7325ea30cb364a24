"""Regenerates the README's screenshot of the inspector (docs/inspector.png) from a real run: `ocs serve` over the
loopback model, a session with two prompts whose answers read, edit and run a file, shot in Debian's chromium through
Playwright as tests/ui drive it. The project lives at /srv/acme/work (made if absent) so that no path of this
machine shows. Not a test; run it from the checkout and look at the picture before committing it:

    .venv/bin/python -m tests.ui.readme_shot [OUTPUT.png]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx2

from tests.support import fake_openai as fake
from tests.support.server import isolated_env, start_server
from tests.ui.conftest import chromium_path

WORK = Path("/srv/acme/work")
WIDTH = 1000  # CSS pixels: the page's reading width with a margin either side
SCALE = 1.5  # device pixels per CSS pixel: text stays sharp when the README scales the picture down
GREET = 'def greet(name):\n    return f"Hello, {name}!"\n\n\nif __name__ == "__main__":\n    print(greet("world"))\n'
FRENCH = ('GREETINGS = {"en": "Hello, {}!", "fr": "Bonjour, {} !"}\n\n\ndef greet(name, lang="en"):\n'
          '    return GREETINGS[lang].format(name)')
TRY = "python3 -c 'from greet import greet; print(greet(\"monde\", lang=\"fr\"))'"


def scripts() -> list[fake.StreamScript]:
    """What the model answers, Step by Step: read, explain; edit, run, report."""
    call = fake.tool_call_deltas
    return [
        fake.completion(fake.text_deltas("Let me read it."), call(0, "call_read", "read", json.dumps(
            {"path": "greet.py"})), finish_reason="tool_calls", usage=fake.usage_block(1850, 40)),
        fake.completion(fake.text_deltas("`greet(name)` returns **Hello, name!**; run as a script it prints "
                                         "`Hello, world!`."), usage=fake.usage_block(2010, 30)),
        fake.completion(call(0, "call_edit", "edit", json.dumps({
            "path": "greet.py", "oldString": 'def greet(name):\n    return f"Hello, {name}!"', "newString": FRENCH})),
            finish_reason="tool_calls", usage=fake.usage_block(2100, 120)),
        fake.completion(call(0, "call_try", "bash", json.dumps({"command": TRY, "description": "Try the French"
                                                                " greeting"})),
                        finish_reason="tool_calls", usage=fake.usage_block(2300, 50)),
        fake.completion(fake.text_deltas('Done: `greet(name, lang="fr")` now greets in French:\n\n```python\n'
                                         '>>> greet("monde", lang="fr")\n\'Bonjour, monde !\'\n```'),
                        usage=fake.usage_block(2400, 35)),
    ]


def shoot(output: Path) -> None:
    path = chromium_path()
    if path is None:
        raise SystemExit("no chromium on PATH")
    WORK.mkdir(parents=True, exist_ok=True)
    if not (WORK / ".git").exists():
        subprocess.run(["git", "init", "-q", str(WORK)], check=True)
    (WORK / "greet.py").write_text(GREET)
    with tempfile.TemporaryDirectory() as scratch, fake.FakeOpenAI.running() as provider:
        root = Path(scratch)
        config = provider.serve_config({"fake-model": {"limit": {"context": 128_000, "output": 4_096}}},
                                       model="loop/fake-model")
        env = isolated_env(root)
        (root / "config" / "opencode").mkdir(parents=True, exist_ok=True)
        (root / "config" / "opencode" / "opencode.json").write_text(json.dumps(config))
        server = start_server(root, env=env, workdir=WORK)
        try:
            provider.enqueue(*scripts())
            with httpx2.Client(base_url=server.url, timeout=60) as api:
                sid = api.post("/api/session", json={"title": "Greet in French"}).json()["data"]["id"]
                for words in ("What does greet.py do?", "Make it greet in French too, and try it"):
                    assert api.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": words}}).status_code == 200
                    assert api.post(f"/api/session/{sid}/wait").status_code == 204
            from playwright.sync_api import sync_playwright

            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
                tab = browser.new_page(base_url=server.url, viewport={"width": WIDTH, "height": 900},
                                       device_scale_factor=SCALE)
                tab.goto(f"/ui/session/{sid}")
                tab.get_by_text("now greets in French").wait_for()
                tab.locator("details.tool", has_text="python3").locator("summary").click()  # the run, open
                # the whole page in one viewport, so the prompt box (fixed to the bottom) sits below the transcript
                height = tab.evaluate("document.documentElement.scrollHeight")
                tab.set_viewport_size({"width": WIDTH, "height": height})
                tab.screenshot(path=str(output))
                browser.close()
        finally:
            server.stop()
    print(f"wrote {output}")


if __name__ == "__main__":
    shoot(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/inspector.png"))
