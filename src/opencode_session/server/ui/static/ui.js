// The inspector's writes: each goes to the V2 API on this origin as JSON (the browser resends its credentials);
// what changes comes back through the live transcript, not through these answers.
"use strict";

async function api(method, path, body) {
  const init = { method, headers: { accept: "application/json" } };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const answer = await fetch(path, init);
  if (!answer.ok) {
    let message = answer.status + " " + answer.statusText;
    try {
      const body = await answer.json();
      message = body._tag ? `${body._tag}: ${body.message}` : (body.message || message);
    } catch (_) { /* not JSON */ }
    throw Object.assign(new Error(message), { status: answer.status });
  }
  return answer;
}

function session(el) { return encodeURIComponent(el.dataset.session); }

// `/compact` compacts; `/name arguments` runs the command `name` (its template expanded by the server); any other
// text is a prompt, delivered as the box says
async function send(form, slash, text) {
  const delivery = form.elements.delivery.value;
  if (slash === "/compact") {
    await api("POST", `/api/session/${session(form)}/compact`);
    return "compaction asked for";
  }
  if (slash !== null) {
    const [, name, args] = slash.match(/^\/(\S+)\s*([\s\S]*)$/) || [];
    if (name) {
      const query = new URLSearchParams({ name, arguments: args || "" });
      const command = await (await api("GET", `/ui/session/${session(form)}/command?${query}`)).json();
      if (command.agent) await api("POST", `/api/session/${session(form)}/agent`, { agent: command.agent });
      if (command.model) await api("POST", `/api/session/${session(form)}/model`, { model: command.model });
      await api("POST", `/api/session/${session(form)}/prompt`, { prompt: { text: command.text }, delivery });
      return `/${name} sent (${delivery})`;
    }
  }
  await api("POST", `/api/session/${session(form)}/prompt`, { prompt: { text }, delivery });
  return `sent (${delivery})`;
}

// one list of labels per question: the options ticked, then the person's own answer if typed
function answers(form) {
  return Array.from(form.querySelectorAll("fieldset"), (set) => {
    const n = set.dataset.index;
    const chosen = Array.from(set.querySelectorAll(`input[name="q${n}"]:checked`), (input) => input.value);
    const own = set.querySelector(`input[name="q${n}-own"]`);
    if (own && own.value.trim()) chosen.push(own.value.trim());
    return chosen;
  });
}

function say(text) {
  const status = document.getElementById("prompt-status");
  if (status) status.textContent = text;
}

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (form.id === "prompt") {
    event.preventDefault();
    const text = form.elements.text.value;
    if (!text.trim()) return;
    try {
      say(await send(form, text.trim().startsWith("/") ? text.trim() : null, text));
      form.elements.text.value = "";
    } catch (err) { say(err.message); }
  } else if (form.classList.contains("question")) {
    event.preventDefault();
    const path = `/api/session/${session(form)}/question/${encodeURIComponent(form.dataset.request)}`;
    try {
      if (event.submitter && event.submitter.value === "reject") {
        await api("POST", `${path}/reject`);
        say("question dismissed");
      } else {
        await api("POST", `${path}/reply`, { answers: answers(form) });
        say("answered");
      }
    } catch (err) { say(err.message); }
  } else if (form.classList.contains("ask")) {
    event.preventDefault();
    const reply = event.submitter ? event.submitter.value : "once";
    const message = form.elements.message.value.trim();
    const body = reply === "reject" && message ? { reply, message } : { reply };
    try {
      await api("POST", `/api/session/${session(form)}/permission/${encodeURIComponent(form.dataset.request)}/reply`,
                body);
      say(`permission: ${reply}`);
    } catch (err) { say(err.message); }
  } else if (form.id === "create") {
    event.preventDefault();
    const status = document.getElementById("create-status");
    const values = form.elements;
    const body = { location: { directory: values.directory.value.trim() } };
    if (values.title.value.trim()) body.title = values.title.value.trim();
    if (values.agent && values.agent.value) body.agent = values.agent.value;
    if (values.model && values.model.value) {
      const [providerID, ...rest] = values.model.value.split("/");
      body.model = { providerID, id: rest.join("/") };
    }
    try {
      const made = await (await api("POST", "/api/session", body)).json();
      window.location.assign(`/ui/session/${encodeURIComponent((made.data || made).id)}?focus=prompt`);
    } catch (err) {
      status.textContent = err.message;
      status.classList.add("error");
    }
  } else if (form.id === "rename") {
    event.preventDefault();
    try {
      await api("PATCH", `/api/session/${session(form)}`, { title: form.elements.title.value });
      say("renamed");
    } catch (err) { say(err.message); }
  }
});

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button");
  if (!button) return;
  if (button.classList.contains("cancel") && button.dataset.inbox) {
    try {
      await api("DELETE", `/api/session/${session(button)}/inbox/${encodeURIComponent(button.dataset.inbox)}`);
      say("cancelled");
    } catch (err) { say(err.message); }
  } else if (button.id === "interrupt") {
    try {
      const answer = await api("POST", `/api/session/${session(button)}/interrupt`);
      say((await answer.json()).interrupted ? "interrupted" : "nothing to interrupt");
    } catch (err) { say(err.message); }
  } else if (button.classList.contains("trust-folder")) {
    await trustFolder(button.closest(".trust-notice"), button);
  } else if (button.id === "delete") {
    if (!window.confirm("Delete this session and its children?")) return;
    try {
      await api("DELETE", `/api/session/${session(button)}`);
      window.location.assign("/");
    } catch (err) { say(err.message); }
  }
});

