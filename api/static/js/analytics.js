// Relay analytics (issue 37) for the caller's projects: the fleet's thread time per level over the days, and per agent
// tool the share of compactions that had a ready package and the share whose package held the agent's own part; the
// window's totals, and the figures per day, project, tool and model (the view analytics_relay_daily) in a table.
import * as api from "./api.js";
import { facts, h } from "./dom.js";
import { LEVEL_STYLES, dayPlot, legend, styleAt } from "./plots.js";
import { liveResource } from "./resource.js";

const WINDOWS = [7, 30, 90];
const LEVELS = ["safe", "watch", "urgent", "critical"];
const TOOL_NAMES = { codex: "Codex", "claude-code": "Claude Code", unknown: "tool unknown" };
const toolName = (tool) => TOOL_NAMES[tool] ?? tool;
const percent = (share) => (share == null ? "—" : `${Math.round(share * 100)}%`);
const seconds = (value) => (value == null ? "—" : `${value.toFixed(1)} s`);

export function analyticsView(main, _params, context) {
  context.title("Relay analytics");
  context.crumbs([["Relay analytics", "#/analytics"]]);
  let days = 30;
  let plots = [];

  function dropPlots() {
    for (const plot of plots) plot.destroy();
    plots = [];
  }

  function render(data) {
    dropPlots();
    const span = dayRange(data, days);
    const levelsBox = h("div", { class: "plot", "data-testid": "levels-plot" });
    const readyBox = h("div", { class: "plot", "data-testid": "ready-plot" });
    const agentBox = h("div", { class: "plot", "data-testid": "agent-plot" });
    const tools = [...new Set(data.relay.map((r) => r.agent_tool))].sort();
    const toolStyles = new Map(tools.map((tool, i) => [tool, styleAt(i)]));
    main.replaceChildren(
      h("h1", { tabindex: -1 }, "Relay analytics"),
      windowPicker(),
      totals(data),
      plotCard(
        "levels-heading",
        "Thread time per level",
        "The share of the day's thread-hours at each level, while the threads reported (stale time left out).",
        levelsBox,
        legend(
          LEVELS.map((level) => [level, LEVEL_STYLES[level]]),
          "Levels",
        ),
      ),
      plotCard(
        "ready-heading",
        "Compactions with a ready package, per agent tool",
        "The share of the day's compactions that began with a ready handoff package (spec 9.5: it should be 100%).",
        readyBox,
        legend(
          tools.map((tool) => [toolName(tool), toolStyles.get(tool)]),
          "Agent tools",
        ),
      ),
      plotCard(
        "agent-heading",
        "Compactions whose package held the agent's own part, per agent tool",
        "The rest had a facts-only package (the relay could not ask the agent) or none.",
        agentBox,
        legend(
          tools.map((tool) => [toolName(tool), toolStyles.get(tool)]),
          "Agent tools",
        ),
      ),
      figures(data.relay),
    );
    if (data.relay.length === 0 && data.levels.length === 0) return;
    plots.push(
      dayPlot(levelsBox, {
        days: span,
        series: LEVELS.map((level) => ({
          label: level,
          style: LEVEL_STYLES[level],
          values: levelShares(data.levels, span, level),
        })),
        yMax: 100,
        yFormat: (v) => `${v}%`,
        yLabel: "share of thread time",
      }),
    );
    for (const [box, part] of [
      [readyBox, "with_ready_package"],
      [agentBox, "with_agent_part"],
    ]) {
      plots.push(
        dayPlot(box, {
          days: span,
          series: tools.map((tool) => ({
            label: toolName(tool),
            style: toolStyles.get(tool),
            values: toolShares(data.relay, span, tool, part),
          })),
          yMax: 100,
          yFormat: (v) => `${v}%`,
          yLabel: "share of compactions",
        }),
      );
    }
  }

  function windowPicker() {
    const select = h(
      "select",
      { id: "window-days" },
      WINDOWS.map((n) => h("option", { value: n, selected: n === days }, `last ${n} days`)),
    );
    select.addEventListener("change", () => {
      days = Number(select.value);
      resource.changed();
    });
    return h("p", { class: "window" }, h("label", { for: "window-days" }, "Days "), select);
  }

  const resource = liveResource({
    main,
    load: (signal) => api.relayAnalytics(days, signal),
    render,
    context,
    what: "relay analytics",
  });
  return {
    onEvent() {}, // figures per day: a reload on each event would cost more than it shows
    resync: resource.changed,
    dispose() {
      resource.dispose();
      dropPlots();
    },
  };
}

