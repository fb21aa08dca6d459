// A detail view's data: loaded once, then loaded again when the live stream says it changed (at most once per
// REFRESH_INTERVAL_MS, so a busy project does not turn every event into a request).
import { h } from "./dom.js";
import { NotFound, Unauthorized } from "./api.js";

const REFRESH_INTERVAL_MS = 1_000;
const RETRY_AFTER_MS = 3_000;

/**
 * `load(signal)` fetches, `render(data)` draws into `main`. Returns `{changed, dispose}`; keyboard focus
 * on a link survives a redraw (the link with the same href takes it back).
 */
export function liveResource({ main, load, render, context, what }) {
  const controller = new AbortController();
  let running = false;
  let again = false;
  let loaded = false;
  let lastStart = 0;
  let timer = null;
  let retryTimer = null;

  async function refresh() {
    if (running) {
      again = true;
      return;
    }
    running = true;
    lastStart = Date.now();
    try {
      const data = await load(controller.signal);
      const focused = main.contains(document.activeElement) ? document.activeElement.getAttribute("href") : null;
      render(data);
      if (!loaded) context.arrived();
      loaded = true;
      if (focused) main.querySelector(`a[href="${CSS.escape(focused)}"]`)?.focus();
    } catch (error) {
      if (controller.signal.aborted) return;
      if (loaded && !(error instanceof Unauthorized || error instanceof NotFound)) {
        // A refresh that failed (the API restarting, a network blip): keep what is shown and try again.
        retryTimer = setTimeout(changed, RETRY_AFTER_MS);
        return;
      }
      showFailure(error);
    } finally {
      running = false;
      if (again && !controller.signal.aborted) {
        again = false;
        changed();
      }
    }
  }

  function showFailure(error) {
    if (error instanceof Unauthorized) return context.unauthorized();
    if (error instanceof NotFound) {
      context.title(`${what} not found`);
      return main.replaceChildren(
        h("h1", { tabindex: -1 }, `${what} not found`),
        h("p", {}, `No ${what} by that id is visible to this token.`),
        h("p", {}, h("a", { href: "#/" }, "Back to the conversations")),
      );
    }
    main.replaceChildren(
      h("h1", { tabindex: -1 }, `Could not load the ${what}`),
      h("p", { role: "alert" }, String(error.message || error)),
      retryButton(),
    );
  }

  function retryButton() {
    const button = h("button", { type: "button" }, "Try again");
    button.addEventListener("click", refresh);
    return button;
  }

  function changed() {
    if (timer !== null) return;
    timer = setTimeout(
      () => {
        timer = null;
        refresh();
      },
      Math.max(0, lastStart + REFRESH_INTERVAL_MS - Date.now()),
    );
  }

  refresh();
  return {
    changed,
    dispose() {
      controller.abort();
      clearTimeout(timer);
      clearTimeout(retryTimer);
    },
  };
}