// "Trust this folder": trusts the Location with the configuration the notice was rendered for (a different one is
// refused: the user did not see it), then says what is on from now
async function trustFolder(notice, button) {
  const status = notice.querySelector(".trust-status");
  const query = new URLSearchParams({ "location[directory]": notice.dataset.directory });
  button.disabled = true;
  try {
    const state = await (await api("POST", `/api/experimental/trust?${query}`, { digest: notice.dataset.digest }))
      .json();
    if (!state.trusted) throw new Error("the folder is still not trusted");
    const later = notice.dataset.plugins ? " (its plugins at the next start of the server)" : "";
    notice.classList.add("trusted");
    notice.setAttribute("role", "status");
    notice.querySelector("p").textContent =
      `This folder is trusted: its ${notice.dataset.off} are on from now on${later}.`;
    button.remove();
    status.textContent = "";
  } catch (err) {
    button.disabled = false;
    status.textContent = err.status === 409
      ? "Not trusted: its configuration changed since this page showed it. Reload the page to see what it says now."
      : err.message;
    status.classList.add("error");
  }
}

document.addEventListener("change", async (event) => {
  const select = event.target;
  const form = select.form;
  if (!form || form.id !== "switches") return;
  const status = document.getElementById("switch-status");
  try {
    if (select.name === "agent") {
      await api("POST", `/api/session/${session(form)}/agent`, { agent: select.value });
    } else {
      const [providerID, ...rest] = select.value.split("/");
      await api("POST", `/api/session/${session(form)}/model`, { model: { providerID, id: rest.join("/") } });
    }
    status.textContent = `${select.name}: ${select.value}`;
    status.classList.remove("error");
  } catch (err) {
    status.textContent = err.message;
    status.classList.add("error");
  }
});

// In the prompt box Enter sends, as in every chat (Ctrl/Cmd+Enter too); Shift+Enter is a new line. An Enter that
// ends an IME composition (isComposing, or keyCode 229 where a browser does not say) only confirms the text.
document.addEventListener("keydown", (event) => {
  const box = event.target;
  if (event.key !== "Enter" || box.name !== "text" || !box.form || box.form.id !== "prompt") return;
  if (event.isComposing || event.keyCode === 229 || event.shiftKey || event.altKey) return;
  event.preventDefault();
  box.form.requestSubmit();
});