/** The UTC days to plot, as "YYYY-MM-DD": from the first with figures (else the window's first) to the window's last. */
function dayRange({ since, relay, levels }, days) {
  const first = Date.parse(`${since}T00:00:00Z`);
  const all = Array.from({ length: days }, (_, i) => new Date(first + i * 86_400_000).toISOString().slice(0, 10));
  const seen = new Set([...relay, ...levels].map((r) => r.day));
  const start = all.findIndex((day) => seen.has(day));
  return start > 0 ? all.slice(start) : all;
}

function byDay(rows, keep, value) {
  const sums = new Map();
  for (const row of rows) {
    if (!keep(row)) continue;
    sums.set(row.day, (sums.get(row.day) ?? 0) + value(row));
  }
  return sums;
}

/** Percent of each day's reporting thread-hours at `level` (null on a day without any). */
function levelShares(levels, days, level) {
  const all = byDay(levels, (r) => r.level !== "stale", (r) => r.thread_hours);
  const at = byDay(levels, (r) => r.level === level, (r) => r.thread_hours);
  return days.map((day) => (all.get(day) ? (100 * (at.get(day) ?? 0)) / all.get(day) : null));
}

/** Percent of each day's compactions of `tool` that count `part` (null on a day without compactions). */
function toolShares(relay, days, tool, part) {
  const compactions = byDay(relay, (r) => r.agent_tool === tool, (r) => r.compactions);
  const counted = byDay(relay, (r) => r.agent_tool === tool, (r) => r[part]);
  return days.map((day) => (compactions.get(day) ? (100 * counted.get(day)) / compactions.get(day) : null));
}

function plotCard(id, title, note, box, key) {
  return h(
    "section",
    { class: "card", "aria-labelledby": id },
    h("h2", { id }, title),
    h("p", { class: "note" }, note),
    key,
    box,
  );
}

function totals({ relay, levels }) {
  const sum = (name) => relay.reduce((total, r) => total + r[name], 0);
  const stale = levels.filter((r) => r.level === "stale").reduce((total, r) => total + r.thread_hours, 0);
  const compactions = sum("compactions");
  const share = (name) => (compactions ? percent(sum(name) / compactions) : "—");
  return h(
    "section",
    { class: "card", "aria-labelledby": "totals-heading", "data-testid": "totals" },
    h("h2", { id: "totals-heading" }, "The window's totals"),
    facts([
      ["Compactions", String(compactions)],
      ["With a ready package", share("with_ready_package")],
      ["Whose package held the agent's own part", share("with_agent_part")],
      ["Facts-only packages", String(sum("facts_only_packages"))],
      ["handoff_missing incidents", String(sum("handoff_missing"))],
      ["prepare_handoff issued", String(sum("prepare_handoff_issued"))],
      ["… of which a package got ready", String(sum("prepare_handoff_readied"))],
      ["Thread-hours reporting", sum("thread_hours").toFixed(1)],
      ["Thread-hours silent (stale)", stale.toFixed(1)],
    ]),
  );
}

const COLUMNS = [
  ["Day", (r) => r.day],
  ["Project", (r) => r.project_id],
  ["Tool", (r) => toolName(r.agent_tool)],
  ["Model", (r) => r.model],
  ["Compactions", (r) => r.compactions],
  ["Ready package", (r) => percent(r.ready_package_share)],
  ["Agent's own part", (r) => percent(r.agent_part_share)],
  ["Facts-only packages", (r) => r.facts_only_packages],
  ["handoff_missing", (r) => r.handoff_missing],
  ["prepare_handoff issued", (r) => r.prepare_handoff_issued],
  ["issued → ready p50", (r) => seconds(r.ready_p50_seconds)],
  ["p99", (r) => seconds(r.ready_p99_seconds)],
  ["Thread-hours", (r) => r.thread_hours.toFixed(1)],
  ["Compactions per thread-hour", (r) => r.compactions_per_thread_hour?.toFixed(2) ?? "—"],
];

/** The view's rows, newest day first. */
function figures(relay) {
  const rows = [...relay].reverse();
  return h(
    "section",
    { class: "card", "aria-labelledby": "figures-heading" },
    h("h2", { id: "figures-heading" }, "Per day, project, tool and model"),
    rows.length === 0
      ? h("p", { class: "muted" }, "No compactions, packages or reports in these days.")
      : h(
          "div",
          { class: "table-scroll" },
          h(
            "table",
            { class: "figures", "data-testid": "relay-figures" },
            h("thead", {}, h("tr", {}, COLUMNS.map(([title]) => h("th", { scope: "col" }, title)))),
            h(
              "tbody",
              {},
              rows.map((r) =>
                h(
                  "tr",
                  {},
                  COLUMNS.map(([, cell], i) => h(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, String(cell(r)))),
                ),
              ),
            ),
          ),
        ),
  );
}
