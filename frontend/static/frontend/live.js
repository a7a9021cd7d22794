// Live rooms: the spectator's page (/live/<room>/) and the host's Live room panel on the play
// page. Both talk to the room's socket (/ws/live/<room>/); spectators also watch the stream
// over a receive-only WebRTC connection the socket negotiates.
(() => {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const viewerRoot = $("live-root");
  const hostPanel = $("room-panel");
  if (!viewerRoot && !hostPanel) return;
  const isHost = !viewerRoot;

  const room = {
    ws: null, pc: null, final: false, role: isHost ? "host" : "viewer", state: null,
    lastApplied: null, applied: [], framesDecoded: 0, fps: 0, viewerCount: 0,
    finalState: null, finalReason: "", reconnects: 0, lastBytes: 0, lastStatsAt: 0,
  };
  window.liveRoom = room; // the tests read these

  function wsPath() { return isHost ? hostPanel.dataset.wsPath : viewerRoot.dataset.wsPath; }

  // --- the room's socket ------------------------------------------------------------------------
  function connect() {
    if (!wsPath() || room.final) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}${wsPath()}`);
    room.ws = ws;
    ws.onmessage = (event) => handle(JSON.parse(event.data));
    ws.onopen = () => { room.reconnects = 0; };
    ws.onclose = (event) => {
      if (room.final) return;
      if (event.code === 4403 || event.code === 4404 || event.code === 4401) {
        const text = event.code === 4404 ? "This live room does not exist." : "You can't watch this room.";
        return finish("removed", text);
      }
      room.reconnects += 1;
      setTimeout(connect, Math.min(5000, 500 * room.reconnects));
    };
  }

  function send(message) {
    if (room.ws && room.ws.readyState === WebSocket.OPEN) room.ws.send(JSON.stringify(message));
  }

  function handle(message) {
    switch (message.type) {
      case "room": return onState(message);
      case "applied": return onApplied(message.prompt);
      case "answer": return room.pc && room.pc.setRemoteDescription({ type: "answer", sdp: message.sdp });
      case "prompt_queued": return feedback(`“${message.text}” is in the queue.`);
      case "closed": return finish(message.state, message.reason || "The host ended the session.");
      case "removed": return finish("removed", message.message);
      case "error":
        if (message.code === "not_ready") { setTimeout(startPeer, 2000); return undefined; }
        return feedback(message.message || "Something went wrong.");
      default: return undefined;
    }
  }

  function feedback(text) {
    const target = isHost ? $("room-feedback") : $("audience-feedback");
    if (target) target.textContent = text;
  }

  // --- what every page shows --------------------------------------------------------------------
  function onState(state) {
    const first = room.state === null;
    room.state = state;
    room.viewerCount = state.viewer_count;
    if (isHost) {
      $("room-viewers").textContent = state.viewer_count;
      renderViewers(state.viewers);
      $("room-audience-steers").checked = state.steering === "audience";
    } else {
      $("hud-viewers").textContent = state.viewer_count;
      $("hud-steering").textContent = state.steering === "audience" ? "the audience steers" : "host picks prompts";
    }
    $("round-clock").textContent = state.round_ends_in === null ? "" : `next pick in ${state.round_ends_in} s`;
    room.roundEndsAt = state.round_ends_in === null ? null : Date.now() + state.round_ends_in * 1000;
    renderQueue(state.queue);
    if (state.last_applied && !room.lastApplied) onApplied(state.last_applied);
    if (first && !isHost) startPeer();
  }

  function onApplied(prompt) {
    room.lastApplied = prompt;
    room.applied.push(prompt);
    $("room-applied").hidden = false;
    $("room-applied-text").textContent = `“${prompt.text}”`;
    const how = prompt.applied_by === "audience" ? "won the audience's vote" : "applied by the host";
    $("room-applied-by").textContent = `sent by ${prompt.author} · ${how}`;
  }

  function renderQueue(queue) {
    const list = $("room-queue");
    list.replaceChildren(...queue.map((prompt) => {
      const item = document.createElement("li");
      item.dataset.promptId = prompt.id;
      const text = document.createElement("span");
      text.className = "prompt-text";
      text.textContent = prompt.text;
      const author = document.createElement("span");
      author.className = "prompt-author";
      author.textContent = `from ${prompt.author}`;
      text.append(author);
      const support = document.createElement("span");
      support.className = "support";
      support.title = "supporters";
      support.textContent = `+${prompt.support}`;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "button button-small" + (isHost ? "" : " button-ghost");
      button.textContent = isHost ? "Apply" : "+1";
      button.setAttribute("aria-label", `${isHost ? "Apply" : "Support"} “${prompt.text}”`);
      button.addEventListener("click", () => send({ type: isHost ? "apply" : "support", prompt: prompt.id }));
      item.append(text, support, button);
      return item;
    }));
    $("queue-empty").hidden = queue.length > 0;
  }

  function renderViewers(names) {
    const list = $("room-viewer-list");
    list.replaceChildren(...names.map((name) => {
      const item = document.createElement("span");
      item.className = "room-viewer";
      item.textContent = name;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "link-button";
      remove.textContent = "remove";
      remove.setAttribute("aria-label", `Remove ${name} from the room`);
      remove.addEventListener("click", () => send({ type: "remove", user: name }));
      item.append(remove);
      return item;
    }));
  }

  setInterval(() => {
    if (room.roundEndsAt) {
      const left = Math.max(0, Math.round((room.roundEndsAt - Date.now()) / 1000));
      $("round-clock").textContent = `next pick in ${left} s`;
    }
  }, 500);

  function finish(state, reason) {
    room.final = true;
    room.finalState = state;
    room.finalReason = reason;
    if (room.pc) room.pc.close();
    room.pc = null;
    if (isHost) {
      feedback(reason);
      return;
    }
    viewerRoot.dataset.finalState = state;
    $("live-badge").hidden = true;
    $("overlay").hidden = false;
    $("overlay-title").textContent = state === "removed" ? "You left this room" : "This live room has ended";
    $("overlay-text").textContent = reason;
    $("overlay-actions").hidden = false;
    $("unmute").hidden = true;
    ["hud-fps", "hud-bitrate"].forEach((id) => { $(id).textContent = "–"; });
    feedback(state === "removed" ? "You can no longer send suggestions here." : "The room has ended.");
    const form = $("audience-prompt-form");
    form.querySelectorAll("input, button").forEach((element) => { element.disabled = true; });
  }

  // --- the host's panel -------------------------------------------------------------------------
  if (isHost) {
    const csrf = document.getElementById("play-root").dataset.csrf;
    function showRoom(url) {
      $("room-live").hidden = false;
      $("room-link").textContent = url;
      $("room-link").href = url;
      $("room-submit").textContent = "Update the room";
    }
    $("room-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const body = new FormData($("room-form"));
      feedback("Opening…");
      try {
        const response = await fetch(hostPanel.dataset.openUrl, {
          method: "POST", body, headers: { "X-CSRFToken": csrf }, credentials: "same-origin",
        });
        const result = await response.json();
        if (!response.ok) { feedback(result.error); return; }
        $("room-invite").value = "";
        const who = result.visibility === "listed" ? "Listed in Live now: any member can watch." : "Private: only invited members can watch.";
        feedback(result.invited.length ? `${who} Invited: ${result.invited.join(", ")}.` : who);
        const opened = !hostPanel.dataset.wsPath;
        hostPanel.dataset.wsPath = result.ws_path;
        showRoom(result.url);
        if (opened) connect();
      } catch (err) {
        feedback("The room could not be opened; check your connection.");
      }
    });
    $("room-audience-steers").addEventListener("change", (event) => {
      send({ type: "steering", mode: event.target.checked ? "audience" : "host" });
    });
    if (hostPanel.dataset.wsPath) { showRoom(hostPanel.dataset.roomUrl); connect(); }
    return;
  }

  // --- the spectator's stream -------------------------------------------------------------------
  const video = $("stream");
  const iceServers = JSON.parse($("ice-servers").textContent || "[]");

  async function startPeer() {
    if (room.final) return;
    if (room.pc) room.pc.close();
    const pc = new RTCPeerConnection({ iceServers });
    room.pc = pc;
    pc.addTransceiver("video", { direction: "recvonly" });
    pc.addTransceiver("audio", { direction: "recvonly" });
    pc.ontrack = (event) => {
      if (!video.srcObject) video.srcObject = event.streams[0] || new MediaStream();
      if (!video.srcObject.getTracks().includes(event.track)) video.srcObject.addTrack(event.track);
      tryPlay();
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "connected") {
        $("overlay").hidden = true;
      } else if (pc.connectionState === "failed" && room.pc === pc && !room.final) {
        setTimeout(startPeer, 1000);
      }
    };
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((resolve) => {
      if (pc.iceGatheringState === "complete") return resolve();
      const check = () => { if (pc.iceGatheringState === "complete") resolve(); };
      pc.addEventListener("icegatheringstatechange", check);
      setTimeout(resolve, 3000);
    });
    send({ type: "offer", sdp: pc.localDescription.sdp });
  }

  // With sound where the browser allows it; otherwise muted, with a button for the sound.
  function tryPlay() {
    video.muted = false;
    video.play().then(() => { $("unmute").hidden = true; }).catch(() => {
      video.muted = true;
      video.play().catch(() => undefined);
      $("unmute").hidden = room.final;
    });
  }

  $("unmute").addEventListener("click", () => {
    video.muted = false;
    video.play().catch(() => undefined);
    $("unmute").hidden = true;
  });

  $("audience-prompt-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const field = $("audience-prompt");
    const text = field.value.trim();
    if (!text) return;
    send({ type: "prompt", text });
    field.value = "";
    feedback(`Sending “${text}”…`);
  });

  setInterval(async () => {
    if (!room.pc) return;
    const stats = await room.pc.getStats();
    stats.forEach((report) => {
      if (report.type === "inbound-rtp" && report.kind === "audio") room.audioSamples = report.totalSamplesReceived || 0;
      if (report.type !== "inbound-rtp" || report.kind !== "video") return;
      room.framesDecoded = report.framesDecoded || 0;
      room.fps = report.framesPerSecond || 0;
      $("hud-fps").textContent = Math.round(room.fps);
      if (room.lastStatsAt) {
        const kbit = ((report.bytesReceived - room.lastBytes) * 8) / (report.timestamp - room.lastStatsAt);
        $("hud-bitrate").textContent = Math.round(kbit);
      }
      room.lastBytes = report.bytesReceived;
      room.lastStatsAt = report.timestamp;
    });
  }, 1000);

  if (viewerRoot.dataset.open === "1") connect();
  else room.final = true;
})();
