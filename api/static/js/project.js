// Project detail (spec 6.2): every active thread with its ring and level, the next compaction-risk thread, the
// threads requiring handoff and the master agent's strategy summary. Any event of the project reloads it.
import * as api from "./api.js";
import { facts, h } from "./dom.js";
import { ringPercent, time } from "./format.js";
import { liveResource } from "./resource.js";
import { levelBadge, ring } from "./ring.js";

export function projectView(main, projectId, context) {
  context.title(`Project ${projectId}`);
  context.crumbs([[`Project ${projectId}`, `#/projects/${encodeURIComponent(projectId)}`]]);

  function render(detail) {
    main.replaceChildren(
      h("h1", { tabindex: -1 }, `Project ${detail.project_id}`),
      h(
        "section",
        { "aria-labelledby": "strategy-heading", class: "card" },
        h("h2", { id: "strategy-heading" }, "Master agent strategy"),
        h("p", { class: "strategy" }, detail.master_context_strategy_summary || "No strategy summary yet."),
        facts([
          ["Next compaction risk", threadLinkOrNone(detail.next_compaction_risk_thread_id, "next-risk")],
          ["Threads requiring handoff", threadLinks(detail.threads_requiring_handoff)],
        ]),
      ),
      h(
        "section",
        { "aria-labelledby": "threads-heading" },
        h("h2", { id: "threads-heading" }, `Active threads (${detail.active_thread_contexts.length})`),
        threadTable(detail.active_thread_contexts),
      ),
    );
  }

  const resource = liveResource({
    main,
    load: (signal) => api.project(projectId, signal),
    render,
    context,
    what: "project",
  });
  return {
    onEvent(event) {
      if (event.data.project_id === projectId) resource.changed();
    },
    resync: resource.changed,
    dispose: resource.dispose,
  };
}

const threadHref = (id) => `#/threads/${encodeURIComponent(id)}`;

function threadLinkOrNone(id, testid) {
  return id ? h("a", { href: threadHref(id), "data-testid": testid }, id) : h("span", { class: "muted" }, "none");
}

function threadLinks(ids) {
  if (ids.length === 0) return h("span", { class: "muted" }, "none");
  return h(
    "ul",
    { class: "inline-list", "data-testid": "handoff-threads" },
    ids.map((id) => h("li", {}, h("a", { href: threadHref(id) }, id))),
  );
}

const threadRing = (t) =>
  ring({ percent: ringPercent(t.context_budget_remaining_pct), level: t.context_budget_level, stale: t.stale });

function threadTable(threads) {
  if (threads.length === 0) return h("p", { class: "muted" }, "No active threads.");
  const head = ["Thread", "Budget", "Level", "Node", "Must finish", "Expected compaction", "Updated"];
  return h(
    "table",
    { class: "threads" },
    h("thead", {}, h("tr", {}, head.map((title) => h("th", { scope: "col" }, title)))),
    h(
      "tbody",
      {},
      threads.map((t) =>
        h(
          "tr",
          { "data-thread-id": t.thread_id },
          h("th", { scope: "row" }, h("a", { href: threadHref(t.thread_id) }, t.thread_id)),
          h("td", {}, threadRing(t)),
          h("td", {}, levelBadge(t.context_budget_level), t.stale ? h("span", { class: "stale-tag" }, "stale") : null),
          h("td", {}, t.node_id),
          h("td", {}, t.must_finish_before_compaction ? "yes" : "no"),
          h("td", {}, time(t.compaction_expected_at)),
          h("td", {}, time(t.updated_at)),
        ),
      ),
    ),
  );
}
