"""What the benchmark scripts share: latency percentiles, `ctxbudget api` in its own process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator

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
