// The Files actions of a session page: stage, clear and commit a revert, and fork (then open the new session).
// Each goes to the V2 API through ui.js's `api`; the revert's state comes back through the live transcript.
"use strict";

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button");
  if (!button) return;
  const sid = button.dataset.session && encodeURIComponent(button.dataset.session);
  try {
    if (button.classList.contains("revert-stage")) {
      await api("POST", `/api/session/${sid}/revert/stage`, { messageID: button.dataset.message });
      button.closest(".revert-preview").remove();
      say("revert staged");
    } else if (button.classList.contains("revert-clear")) {
      await api("POST", `/api/session/${sid}/revert/clear`);
      say("revert cleared: the files are back");
    } else if (button.classList.contains("revert-commit")) {
      await api("POST", `/api/session/${sid}/revert/commit`);
      say("revert committed");
    } else if (button.classList.contains("fork")) {
      const body = button.dataset.message ? { messageID: button.dataset.message } : {};
      const forked = await (await api("POST", `/api/session/${sid}/fork`, body)).json();
      window.location.assign(`/ui/session/${encodeURIComponent((forked.data || forked).id)}`);
    }
  } catch (err) { say(err.message); }
});
