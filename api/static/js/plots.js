// Plots drawn by uPlot (api/static/vendor/uplot, a classic script that index.html loads before the modules). No series
// or mark is told apart by colour alone: each has a dash pattern and a marker shape of its own, its name is written
// beside its last point, and a legend draws the same line and shape with the name. The figures behind a plot are in a
// table under it.
import { h } from "./dom.js";

// Okabe-Ito colours (distinct under the common colour-vision deficiencies), each with a dash and a shape.
export const STYLES = [
  { stroke: "#0072b2", dash: [], shape: "circle" },
  { stroke: "#d55e00", dash: [8, 4], shape: "square" },
  { stroke: "#009e73", dash: [2, 3], shape: "triangle" },
  { stroke: "#cc79a7", dash: [10, 3, 2, 3], shape: "diamond" },
  { stroke: "#e69f00", dash: [14, 4], shape: "cross" },
  { stroke: "#56b4e9", dash: [4, 4], shape: "down" },
];
export const LEVEL_STYLES = {
  safe: STYLES[0],
  watch: STYLES[1],
  urgent: STYLES[2],
  critical: STYLES[3],
};
const FONT = '12px system-ui, -apple-system, "Segoe UI", "Noto Sans", sans-serif';
const INK = "#1f2328";
const GRID = "#d0d7de";

/** The style of the n-th series of a plot whose series are not fixed (agent tools). */
export const styleAt = (n) => STYLES[n % STYLES.length];

/** Draws `shape` centred at (x, y), radius r; `hollow` strokes it only. */
export function drawShape(ctx, shape, x, y, r, color, hollow = false) {
  ctx.save();
  ctx.beginPath();
  ctx.strokeStyle = color;
  ctx.fillStyle = color;
  ctx.lineWidth = 1.5;
  ctx.setLineDash([]);
  switch (shape) {
    case "square":
      ctx.rect(x - r, y - r, 2 * r, 2 * r);
      break;
    case "triangle":
      ctx.moveTo(x, y - r);
      ctx.lineTo(x + r, y + r);
      ctx.lineTo(x - r, y + r);
      ctx.closePath();
      break;
    case "down":
      ctx.moveTo(x - r, y - r);
      ctx.lineTo(x + r, y - r);
      ctx.lineTo(x, y + r);
      ctx.closePath();
      break;
    case "diamond":
      ctx.moveTo(x, y - r - 1);
      ctx.lineTo(x + r + 1, y);
      ctx.lineTo(x, y + r + 1);
      ctx.lineTo(x - r - 1, y);
      ctx.closePath();
      break;
    case "cross":
      ctx.moveTo(x - r, y - r);
      ctx.lineTo(x + r, y + r);
      ctx.moveTo(x + r, y - r);
      ctx.lineTo(x - r, y + r);
      ctx.lineWidth = 2;
      ctx.stroke();
      ctx.restore();
      return;
    default:
      ctx.arc(x, y, r, 0, 2 * Math.PI);
  }
  if (hollow) {
    ctx.fillStyle = "#ffffff";
    ctx.fill();
    ctx.stroke();
  } else {
    ctx.fill();
  }
  ctx.restore();
}

const SVG_SHAPES = {
  circle: () => h("circle", { cx: 14, cy: 8, r: 4 }),
  square: () => h("rect", { x: 10, y: 4, width: 8, height: 8 }),
  triangle: () => h("polygon", { points: "14,3 19,12 9,12" }),
  down: () => h("polygon", { points: "9,4 19,4 14,13" }),
  diamond: () => h("polygon", { points: "14,2 20,8 14,14 8,8" }),
  cross: () => h("path", { d: "M10 4 L18 12 M18 4 L10 12", fill: "none", "stroke-width": 2 }),
};

/** A legend entry's picture: the series' line (with its dash, when `line`) and its marker (when `marker`). */
function swatch({ stroke, dash, shape }, { line = true, marker: marked = true, hollow = false } = {}) {
  const marker = marked ? SVG_SHAPES[shape]() : null;
  marker?.setAttribute("stroke", stroke);
  marker?.setAttribute("fill", hollow || shape === "cross" ? "#ffffff" : stroke);
  if (hollow) marker?.setAttribute("stroke-width", 1.5);
  return h(
    "svg",
    { width: 28, height: 16, viewBox: "0 0 28 16", "aria-hidden": "true", focusable: "false" },
    line
      ? h("line", {
          x1: 0,
          y1: 8,
          x2: 28,
          y2: 8,
          stroke,
          "stroke-width": 2,
          "stroke-dasharray": dash.length ? dash.join(" ") : null,
        })
      : null,
    marker,
  );
}

/** A legend: `[label, style, options]` entries, each drawn as on the plot and named in text. */
export function legend(entries, label) {
  return h(
    "ul",
    { class: "plot-legend", "aria-label": label },
    entries.map(([text, style, options]) =>
      h("li", { "data-series": text }, swatch(style, options), h("span", {}, text)),
    ),
  );
}

const AXIS = { stroke: INK, font: FONT, grid: { stroke: GRID, width: 1 }, ticks: { stroke: GRID, width: 1 } };

function plotWidth(container) {
  return Math.max(320, Math.floor(container.getBoundingClientRect().width) - 8);
}

