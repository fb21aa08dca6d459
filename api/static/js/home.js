// Home (spec 6.1, 7.1-7.3): the conversation list, pinned first then the latest reply (the API's order), each
// single-device and master-agent conversation with its ring, group conversations without one. Indicator events
// redraw a ring in place. Below it, the projects the token sees, each linking to its page: real workers' threads
// belong to no conversation (a chat front end registers those), so this is how their fleet is reached.
import * as api from "./api.js";
import { h } from "./dom.js";
import { CONVERSATION_TYPES, older, time } from "./format.js";
import { liveResource } from "./resource.js";
import { ring } from "./ring.js";

const INDICATOR_UPDATED = "conversation.context_indicator.updated";
const RISK_UPDATED = "project.context_risk.updated";

export function homeView(main, _params, context) {
  context.title("Conversations");
  context.crumbs([]);
  const rows = new Map(); // conversation_id -> {item, element}
  let nextCursor = null;
  // The newest indicator event per conversation, applied again over every load: the list is read from ClickHouse,
  // which the sink fills a moment after the event, so a load that began after an event may still predate it.
  const latest = new Map(); // conversation_id -> event data

  async function conversations(signal) {
    const wanted = Math.max(rows.size, 1);
    const items = [];
    let cursor = null;
    do {
      const page = await api.conversations(cursor, signal);
      items.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor && items.length < wanted);
    return { items, cursor };
  }

  async function load(signal) {
    const [listed, projects] = await Promise.all([conversations(signal), api.projects(signal)]);
    return { ...listed, projects: projects.items };
  }

  function render({ items, cursor, projects }) {
    rows.clear();
    nextCursor = cursor;
    const list = h("ol", { class: "conversations", "aria-label": "Conversations" });
    for (const item of items) list.append(row(item));
    main.replaceChildren(
      h("h1", { tabindex: -1 }, "Conversations"),
      items.length ? list : h("p", { class: "muted" }, "No conversations are visible to this token."),
      moreButton(list) ?? "",
      h("h2", {}, "Projects"),
      projects.length
        ? h("ul", { class: "projects", "aria-label": "Projects" }, ...projects.map(projectRow))
        : h("p", { class: "muted" }, "No projects are visible to this token."),
    );
    for (const update of latest.values()) if (rows.has(update.conversation_id)) apply(update);
  }

  function row(item) {
    const element = h(
      "li",
      { "data-conversation-id": item.conversation_id, "data-type": item.conversation_type },
      h(
        "a",
        { class: "conversation", href: `#/projects/${encodeURIComponent(item.project_id)}` },
        h(
          "span",
          { class: "conversation-text" },
          h("span", { class: "conversation-title" }, item.project_title),
          h(
            "span",
            { class: "conversation-meta" },
            item.manual_pinned ? h("span", { class: "pin" }, "pinned") : null,
            h("span", {}, CONVERSATION_TYPES[item.conversation_type] ?? item.conversation_type),
            item.latest_reply_at ? h("span", {}, "last reply ", time(item.latest_reply_at)) : null,
          ),
        ),
        h("span", { class: "indicator" }, indicator(item)),
      ),
    );
    rows.set(item.conversation_id, { item, element });
    return element;
  }

  function moreButton(list) {
    if (!nextCursor) return null;
    const button = h("button", { type: "button", class: "more" }, "Show more conversations");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const page = await api.conversations(nextCursor);
        for (const item of page.items) if (!rows.has(item.conversation_id)) list.append(row(item));
        nextCursor = page.next_cursor;
        if (nextCursor) button.disabled = false;
        else button.remove();
      } catch (error) {
        if (error instanceof api.Unauthorized) context.unauthorized();
        else button.disabled = false;
      }
    });
    return button;
  }

  /** Patches the conversation's ring; unknown conversations reload the list when it is complete (may be new). */
  function apply(update) {
    const known = rows.get(update.conversation_id);
    if (!known) {
      if (!nextCursor) resource.changed();
      return;
    }
    if (older(update.context_budget_updated_at, known.item.context_budget_updated_at)) return;
    known.item = { ...known.item, ...indicatorFields(update) };
    known.element.querySelector(".indicator").replaceChildren(indicator(known.item) ?? "");
  }

  const resource = liveResource({ main, load, render, context, what: "conversation list" });
  return {
    onEvent(event) {
      if (event.type === RISK_UPDATED) resource.changed();
      if (event.type !== INDICATOR_UPDATED) return;
      const seen = latest.get(event.data.conversation_id);
      if (!seen || !older(event.data.context_budget_updated_at, seen.context_budget_updated_at)) {
        latest.set(event.data.conversation_id, event.data);
      }
      apply(event.data);
    },
    resync: resource.changed,
    dispose: resource.dispose,
  };
}

/** A project with its active threads and the risk the engine ranks: a link to its page. */
function projectRow(item) {
  const threads = Object.values(item.threads_per_level).reduce((sum, count) => sum + count, 0);
  const handoffs = item.threads_requiring_handoff_count;
  return h(
    "li",
    { "data-project-id": item.project_id },
    h(
      "a",
      { class: "conversation", href: `#/projects/${encodeURIComponent(item.project_id)}` },
      h(
        "span",
        { class: "conversation-text" },
        h("span", { class: "conversation-title" }, item.project_id),
        h(
          "span",
          { class: "conversation-meta" },
          h("span", {}, `${threads} active ${threads === 1 ? "thread" : "threads"}`),
          handoffs ? h("span", {}, `${handoffs} requiring a handoff`) : null,
          item.next_compaction_risk_thread_id
            ? h("span", {}, "next compaction risk ", item.next_compaction_risk_thread_id)
            : null,
        ),
      ),
    ),
  );
}

/** The ring for a conversation, or null: groups never have one (spec 7.2), whatever the indicator says. */
function indicator(item) {
  const shown = item.context_budget_indicator;
  if (item.conversation_type === "group" || !shown.visible) return null;
  return ring(shown);
}

/** What an indicator event changes in a conversation (spec 6.4 `conversation.context_indicator.updated`). */
const indicatorFields = (update) => ({
  context_budget_indicator: update.context_budget_indicator,
  context_budget_source_node_id: update.context_budget_source_node_id,
  context_budget_updated_at: update.context_budget_updated_at,
  must_finish_before_compaction: update.must_finish_before_compaction,
});
