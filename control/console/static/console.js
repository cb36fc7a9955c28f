// The console's own script, loaded from a file (the CSP allows no inline
// script). Everything works without it: it only shows the copy buttons,
// which need the clipboard.
"use strict";
function initCopy(root) {
  if (!navigator.clipboard) {
    return;
  }
  root.querySelectorAll("button.copy-button[hidden]").forEach(function (b) {
    b.hidden = false;
    b.addEventListener("click", function () {
      navigator.clipboard.writeText(b.dataset.copy).then(function () {
        b.textContent = "Copied";
      });
    });
  });
}
document.addEventListener("DOMContentLoaded", function () { initCopy(document); });
document.addEventListener("htmx:afterSwap", function (e) { initCopy(e.target.parentNode || document); });
