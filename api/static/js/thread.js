// Thread detail (spec 6.3): percent and level, expected compaction with its forecast band, the last compaction and
// what triggered it, the wrap-up checklist (spec 8.3), the handoff package, and what the context is made of (seed
// 000 5.3: one bar per section of the latest manifest, against the window, as estimates), and the budget over time
// with its compactions, master actions and packages marked (issue 37: the view analytics_thread_timeline); beside the
// level, where the thread's tool compacts automatically and whether the fleet learnt it (docs/compaction-points.md).
import * as api from "./api.js";
import { facts, h, textList } from "./dom.js";
import { TRIGGER_MODES, ringPercent, time, tokens, words } from "./format.js";
import { STYLES, budgetPlot, legend } from "./plots.js";
import { liveResource } from "./resource.js";
import { levelBadge, ring } from "./ring.js";

export function threadView(main, threadId, context) {
  context.title(`Thread ${threadId}`);
  let projectId = null;
  let plot = null;

  function render({ detail, timeline, points }) {
    plot?.destroy();
    plot = null;
    projectId = detail.project_id;
    const project = `#/projects/${encodeURIComponent(detail.project_id)}`;
    context.crumbs([
      [`Project ${detail.project_id}`, project],
      [`Thread ${detail.thread_id}`, `#/threads/${encodeURIComponent(detail.thread_id)}`],
    ]);
    const percent = ringPercent(detail.context_budget_remaining_pct);
    main.replaceChildren(
      h("h1", { tabindex: -1 }, `Thread ${detail.thread_id}`),
      h(
        "section",
        { class: "card budget", "aria-labelledby": "budget-heading" },
        h("h2", { id: "budget-heading" }, "Context budget"),
        h(
          "div",
          { class: "budget-head" },
          ring({ percent, level: detail.context_budget_level, stale: detail.stale }, "large"),
          h(
            "div",
            {},
            h("p", { class: "big", "data-testid": "percent" }, `${percent}% left`),
            h("p", {}, "Level ", levelBadge(detail.context_budget_level)),
            compactsAt(points),
            detail.stale ? h("p", { class: "stale-tag" }, "stale: the thread missed its report deadline") : null,
          ),
        ),
        toolShows(detail, percent),
        facts([
          ["Project", h("a", { href: project }, detail.project_id)],
          ["Expected compaction", expected(detail)],
          ["Last compaction", lastCompaction(detail)],
          ["Must finish before compaction", detail.must_finish_before_compaction ? "yes" : "no"],
          ["Pending master actions", textList(detail.pending_master_actions.map(words), "Pending master actions")],
          ["Handoff package", handoff(detail)],
          ["Updated", time(detail.updated_at)],
        ]),
      ),
      checklist(detail.wrap_up_checklist),
      composition(detail.latest_context_manifest),
      history(detail.compaction_history),
    );
    const budget = timeline.points.filter((p) => p.kind === "budget").map((p) => [seconds(p.at), p.remaining_pct]);
    const marks = timeline.points.filter((p) => p.kind !== "budget").map(mark);
    main.querySelector("[data-testid=composition]").before(overTime(timeline, budget, marks));
    if (budget.length) plot = budgetPlot(main.querySelector("[data-testid=budget-plot]"), { budget, marks });
  }

  const resource = liveResource({
    main,
    load: async (signal) => {
      const [detail, timeline, points] = await Promise.all([
        api.threadBudget(threadId, signal),
        api.threadTimeline(threadId, signal),
        api.threadCompactionPoint(threadId, signal),
      ]);
      return { detail, timeline, points };
    },
    render,
    context,
    what: "thread",
  });
  return {
    onEvent(event) {
      const data = event.data;
      if (data.project_id === projectId || data.thread_id === threadId) resource.changed();
    },
    resync: resource.changed,
    dispose() {
      resource.dispose();
      plot?.destroy();
    },
  };
}

const seconds = (iso) => Date.parse(iso) / 1000;

// How each mark is drawn: a compaction a downward triangle (and a dashed rule), a master action a diamond (filled when
// issued, hollow once done, a cross when superseded), a package a square (filled with the agent's own part, hollow
// when facts only or empty). Each kind has its lane and its shape, so colour only repeats what they say.
const MARK_STYLES = {
  compaction: { ...STYLES[1], shape: "down" },
  master_action: { ...STYLES[3], shape: "diamond" },
  package: { ...STYLES[2], shape: "square" },
};
const SUPERSEDED = { ...MARK_STYLES.master_action, shape: "cross" };
const HOLLOW_ACTIONS = new Set(["done"]);

function mark(point) {
  const base = { at: seconds(point.at), kind: point.kind, point };
  if (point.kind === "package") return { ...base, style: MARK_STYLES.package, hollow: point.detail !== "agent" };
  if (point.kind === "master_action" && point.detail === "superseded") return { ...base, style: SUPERSEDED };
  return { ...base, style: MARK_STYLES[point.kind], hollow: HOLLOW_ACTIONS.has(point.detail) };
}

