// The ring marker (spec 7.1): a small neutral grey ring with the integer percent, the same on every page. Levels are
// named in text beside it on the detail pages; the home list shows the ring alone (no stacked warning text).
import { h } from "./dom.js";

const RADIUS = 15.915494; // circumference 100: the dash length is the percent

/** A `meter` named like "context budget 52%, watch" (", stale" when the value is the thread's last report). */
export function ring({ percent, level, stale = false }, size = "small") {
  const label = `context budget ${percent}%, ${level}${stale ? ", stale" : ""}`;
  return h(
    "span",
    {
      class: `ring ring-${size}${stale ? " stale" : ""}`,
      role: "meter",
      "aria-valuemin": 0,
      "aria-valuemax": 100,
      "aria-valuenow": percent,
      "aria-valuetext": `${percent}%, ${level}${stale ? ", stale" : ""}`,
      "aria-label": label,
      "data-level": level,
      "data-stale": stale,
      title: stale ? `${label}: the thread missed its report deadline, this is its last value` : label,
    },
    h(
      "svg",
      { viewBox: "0 0 36 36", "aria-hidden": "true", focusable: "false" },
      h("circle", { class: "ring-track", cx: 18, cy: 18, r: RADIUS }),
      h("circle", { class: "ring-fill", cx: 18, cy: 18, r: RADIUS, "stroke-dasharray": `${percent} 100` }),
    ),
    h("span", { class: "ring-percent", "aria-hidden": "true" }, `${percent}%`),
  );
}

/** The level as a word, for the detail pages. */
export const levelBadge = (level) => h("span", { class: "level", "data-level": level }, level);
