"""Does a master get packages ready before compactions? The simulated fleet with the master off and on, in one run.

    .venv/bin/python -m bench.fleet_relay [--threads 16] [--projects 4] [--turns 90] [--turn-seconds 1.3]
        [--cap-per-node 1] [--cap-per-project 2] [--repeat-seconds 60]

A `ctxbudget run` worker (broker, folds, sinks, API) on a fresh broker and data dir; a live simulated fleet whose
threads post no packages of their own (`SimulationConfig.self_handoff=False`) and compact where their budget runs
out. Each project is in one mode for the whole run, half the projects in each, so both halves share the machine, the
clock and the fleet's traffic:

- `off`: nobody prepares a package (the baseline: what today's fleet gets when nothing acts on the actions);
- `master`: the example master (`master.driver`, over MCP with `ctxbudget mcp` on stdio) requests handoffs in the
  spec 8.2 order, a `Responder` posts the package each simulated worker would (over HTTP, with that worker's token),
  and the master consumes finished packages into relay threads. It schedules them (issue 37): at most
  `--cap-per-node` relays per simulated machine and `--cap-per-project` per project at once, the rest queued in the
  8.1 order, and no relay of work relayed less than `--repeat-seconds` ago (futile). The caps are small on purpose, so
  that the fleet's wrap-ups outnumber them and the figures say what queueing costs.

- `relay`: nobody asks but the engine's own actions: each simulated worker runs the reporter's relay
  (`bench.relay_responder`, issue 23), which lists its threads' open actions from the API, acknowledges them and
  answers each wrap-up with a package from facts alone, draft then ready.

With `--modes off,master,relay` (the default) the projects are split in thirds; `--modes off,relay` in halves.

Printed from the compaction analytics in ClickHouse (`compaction_events`, `master_actions`, through the API's SQL
endpoint): per mode, the share of compactions that had a ready package for their cycle, and the time from
`prepare_handoff` issued to the package ready (p50 / p99) for the actions a ready package completed; from the
master's rounds, the relays queued and the futile relays caught.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from bench.measure import percentile
from bench.relay_responder import relays_running, worker_relays
from core.settings import Settings
from master.cli import drive, mcp_command
from master.driver import RoundReport
from master.strategy import HandoffRequest
from schemas import HandoffPackage, PackageStatus
from schemas.codec import encode_record
from streams.local_kafka import LocalKafka, free_port
from streams.simulator import SimulationConfig, live_traffic, produce, worker_id_of
from streams.topic_admin import ensure_topics

MODES = ("off", "master", "relay")
RECORDS_PER_TURN = 1.25
"""Records a simulated thread sends per turn on average (a snapshot, sometimes an estimate or a work fact)."""
SETTLE_SECONDS = 20
"""After the fleet's last record, time for the folds and the sinks to write what it caused."""


class SimulatedWorkers:
    """The `master` mode's responder: the worker of the thread posts a ready package when the master asks."""

    def __init__(self, api: str, secret: bytes) -> None:
        self.api = api
        self.secret = secret
        self.posted = 0
        self.failed: list[str] = []

    async def handoff_requested(self, request: HandoffRequest) -> None:
        now = datetime.now(UTC)
        self.posted += 1
        package = HandoffPackage(
            handoff_package_id=f"hp-{request.thread_id}-m{self.posted}",
            project_id=request.project_id,
            from_thread_id=request.thread_id,
            package_status=PackageStatus.READY,
            summary_text=f"{request.thread_id}: handed off at the master's request ({request.reason}).",
            critical_files=["src/main.py"],
            critical_commands=["pytest -q"],
            created_at=now,
            ready_at=now,
        )
        token = issue_token(
            self.secret, Role.WORKER, worker_id_of(request.thread_id), [request.project_id], ttl=timedelta(hours=1)
        )
        url = f"{self.api}/api/v1/threads/{request.thread_id}/handoff-packages"
        status, body = await asyncio.to_thread(_send, "POST", url, token, encode_record(package))
        if status != 202:
            self.failed.append(f"{status} {body[:200]!r}")


def _send(method: str, url: str, token: str, body: bytes | None = None, content_type: str = "application/json"):
    request = urllib.request.Request(url, data=body, method=method, headers={"Authorization": f"Bearer {token}"})
    if body is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def sql(api: str, token: str, query: str) -> list[dict[str, Any]]:
    status, body = _send("POST", f"{api}/api/v1/sql?format=json", token, query.encode(), "text/plain")
    if status != 200:
        raise RuntimeError(f"SQL answered {status}: {body[:500]!r}")
    return [json.loads(line) for line in body.splitlines() if line.strip()]