const MARK_TEXT = {
  compaction: (p) => `compaction, ${TRIGGER_MODES[p.label] ?? words(p.label)}: ${p.detail}`,
  master_action: (p) => `${words(p.label)} ${p.detail}`,
  package: (p) => `package ${p.ref} ${p.label}, ${words(p.detail)}`,
};

/** The budget plot with its legend, and its marks as a list (what the plot shows, for reading without it). */
function overTime(timeline, budget, marks) {
  const key = legend(
    [
      ["budget left", STYLES[0], { marker: false }],
      ["compaction began", MARK_STYLES.compaction, { line: false }],
      ["master action issued", MARK_STYLES.master_action, { line: false }],
      ["master action done", MARK_STYLES.master_action, { line: false, hollow: true }],
      ["master action superseded", SUPERSEDED, { line: false }],
      ["package with the agent's own part", MARK_STYLES.package, { line: false }],
      ["package of facts only", MARK_STYLES.package, { line: false, hollow: true }],
    ],
    "Budget plot legend",
  );
  return h(
    "section",
    { class: "card", "aria-labelledby": "over-time-heading", "data-testid": "over-time" },
    h("h2", { id: "over-time-heading" }, "Budget over time"),
    budget.length === 0
      ? h("p", { class: "muted" }, "No budget recorded yet.")
      : [
          timeline.truncated ? h("p", { class: "note" }, "The newest points only.") : null,
          key,
          h("div", { class: "plot", "data-testid": "budget-plot" }),
          h(
            "details",
            {},
            h("summary", {}, `The marks as a list (${marks.length})`),
            h(
              "ul",
              { "data-testid": "marks" },
              marks.map((m) => h("li", { "data-kind": m.kind }, time(m.point.at), " ", MARK_TEXT[m.kind](m.point))),
            ),
          ),
        ],
  );
}

const TOOL_NAMES = { codex: "Codex", "claude-code": "Claude Code" };

/** The percent the agent tool itself displays, beside the ring, and why the two differ: the tool counts its whole
 * window, the ring the room before the tool compacts automatically, which comes first. */
function toolShows(detail, percent) {
  if (detail.shown_remaining_pct == null) return null;
  const tool = TOOL_NAMES[detail.agent_tool] ?? detail.agent_tool ?? "The agent tool";
  const shown = Math.round(detail.shown_remaining_pct);
  return h(
    "div",
    { class: "tool-shows", "data-testid": "tool-shows" },
    h("p", {}, `${tool} shows `, h("strong", { "data-testid": "shown-percent" }, `${shown}% left`),
      detail.model ? ` (${detail.model})` : "", `; room before compaction: ${percent}%.`),
    h(
      "p",
      { class: "note", "data-testid": "shown-why" },
      `${tool} counts what is left of its whole context window; the ring counts what is left before ${tool} ` +
        "compacts the thread automatically, which happens before the window is full, so the ring is usually lower. " +
        "A thread can reach 0% here while the tool still shows room.",
    ),
  );
}

const thousands = (count) => `${Math.round(count / 1000)}k`;

/** Where the thread's tool compacts automatically, which its level is measured against: the fleet's point, learnt
 * from the compactions of every thread of its key (tool, version, model, window), with the evidence; else the tool's
 * formula. */
function compactsAt({ thread, points }) {
  if (!thread?.compaction_point_tokens) return null;
  const learnt = points.find((p) => p.point_key === thread.point_key && p.compaction_point_tokens != null);
  if (!learnt) {
    return h(
      "p",
      { class: "note", "data-testid": "compacts-at" },
      `Auto-compacts at ${thousands(thread.compaction_point_tokens)} (the tool's formula: the fleet has not learnt ` +
        "this tool, model and window yet)",
    );
  }
  const moved = learnt.previous_point_tokens == null ? [] : [`; was ${thousands(learnt.previous_point_tokens)} until `, time(learnt.moved_at)];
  return h(
    "p",
    { "data-testid": "compacts-at", title: learnt.point_key },
    `Auto-compacts at ${thousands(learnt.compaction_point_tokens)}, learnt from ${learnt.compactions} compactions since `,
    time(learnt.since),
    ...moved,
  );
}

function expected(detail) {
  if (!detail.compaction_expected_at) return h("span", { "data-testid": "expected" }, "not forecast");
  const earliest = detail.compaction_expected_earliest_at;
  const latest = detail.compaction_expected_latest_at;
  const band = earliest && latest ? [" (between ", time(earliest), " and ", time(latest), ")"] : [];
  return h("span", { "data-testid": "expected" }, time(detail.compaction_expected_at), ...band);
}

