// Gallery cards play their muted preview while hovered or focused.
(() => {
  "use strict";
  document.querySelectorAll(".world-card").forEach((card) => {
    const video = card.querySelector(".world-preview");
    if (!video) return;
    const start = () => { card.classList.add("previewing"); video.play().catch(() => {}); };
    const stop = () => { card.classList.remove("previewing"); video.pause(); };
    card.addEventListener("mouseenter", start);
    card.addEventListener("mouseleave", stop);
    card.addEventListener("focusin", start);
    card.addEventListener("focusout", stop);
  });
})();
