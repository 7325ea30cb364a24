// Drives `ocs serve` with OpenCode's official TypeScript SDK, scoped to a directory the way its README does
// (createOpencodeClient({baseUrl, directory})). argv: the SDK's package directory, the server URL, the directory.
// Prints one JSON object: {calls: [{name, status}], facts: {...}}.
import { pathToFileURL } from "node:url"
import path from "node:path"

const [pkg, baseUrl, directory] = process.argv.slice(2)
const { createOpencodeClient } = await import(pathToFileURL(path.join(pkg, "dist", "v2", "index.js")).href)
const client = createOpencodeClient({ baseUrl, directory })
const v2 = client.v2
const calls = []
const facts = {}

async function call(name, fn) {
  const result = await fn()
  calls.push({ name, status: result.response?.status ?? 0, error: result.error ?? null })
  return result.data
}

// An SSE operation: the stream's first item, within a deadline (the SDK opens the request when it is iterated).
async function firstItem(name, open) {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), 5000)
  let status = 0
  let first = null
  try {
    const { stream } = await open({
      signal: controller.signal,
      sseMaxRetryAttempts: 1,
      onSseError: (err) => { status = status || (err?.status ?? -1) },
      onSseEvent: () => { status = status || 200 },
    })
    for await (const item of stream) {
      first = item
      break
    }
  } catch (err) {
    if (!controller.signal.aborted) status = status || -1
  } finally {
    clearTimeout(timer)
    controller.abort()
  }
  calls.push({ name, status: first ? 200 : status, error: first ? null : "no item" })
  return first
}

await call("health.get", () => v2.health.get())
facts.location = (await call("location.get", () => v2.location.get()))?.directory
await call("agent.list", () => v2.agent.list())
const created = (await call("session.create", () => v2.session.create({})))?.data
const sessionID = created?.id
facts.sessionDirectory = created?.location?.directory
await call("session.list", () => v2.session.list())
await call("session.active", () => v2.session.active())
await call("session.get", () => v2.session.get({ sessionID }))
await call("session.switchAgent", () => v2.session.switchAgent({ sessionID, agent: "plan" }))
const admitted = await call("session.prompt", () => v2.session.prompt({ sessionID, prompt: { text: "hi" } }))
facts.admitted = Boolean(admitted)
await call("session.messages", () => v2.session.messages({ sessionID }))
await call("session.context", () => v2.session.context({ sessionID }))
await call("session.interrupt", () => v2.session.interrupt({ sessionID }))
await firstItem("session.events", (opts) => v2.session.events({ sessionID }, opts))
const connected = await firstItem("event.subscribe", (opts) => v2.event.subscribe(opts))
facts.firstEvent = connected?.type ?? null
await call("model.list", () => v2.model.list())
await call("provider.list", () => v2.provider.list())
await call("integration.list", () => v2.integration.list())
await call("permission.request.list", () => v2.permission.request.list())
await call("permission.saved.list", () => v2.permission.saved.list())
await call("question.request.list", () => v2.question.request.list())
await call("fs.list", () => v2.fs.list())
await call("fs.find", () => v2.fs.find({ query: "marker" }))
await call("command.list", () => v2.command.list())
await call("skill.list", () => v2.skill.list())
await call("reference.list", () => v2.reference.list())
await call("pty.list", () => v2.pty.list())
// a prompt that conflicts with nothing: an explicit location beside the client's directory, as a user may write
const elsewhere = (await call("session.create.elsewhere", () => v2.session.create({ location: { directory: path.dirname(directory) } })))?.data
facts.elsewhereDirectory = elsewhere?.location?.directory
// refusals the SDK must be able to read: an unknown agent at once, and a route this server does not have
const unknown = await v2.session.switchAgent({ sessionID, agent: "no-such-agent" })
facts.unknownAgent = { status: unknown.response.status, error: unknown.error }
const missing = await client.client.get({ url: "/api/no-such-route" })
facts.missingRoute = { status: missing.response.status, error: missing.error }
try {
  await client.client.get({ url: "/api/no-such-route", throwOnError: true })
} catch (err) {
  facts.missingRouteMessage = err.message
}
console.log(JSON.stringify({ calls, facts }))
