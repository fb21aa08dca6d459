// How values read on the page: times in the viewer's zone, token counts grouped, enum values as words.

const TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const NUMBER = new Intl.NumberFormat();

/** A <time> for an ISO timestamp, or "—" when absent. */
export function time(iso) {
  if (!iso) return "—";
  const element = document.createElement("time");
  element.dateTime = iso;
  element.textContent = TIME.format(new Date(iso));
  return element;
}

export const tokens = (count) => `${NUMBER.format(count)} tokens`;

/** The ring's integer percent of a remaining budget: floored like the stream's (streams/aggregates/resolution.py, ring_percent). */
export const ringPercent = (pct) => Math.floor(pct);

export const CONVERSATION_TYPES = { single_device: "single device", group: "group", master_agent: "master agent" };
export const TRIGGER_MODES = { request_start: "at request start", mid_loop: "mid-loop", manual: "manual" };

/** A snake_case enum value as words. */
export const words = (value) => (value ? value.replaceAll("_", " ") : "—");

/** True when timestamp `a` is strictly older than `b` (an absent one is never newer). */
export const older = (a, b) => Boolean(a && b) && Date.parse(a) < Date.parse(b);
