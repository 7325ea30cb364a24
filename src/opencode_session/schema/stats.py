"""The public shape of usage statistics over a time range: activity, tokens and cost (in all, per model, per agent,
per local day) and the reliability of each tool."""

from __future__ import annotations

from pydantic import Field

from .base import Struct
from .common import Millis, Tokens


class StatsRange(Struct):
    from_: Millis | None = Field(None, alias="from", description="Start (epoch ms, inclusive); omitted: the start.")
    to: Millis | None = Field(None, description="End (epoch ms, exclusive); omitted: now.")
    timezone: str = Field(description="The IANA time zone the days are counted in.")


class StatsUsage(Struct):
    """What a set of Steps used: their number (`failed`: ended with an error), tokens and cost."""

    sessions: int = Field(ge=0, description="Sessions with a prompt or a Step in the range.")
    prompts: int = Field(ge=0, description="User prompts delivered in the range (per model or agent: those its Steps"
                                           " answered first).")
    steps: int = Field(ge=0, description="Model Steps started in the range.")
    failed: int = Field(ge=0, description="Of those Steps, the ones that ended with an error.")
    tokens: Tokens
    cost: float = Field(ge=0)


class StatsModel(StatsUsage):
    """A model's Steps and the prompts they answered first (empty IDs: the prompts no Step answered); the models'
    rows add up to the total, as the agents' do."""

    providerID: str
    modelID: str


class StatsAgent(StatsUsage):
    """An agent's Steps and the prompts they answered first (an empty name: the prompts no Step answered)."""

    agent: str


class StatsDay(StatsUsage):
    day: str = Field(description="The local date, YYYY-MM-DD, in the range's time zone.")


class StatsTool(Struct):
    tool: str
    calls: int = Field(ge=0, description="Calls that settled (completed or failed).")
    failures: int = Field(ge=0)


class SessionStats(Struct):
    """Usage over `range`: `total`, then broken down per model, per agent and per local day (days without activity are
    left out), and each tool's settled calls and failures (omitted when `tools=false` was asked)."""

    range: StatsRange
    created: int = Field(ge=0, description="Sessions created in the range.")
    total: StatsUsage
    models: list[StatsModel]
    agents: list[StatsAgent]
    days: list[StatsDay]
    tools: list[StatsTool] | None = None
