// Export rows poll their status until the video is ready (or failed), showing live progress.
(() => {
  "use strict";
  const active = (status) => status === "queued" || status === "running";
  document.querySelectorAll(".export-row").forEach((row) => {
    if (!active(row.dataset.status)) return;
    const bar = row.querySelector(".meter");
    const label = row.querySelector(".export-status");
    const file = row.querySelector(".export-file");
    const poll = async () => {
      try {
        const response = await fetch(row.dataset.statusUrl, { credentials: "same-origin" });
        const state = await response.json();
        row.dataset.status = state.status;
        bar.setAttribute("aria-valuenow", state.progress);
        bar.querySelector("span").style.width = `${state.progress}%`;
        label.className = `export-status state state-${state.status}`;
        label.textContent = state.status === "running" ? `${state.status_label} ${state.progress}%` : state.status_label;
        if (state.download_url) {
          file.innerHTML = "";
          const link = document.createElement("a");
          link.className = "button button-small";
          link.href = state.download_url;
          link.textContent = "Download MP4";
          file.appendChild(link);
        }
        if (state.error) {
          const error = document.createElement("p");
          error.className = "error";
          error.textContent = state.error;
          label.after(error);
        }
        if (active(state.status)) setTimeout(poll, 1500);
      } catch (err) {
        setTimeout(poll, 5000);
      }
    };
    poll();
  });
})();
