"""The inspector's Files views beyond a turn's diff: the preview of a revert from a prompt (the files staging it
would put back), as a fragment. Staging, clearing, committing and forking go from the page to the V2 API."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ...schema.errors import TaggedError
from ..state import runtime_of
from .pages import html, render
from .parts import newest_prompt

DIFF_CONTEXT = 3  # unchanged lines around each hunk, as `git diff` shows them


async def revert_preview(request: Request) -> Response:
    """What the prompts from `from` through `to` (default: the newest) changed: a revert from `from` puts it back."""
    runtime = runtime_of(request)
    session_id, q = request.path_params["sessionID"], request.query_params
    first = q.get("from") or None
    values = {"session_id": session_id, "message_id": first or ""}
    if first is None:
        return html(render("revert_preview.html", files=[], problem="Which prompt? (from)", **values), 400)
    try:
        last = q.get("to") or await newest_prompt(runtime, session_id)  # an older page's prompt: to the newest
        files = await runtime.diffs.diff(session_id, first, last, context=DIFF_CONTEXT)
    except TaggedError as err:
        return html(render("revert_preview.html", files=[], problem=err.message, **values), err.status)
    return html(render("revert_preview.html", files=[f.model_dump(mode="json") for f in files], problem=None,
                       **values))


async def login_page(_request: Request) -> Response:
    # with a password the auth middleware answers this path; without one there is nothing to log in to
    return RedirectResponse("/", status_code=303)


FILE_ROUTES: list[BaseRoute] = [
    Route("/ui/session/{sessionID}/revert-preview", revert_preview, methods=["GET"], name="ui.session.revert"),
    Route("/ui/login", login_page, methods=["GET"], name="ui.login"),
]
