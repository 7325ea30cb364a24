// The terminal panel: a shell at the session's Location over the PTY WebSocket (same origin, opened with a
// single-use ticket), drawn by xterm.js, which is loaded the first time the panel opens.
"use strict";

(() => {
  const panel = document.getElementById("terminal");
  const toggle = document.getElementById("terminal-toggle");
  if (!panel || !toggle) return;
  const screen = panel.querySelector(".screen");
  const where = "location%5Bdirectory%5D=" + encodeURIComponent(toggle.dataset.directory);
  const title = "inspector " + toggle.dataset.session;
  let term = null, fit = null, socket = null, ptyID = null;

  function status(text) { panel.querySelector(".terminal-status").textContent = text; }

  function load(src) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = resolve;
      script.onerror = () => reject(new Error("cannot load " + src));
      document.head.append(script);
    });
  }

  async function libraries() {
    if (window.Terminal && window.FitAddon) return;
    const css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = "/ui/static/vendor/xterm.css";
    document.head.append(css);
    await load("/ui/static/vendor/xterm.js");
    await load("/ui/static/vendor/xterm-addon-fit.js");
  }

  async function json(method, path, body) {
    const answer = await api(method, path, body);
    return answer.status === 204 ? null : answer.json();
  }

  async function terminalID() { // this session's terminal if it still runs, else a new one at its Location
    const mine = (await json("GET", "/api/pty?" + where)).data.find((p) => p.title === title && p.status === "running");
    return mine ? mine.id : (await json("POST", "/api/pty?" + where, { title })).data.id;
  }

  function sendSize() {
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    const control = new TextEncoder().encode(JSON.stringify({ size: { rows: term.rows, cols: term.cols } }));
    const frame = new Uint8Array(control.length + 1); // a 0x00 byte, then the JSON
    frame.set(control, 1);
    socket.send(frame);
  }

  function refit() {
    if (term && !panel.hidden) { fit.fit(); sendSize(); }
  }

  async function connect() {
    await libraries();
    if (!term) {
      term = new window.Terminal({ convertEol: false, cursorBlink: true, fontSize: 13, scrollback: 5000 });
      fit = new window.FitAddon.FitAddon();
      term.loadAddon(fit);
      term.open(screen);
      term.onData((data) => { if (socket && socket.readyState === WebSocket.OPEN) socket.send(data); });
      // Shift+Escape leaves the terminal for the page (every other key belongs to the shell)
      term.attachCustomKeyEventHandler((e) => {
        if (e.type === "keydown" && e.key === "Escape" && e.shiftKey) { toggle.focus(); return false; }
        return true;
      });
      new ResizeObserver(refit).observe(screen);
    } else {
      term.reset(); // the replay brings back what the terminal showed
    }
    fit.fit();
    ptyID = await terminalID();
    const ticket = (await json("POST", `/api/pty/${encodeURIComponent(ptyID)}/connect-token?${where}`)).data.ticket;
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(`${scheme}//${window.location.host}/api/pty/${encodeURIComponent(ptyID)}/connect?` +
                           `${where}&ticket=${encodeURIComponent(ticket)}`);
    socket.binaryType = "arraybuffer";
    socket.onmessage = (e) => { if (typeof e.data === "string") term.write(e.data); }; // binary: the cursor frame
    socket.onopen = () => { status("connected"); sendSize(); term.focus(); };
    socket.onclose = () => { status("disconnected (open it again to reconnect)"); socket = null; };
  }

  toggle.addEventListener("click", async () => {
    const opening = panel.hidden;
    panel.hidden = !opening;
    toggle.setAttribute("aria-expanded", String(opening));
    if (!opening) return;
    try {
      if (!socket) { status("connecting…"); await connect(); } else { refit(); term.focus(); }
    } catch (err) { status(err.message); }
  });

  panel.querySelector(".terminal-end").addEventListener("click", async () => {
    if (socket) { socket.onclose = null; socket.close(); socket = null; }
    try {
      if (ptyID) await api("DELETE", `/api/pty/${encodeURIComponent(ptyID)}?${where}`);
      ptyID = null;
      status("ended");
      panel.hidden = true;
      toggle.setAttribute("aria-expanded", "false");
      toggle.focus();
    } catch (err) { status(err.message); }
  });
})();