/** Each series' markers at its points, and its name beside its last point (names nudged apart vertically). */
function drawSeries(u, series) {
  const ctx = u.ctx;
  const ratio = window.devicePixelRatio || 1;
  const ends = [];
  series.forEach((s, i) => {
    const values = u.data[i + 1];
    let last = null;
    for (let j = 0; j < values.length; j++) {
      if (values[j] == null) continue;
      const x = u.valToPos(u.data[0][j], "x", true);
      const y = u.valToPos(values[j], "y", true);
      drawShape(ctx, s.style.shape, x, y, 3.5 * ratio, s.style.stroke);
      last = { x, y, text: s.label, color: s.style.stroke };
    }
    if (last) ends.push(last);
  });
  ends.sort((a, b) => a.y - b.y);
  const gap = 14 * ratio;
  for (let k = 1; k < ends.length; k++) ends[k].y = Math.max(ends[k].y, ends[k - 1].y + gap);
  ctx.save();
  ctx.font = FONT.replace("12px", `${12 * ratio}px`);
  ctx.textBaseline = "middle";
  for (const end of ends) {
    ctx.fillStyle = INK;
    ctx.fillText(end.text, end.x + 8 * ratio, end.y);
  }
  ctx.restore();
}

/**
 * A line plot over UTC days into `container` (already in the page): `days` as "YYYY-MM-DD", `series` as
 * `{label, style, values}` with null where there is nothing to show. Returns the uPlot instance (destroy it).
 */
export function dayPlot(container, { days, series, yMax, yFormat, yLabel, height = 260 }) {
  const xs = days.map((day) => Date.parse(`${day}T00:00:00Z`) / 1000);
  const options = {
    width: plotWidth(container),
    height,
    padding: [12, 110, 0, 0], // the right margin holds the series' names
    tzDate: (ts) => window.uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    legend: { show: false },
    cursor: { show: false },
    scales: { x: { time: true, range: [xs[0] - 43_200, xs[xs.length - 1] + 43_200] }, y: { range: [0, yMax] } },
    axes: [
      {
        ...AXIS,
        incrs: [1, 2, 7, 14, 28].map((n) => n * 86_400), // whole days only
        values: (u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)),
      },
      { ...AXIS, label: yLabel, size: 56, values: (u, ticks) => ticks.map(yFormat) },
    ],
    series: [
      {},
      ...series.map((s) => ({
        label: s.label,
        stroke: s.style.stroke,
        dash: s.style.dash,
        width: 2,
        points: { show: false },
      })),
    ],
    hooks: { draw: [(u) => drawSeries(u, series)] },
  };
  return new window.uPlot(options, [xs, ...series.map((s) => s.values)], container);
}

const SILENT_SECONDS = 900;
/** A thread reports every 5 to 30 s while it runs: a longer silence breaks the line rather than bridging it. */
function withGaps(budget) {
  const points = [];
  for (const point of budget) {
    const previous = points[points.length - 1];
    if (previous && point[0] - previous[0] > SILENT_SECONDS) points.push([previous[0] + 1, null]);
    points.push(point);
  }
  return points;
}

const LANES = [
  ["compactions", -9],
  ["master actions", -19],
  ["packages", -29],
];
export const LANE_OF = { compaction: -9, master_action: -19, package: -29 };

/**
 * The budget over time (percent left, 0-100) with marks in lanes below the 0% line: `budget` as `[seconds, pct]`,
 * `marks` as `{at, kind, style, hollow}` (seconds). Returns the uPlot instance.
 */
export function budgetPlot(container, { budget, marks, height = 300 }) {
  const points = withGaps(budget);
  const xs = points.map(([at]) => at);
  const all = [...xs, ...marks.map((m) => m.at)];
  const low = Math.min(...all);
  const high = Math.max(...all);
  const pad = Math.max(60, (high - low) * 0.02);
  const line = STYLES[0];
  const options = {
    width: plotWidth(container),
    height,
    padding: [12, 16, 0, 0],
    legend: { show: false },
    cursor: { show: false },
    scales: { x: { time: true, range: [low - pad, high + pad] }, y: { range: [-34, 100] } },
    axes: [
      { ...AXIS },
      {
        ...AXIS,
        label: "budget left",
        size: 56,
        splits: () => [0, 25, 50, 75, 100],
        values: (u, ticks) => ticks.map((t) => `${t}%`),
      },
    ],
    series: [{}, { label: "budget", stroke: line.stroke, width: 2, points: { show: false } }],
    hooks: {
      draw: [
        (u) => {
          const ctx = u.ctx;
          const ratio = window.devicePixelRatio || 1;
          const left = u.bbox.left;
          const top = u.bbox.top;
          const bottom = u.bbox.top + u.bbox.height;
          ctx.save();
          ctx.font = FONT.replace("12px", `${11 * ratio}px`);
          ctx.textBaseline = "middle";
          ctx.fillStyle = "#59636e";
          for (const [name, y] of LANES) ctx.fillText(name, left + 4 * ratio, u.valToPos(y + 4.5, "y", true));
          ctx.restore();
          for (const mark of marks) {
            const x = u.valToPos(mark.at, "x", true);
            if (mark.kind === "compaction") {
              // a compaction resets the budget: a dashed rule across the plot shows where
              ctx.save();
              ctx.strokeStyle = mark.style.stroke;
              ctx.setLineDash([4 * ratio, 4 * ratio]);
              ctx.beginPath();
              ctx.moveTo(x, top);
              ctx.lineTo(x, bottom);
              ctx.stroke();
              ctx.restore();
            }
            const y = u.valToPos(LANE_OF[mark.kind], "y", true);
            drawShape(ctx, mark.style.shape, x, y, 4.5 * ratio, mark.style.stroke, mark.hollow);
          }
        },
      ],
    },
  };
  return new window.uPlot(options, [xs, points.map(([, pct]) => pct)], container);
}
