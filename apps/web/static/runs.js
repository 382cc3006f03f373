// The Runs page: open another run directory (or a folder of them) by its path.
"use strict";
(() => {
  const {post} = pyql;
  const form = document.getElementById("open-form");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const error = document.getElementById("open-error");
    error.textContent = "";
    try {
      const opened = await post("/api/runs/open", {path: document.getElementById("open-path").value});
      window.location.href = opened.url;
    } catch (failure) {
      error.textContent = failure.message;
    }
  });
})();
