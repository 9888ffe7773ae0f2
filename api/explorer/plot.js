// A line with an interval band, as inline SVG built with DOM calls (no
// library, no inline style: colours come from explorer.css classes, so the
// page keeps to its Content-Security-Policy).

const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs = {}, text = null) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== null) e.textContent = text;
  return e;
}

/**
 * An SVG chart of `series`: each {name, cls, points: [{x, y, low, high,
 * title}]}, drawn as a band from low to high (when given), a line through
 * y and a dot per point (its `title` shown on hover). `x` is any increasing
 * number (here a log index); `xLabel(x)` writes the axis labels. The y
 * axis runs from 0 to 1, or further when a value lies outside.
 */
export function chart({ title, series, xLabel, width = 640, height = 220 }) {
  const pad = { left: 48, right: 16, top: 44, bottom: 36 };
  const all = series.flatMap((s) => s.points);
  const xs = all.map((p) => p.x);
  const ys = all.flatMap((p) => [p.y, p.low, p.high]).filter((v) => typeof v === "number" && Number.isFinite(v));
  let x0 = Math.min(...xs);
  let x1 = Math.max(...xs);
  if (x0 === x1) {
    x0 -= 1;
    x1 += 1;
  }
  const y0 = Math.min(0, ...ys);
  const y1 = Math.max(1, ...ys);
  const sx = (x) => pad.left + ((x - x0) / (x1 - x0)) * (width - pad.left - pad.right);
  const sy = (y) => height - pad.bottom - ((y - y0) / (y1 - y0)) * (height - pad.top - pad.bottom);

  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": title });
  svg.append(el("text", { x: pad.left, y: 16, class: "chart-title" }, title));
  // Axes and gridlines at quarters of the y range.
  for (let i = 0; i <= 4; i++) {
    const v = y0 + ((y1 - y0) * i) / 4;
    const y = sy(v);
    svg.append(el("line", { x1: pad.left, x2: width - pad.right, y1: y, y2: y, class: "chart-grid" }));
    svg.append(el("text", { x: pad.left - 6, y: y + 4, class: "chart-tick chart-tick-y" }, v.toFixed(2)));
  }
  svg.append(el("text", { x: sx(x0), y: height - 12, class: "chart-tick" }, xLabel(x0)));
  svg.append(el("text", { x: sx(x1), y: height - 12, class: "chart-tick chart-tick-end" }, xLabel(x1)));

  for (const s of series) {
    const pts = s.points;
    if (pts.length === 0) continue;
    const banded = pts.filter((p) => typeof p.low === "number" && typeof p.high === "number");
    if (banded.length > 1) {
      const upper = banded.map((p) => `${sx(p.x)},${sy(p.high)}`);
      const lower = banded.map((p) => `${sx(p.x)},${sy(p.low)}`).reverse();
      svg.append(el("polygon", { points: [...upper, ...lower].join(" "), class: `chart-band ${s.cls}` }));
    }
    if (pts.length > 1) {
      svg.append(el("polyline", { points: pts.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" "), class: `chart-line ${s.cls}` }));
    }
    for (const p of pts) {
      if (typeof p.low === "number" && typeof p.high === "number") {
        svg.append(el("line", { x1: sx(p.x), x2: sx(p.x), y1: sy(p.low), y2: sy(p.high), class: `chart-whisker ${s.cls}` }));
      }
      const dot = el("circle", { cx: sx(p.x), cy: sy(p.y), r: 3, class: `chart-dot ${s.cls}` });
      dot.append(el("title", {}, p.title ?? ""));
      svg.append(dot);
    }
  }
  // Legend, on the line below the title.
  let lx = pad.left;
  for (const s of series) {
    svg.append(el("text", { x: lx, y: 32, class: `chart-legend ${s.cls}` }, `● ${s.name}`));
    lx += 24 + 6 * s.name.length;
  }
  return svg;
}
