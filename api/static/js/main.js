// The page: asks for a token once per tab, routes between the four views by URL hash, and feeds them one live
// event stream (spec 6.4) for the whole tab.
import { forgetToken, setToken, token } from "./auth.js";
import { analyticsView } from "./analytics.js";
import { h } from "./dom.js";
import { homeView } from "./home.js";
import { projectView } from "./project.js";
import { threadView } from "./thread.js";
import { LiveStream } from "./sse.js";

const ROUTES = [
  [/^#\/projects\/([^/]+)$/, projectView],
  [/^#\/threads\/([^/]+)$/, threadView],
  [/^#\/analytics$/, analyticsView],
  [/^(?:#\/?)?$/, homeView],
];
const STATUS_TEXT = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", offline: "offline" };

const main = document.getElementById("main");
const statusLine = document.getElementById("live-status");
const crumbs = document.getElementById("crumbs");
const signOut = document.getElementById("sign-out");

let view = null;
let stream = null;
let navigated = false; // focus moves to a view's heading after in-page navigation, not on the first load

const context = {
  title(text) {
    document.title = `${text} · ctxbudget`;
  },
  crumbs(trail) {
    crumbs.replaceChildren(
      h(
        "ol",
        {},
        h("li", {}, h("a", { href: "#/" }, "Conversations")),
        trail.map(([label, href], i) =>
          h("li", {}, h("a", { href, "aria-current": i === trail.length - 1 ? "page" : null }, label)),
        ),
      ),
    );
  },
  arrived() {
    if (navigated) main.querySelector("h1")?.focus();
  },
  unauthorized() {
    signIn("The API refused this token (expired, or from another deployment). Enter a new one.");
  },
};

function setStatus(state) {
  statusLine.dataset.state = state;
  statusLine.textContent = STATUS_TEXT[state];
}

function route() {
  view?.dispose();
  view = null;
  if (!token()) return signIn();
  const hash = location.hash;
  for (const [pattern, make] of ROUTES) {
    const match = pattern.exec(hash);
    if (match) {
      main.replaceChildren();
      view = make(main, match[1] === undefined ? null : decodeURIComponent(match[1]), context);
      return;
    }
  }
  location.hash = "#/";
}

function startStream() {
  stream?.stop();
  stream = new LiveStream({
    url: "/api/v1/events",
    token,
    onEvent: (event) => view?.onEvent(event),
    onStatus: setStatus,
    onUnauthorized: context.unauthorized,
    onResync: () => view?.resync(),
  });
  stream.start();
}

function signIn(problem = null) {
  view?.dispose();
  view = null;
  stream?.stop();
  stream = null;
  forgetToken();
  setStatus("offline");
  signOut.hidden = true;
  crumbs.replaceChildren();
  context.title("Sign in");
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true });
  const form = h(
    "form",
    { class: "card sign-in" },
    h("h1", { tabindex: -1 }, "Sign in"),
    problem ? h("p", { role: "alert", class: "problem" }, problem) : null,
    h("label", { for: "token" }, "Bearer token"),
    h("p", { class: "note", id: "token-help" }, "A token from `ctxbudget token`; kept for this tab only."),
    input,
    h("button", { type: "submit" }, "Open"),
  );
  input.setAttribute("aria-describedby", "token-help");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!input.value.trim()) return;
    setToken(input.value);
    start();
  });
  main.replaceChildren(form);
  input.focus();
}

function start() {
  signOut.hidden = false;
  startStream();
  route();
}

signOut.addEventListener("click", () => signIn());
// The skip link must not change the hash: the hash is the route.
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});
window.addEventListener("hashchange", () => {
  navigated = true;
  if (token()) route();
});
if (token()) start();
else signIn();
