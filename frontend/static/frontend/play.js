// The play page: signalling over the WebSocket, WebRTC media + inputs, controls and the HUD.
(() => {
  "use strict";

  const root = document.getElementById("play-root");
  if (!root) return;

  const $ = (id) => document.getElementById(id);
  const video = $("stream");
  const iceServers = JSON.parse($("ice-servers").textContent || "[]");
  const KEY_BITS = { W: 1, A: 2, S: 4, D: 8, LEFT: 16, RIGHT: 32, UP: 64, DOWN: 128 };
  const KEY_CODES = {
    KeyW: "W", KeyA: "A", KeyS: "S", KeyD: "D",
    ArrowLeft: "LEFT", ArrowRight: "RIGHT", ArrowUp: "UP", ArrowDown: "DOWN",
  };
  const LOOK_RADIANS_PER_PIXEL = 0.0025;
  const MAX_DELTA = 0.45; // the server refuses larger camera deltas per message
  const TICK_MS = 50;

  const state = {
    ws: null, pc: null, input: null, events: null, micSender: null, micTrack: null,
    final: false, live: false, reconnects: 0, seq: 0, keys: 0, lastSentKeys: -1,
    yaw: 0, pitch: 0, liveSince: null, history: [], historyIndex: -1,
    lastBytes: 0, lastStatsAt: 0, serverLatency: null, lastKeysSentAt: 0, frameLateMs: [],
  };
  window.worldsite = state; // tests and the bench read the HUD numbers from here

  // --- overlay -------------------------------------------------------------------------------
  function showOverlay(title, text, { final = false } = {}) {
    $("overlay").hidden = false;
    $("overlay-title").textContent = title;
    $("overlay-text").textContent = text || "";
    $("overlay-actions").hidden = !final;
  }
  function hideOverlay() { $("overlay").hidden = true; }
  function formatSeconds(s) {
    s = Math.max(0, Math.round(s));
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
  }

  // --- signalling ------------------------------------------------------------------------------
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}${root.dataset.wsPath}`);
    state.ws = ws;
    ws.onmessage = (event) => handle(JSON.parse(event.data));
    ws.onclose = (event) => {
      if (state.final) return;
      if (event.code === 4401 || event.code === 4404) {
        state.final = true;
        showOverlay("This session is not available", "Log in with the account that started it.", { final: true });
        return;
      }
      // A network blip: the engine keeps the world for a few seconds, so reconnect quickly.
      state.reconnects += 1;
      const delay = Math.min(5000, 500 * state.reconnects);
      showOverlay("Reconnecting…", "The connection dropped; your world is still running.");
      setTimeout(connect, delay);
    };
    ws.onopen = () => { state.reconnects = 0; };
  }

  function send(message) {
    if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(message));
  }

  function handle(message) {
    switch (message.type) {
      case "status": return onStatus(message);
      case "ready": return startPeer();
      case "answer": return state.pc && state.pc.setRemoteDescription({ type: "answer", sdp: message.sdp });
      case "stats": return onStats(message);
      case "error": return onError(message);
      default: return undefined;
    }
  }

  function onStatus(message) {
    if (message.state === "queued") {
      const eta = message.eta_s ? ` — about ${formatSeconds(message.eta_s)} to wait` : "";
      showOverlay(`You are number ${message.position} in the queue`, `Every world engine is busy${eta}. Keep this tab open.`);
    } else if (message.state === "starting") {
      showOverlay("Starting the world…", "The world engine is loading your world.");
    } else if (message.state === "live") {
      state.live = true;
      state.liveSince = state.liveSince || Date.now();
      hideOverlay();
      tryPlay();
    } else if (message.state === "ended" || message.state === "failed") {
      state.final = true;
      state.live = false;
      root.dataset.finalState = message.state;
      const title = message.state === "failed" ? "The session stopped" : "Session ended";
      showOverlay(title, message.reason || "", { final: true });
      closePeer();
    }
  }

  function onError(message) {
    const feedback = $("prompt-feedback");
    if (message.code === "not_ready") return;
    feedback.textContent = message.message || "Something went wrong.";
  }

  function onStats(message) {
    if (typeof message.seconds_left === "number") $("hud-left").textContent = formatSeconds(message.seconds_left);
    if (typeof message.input_latency_ms_p50 === "number") state.serverLatency = message.input_latency_ms_p50;
    if (typeof message.frames === "number") state.engineFrames = message.frames; // the bench reads it
    if (typeof message.frame_late_ms_max === "number") {
      state.frameLateMs.push(message.frame_late_ms_max); // one a second; the bench reads them
      if (state.frameLateMs.length > 600) state.frameLateMs.shift();
    }
  }

  // --- WebRTC ----------------------------------------------------------------------------------
  async function startPeer() {
    closePeer();
    const pc = new RTCPeerConnection({ iceServers });
    state.pc = pc;
    pc.addTransceiver("video", { direction: "recvonly" });
    const audio = pc.addTransceiver("audio", { direction: "sendrecv" });
    state.micSender = audio.sender;
    if (state.micTrack) await audio.sender.replaceTrack(state.micTrack);
    state.input = pc.createDataChannel("input", { ordered: false, maxRetransmits: 0 });
    state.events = pc.createDataChannel("events", { ordered: true });
    state.events.onmessage = (event) => onEngineMessage(JSON.parse(event.data));
    // The picture and the sound come as two streams (so the browser never holds the picture
    // back to match the sound's buffer); the page plays both in the one <video>.
    const shown = new MediaStream();
    pc.ontrack = (event) => {
      if (!shown.getTracks().includes(event.track)) shown.addTrack(event.track);
      if (video.srcObject !== shown) video.srcObject = shown;
      tryPlay();
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "failed" && !state.final && state.pc === pc) {
        showOverlay("Reconnecting…", "The media connection dropped.");
        send({ type: "ping", t: Date.now() });
        startPeer();
      }
    };
    await pc.setLocalDescription(await pc.createOffer());
    await waitForIceGathering(pc, 3000);
    send({ type: "offer", sdp: pc.localDescription.sdp });
  }

  function waitForIceGathering(pc, timeoutMs) {
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => { pc.removeEventListener("icegatheringstatechange", check); resolve(); };
      const check = () => { if (pc.iceGatheringState === "complete") done(); };
      pc.addEventListener("icegatheringstatechange", check);
      setTimeout(done, timeoutMs);
    });
  }

  function closePeer() {
    if (state.pc) state.pc.close();
    state.pc = null;
    state.input = null;
    state.events = null;
  }

  function onEngineMessage(message) {
    if (message.type === "prompt_ack") $("prompt-feedback").textContent = `“${message.text}” — the world is listening.`;
    else if (message.type === "error") $("prompt-feedback").textContent = message.message;
    else if (message.type === "ended") onStatus({ state: message.failed ? "failed" : "ended", reason: message.reason });
  }

  function tryPlay() {
    video.muted = false;
    video.play().then(() => { $("unmute").hidden = true; }).catch(() => {
      // Autoplay with sound needs a gesture on this page: offer one.
      $("overlay").hidden = false;
      $("unmute").hidden = false;
    });
  }
  $("unmute").addEventListener("click", () => { tryPlay(); if (state.live) hideOverlay(); });

  // --- inputs ----------------------------------------------------------------------------------
  function sendData(channel, message) {
    if (channel && channel.readyState === "open") channel.send(JSON.stringify(message));
  }

  function typingInField(event) {
    const tag = event.target && event.target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (event.target && event.target.isContentEditable);
  }

  function setKey(name, down) {
    const bit = KEY_BITS[name];
    const before = state.keys;
    state.keys = down ? state.keys | bit : state.keys & ~bit;
    if (state.keys !== before) sendInputState(true);
  }

  document.addEventListener("keydown", (event) => {
    if (typingInField(event) || event.metaKey || event.ctrlKey || event.altKey) return;
    const name = KEY_CODES[event.code];
    if (!name) return;
    event.preventDefault();
    setKey(name, true);
  });
  document.addEventListener("keyup", (event) => {
    const name = KEY_CODES[event.code];
    if (name) setKey(name, false);
  });
  window.addEventListener("blur", () => { state.keys = 0; });

  // Mouse look with pointer lock.
  video.addEventListener("click", () => { if (state.live && video.requestPointerLock) video.requestPointerLock(); });
  document.addEventListener("mousemove", (event) => {
    if (document.pointerLockElement !== video) return;
    state.yaw += event.movementX * LOOK_RADIANS_PER_PIXEL;
    state.pitch -= event.movementY * LOOK_RADIANS_PER_PIXEL;
  });

  // Touch: the pad walks, dragging the picture looks.
  const pad = $("touch-pad");
  pad.querySelectorAll("button").forEach((button) => {
    const key = button.dataset.key;
    button.addEventListener("pointerdown", (e) => { e.preventDefault(); setKey(key, true); });
    ["pointerup", "pointerleave", "pointercancel"].forEach((t) => button.addEventListener(t, () => setKey(key, false)));
  });
  let lastTouch = null;
  video.addEventListener("touchstart", (e) => { lastTouch = e.touches[0]; }, { passive: true });
  video.addEventListener("touchmove", (e) => {
    const touch = e.touches[0];
    if (lastTouch) {
      state.yaw += (touch.clientX - lastTouch.clientX) * LOOK_RADIANS_PER_PIXEL * 2;
      state.pitch -= (touch.clientY - lastTouch.clientY) * LOOK_RADIANS_PER_PIXEL * 2;
    }
    lastTouch = touch;
  }, { passive: true });

  // Gamepad: left stick walks, right stick looks (continuous).
  function pollGamepad() {
    const pads = navigator.getGamepads ? Array.from(navigator.getGamepads()).filter(Boolean) : [];
    if (!pads.length) return 0;
    const [lx, ly, rx, ry] = pads[0].axes.concat([0, 0, 0, 0]);
    let mask = 0;
    if (ly < -0.4) mask |= KEY_BITS.W;
    if (ly > 0.4) mask |= KEY_BITS.S;
    if (lx < -0.4) mask |= KEY_BITS.A;
    if (lx > 0.4) mask |= KEY_BITS.D;
    const dead = (v) => (Math.abs(v) < 0.15 ? 0 : v);
    state.yaw += dead(rx) * 0.06;
    state.pitch -= dead(ry) * 0.04;
    return mask;
  }

  // The held keys and the accumulated camera delta, unordered, no retransmits. Sending the
  // full state (not key events) means a lost packet is corrected by the next one. A key change
  // goes out at once; the tick repeats the state and carries mouse/gamepad motion.
  function sendInputState(force) {
    if (!state.live) return;
    const keys = state.keys | pollGamepad();
    const yaw = Math.max(-MAX_DELTA, Math.min(MAX_DELTA, state.yaw));
    const pitch = Math.max(-MAX_DELTA, Math.min(MAX_DELTA, state.pitch));
    const now = performance.now();
    const changed = keys !== state.lastSentKeys || yaw !== 0 || pitch !== 0;
    if (!force && !changed && now - state.lastKeysSentAt < 250) return;
    state.yaw -= yaw;
    state.pitch -= pitch;
    state.seq += 1;
    state.lastSentKeys = keys;
    state.lastKeysSentAt = now;
    sendData(state.input, { type: "input", keys, yaw, pitch, seq: state.seq });
  }
  setInterval(() => sendInputState(false), TICK_MS);

  // Prompts: Enter sends, arrows walk the history; typing never reaches the world.
  const promptField = $("prompt");
  function sendPrompt(text) {
    text = text.trim();
    if (!text) return;
    if (!state.events || state.events.readyState !== "open") {
      $("prompt-feedback").textContent = "Wait until the world is live, then try again.";
      return;
    }
    sendData(state.events, { type: "prompt", text });
    state.history.unshift(text);
    state.history = state.history.slice(0, 30);
    state.historyIndex = -1;
    $("prompt-feedback").textContent = `Sending “${text}”…`;
  }
  $("prompt-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sendPrompt(promptField.value);
    promptField.value = "";
  });
  promptField.addEventListener("keydown", (event) => {
    event.stopPropagation();
    if (event.key === "ArrowUp" && state.history.length) {
      state.historyIndex = Math.min(state.history.length - 1, state.historyIndex + 1);
      promptField.value = state.history[state.historyIndex];
      event.preventDefault();
    } else if (event.key === "ArrowDown") {
      state.historyIndex = Math.max(-1, state.historyIndex - 1);
      promptField.value = state.historyIndex < 0 ? "" : state.history[state.historyIndex];
      event.preventDefault();
    } else if (event.key === "Escape") {
      promptField.blur();
    }
  });
  document.querySelectorAll(".chip").forEach((chip) => chip.addEventListener("click", () => sendPrompt(chip.dataset.prompt)));

  // Reference image: drop or pick, uploaded over HTTP (validated there), then pushed to the engine.
  const drop = $("drop-zone");
  const fileInput = $("image-input");
  async function upload(file) {
    const feedback = $("image-feedback");
    if (!file) return;
    if (file.size > 4 * 1024 * 1024) { feedback.textContent = "That image is over 4 MB."; return; }
    const body = new FormData();
    body.append("image", file);
    feedback.textContent = "Uploading…";
    try {
      const response = await fetch(root.dataset.imageUrl, {
        method: "POST", body, headers: { "X-CSRFToken": root.dataset.csrf }, credentials: "same-origin",
      });
      const result = await response.json();
      feedback.textContent = response.ok ? "The world is taking on your picture's colours." : result.error;
    } catch (err) {
      feedback.textContent = "The upload failed; check your connection.";
    }
  }
  drop.addEventListener("click", () => fileInput.click());
  drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); fileInput.click(); } });
  fileInput.addEventListener("change", () => upload(fileInput.files[0]));
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("drop-active"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("drop-active"));
  drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("drop-active"); upload(e.dataTransfer.files[0]); });

  // Microphone: its track rides the audio transceiver negotiated up front.
  $("mic-toggle").addEventListener("click", async () => {
    const button = $("mic-toggle");
    if (state.micTrack) {
      state.micTrack.stop();
      state.micTrack = null;
      if (state.micSender) await state.micSender.replaceTrack(null);
      button.textContent = "Microphone: off";
      button.setAttribute("aria-pressed", "false");
      return;
    }
    try {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
      state.micTrack = stream.getAudioTracks()[0];
      if (state.micSender) await state.micSender.replaceTrack(state.micTrack);
      button.textContent = "Microphone: on";
      button.setAttribute("aria-pressed", "true");
    } catch (err) {
      $("prompt-feedback").textContent = "The microphone is not available (permission denied?).";
    }
  });

  $("end-session").addEventListener("click", () => {
    send({ type: "end" });
    $("end-session").disabled = true;
  });

  // HUD from getStats: decoded fps, bitrate, and input-to-frame latency (engine + network + jitter buffer).
  setInterval(async () => {
    if (state.liveSince) $("hud-timer").textContent = formatSeconds((Date.now() - state.liveSince) / 1000);
    if (!state.pc) return;
    const stats = await state.pc.getStats();
    let rtt = 0;
    stats.forEach((report) => {
      if (report.type === "inbound-rtp" && report.kind === "video") {
        state.framesDecoded = report.framesDecoded || 0;
        state.fps = report.framesPerSecond || 0;
        $("hud-fps").textContent = Math.round(state.fps);
        const now = report.timestamp;
        if (state.lastStatsAt) {
          const kbit = ((report.bytesReceived - state.lastBytes) * 8) / (now - state.lastStatsAt);
          $("hud-bitrate").textContent = Math.round(kbit);
        }
        state.lastBytes = report.bytesReceived;
        state.lastStatsAt = now;
        const emitted = report.jitterBufferEmittedCount || 0;
        state.jitterMs = emitted ? (1000 * report.jitterBufferDelay) / emitted : 0;
      } else if (report.type === "inbound-rtp" && report.kind === "audio") {
        state.audioSamplesReceived = report.totalSamplesReceived || 0;
      } else if (report.type === "candidate-pair" && report.state === "succeeded" && report.currentRoundTripTime) {
        rtt = report.currentRoundTripTime * 1000;
      }
    });
    if (state.serverLatency !== null) {
      state.latencyMs = Math.round(state.serverLatency + rtt / 2 + (state.jitterMs || 0));
      $("hud-latency").textContent = state.latencyMs;
    }
  }, 1000);

  if (window.matchMedia("(pointer: coarse)").matches) pad.classList.add("touch-pad-visible");
  connect();
})();
