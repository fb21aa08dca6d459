"""What the benchmark scripts share: latency percentiles, `ctxbudget api` in its own process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from core.settings import Settings
from streams.local_kafka import free_port


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by the nearest rank below; values need not be sorted."""
    ordered = sorted(values)
    return ordered[int(q / 100 * (len(ordered) - 1))]


@contextlib.asynccontextmanager
async def api_process(settings: Settings) -> AsyncIterator[str]:
    """`ctxbudget api` on the settings' broker, prefix and data dir (its own embedded chdb), in a process of its own
    so a load generator here does not share its CPU; yields its base URL once it answers."""
    port = free_port()
    env = {
        **os.environ,
        "CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS": str(settings.kafka_bootstrap_servers),
        "CTXBUDGET_TOPIC_PREFIX": settings.topic_prefix,
        "CTXBUDGET_DATA_DIR": str(settings.data_dir),
        "CTXBUDGET_API_PORT": str(port),
    }
    server = subprocess.Popen(  # noqa: ASYNC220 - started once, not awaited
        [sys.executable, "-m", "streams", "api"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(240):  # it binds once its Kafka side and migrations are up
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            await asyncio.sleep(0.5)
        else:
            raise RuntimeError("`ctxbudget api` never answered")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=60)


def child_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process's children (Linux): the `ctxbudget api` of
    `api_process`, whose CPU per request or per delivery holds up on a machine shared with other work, where its
    latency does not."""
    ticks = 0
    for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in children.read_text().split():
            with contextlib.suppress(OSError):  # it just ended
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of proc(5)
    return ticks / os.sysconf("SC_CLK_TCK")
