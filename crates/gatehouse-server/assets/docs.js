// Gatehouse reference documentation: filters the sidebar as you type in the
// search box. Served by the binary at /docs/assets/docs.js; the pages work
// without it (the search form asks the server, /docs/search?q=).
(function () {
  "use strict";
  function ready() {
    var input = document.getElementById("q");
    var nav = document.querySelector("nav.sidebar");
    if (!input || !nav) return;
    var items = Array.prototype.slice.call(nav.querySelectorAll("li[data-search]"));
    var tags = Array.prototype.slice.call(nav.querySelectorAll("li.tag"));
    var empty = document.createElement("p");
    empty.className = "empty";
    empty.textContent = "No match in the sidebar. Press Enter to search everything.";
    empty.hidden = true;
    nav.appendChild(empty);

    function filter() {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      nav.classList.toggle("filtering", words.length > 0);
      items.forEach(function (li) {
        var text = li.getAttribute("data-search");
        var match = words.every(function (w) { return text.indexOf(w) !== -1; });
        li.hidden = !match;
        if (match) shown++;
      });
      tags.forEach(function (tag) {
        var any = tag.querySelector("li[data-search]:not([hidden])");
        tag.hidden = words.length > 0 && !any;
      });
      empty.hidden = words.length === 0 || shown > 0;
    }

    input.addEventListener("input", filter);
    input.addEventListener("keydown", function (e) {
      if (e.key === "Escape") {
        input.value = "";
        filter();
      }
    });
    document.addEventListener("keydown", function (e) {
      if (e.key === "/" && document.activeElement !== input &&
          !(e.target && /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName))) {
        e.preventDefault();
        input.focus();
      }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
