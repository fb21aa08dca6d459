"""Reporter footprint on a worker: one `ctxbudget report` tailing N active transcripts, half Claude Code
transcripts and half Codex rollouts, against a local receiver that answers like the API; printed against the targets
(under 2% of a core, under 100 MB RSS, a line's report at the API within 1 s) and baselines of the same run.

    .venv/bin/python -m bench.reporter_bench [--threads 200] [--baseline-threads 20] [--rate 0.5] [--seconds 60]
        [--checkout DIR]

Phases, each a fresh reporter on fresh files: (1) the N files present and idle (the polling floor), (2) the baseline
count active, (3) the N active. "Active" appends records at `--rate` lines/s per file, cycling through the real
records in tests/data (spotter-tool-heavy for Claude Code, the Codex Desktop rollout for Codex), each re-stamped with
its write time, a fresh uuid and its thread's ids and working directory (one of `--repos` git work trees).

CPU is the reporter's user+system time with its waited children (the git processes of the work facts) over the
phase's wall time, from /proc; RSS its peak VmHWM. Latency is the receiver's arrival time minus the time written in
the record: for every session event, and for every snapshot that goes out at once (a thread's first, or a level
change: the cadence of spec 5.1 holds the others back on purpose). "Reports" counts the snapshots the receiver got,
"spooled" those still in the reporter's spool at the end (a stuck delivery shows there, not in the latencies).

`--checkout` runs the reporter from another checkout of the repository (a baseline, e.g. a `git worktree` of main)
under this bench: alternate runs of both in one session to compare them on the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.measure import percentile
from reporter.delivery.spool import LOG_NAME, read_frames
from schemas import ContextBudgetLevel, WorkerReportResponse
from schemas.admission import RESEND_BITS

DATA = Path(__file__).parents[1] / "tests" / "data"
CLAUDE_TEMPLATE = DATA / "claude_code" / "spotter-tool-heavy.jsonl"
CODEX_TEMPLATE = DATA / "codex" / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
WARMUP_SECONDS = 6.0
TICKS = os.sysconf("SC_CLK_TCK")
REPORT_ANSWER = (
    WorkerReportResponse(
        accepted=True,
        thread_id="t",
        context_budget_level=ContextBudgetLevel.SAFE,
        next_required_report_in_seconds=30,
        master_actions=[],
    )
    .model_dump_json()
    .encode()
)  # a valid 5.2 answer: one the reporter cannot read keeps its snapshot spooled


@dataclass
class Received:
    lock: threading.Lock = field(default_factory=threading.Lock)
    items: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)


def receiver(received: Received) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        # Like the API's uvicorn: the connection stays open between requests, and an answer is not held back by
        # Nagle's algorithm waiting on the client's delayed ack of its headers.
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            arrived = time.time()
            kind = "event" if self.path.endswith("/session-events") else "snapshot"
            record = json.loads(body)
            if kind == "snapshot":  # a 5.2 report carries its version in a header
                record["snapshot_version"] = int(self.headers["X-Snapshot-Version"])
            records = record if isinstance(record, list) else [record]  # session events come a batch per request
            with received.lock:
                received.items.extend((arrived, kind, r) for r in records)
            answer = REPORT_ANSWER if kind == "snapshot" else b"{}"
            self.send_response(200 if kind == "snapshot" else 202)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _git_repo(path: Path) -> None:
    path.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b"}
    env["GIT_COMMITTER_EMAIL"] = "b@x"
    (path / "app.py").write_text("x = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, env=env)


@dataclass
class Transcript:
    path: Path
    claude: bool
    thread: str
    cwd: str
    template: list[dict[str, Any]]
    index: int = 0
    cycle: int = 0

    def next_line(self) -> bytes:
        record = json.loads(json.dumps(self.template[self.index]))
        now = datetime.now(UTC).isoformat()
        if self.claude:
            record |= {"sessionId": self.thread, "cwd": self.cwd, "timestamp": now}
            if "uuid" in record:
                record["uuid"] = str(uuid.uuid4())
            if isinstance(record.get("message"), dict) and record["message"].get("id"):
                record["message"]["id"] = f"{record['message']['id']}-{self.cycle}"
        else:
            record["timestamp"] = now
            if record["type"] == "turn_context":
                record["payload"]["cwd"] = self.cwd
        self.index += 1
        if self.index == len(self.template):
            self.index, self.cycle = 0, self.cycle + 1
        return (json.dumps(record, ensure_ascii=False) + "\n").encode()


def _templates() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    claude = [json.loads(line) for line in CLAUDE_TEMPLATE.read_text().splitlines() if line.strip()]
    codex = [json.loads(line) for line in CODEX_TEMPLATE.read_text().splitlines() if line.strip()]
    return claude, [r for r in codex if r["type"] != "session_meta"]


def _files(root: Path, count: int, repos: list[Path]) -> list[Transcript]:
    claude_template, codex_template = _templates()
    out = []
    for i in range(count):
        thread, cwd = str(uuid.uuid4()), str(repos[i % len(repos)])
        if i % 2 == 0:
            path = root / "claude" / f"-repo-{i % len(repos)}" / f"{thread}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            out.append(Transcript(path, True, thread, cwd, claude_template))
        else:
            path = root / "codex" / "2026" / "12" / "02" / f"rollout-2026-12-02T00-00-00-{thread}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            meta = {"id": thread, "cwd": cwd, "originator": "bench", "cli_version": "0.104.0"}
            header = {"timestamp": datetime.now(UTC).isoformat(), "type": "session_meta", "payload": meta}
            path.write_text(json.dumps(header) + "\n")
            out.append(Transcript(path, False, thread, cwd, codex_template))
    return out


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return (utime + stime + cutime + cstime) / TICKS


def _status_kb(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    raise KeyError(name)


@dataclass(frozen=True)
class Figures:
    label: str
    cpu_share: float
    rss_mb: float
    lines: int
    events: list[float]
    snapshots: list[float]
    reports: int
    spooled: int


@dataclass(frozen=True)
class Phase:
    label: str
    count: int
    rate: float


@dataclass(frozen=True)
class Options:
    seconds: float
    poll: float
    repos: int
    checkout: Path


def run_phase(phase: Phase, root: Path, options: Options) -> Figures:
    count, rate, seconds, poll = phase.count, phase.rate, options.seconds, options.poll
    trees = [root / "repos" / f"r{i}" for i in range(options.repos)]
    for tree in trees:
        _git_repo(tree)
    transcripts = _files(root, count, trees)
    received = Received()
    server = receiver(received)
    log = (root / "reporter.log").open("wb")
    command = [
        sys.executable, "-m", "ctxbudget", "report", "--from", "claude-code", "--from", "codex-rollouts",
        "--dir", str(root / "claude"), "--dir", str(root / "codex"), "--poll-seconds", str(poll),
        "--api-url", f"http://127.0.0.1:{server.server_port}", "--token", "bench",
        "--node-id", "bench-node", "--worker-id", "bench-worker", "--project-id", "bench",
    ]  # fmt: skip
    # the worker state where checkouts before it kept theirs (<data dir>/reporter), so both leave the spool in one place
    state = {"CTXBUDGET_DATA_DIR": str(root / "data"), "CTXBUDGET_WORKER_STATE_DIR": str(root / "data" / "reporter")}
    env = {**os.environ, **state, "PYTHONPATH": str(options.checkout)}
    process = subprocess.Popen(command, env=env, cwd=options.checkout, stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(WARMUP_SECONDS)  # imports, the first read of every file
        start, cpu_start = time.time(), _cpu_seconds(process.pid)
        lines = _append(transcripts, rate, seconds)
        time.sleep(poll + 0.5)  # the last lines' round
        wall, cpu = time.time() - start, _cpu_seconds(process.pid) - cpu_start
        rss = _status_kb(process.pid, "VmHWM") / 1024
    finally:
        process.terminate()
        process.wait(timeout=30)
        server.shutdown()
        log.close()
    if process.returncode not in (0, -15, 1):
        raise RuntimeError(f"the reporter exited {process.returncode}: {(root / 'reporter.log').read_text()[-2000:]}")
    events, snapshots = _latencies(received, start)
    reports = sum(kind == "snapshot" for _, kind, _ in received.items)
    left = _spooled(root / "data" / "reporter" / "spool" / LOG_NAME)
    return Figures(phase.label, cpu / wall, rss, lines, events, snapshots, reports, left)


def _spooled(log: Path) -> int:
    """Snapshots the spool still held when the reporter stopped: the PUT frames without a GONE."""
    frames, _ = read_frames(log.read_bytes()) if log.exists() else ([], 0)
    gone = {seq for kind, seq, _ in frames if kind == b"G"}
    return sum(kind == b"P" and seq not in gone for kind, seq, _ in frames)


def _append(transcripts: list[Transcript], rate: float, seconds: float) -> int:
    """Append each file's next record at `rate` lines/s, the files' turns spread evenly over one period."""
    if rate <= 0:
        time.sleep(seconds)
        return 0
    period, start, written = 1 / rate, time.monotonic(), 0
    due = [start + period * i / len(transcripts) for i in range(len(transcripts))]
    while (now := time.monotonic()) < start + seconds:
        for i, transcript in enumerate(transcripts):
            if due[i] <= now:
                with transcript.path.open("ab") as handle:
                    handle.write(transcript.next_line())
                due[i] += period
                written += 1
        time.sleep(0.005)
    return written


def _latencies(received: Received, start: float) -> tuple[list[float], list[float]]:
    events, snapshots, levels = [], [], {}
    with received.lock:
        items = list(received.items)
    for arrived, kind, body in items:
        if kind == "event":
            written = datetime.fromisoformat(body["occurred_at"]).timestamp()
            if written >= start and body["type"] != "work_fact_changed":  # a fact's time is its evaluation
                events.append(arrived - written)
            continue
        thread, level = body["thread_id"], body["context_budget_level"]
        resend = body["snapshot_version"] & ((1 << RESEND_BITS) - 1)
        at_once = resend == 0 and levels.get(thread) != level
        levels[thread] = level
        written = datetime.fromisoformat(body["captured_at"]).timestamp()
        if at_once and written >= start:
            snapshots.append(arrived - written)
    return events, snapshots


def _ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:.0f} ms" if values else "—"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--baseline-threads", type=int, default=20)
    parser.add_argument("--rate", type=float, default=0.5, help="lines/s appended to each active file")
    # long enough for both tools' files to report: the Codex template's first usage is its 17th line (34 s at 0.5/s)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--poll", type=float, default=0.5, help="the reporter's --poll-seconds")
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--checkout", type=Path, default=Path(__file__).parents[1], help="the reporter's code")
    args = parser.parse_args()
    phases = [
        Phase(f"{args.threads} files, idle", args.threads, 0.0),
        Phase(f"{args.baseline_threads} active", args.baseline_threads, args.rate),
        Phase(f"{args.threads} active", args.threads, args.rate),
    ]
    options = Options(args.seconds, args.poll, args.repos, args.checkout.resolve())
    results = []
    for phase in phases:
        root = Path(tempfile.mkdtemp(prefix="reporter-bench-"))
        try:
            results.append(run_phase(phase, root, options))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    head = subprocess.run(["git", "-C", str(options.checkout), "rev-parse", "--short", "HEAD"], capture_output=True)
    print(f"reporter at {options.checkout} ({head.stdout.decode().strip()}), load average {os.getloadavg()}")
    print(f"reporter footprint, {args.rate} lines/s per active file, poll {args.poll} s, {args.seconds:.0f} s each")
    print(f"{'phase':<20} {'lines':>6} {'CPU (core)':>11} {'RSS peak':>9} {'event p50':>10} {'event p99':>10}"
          f" {'report p50':>11} {'report p99':>11} {'reports':>8} {'spooled':>8}")  # fmt: skip
    for f in results:
        print(
            f"{f.label:<20} {f.lines:>6} {f.cpu_share * 100:>10.2f}% {f.rss_mb:>6.0f} MB {_ms(f.events, 50):>10}"
            f" {_ms(f.events, 99):>10} {_ms(f.snapshots, 50):>11} {_ms(f.snapshots, 99):>11} {f.reports:>8}"
            f" {f.spooled:>8}"
        )
    print("targets: CPU < 2% of a core, RSS < 100 MB, line -> API < 1 s (p99)")


if __name__ == "__main__":
    main()
