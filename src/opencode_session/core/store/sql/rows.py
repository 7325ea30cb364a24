"""Every concern's operations over one connection, which a backend hands the Store as its `Reader` and, inside a
transaction, as its `Writer` (the backend adds `replace_projections`)."""

from __future__ import annotations

from .connection import Connection
from .contexts import SqlContexts
from .continuation import SqlContinuation
from .events import SqlEvents
from .instructions import SqlInstructions
from .leases import SqlLeases
from .lifecycle import SqlLifecycle
from .messages import SqlMessages
from .pending import SqlPending
from .permissions import SqlPermissions
from .sessions import SqlSessions
from .stats import SqlStats
from .suspension import SqlSuspension

# The log, which replay reads and never changes.
LOG_TABLES = ("event_sequence", "event")
# The tables the projector writes: cleared and rebuilt from the event log by replay.
PROJECTION_TABLES = ("session", "session_message", "session_usage", "session_usage_tool", "session_usage_active",
                     "session_usage_period", "session_usage_sums", "session_usage_tool_period", "session_pending",
                     "session_search_doc")
# State kept beside the projections but not derived from events, which a rebuild leaves as it was: the instruction
# checkpoint and entries (the files and values a baseline was read from are not in the log), the "always"
# permissions, the count of removed messages the history cache watches, the session leases, what each Step sent
# (step_context), and the suspension mark, continuation claim and continuation record of a session row.
STATE_TABLES = ("instruction_checkpoint", "instruction_entry", "permission_saved", "session_message_removal",
                "session_lease", "step_context")
SESSION_STATE_COLUMNS = ("time_suspended", "time_claimed", "continued")


class SqlRows:
    """Every concern's operations over one connection: a reader's, or a writer's inside its transaction."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.events = SqlEvents(conn)
        self.sessions = SqlSessions(conn)
        self.messages = SqlMessages(conn)
        self.pending = SqlPending(conn)
        self.instructions = SqlInstructions(conn)
        self.contexts = SqlContexts(conn)
        self.permissions = SqlPermissions(conn)
        self.suspension = SqlSuspension(conn)
        self.leases = SqlLeases(conn)
        self.continuation = SqlContinuation(conn)
        self.lifecycle = SqlLifecycle(conn)
        self.stats = SqlStats(conn)
