// The BFF reads (spec 6.1-6.3) with the tab's bearer token.
import { token } from "./auth.js";
import { Unauthorized } from "./sse.js";

export { Unauthorized };
export class NotFound extends Error {}

async function getJson(path, signal) {
  const response = await fetch(path, {
    headers: { Authorization: `Bearer ${token()}`, Accept: "application/json" },
    cache: "no-store",
    signal,
  });
  if (response.status === 401) throw new Unauthorized();
  if (response.status === 404) throw new NotFound();
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

const PAGE_SIZE = 50;
const segment = encodeURIComponent;

export const conversations = (cursor, signal) =>
  getJson(`/api/v1/conversations?limit=${PAGE_SIZE}${cursor ? `&cursor=${segment(cursor)}` : ""}`, signal);
export const projects = (signal) => getJson("/api/v1/projects", signal);
export const project = (id, signal) => getJson(`/api/v1/projects/${segment(id)}`, signal);
export const threadBudget = (id, signal) => getJson(`/api/v1/threads/${segment(id)}/context-budget`, signal);
export const threadTimeline = (id, signal) => getJson(`/api/v1/threads/${segment(id)}/timeline`, signal);
export const threadCompactionPoint = (id, signal) =>
  getJson(`/api/v1/compaction-points?thread_id=${segment(id)}`, signal);
export const relayAnalytics = (days, signal) => getJson(`/api/v1/analytics/relay?days=${days}`, signal);
