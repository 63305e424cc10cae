// Draws every chart that tokendyn.plotting left in the page (a .tokendyn-vega element holding
// its Vega-Lite spec as JSON). vega-bundle.js, served by the book itself, defines
// window.vegaEmbed; both are module scripts, so they run in order once the page is parsed.
const views = (window.tokendynViews = []);

async function drawCharts() {
  for (const el of document.querySelectorAll(".tokendyn-vega")) {
    if (el.dataset.rendered) continue;
    const source = el.querySelector('script[type="application/json"]');
    const target = document.createElement("div");
    el.appendChild(target);
    try {
      const result = await window.vegaEmbed(target, JSON.parse(source.textContent), {
        renderer: "svg",
        actions: { export: true, source: false, compiled: false, editor: false },
      });
      views.push(result.view);
      el.dataset.rendered = "true";
    } catch (err) {
      el.dataset.rendered = "error";
      target.textContent = "This chart could not be drawn: " + err;
    }
  }
  document.documentElement.dataset.tokendynCharts = "done";
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", drawCharts);
} else {
  drawCharts();
}
