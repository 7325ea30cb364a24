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
    try { message = (await answer.json()).message || message; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return answer;
}

function session(el) { return encodeURIComponent(el.dataset.session); }

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
      await api("POST", `/api/session/${session(form)}/prompt`,
                { prompt: { text }, delivery: form.elements.delivery.value });
      form.elements.text.value = "";
      say("sent");
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
  if (button.id === "interrupt") {
    try {
      const answer = await api("POST", `/api/session/${session(button)}/interrupt`);
      say((await answer.json()).interrupted ? "interrupted" : "nothing to interrupt");
    } catch (err) { say(err.message); }
  } else if (button.id === "delete") {
    if (!window.confirm("Delete this session and its children?")) return;
    try {
      await api("DELETE", `/api/session/${session(button)}`);
      window.location.assign("/");
    } catch (err) { say(err.message); }
  }
});

document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.name === "text") {
    event.preventDefault();
    event.target.form.requestSubmit();
  }
});

// times as the reader's local clock; the transcript keeps its place at the bottom while it grows
function localTimes(root) {
  for (const el of root.querySelectorAll("time[data-ms]")) {
    el.textContent = new Date(Number(el.dataset.ms)).toLocaleString();
  }
}
document.addEventListener("DOMContentLoaded", () => localTimes(document));
document.addEventListener("htmx:afterSwap", (event) => localTimes(event.target));
document.addEventListener("htmx:sseBeforeMessage", (event) => {
  // a fresh transcript holds the text streamed so far: what streams after it starts again below it
  const streaming = document.getElementById("streaming");
  if (event.detail.type === "transcript" && streaming) streaming.replaceChildren();
  const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  if (atBottom) requestAnimationFrame(() => window.scrollTo(0, document.body.scrollHeight));
});
