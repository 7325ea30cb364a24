"""MCP servers as tool sources and instruction sources: their configuration (`config`), one server's connection
through the official SDK (`connection`), the servers of each Location (`servers`), their tools (`source`), the MCP
guidance Instruction Source (`guidance`) and how results lower to tool output (`lowering`)."""

from .config import DEFAULT_TIMEOUT_MS, ServerEntry, configured_servers
from .servers import McpServers, McpStatus

__all__ = ["DEFAULT_TIMEOUT_MS", "McpServers", "McpStatus", "ServerEntry", "configured_servers"]