function lastCompaction(detail) {
  if (!detail.last_compaction_at) return h("span", { "data-testid": "last-compaction" }, "none yet");
  const mode = detail.last_compaction_trigger_mode;
  return h(
    "span",
    { "data-testid": "last-compaction" },
    time(detail.last_compaction_at),
    mode ? `, triggered ${TRIGGER_MODES[mode] ?? mode}` : "",
    ` (${detail.compaction_count} in all)`,
  );
}

function handoff(detail) {
  // The engine's verdict on a package it did not take as claimed (demoted to draft, or rejected), while current.
  const verdict = detail.handoff_decision_reason
    ? h("span", { class: "package-verdict", "data-testid": "handoff-verdict" },
        ` (${detail.handoff_decision_package_id}: ${detail.handoff_decision_reason})`)
    : null;
  if (!detail.handoff_package_id) return h("span", { "data-testid": "handoff" }, "no package", verdict);
  return h(
    "span",
    { "data-testid": "handoff" },
    `${detail.handoff_package_id}: `,
    h("span", { class: "package-status", "data-status": detail.handoff_package_status }, detail.handoff_package_status),
    verdict,
  );
}

function checklist(list) {
  const command = list.last_key_command;
  return h(
    "section",
    { class: "card", "aria-labelledby": "checklist-heading", "data-testid": "checklist" },
    h("h2", { id: "checklist-heading" }, "Wrap-up checklist"),
    facts([
      ["Files", textList(list.files, "Files")],
      ["Completed patches", textList(list.completed_patches, "Completed patches")],
      ["Pending patches", textList(list.pending_patches, "Pending patches")],
      [
        "Last key command",
        command
          ? h("code", {}, command.command, command.exit_code == null ? "" : ` → exit ${command.exit_code}`)
          : "—",
      ],
      ["Last test conclusion", list.last_test_conclusion ?? "—"],
      ["Open questions", textList(list.open_questions, "Open questions")],
      ["Suggested next action", list.suggested_next_action ?? "—"],
      ["Evidence", textList(list.evidence_links, "Evidence")],
    ]),
  );
}

/** One bar per manifest section, scaled to the window (or, when the window is unknown, to the sections' sum). */
function composition(manifest) {
  const section = (...children) =>
    h(
      "section",
      { class: "card", "aria-labelledby": "composition-heading", "data-testid": "composition" },
      h("h2", { id: "composition-heading" }, "Context composition ", h("span", { class: "estimate" }, "(estimates)")),
      ...children,
    );
  if (!manifest) return section(h("p", { class: "muted" }, "No context manifest reported yet."));
  const total = manifest.sections.reduce((sum, s) => sum + s.tokens, 0);
  const windowTokens = manifest.estimated_window_tokens;
  const scale = windowTokens || total || 1;
  return section(
    h(
      "p",
      { class: "note" },
      windowTokens
        ? `Window: ${tokens(windowTokens)} (estimated). `
        : "Window unknown: bars are shares of the sections' sum. ",
      `Sections: ${tokens(total)}. Token counts are estimates from the latest context manifest; they need not add `,
      "up to the measured budget above, which the model's own usage reports.",
    ),
    h(
      "ul",
      { class: "bars", "aria-label": "Context sections" },
      manifest.sections.map((s) => {
        const share = (100 * s.tokens) / scale;
        const bar = h("span", { class: "bar-fill" });
        bar.style.width = `${Math.min(100, share)}%`;
        return h(
          "li",
          { "data-section": s.key },
          h("span", { class: "bar-label" }, s.label, s.count ? ` (${s.count})` : ""),
          h("span", { class: "bar", "aria-hidden": "true" }, bar),
          h("span", { class: "bar-value" }, `${tokens(s.tokens)} · ${share.toFixed(1)}%`),
        );
      }),
    ),
    manifest.memory_ids.length
      ? h("p", { class: "note" }, `Memories injected: ${manifest.memory_ids.join(", ")}`)
      : null,
  );
}

function history(compactions) {
  const recent = compactions.recent;
  return h(
    "section",
    { class: "card", "aria-labelledby": "history-heading" },
    h("h2", { id: "history-heading" }, `Compactions (${compactions.compaction_count})`),
    recent.length === 0
      ? h("p", { class: "muted" }, "none recorded")
      : h(
          "ul",
          {},
          recent.map((c) =>
            h(
              "li",
              {},
              time(c.completed_at),
              `, ${TRIGGER_MODES[c.trigger_mode] ?? c.trigger_mode}`,
              c.tokens_before != null && c.tokens_after != null
                ? `: ${tokens(c.tokens_before)} → ${tokens(c.tokens_after)}`
                : "",
              c.handoff_ready ? ", handoff ready" : ", no handoff ready",
            ),
          ),
        ),
  );
}
