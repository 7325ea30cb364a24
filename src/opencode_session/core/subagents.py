"""Subagents: the `task` tool, through which an agent hands work to another agent of the config (`mode` `subagent` or
`all`) in a child session and reads its final answer; the child keeps its own durable log and execution, so it
runs (and continues after a crash) on any host, offered to the other hosts first, and the parent's call only waits on
its log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Literal

import anyio
from pydantic import BaseModel, Field, create_model

from ..schema import events as ev
from ..schema.events import EventRecord
from ..schema.ids import message_id
from ..schema.message import ToolTextContent
from ..schema.permission import PermissionV2Rule
from ..schema.prompt import PromptInput
from ..schema.session import SessionV2Info
from .agents import Agent, list_agents
from .boundary import Boundary
from .cancellation import shielded
from .session import Sessions
from .store import Reader
from .tools.arguments import schema_of
from .tools.tool import Tool, ToolContext, ToolFailure, ToolOutput

TASK: Final = "task"
# How many children one runtime runs for `task` calls at once (more wait their turn): $OCS_TASK_CONCURRENCY.
DEFAULT_CONCURRENCY: Final = 4
_TERMINAL: Final = (ev.ExecutionSucceeded, ev.ExecutionFailed, ev.ExecutionInterrupted)

Interrupt = Callable[[str], Awaitable[object]]
# Starts a child whose input was admitted without a wake: on another host of a shared database when one takes it
Start = Callable[[str], Awaitable[None]]


def subagents(config_agents: Sequence[Agent]) -> list[Agent]:
    """The agents a `task` may hand work to: the config's own agents whose mode allows it (not the built-ins)."""
    return [a for a in config_agents if not a.builtin and a.mode in ("subagent", "all")]


class Delegation:
    """Runs `task` calls: one child session per call (found again by its call ID when the call runs again after a
    takeover, so the wait resumes instead of starting the work twice), under a bound on children at once."""

    def __init__(self, sessions: Sessions, interrupt: Interrupt, env: Mapping[str, str],
                 start: Start | None = None) -> None:
        self.sessions = sessions
        self.interrupt = interrupt
        self.start = start  # None: the admission wakes the child here
        limit = env.get("OCS_TASK_CONCURRENCY", "")
        self.limit = anyio.Semaphore(int(limit) if limit.isdigit() and int(limit) > 0 else DEFAULT_CONCURRENCY)

    async def run(self, agent: Agent, description: str, prompt: str, task_id: str | None,
                  ctx: ToolContext) -> ToolOutput:
        child, input_id = await self._child(agent, description, task_id, ctx)
        progress = _Progress(ctx, child.id)
        async with self.limit:
            progress.show()
            admitted = await self.sessions.admit(child.id, PromptInput(text=prompt), id=input_id,
                                                 resume=self.start is None)
            try:
                if self.start is not None:
                    await self.start(child.id)
                answer = await self._answer(child.id, input_id, admitted.admittedSeq, progress)
            except BaseException:
                # the parent was interrupted (or failed): its child stops too, its input stays in its log
                await shielded(self.interrupt(child.id))
                raise
        text = f"task_id: {child.id} (pass it as task_id to continue this task)\n\n<task_result>\n{answer}\n" \
               "</task_result>"
        return ToolOutput(content=[ToolTextContent(text=text)],
                          structured={"sessionID": child.id, "agent": agent.name}, title=description)

    async def _child(self, agent: Agent, description: str, task_id: str | None,
                     ctx: ToolContext) -> tuple[SessionV2Info, str]:
        """The child to run in and the ID of the input to admit there: the one `task_id` names (a child a task of
        this session made), the one this call made already (a run again), or a new one."""
        if task_id is not None:
            child = await self.store_read(lambda reader: reader.sessions.load(task_id))
            # a child a `task` call of this runtime made (an imported one lost that link: it runs only when asked)
            made_by_task = child is not None and isinstance((child.metadata or {}).get("task"), dict)
            if child is None or child.parentID != ctx.session_id or not made_by_task:
                raise ToolFailure(f"No task {task_id} of this session to continue")
            return child, message_id()
        made = await self.store_read(lambda reader: _made_by(reader, ctx.session_id, ctx.call_id))
        if made is not None:
            return made, str((made.metadata or {})["task"]["inputID"])
        parent = await self.sessions.get(ctx.session_id)
        input_id = message_id()
        rules = [PermissionV2Rule(action=r.action, resource=r.resource, effect=r.effect) for r in ctx.rules]
        child = await self.sessions.create(
            agent=agent.name, model=agent.model or parent.model, location=parent.location,
            parent_id=ctx.session_id, title=f"{description} (@{agent.name} subagent)",
            metadata={"task": {"callID": ctx.call_id, "inputID": input_id}}, permissions=rules)
        return child, input_id

    async def store_read(self, query: Callable[[Reader], Any]) -> Any:
        return await self.sessions.store.read(query)

    async def _answer(self, child_id: str, input_id: str, admitted_seq: int, progress: _Progress) -> str:
        """Follow the child's log from the admission until the execution that took the input ends: its last
        assistant text, or ToolFailure when it failed or was interrupted."""
        promoted = False
        texts: dict[str, list[str]] = {}
        last: str | None = None
        batches = await self.sessions.log_batches(child_id, admitted_seq - 1)
        try:
            async for batch in batches:
                for record in batch:
                    if not isinstance(record, EventRecord):
                        continue
                    data = record.data
                    if isinstance(data, ev.InputPromoted) and data.inputID == input_id:
                        promoted = True
                    elif isinstance(data, ev.TextEnded):
                        texts.setdefault(data.assistantMessageID, []).append(data.text)
                        last = data.assistantMessageID
                    elif isinstance(data, ev.ToolCalled):
                        progress.called(data.callID, data.name)
                    elif isinstance(data, ev.ToolSuccess | ev.ToolFailed):
                        progress.settled(data.callID)
                    elif promoted and isinstance(data, _TERMINAL):
                        return _outcome(child_id, data, "\n".join(texts.get(last, [])) if last else "")
        finally:
            await batches.aclose()
        raise ToolFailure(f"The subagent's session {child_id} ended its log unexpectedly")


