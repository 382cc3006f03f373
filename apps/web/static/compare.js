// The comparison table: flipped questions only, or every shared one.
"use strict";
(() => {
  const box = document.getElementById("only-flipped");
  function apply() {
    for (const tr of document.querySelectorAll("#compare-table tr.pair")) {
      tr.hidden = box.checked && tr.dataset.flipped !== "1";
    }
  }
  box.addEventListener("change", apply);
  apply();
})();
