// The Jupyter widget manager (npm @jupyter-widgets/html-manager 1.x, loaded on pages with
// widgets) typesets every widget label through MathJax 2's MathJax.Hub.Queue whenever
// window.MathJax exists. The book serves MathJax 3, which has no Hub, so each labelled widget
// threw "Cannot read properties of undefined (reading 'Queue')". This gives MathJax 3 the one
// Hub call the widgets make, done with MathJax 3's typesetPromise. A classic script: MathJax
// (deferred) has replaced its configuration object by the real MathJax by DOMContentLoaded.
(function () {
  "use strict";

  function install() {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.startup) return;
    mj.Hub = {
      Queue: function () {
        Array.prototype.forEach.call(arguments, function (job) {
          // Only ["Typeset", MathJax.Hub, element] is used by the widget manager.
          if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
            mj.startup.promise = mj.startup.promise
              .then(function () {
                return mj.typesetPromise([job[2]]);
              })
              .catch(function (err) {
                console.error("MathJax could not typeset a widget label: " + err);
              });
          }
        });
      },
    };
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", install);
  } else {
    install();
  }
})();
