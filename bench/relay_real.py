"""Do compactions of the real Claude Code and Codex carry the agent's own handoff? Relay on against relay off, one run.

    .venv/bin/python -m bench.relay_real [--sessions 10] [--modes claude-auto,claude-manual,codex-exec,codex-app-server]
                                         [--step-seconds 1.0] [--parallel 4]

A fresh local broker and a `ctxbudget run` worker (folds, sinks into embedded chdb, API). For each mode, two workers
set up as the README says (tests/realtools/relay_scenario.py), each with its own HOME, work tree, token and project:
one with the relay (`ctxbudget hooks install`, `ctxbudget report`), one without (the reporter with `--no-relay` and no
hooks: the baseline of the same run). Each runs `--sessions` sessions of the pinned real tool against the scripted
model, one after another, each until it compacted (Claude Code automatically or by `/compact`, Codex by itself) and
took one more turn. `--step-seconds` is the model's time per step (a real agent's pace).

Printed per mode and relay, from what the pipeline recorded (ClickHouse, through the API's SQL endpoint):
compactions, the share with a ready package for their cycle, the share whose package holds the agent's own summary,
facts-only packages, `handoff_missing` alerts, `prepare_handoff` issued -> ready p50/p99, sessions resumed from the
package, and work trees holding anything but the agent's own files.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from bench.fleet_relay import fresh_broker, pipeline, wait_up
from bench.measure import percentile
from core.settings import Settings
from streams.local_kafka import free_port
from streams.topic_admin import ensure_topics
from tests.realtools.relay_scenario import Group, Mode, Recorded, settled, worker_token
from tests.realtools.tools import install

SETTLE_SECONDS = 120


def main(args: argparse.Namespace) -> None:
    binaries = install()
    with fresh_broker("relay-real-") as (root, settings):
        asyncio.run(ensure_topics(settings))
        port = free_port()
        api = f"http://127.0.0.1:{port}"
        with pipeline(settings, port, {}) as worker:
            wait_up(api, worker)
            secret = token_secret(Settings(data_dir=settings.data_dir), ApiSettings())
            operator = issue_token(secret, Role.OPERATOR, "bench", ttl=timedelta(hours=3))
            groups = []
            for mode in (Mode(m) for m in args.modes.split(",")):
                for relay in (True, False):
                    name = f"{mode}-{'on' if relay else 'off'}"
                    token = worker_token(settings.resolved_data_dir, f"w-{name}", f"p-{name}")
                    groups.append(
                        Group(
                            mode, relay, root / name, api, token, f"p-{name}", f"w-{name}", binaries, args.step_seconds
                        )
                    )
            print(f"{len(groups)} workers x {args.sessions} sessions, step {args.step_seconds} s, data in {root}",
                  flush=True)  # fmt: skip
            started = time.monotonic()
            failures: list[str] = []
            with ThreadPoolExecutor(args.parallel) as pool:
                futures = {pool.submit(group.run, args.sessions): group for group in groups}
                for future, group in futures.items():
                    try:
                        future.result()
                    except Exception as error:  # a group that fails is reported with the rest, not hidden
                        failures.append(f"{group.mode} relay={group.relay}: {error}"[:500])
            print(f"sessions played in {time.monotonic() - started:.0f} s", flush=True)
            summary = groups[0].script().handoff["summary"]
            results = settled(api, operator, groups, summary, SETTLE_SECONDS)
            report(groups, results)
            for failure in failures:
                print(f"FAILED {failure}")


def report(groups: list[Group], results: dict[str, Recorded]) -> None:
    print(
        f"{'mode':17} {'relay':5} {'sessions':>8} {'compactions':>11} {'ready':>13} {'agent part':>13}"
        f" {'facts-only':>10} {'missing':>7} {'issued':>6} {'p50 s':>6} {'p99 s':>6} {'resumed':>7} {'dirty':>5}"
    )
    for group in groups:
        r = results[group.project]
        n = len(r.compactions)
        ready = sum(c.handoff_ready for c in r.compactions)
        agent = sum(c.agent_part for c in r.compactions)
        p50, p99 = (f"{percentile(r.waits, q):.1f}" if r.waits else "-" for q in (50, 99))
        resumed = sum(s.resumed for s in group.sessions)
        dirty = sum(s.work_tree_status != ["?? notes.txt"] for s in group.sessions)
        print(
            f"{group.mode:17} {'on' if group.relay else 'off':5} {len(group.sessions):>8} {n:>11}"
            f" {share(ready, n):>13} {share(agent, n):>13} {r.facts_only:>10} {r.handoff_missing:>7} {r.issued:>6}"
            f" {p50:>6} {p99:>6} {resumed:>7} {dirty:>5}"
        )
        if r.ctxbudget_paths:
            print(f"  ctxbudget's own files in packages: {r.ctxbudget_paths[:5]}")


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} {part / whole:.0%}" if whole else "-"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10, help="Sessions per mode and relay setting.")
    parser.add_argument("--modes", default=",".join(Mode))
    parser.add_argument("--step-seconds", type=float, default=1.0, help="The model's time per step.")
    parser.add_argument("--parallel", type=int, default=4, help="Workers playing at once.")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse())
