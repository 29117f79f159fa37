// The dashboard's one script (D48), served by the binary under a CSP
// without 'unsafe-inline'. Progressive enhancement only: every form works
// without it. It shows the copy buttons and copies the text they name.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var buttons = document.querySelectorAll("button.copy[data-copy]");
  Array.prototype.forEach.call(buttons, function (button) {
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = target.value !== undefined && target.tagName === "INPUT" ? target.value : target.textContent;
      var status = document.getElementById("copied");
      var done = function () {
        button.textContent = "Copied";
        if (status) status.textContent = "Copied to the clipboard.";
        setTimeout(function () { button.textContent = "Copy"; }, 2000);
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, function () {
          if (target.select) target.select();
        });
      } else if (target.select) {
        target.select();
        document.execCommand("copy");
        done();
      }
    });
  });
});
