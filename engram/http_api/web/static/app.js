// engram's web page: search as you type. Without this script the search form is a plain GET
// form and every page reads the same; with it, the results are fetched (as HTML the server
// rendered and escaped) while you type, and the address bar follows the query.
"use strict";
(function () {
  var form = document.getElementById("search");
  var results = document.getElementById("results");
  if (!form || !results || !window.fetch || !window.URLSearchParams) {
    return;
  }
  var timer = null;
  var asked = 0;

  function query() {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (value, key) {
      if (String(value).trim() !== "") {
        params.append(key, value);
      }
    });
    return params;
  }

  function run() {
    var params = query();
    var shown = params.toString();
    params.append("fragment", "1");
    var mine = ++asked;
    fetch("/ui/search?" + params.toString(), {
      credentials: "same-origin",
      headers: { Accept: "text/html" },
    })
      .then(function (response) {
        return response.text();
      })
      .then(function (html) {
        if (mine !== asked) {
          return; // a later keystroke asked again: its answer wins
        }
        var box = document.getElementById("results");
        var parsed = new DOMParser().parseFromString(html, "text/html");
        var fresh = parsed.getElementById("results");
        if (box && fresh) {
          box.replaceWith(document.importNode(fresh, true));
        }
        history.replaceState(null, "", "/ui/search" + (shown ? "?" + shown : ""));
      })
      .catch(function () {
        /* the plain form still works: submit sends it */
      });
  }

  function later() {
    if (timer !== null) {
      clearTimeout(timer);
    }
    timer = setTimeout(run, 150);
  }

  form.addEventListener("input", later);
  form.addEventListener("change", later);
})();
