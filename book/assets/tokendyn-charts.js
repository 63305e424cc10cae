// Draws every chart that tokendyn.publish.plotting left in the page (a .tokendyn-vega element holding
// its Vega-Lite spec as JSON). A classic script, not a module: Chromium refuses module scripts
// on pages opened from disk (file://). vega.min.js, vega-lite.min.js and vega-embed.min.js
// (UMD builds served by the book itself) load before this file and before require.js, so they
// set window.vega, window.vegaLite and window.vegaEmbed rather than registering as AMD modules.
// window.tokendynViews[i] is the Vega view of the i-th chart on the page (in document order).
(function () {
  "use strict";

  var views = (window.tokendynViews = []);

  function fail(el, target, message) {
    el.dataset.rendered = "error";
    target.textContent = "This chart could not be drawn: " + message;
  }

  function drawCharts() {
    var charts = document.querySelectorAll(".tokendyn-vega");
    var pending = [];
    Array.prototype.forEach.call(charts, function (el, i) {
      if (el.dataset.rendered) return;
      var source = el.querySelector('script[type="application/json"]');
      var target = document.createElement("div");
      el.appendChild(target);
      if (typeof window.vegaEmbed !== "function") {
        fail(el, target, "vega-embed did not load");
        return;
      }
      var spec;
      try {
        spec = JSON.parse(source.textContent);
      } catch (err) {
        fail(el, target, err);
        return;
      }
      pending.push(
        window
          .vegaEmbed(target, spec, {
            renderer: "svg",
            actions: { export: true, source: false, compiled: false, editor: false },
          })
          .then(function (result) {
            views[i] = result.view;
            el.dataset.rendered = "true";
          })
          .catch(function (err) {
            fail(el, target, err);
          })
      );
    });
    Promise.all(pending).then(function () {
      document.documentElement.dataset.tokendynCharts = "done";
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawCharts);
  } else {
    drawCharts();
  }
})();