def _made_by(reader: Reader, parent_id: str, call_id: str) -> SessionV2Info | None:
    for child_id in reader.lifecycle.children(parent_id):
        child = reader.sessions.load(child_id)
        task = (child.metadata or {}).get("task") if child is not None else None
        if isinstance(task, dict) and task.get("callID") == call_id:
            return child
    return None


def _outcome(child_id: str, data: Any, answer: str) -> str:
    if isinstance(data, ev.ExecutionFailed):
        raise ToolFailure(f"The subagent (session {child_id}) failed: {data.error.type}: {data.error.message}")
    if isinstance(data, ev.ExecutionInterrupted):
        raise ToolFailure(f"The subagent (session {child_id}) was interrupted ({data.reason})")
    return answer or "(the subagent answered nothing)"


class _Progress:
    """The parent's running call, shown live: which child session it runs in and which tools the child runs now."""

    def __init__(self, ctx: ToolContext, child_id: str) -> None:
        self.ctx = ctx
        self.child_id = child_id
        self.running: dict[str, str] = {}

    def called(self, call_id: str, name: str) -> None:
        self.running[call_id] = name
        self.show()

    def settled(self, call_id: str) -> None:
        if self.running.pop(call_id, None) is not None:
            self.show()

    def show(self) -> None:
        if self.ctx.publish_live is None:
            return
        tools = list(self.running.values())
        text = f"subagent session {self.child_id}" + (f": running {', '.join(tools)}" if tools else "")
        self.ctx.publish_live(ev.ToolProgress(sessionID=self.ctx.session_id, assistantMessageID=self.ctx.message_id,
                                              callID=self.ctx.call_id, content=[ToolTextContent(text=text)],
                                              structured={"sessionID": self.child_id, "running": tools}))


class TaskArguments(BaseModel):
    description: str = Field(description="A short (3-5 words) description of the task.")
    prompt: str = Field(description="The task for the subagent, complete in itself.")
    subagent_type: str = Field(description="Which subagent does the task.")
    task_id: str | None = Field(None, description="A task_id an earlier task returned, to go on there.")


def task_arguments(agents: Sequence[str]) -> type[TaskArguments]:
    """TaskArguments whose `subagent_type` is one of `agents` (the schema lists them as its enum)."""
    names: Any = Literal.__getitem__(tuple(agents))  # the names are known only at run time
    return create_model("TaskArguments", __base__=TaskArguments,
                        subagent_type=(names, Field(description="Which subagent does the task.")))


class TaskTool:
    """`task` as OpenCode offers it, for the subagents of one configuration (its description lists them)."""

    name = TASK
    # a call run again (after a takeover) finds the child it made and waits on it again: nothing runs twice
    idempotent = True

    def __init__(self, delegation: Delegation, agents: Sequence[Agent]) -> None:
        self.delegation = delegation
        self.agents = {a.name: a for a in agents}
        listed = "\n".join(f"- {a.name}: {a.description or 'no description'}" for a in agents)
        self.description = (
            "Hand a self-contained piece of work to a subagent, which works on it in a session of its own with its "
            "own tools and answers once, at the end; its answer is this tool's result. Use it for research or "
            "multi-step work that would crowd this conversation, and call it several times in one step to run "
            "independent tasks at once. The subagent knows only what the prompt tells it: say exactly what to do "
            "and what to report back. To continue an earlier task with what it already knows, pass its task_id.\n"
            f"Subagents:\n{listed}")
        self.arguments = task_arguments(list(self.agents))
        self.parameters = schema_of(self.arguments)

    async def execute(self, args: TaskArguments, ctx: ToolContext) -> ToolOutput:
        agent = self.agents.get(args.subagent_type)
        if agent is None:
            raise ToolFailure(f"Unknown subagent {args.subagent_type!r}; one of: {', '.join(self.agents)}")
        await ctx.permit(TASK, [agent.name], metadata={"description": args.description})
        return await self.delegation.run(agent, args.description, args.prompt, args.task_id, ctx)


class SubagentTools:
    """The ToolSource of `task`: offered at a boundary whose config declares subagents, to root sessions only (a
    child does not delegate further). The tool is built once per list of subagents."""

    def __init__(self, delegation: Delegation) -> None:
        self.delegation = delegation
        self._built: dict[tuple[tuple[str, str | None], ...], TaskTool] = {}

    @property
    def name(self) -> str:
        return "subagents"

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def list_tools(self) -> Sequence[Tool]:
        return ()  # which subagents exist depends on the boundary's config: see tools_at

    def tools_at(self, boundary: Boundary) -> Sequence[Tool]:
        if boundary.session.parentID is not None:
            return ()
        agents = subagents(list_agents(boundary.config))
        if not agents:
            return ()
        key = tuple((a.name, a.description) for a in agents)
        tool = self._built.get(key)
        if tool is None:
            if len(self._built) > 64:
                self._built.clear()
            tool = self._built[key] = TaskTool(self.delegation, agents)
        return (tool,)


__all__ = ["TASK", "Delegation", "SubagentTools", "TaskTool", "subagents"]
