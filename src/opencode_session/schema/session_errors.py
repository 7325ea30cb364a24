"""The catalogue of Session error types: the stable dotted `type` of every SessionErrorInfo that a Step, a tool call or
an execution records, and that clients match on."""

from typing import Final

# Execution and Steps
ABORTED: Final = "aborted"  # interrupted: the Step or tool call was cut short (a user interrupt, a shutdown)
UNKNOWN: Final = "unknown"  # a defect; the message names the exception
# the host running the Step or execution was lost (a hard crash): on a Step it left open, and on the execution of a
# session whose automatic continuation budget is spent (it waits idle for a prompt)
HOST_LOST: Final = "host.lost"
# a Step an imported transcript left open: it ended elsewhere (or never); nothing of it runs here
IMPORT_UNFINISHED: Final = "import.unfinished"
CONFIG_INVALID: Final = "config.invalid"
AGENT_NOT_FOUND: Final = "agent.not-found"
INSTRUCTIONS_UNAVAILABLE: Final = "instructions.unavailable"  # no first complete Instruction Baseline yet
MODEL_NOT_FOUND: Final = "model.not-found"

# Tool calls
TOOL_EXECUTION: Final = "tool.execution"  # the tool failed (or was disabled); the message is for the model
TOOL_UNKNOWN: Final = "tool.unknown"
TOOL_INVALID_INPUT: Final = "tool.invalid-input"
TOOL_RESULT_MISSING: Final = "tool.result-missing"  # a provider-executed call the provider never settled
# left streaming or running by a lost host, and not idempotent: not run again; or left open in an imported transcript
TOOL_STALE: Final = "tool.stale"
PERMISSION_REJECTED: Final = "permission.rejected"  # a deny rule
PERMISSION_REQUIRED: Final = "permission.required"  # an ask rule, with nobody to ask yet
PERMISSION_DECLINED: Final = "permission.declined"  # the user refused without feedback: the drain stops
QUESTION_REJECTED: Final = "question.rejected"  # the user dismissed a question the tool asked: the drain stops
# A call failing with one of these ends its Step and its execution (interrupted by the user), not just the call.
DECLINES: Final = frozenset({PERMISSION_DECLINED, QUESTION_REJECTED})

# Provider calls
PROVIDER_UNKNOWN: Final = "provider.unknown"
PROVIDER_RATE_LIMIT: Final = "provider.rate-limit"
PROVIDER_INTERNAL: Final = "provider.internal"
PROVIDER_TRANSPORT: Final = "provider.transport"
PROVIDER_AUTH: Final = "provider.auth"
PROVIDER_QUOTA: Final = "provider.quota"
PROVIDER_CONTENT_FILTER: Final = "provider.content-filter"
PROVIDER_INVALID_REQUEST: Final = "provider.invalid-request"
PROVIDER_CONTEXT_OVERFLOW: Final = "provider.context-overflow"
PROVIDER_INVALID_OUTPUT: Final = "provider.invalid-output"
PROVIDER_NO_MODEL: Final = "provider.no-model"

# Compaction
COMPACTION_FAILED: Final = "compaction.failed"  # the summary call failed or did not follow the template
COMPACTION_UNAVAILABLE: Final = "compaction.unavailable"  # nothing older than the recent tail to summarise
COMPACTION_INTERRUPTED: Final = "compaction.interrupted"

# Hooks
HOOK_BLOCKED: Final = "hook.blocked"  # a user hook (or a plugin's before-tool hook) refused the call; says why

# Plugins
PLUGIN_HOOK: Final = "plugin.hook"  # a plugin's hook raised: the Step or tool call it ran for fails; names both