// times as the reader's local clock; the transcript keeps its place at the bottom while it grows
function localTimes(root) {
  for (const el of root.querySelectorAll("time[data-ms]")) {
    el.textContent = new Date(Number(el.dataset.ms)).toLocaleString();
  }
}
document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  const opened = new URL(window.location.href);
  if (opened.searchParams.get("focus") === "prompt") {  // a session just made here: ready to type its first prompt
    document.querySelector("#prompt textarea")?.focus();
    opened.searchParams.delete("focus");
    window.history.replaceState(null, "", opened);
  }
  if (document.getElementById("transcript")) window.scrollTo(0, document.body.scrollHeight);  // the newest first
});
// An older page goes in above what the reader sees, which stays where it was on the screen: the browser's own scroll
// anchoring does not act at the very top, where a reader who scrolled up to load it is. Measured from the bottom,
// which the insertion does not move.
let fromBottom = null;
document.addEventListener("htmx:beforeSwap", (event) => {
  const from = event.detail.requestConfig && event.detail.requestConfig.elt;
  if (from && from.classList && from.classList.contains("earlier")) {
    fromBottom = document.documentElement.scrollHeight - window.scrollY;
  }
});
document.addEventListener("htmx:afterSwap", () => {
  if (fromBottom === null) return;
  window.scrollTo(0, document.documentElement.scrollHeight - fromBottom);
  fromBottom = null;
});
// Near the top (300 px before it), the page before the oldest shown loads by itself, every time the reader gets
// there, however they scrolled (the button does the same by hand; hx-sync drops a second press while one loads).
const nearTop = new IntersectionObserver((seen) => {
  for (const entry of seen) {
    if (entry.isIntersecting && !entry.target.classList.contains("htmx-request")) entry.target.click();
  }
}, { rootMargin: "300px 0px 0px 0px" });
function watchEarlier(root) {
  if (root.matches && root.matches("button.earlier")) nearTop.observe(root);
  if (root.querySelectorAll) for (const button of root.querySelectorAll("button.earlier")) nearTop.observe(button);
}
document.addEventListener("DOMContentLoaded", () => watchEarlier(document));
document.addEventListener("htmx:load", (event) => watchEarlier(event.detail.elt));
document.addEventListener("htmx:afterSwap", (event) => localTimes(event.target));
// the session's name as the live transcript tells it (a rename here, in another tab or by the API): the breadcrumb,
// the tab's title, and the title box unless the reader is typing in it
document.addEventListener("htmx:afterSwap", (event) => {
  const named = event.target.id === "transcript" && document.getElementById("session-name");
  if (!named) return;
  document.getElementById("crumb").textContent = named.dataset.name;
  document.title = `${named.dataset.name} · opencode-session`;
  const box = document.querySelector("#rename input[name=title]");
  if (box && document.activeElement !== box) box.value = named.dataset.title;
});
// Streamed text goes, as text, to the end of the part it belongs to (a fresh transcript holds what streamed before
// it); a part the page does not show yet gets a place before the inbox until the next render puts it in its answer.
function appendDeltas(pieces) {
  for (const [id, text] of pieces) {
    let part = document.getElementById(id);
    if (!part) {
      part = document.createElement("div");
      part.id = id;
      part.className = "text streamed";
      document.getElementById("streaming").append(part);
    }
    part.append(text);
  }
}
document.addEventListener("htmx:sseBeforeMessage", (event) => {
  const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  if (event.detail.type === "delta") {
    event.preventDefault();
    appendDeltas(JSON.parse(event.detail.data));
  }
  if (atBottom) requestAnimationFrame(() => window.scrollTo(0, document.body.scrollHeight));
});
// A code block's copy button copies the block's text (the clipboard API where the page is a secure context, else
// the selection), then says so for a moment.
async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  const box = Object.assign(document.createElement("textarea"), { value: text });
  document.body.append(box);
  box.select();
  const done = document.execCommand("copy");
  box.remove();
  if (!done) throw new Error("copy refused");
}
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.copy");
  const block = button && button.closest(".code");
  if (!block) return;
  try {
    await copyText(block.querySelector("pre").textContent);
    button.textContent = "Copied";
  } catch (_) {
    button.textContent = "Copy failed";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
});
