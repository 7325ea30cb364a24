"""The permission service: asking the user whenever a Step's rules say `ask`, pending requests in memory per session
(published live as `permission.v2.asked` / `permission.v2.replied`), replies, and the project's saved `always` rules.

Evaluation order for one requirement: the defaults, then the global config, then the agent of the Step that issued
the call (all in its Ruleset, last match wins). A `deny` there always holds; saved `always` rules only turn an `ask`
into an allow, so a rule the user later writes as `deny` in opencode.json beats anything they once allowed."""

from __future__ import annotations

from collections.abc import Sequence

from ...schema import events as ev
from ...schema import session_errors
from ...schema.errors import InvalidRequestError, PermissionNotFoundError
from ...schema.ids import permission_id
from ...schema.permission import PermissionSavedInfo, PermissionV2Reply, PermissionV2Request, PermissionV2Source
from ..store import Store, now_ms
from ..waiting import Waiting, WaitingRequests
from .ask import Asker, PermissionAsk, PermissionWait, Waited
from .authority import AccessRefused, Correction
from .rules import Effect, Rule, Ruleset, evaluate, literal

DECLINED = "The user declined this tool call"


class _Asked(PermissionV2Request):
    """A pending request plus what answering it needs: the project its `always` is saved for."""

    projectID: str
    explicit: bool = False  # a configuration file among the resources: no saved pattern covers it

    def public(self) -> PermissionV2Request:
        return PermissionV2Request.model_validate(self.model_dump(exclude={"projectID", "explicit"}))


def _covered(saved: Sequence[PermissionSavedInfo], action: str, resources: Sequence[str],
             explicit: bool = False) -> bool:
    """Whether the saved rules allow `action` on every resource (with `explicit`, only the rules that name one
    resource, without wildcards: a configuration file is never covered by a pattern)."""
    rules = tuple(Rule(s.action, s.resource, "allow") for s in saved if not explicit or literal(s.resource))
    return bool(resources) and all(evaluate(rules, action, r) == "allow" for r in resources)


def _same_step(one: PermissionV2Request, other: PermissionV2Request) -> bool:
    """Whether two requests were asked by calls of the same Step (the same assistant message)."""
    return one.source is not None and other.source is not None and one.source.messageID == other.source.messageID


