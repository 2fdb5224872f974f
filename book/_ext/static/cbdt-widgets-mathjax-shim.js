/* The widget manager (@jupyter-widgets/html-manager 1.0.6) typesets widget labels with the
 * MathJax 2 API, MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]). The book loads
 * MathJax 3, which has no Hub, so every widget view would throw
 * "Cannot read properties of undefined (reading 'Queue')". This shim maps the call to the
 * MathJax 3 API. Widget labels use Jupyter's $...$ / $$...$$ delimiters, which the book's
 * MathJax (Sphinx: \(...\) and \[...\] only) does not scan for, so they are converted inside
 * the widget element before typesetting. Loaded with `defer` right after MathJax, only on pages
 * with widgets (book/_ext/offline_assets.py). */
(function () {
  "use strict";
  var MJ = window.MathJax;
  if (!MJ || MJ.Hub || !MJ.startup) {
    return;
  }

  function convertDelimiters(root) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    var nodes = [];
    while (walker.nextNode()) {
      nodes.push(walker.currentNode);
    }
    nodes.forEach(function (node) {
      var text = node.nodeValue;
      if (text.indexOf("$") < 0) {
        return;
      }
      node.nodeValue = text
        .replace(/\$\$([^$]+)\$\$/g, "\\[$1\\]")
        .replace(/(^|[^\\])\$([^$]+)\$/g, "$1\\($2\\)");
    });
  }

  MJ.Hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset") {
          var el = job[2];
          MJ.startup.promise = MJ.startup.promise
            .then(function () {
              if (el) {
                convertDelimiters(el);
              }
              return MJ.typesetPromise(el ? [el] : undefined);
            })
            .catch(function (err) {
              console.warn("MathJax typeset of a widget failed:", err);
            });
        }
      }
    },
  };
})();
