// Server-sent events over fetch(): EventSource cannot send an Authorization header, and a token in the URL would
// land in access logs and history. The parser follows the WHATWG event-stream rules; the connection resumes with
// Last-Event-ID after any drop, so the server replays exactly what this tab missed (api/events.py).

const DEFAULT_RETRY_MS = 2_000; // until the server's `retry:` field says otherwise (api/events.py RETRY_MILLISECONDS)
const MAX_RETRY_MS = 30_000;
// The API sends a heartbeat after 15 s of silence (api/settings.py sse_heartbeat_seconds); three missed ones mean a
// half-open connection that the browser alone would never notice.
const IDLE_TIMEOUT_MS = 45_000;

export class Unauthorized extends Error {}

/** Splits a text/event-stream into events. `lastEventId` follows every dispatch, heartbeats included. */
export class EventStreamParser {
  constructor(onEvent, onRetry = () => {}) {
    this.onEvent = onEvent;
    this.onRetry = onRetry;
    this.lastEventId = null;
    this.buffer = "";
    this.pendingCr = false;
    this.reset();
  }

  reset() {
    this.data = [];
    this.type = "";
    this.idBuffer = this.lastEventId;
  }

  feed(text) {
    if (text === "") return;
    // A CR ends a line at once; a LF right after it (maybe in the next chunk) completes the same CRLF.
    if (this.pendingCr && text.startsWith("\n")) text = text.slice(1);
    this.pendingCr = text.endsWith("\r");
    this.buffer += text;
    const lines = this.buffer.split(/\r\n|\r|\n/);
    this.buffer = lines.pop();
    for (const line of lines) this.line(line);
  }

  line(line) {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return; // a comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.idBuffer = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.onRetry(Number(value));
  }

  dispatch() {
    this.lastEventId = this.idBuffer;
    if (this.data.length > 0) {
      this.onEvent({ type: this.type || "message", data: this.data.join("\n"), id: this.lastEventId });
    }
    this.reset();
  }
}

/**
 * One live stream for the tab. `onEvent({type, data, id})` gets each event with its JSON decoded; `onStatus` gets
 * "connecting", "live" or "reconnecting"; `onUnauthorized` is called (and the stream stops) when the token is refused;
 * `onResync` is called when the stream opens without resuming (events before it may be missing: read again).
 */
export class LiveStream {
  constructor({ url, token, onEvent, onStatus = () => {}, onUnauthorized = () => {}, onResync = () => {} }) {
    Object.assign(this, { url, token, onEvent, onStatus, onUnauthorized, onResync });
    this.lastEventId = null;
    this.retryMs = DEFAULT_RETRY_MS;
    this.failures = 0;
    this.controller = null;
    this.stopped = true;
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.run();
  }

  stop() {
    this.stopped = true;
    this.controller?.abort();
  }

  async run() {
    this.onStatus("connecting");
    while (!this.stopped) {
      try {
        await this.once();
      } catch (error) {
        if (error instanceof Unauthorized) {
          this.stopped = true;
          this.onUnauthorized();
          return;
        }
        this.failures += 1;
      }
      if (this.stopped) return;
      this.onStatus("reconnecting");
      await sleep(Math.min(this.retryMs * 2 ** Math.max(0, this.failures - 1), MAX_RETRY_MS));
    }
  }

  async once() {
    this.controller = new AbortController();
    const headers = { Authorization: `Bearer ${this.token()}`, Accept: "text/event-stream" };
    if (this.lastEventId !== null) headers["Last-Event-ID"] = this.lastEventId;
    const response = await fetch(this.url, { headers, cache: "no-store", signal: this.controller.signal });
    if (response.status === 401) throw new Unauthorized();
    if (response.status === 422 && this.lastEventId !== null) {
      this.lastEventId = null; // a position the API no longer accepts: start afresh (and read the views again)
      throw new Error("event stream: Last-Event-ID refused");
    }
    if (!response.ok) throw new Error(`event stream: HTTP ${response.status}`);
    const resumed = this.lastEventId !== null;

    const parser = new EventStreamParser(
      (event) => this.deliver(event),
      (ms) => {
        this.retryMs = ms;
      },
    );
    parser.lastEventId = parser.idBuffer = this.lastEventId;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let idle = setTimeout(() => this.controller.abort(), IDLE_TIMEOUT_MS);
    try {
      for (let first = true; ; first = false) {
        const { value, done } = await reader.read();
        if (done) return;
        clearTimeout(idle);
        idle = setTimeout(() => this.controller.abort(), IDLE_TIMEOUT_MS);
        if (first) {
          this.failures = 0;
          this.onStatus("live");
          if (!resumed) this.onResync();
        }
        parser.feed(value);
        this.lastEventId = parser.lastEventId;
      }
    } finally {
      clearTimeout(idle);
    }
  }

  deliver(event) {
    let data;
    try {
      data = JSON.parse(event.data);
    } catch {
      console.warn("skipping an event whose data is not JSON", event.id);
      return;
    }
    this.onEvent({ ...event, data });
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