class PermissionRequests:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._waiting: WaitingRequests[_Asked] = WaitingRequests()

    # --- asking -------------------------------------------------------------------------------------

    def asker(self, session_id: str, project_id: str, message_id: str, call_id: str,
              waited: Waited | None = None) -> Asker:
        """The Asker of one tool call; `waited` hears of each time it waited for the user, once answered."""
        source = PermissionV2Source(messageID=message_id, callID=call_id)

        async def ask(need: PermissionAsk) -> None:
            await self.ask(session_id, project_id, need, source, waited)

        return ask

    async def ask(self, session_id: str, project_id: str, need: PermissionAsk, source: PermissionV2Source,
                  waited: Waited | None = None) -> None:
        """Return once the user allows `need` (or a saved rule already does); AccessRefused when they refuse.
        `waited` hears when the user was asked and answered (nothing when a saved rule answered)."""
        if _covered(await self.saved(project_id), need.action, need.resources, need.explicit):
            return
        asked = now_ms()
        request = self._asked(permission_id(), session_id, project_id, need, source)
        reply: PermissionV2Reply = "reject"
        try:
            # an interrupted call withdraws its request: clients see it answered `reject`
            reply = await self._waiting.wait(request, lambda r: self._publish(r, "reject"))
        finally:
            if waited is not None:
                waited(PermissionWait(request.id, asked, now_ms(), reply))

    async def create(self, session_id: str, project_id: str, rules: Ruleset, need: PermissionAsk,
                     source: PermissionV2Source | None = None, request_id: str | None = None) -> tuple[str, Effect]:
        """Ask on a client's behalf without waiting: `deny` or `allow` when the rules (and saved rules) decide,
        else `ask` with a pending request under `request_id` that is answered like any other."""
        request_id = request_id or permission_id()
        effects = {evaluate(rules, need.action, r) for r in need.resources}
        if "deny" in effects:
            return request_id, "deny"
        if "ask" not in effects or _covered(await self.saved(project_id), need.action, need.resources):
            return request_id, "allow"
        if self._waiting.find(session_id, request_id) is None:
            if request_id in self._waiting:
                raise InvalidRequestError(f"Permission request ID is in use: {request_id}", field="id")
            self._waiting.add(self._asked(request_id, session_id, project_id, need, source))
        return request_id, "ask"

    def _asked(self, request_id: str, session_id: str, project_id: str, need: PermissionAsk,
               source: PermissionV2Source | None) -> _Asked:
        """A new pending request, published."""
        request = _Asked(id=request_id, sessionID=session_id, action=need.action, resources=list(need.resources),
                         save=list(need.save), metadata=need.metadata or None, source=source, projectID=project_id,
                        explicit=need.explicit)
        self._store.publish_live(ev.PermissionAsked(**request.public().model_dump()), session_id)
        return request

    def _publish(self, request: _Asked, reply: PermissionV2Reply) -> None:
        self._store.publish_live(ev.PermissionReplied(sessionID=request.sessionID, requestID=request.id, reply=reply),
                                 request.sessionID)

    # --- the API ------------------------------------------------------------------------------------

    def pending(self, session_id: str | None = None) -> list[PermissionV2Request]:
        return [r.public() for r in self._waiting.pending(session_id)]

    def get(self, session_id: str, request_id: str) -> PermissionV2Request:
        return self._find(session_id, request_id).request.public()

    def _find(self, session_id: str, request_id: str) -> Waiting[_Asked]:
        waiting = self._waiting.find(session_id, request_id)
        if waiting is None:
            raise PermissionNotFoundError(requestID=request_id)
        return waiting

    async def reply(self, session_id: str, request_id: str, reply: PermissionV2Reply, message: str | None) -> None:
        """`once` allows this call; `always` also saves the request's `save` patterns for the project and allows the
        other pending requests they now cover; `reject` with a message fails the call with that feedback for the
        model, and the other calls of its Step that wait on a request with it; `reject` without one declines: the
        call fails, the drain stops and the session's other pending requests are declined too."""
        waiting = self._find(session_id, request_id)
        request = waiting.request
        if reply == "always":
            await self._store.write(lambda tx: tx.permissions.save(request.projectID, request.action,
                                                                request.save or request.resources, now_ms()))
        if reply != "reject":
            self._answer(waiting, reply)
        elif message:
            correction = Correction(
                f"The user rejected permission to use this tool ({request.action}) and said: {message}", message)
            self._answer(waiting, reply, correction)
            for other in self._waiting.of_session(session_id):
                if _same_step(other.request, request):
                    self._answer(other, reply, correction.elsewhere())
        else:
            for declined in (waiting, *self._waiting.of_session(session_id)):
                self._answer(declined, reply, AccessRefused(DECLINED, session_errors.PERMISSION_DECLINED))
        if reply == "always":
            saved = await self.saved(request.projectID)
            for other in self._waiting.all():
                if other.request.projectID == request.projectID and \
                        _covered(saved, other.request.action, other.request.resources, other.request.explicit):
                    self._answer(other, reply)

    def _answer(self, waiting: Waiting[_Asked], reply: PermissionV2Reply, refusal: AccessRefused | None = None) -> None:
        """Answer one request unless it was answered (or withdrawn) already: allow it, or fail its call."""
        if not self._waiting.take(waiting):
            return
        self._publish(waiting.request, reply)
        if refusal is None:
            waiting.answer.set_result(reply)
        else:
            waiting.answer.set_exception(refusal)

    async def saved(self, project_id: str | None = None) -> list[PermissionSavedInfo]:
        return await self._store.read(lambda reader: reader.permissions.listed(project_id))

    async def remove_saved(self, saved_id: str) -> None:
        await self._store.write(lambda tx: tx.permissions.remove(saved_id))