@contextlib.contextmanager
def pipeline(settings: Settings, port: int, extra: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUDGET_")}
    env |= {
        "CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS": str(settings.kafka_bootstrap_servers),
        "CTXBUDGET_TOPIC_PREFIX": settings.topic_prefix,
        "CTXBUDGET_DATA_DIR": str(settings.data_dir),
        "CTXBUDGET_API_PORT": str(port),
        "CTXBUDGET_WORKER_WEB_PORT": str(free_port()),
        # the machine may lag behind the fleet's clock: a late report must not make a thread stale (the master
        # skips stale threads), which would measure the machine instead of the master
        "CTXBUDGET_STALE_FACTOR": "1000",
        **extra,
    }
    log = (Path(settings.data_dir) / "worker.log").open("ab")
    worker = subprocess.Popen([sys.executable, "-m", "streams", "run"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield worker
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            worker.wait(timeout=90)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        log.close()


def wait_up(api: str, worker: subprocess.Popen[bytes], within: float = 180) -> None:
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{api}/healthz", timeout=5):
            return
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the worker's API never answered (see worker.log in the data dir)")
        time.sleep(0.5)


@contextlib.asynccontextmanager
async def master_running(
    command: list[str],
    responder: SimulatedWorkers,
    projects: list[str],
    interval: float,
    reports: list[RoundReport],
    log: Path,
) -> AsyncIterator[None]:
    """The master's rounds in the background; the MCP server's log lines go to `log`."""
    with log.open("a") as errlog:
        task = asyncio.create_task(drive(command, responder, projects, interval, 0, reports.append, errlog))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def measure(api: str, token: str, mode_of: dict[str, str]) -> dict[str, dict[str, Any]]:
    compactions = sql(
        api,
        token,
        "SELECT project_id, count() AS compactions, countIf(handoff_ready) AS ready"
        " FROM compaction_events GROUP BY project_id",
    )
    waits = sql(
        api,
        token,
        "SELECT project_id, action_id, min(issued_at) AS issued,"
        " minIf(state_changed_at, state = 'done' AND state_reason = 'handoff_ready') AS ready,"
        " countIf(state = 'done' AND state_reason = 'handoff_ready') AS readied"
        " FROM master_actions WHERE has(actions, 'prepare_handoff') GROUP BY project_id, action_id",
    )
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"compactions": 0, "ready": 0, "issued": 0, "waits": []})
    for row in compactions:
        mode = out[mode_of.get(row["project_id"], "other")]
        mode["compactions"] += int(row["compactions"])
        mode["ready"] += int(row["ready"])
    for row in waits:
        mode = out[mode_of.get(row["project_id"], "other")]
        mode["issued"] += 1
        if int(row["readied"]):
            issued, ready = (datetime.fromisoformat(row[k]) for k in ("issued", "ready"))
            mode["waits"].append((ready - issued).total_seconds())
    return dict(out)


def report(results: dict[str, dict[str, Any]], master: list[RoundReport], workers: SimulatedWorkers) -> None:
    print(f"{'mode':8} {'compactions':>11} {'with ready package':>19} {'prepare_handoff':>16} {'readied':>8}"
          f" {'ready p50 s':>12} {'ready p99 s':>12}")  # fmt: skip
    for mode in MODES:
        r = results.get(mode, {"compactions": 0, "ready": 0, "issued": 0, "waits": []})
        share = f"{r['ready']}/{r['compactions']} = {r['ready'] / r['compactions']:.0%}" if r["compactions"] else "-"
        waits = r["waits"]
        p50, p99 = (f"{percentile(waits, q):.1f}" if waits else "-" for q in (50, 99))
        print(f"{mode:8} {r['compactions']:>11} {share:>19} {r['issued']:>16} {len(waits):>8} {p50:>12} {p99:>12}")
    errors = [e for rep in master for e in rep.errors]
    print(
        f"master: {len(master)} rounds, {sum(len(r.requested) for r in master)} handoff requests, "
        f"{sum(len(r.consumed) for r in master)} packages consumed, {len(errors)} tool errors"
        + (f" (first: {errors[0][:160]})" if errors else "")
    )
    queued = {t for r in master for t in r.queued}
    futile = {t: why for r in master for t, why in r.futile.items()}
    print(
        f"schedule: wrap-ups over the cap in {sum(bool(r.queued) for r in master)} of {len(master)} rounds, "
        f"{len(queued)} threads queued ({sum(len(r.queued) for r in master)} round-waits), "
        f"{len(futile)} futile relays caught"
        + (f" (e.g. {next(iter(futile))}: {next(iter(futile.values()))[:120]})" if futile else "")
    )
    print(f"simulated workers: {workers.posted} packages posted, {len(workers.failed)} refused"
          + (f" (first: {workers.failed[0]})" if workers.failed else ""))  # fmt: skip


@contextlib.contextmanager
def fresh_broker(prefix: str) -> Iterator[tuple[Path, Settings]]:
    """A fresh local broker and data dir for one run (its folder, the worker's settings), the broker stopped at the
    end."""
    data = Path(tempfile.mkdtemp(prefix=prefix))
    base = Settings()
    broker = LocalKafka(data / "kafka", base.kafka_version, base.kafka_cache_dir)
    settings = Settings(
        kafka_bootstrap_servers=broker.up(), data_dir=data / "worker", topic_prefix="bench.", topic_partitions=2
    )
    settings.resolved_data_dir.mkdir(parents=True)
    try:
        yield data, settings
    finally:
        broker.down()


def main(args: argparse.Namespace) -> None:
    with fresh_broker("fleet-relay-") as (data, settings):
        asyncio.run(bench(args, settings, data / "operator-token"))


async def bench(args: argparse.Namespace, settings: Settings, token_file: Path) -> None:
    await ensure_topics(settings)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    caps = {
        "CTXBUDGET_API_RELAY_CAP_PER_NODE": str(args.cap_per_node),
        "CTXBUDGET_API_RELAY_CAP_PER_PROJECT": str(args.cap_per_project),
        "CTXBUDGET_API_RELAY_REPEAT_SECONDS": str(args.repeat_seconds),
    }
    with pipeline(settings, port, caps) as worker:
        await asyncio.to_thread(wait_up, api, worker)
        secret = token_secret(Settings(data_dir=settings.data_dir), ApiSettings())
        operator = issue_token(secret, Role.OPERATOR, "bench", ttl=timedelta(hours=2))
        await asyncio.to_thread(token_file.write_text, operator)
        projects = [f"proj-{i:03d}" for i in range(args.projects)]
        modes = args.modes.split(",")
        mode_of = {p: modes[i % len(modes)] for i, p in enumerate(projects)}
        on = [p for p in projects if mode_of[p] == "master"]
        relayed = [(f"thread-{i:04d}", f"proj-{i % args.projects:03d}") for i in range(args.threads)]
        relays = worker_relays(
            api, secret, [(t, p) for t, p in relayed if mode_of[p] == "relay"], settings.resolved_data_dir / "relay"
        )
        config = SimulationConfig(
            threads=args.threads,
            projects=args.projects,
            turns_per_thread=args.turns,
            seed=args.seed,
            start=datetime.now(UTC),
            turn_seconds=args.turn_seconds,
            duplicate_rate=0,
            late_rate=0,
            invalid_rate=0,
            mismatch_rate=0,
            self_handoff=False,
        )
        rate = args.threads * RECORDS_PER_TURN / args.turn_seconds
        workers, rounds = SimulatedWorkers(api, secret), []
        print(f"fleet: {args.threads} threads, {args.projects} projects ({mode_of}), "
              f"{args.turns} turns of ~{args.turn_seconds} s; relay caps {args.cap_per_node} per node, "
              f"{args.cap_per_project} per project, repeat {args.repeat_seconds} s; data in {settings.data_dir}",
              flush=True)  # fmt: skip
        started = time.monotonic()
        mcp_log = settings.resolved_data_dir / "mcp.log"
        master = master_running(mcp_command(api, token_file), workers, on, args.interval, rounds, mcp_log)
        async with master if on else contextlib.nullcontext(), relays_running(relays):
            sent = await produce(live_traffic(config), str(settings.kafka_bootstrap_servers), "bench.", rate)
            await asyncio.sleep(SETTLE_SECONDS)
        print(f"sent {sent} records in {time.monotonic() - started:.0f} s", flush=True)
        await asyncio.sleep(5)  # the sinks' last flush
        report(await asyncio.to_thread(measure, api, operator, mode_of), rounds, workers)
        made = [p for relay in relays for p in relay.prepared]
        owed = sum(len(relay.outbox) for relay in relays)
        print(f"relays: {len(relays)} workers, {len(made)} packages, {sum(p.ready_at is not None for p in made)} ready,"
              f" {sum(r.outbox.rejected for r in relays)} refused, {owed} still owed")  # fmt: skip


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--projects", type=int, default=6)
    parser.add_argument("--turns", type=int, default=90)
    parser.add_argument("--turn-seconds", type=float, default=1.3)
    parser.add_argument("--interval", type=float, default=2.0, help="Seconds between the master's rounds.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap-per-node", type=int, default=1, help="Relays a simulated machine runs at once.")
    parser.add_argument("--cap-per-project", type=int, default=2, help="Relays a project runs at once.")
    parser.add_argument("--repeat-seconds", type=float, default=60, help="Relaying the same work sooner is futile.")
    parser.add_argument("--modes", default=",".join(MODES), help="The modes, each given to a share of the projects.")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse())
