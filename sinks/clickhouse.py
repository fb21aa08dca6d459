"""The ClickHouse client, through clickhouse-connect only: embedded chdb (`chdb:///path`) or a server (`http://...`).

chdb allows one process per data path, so a process opens its client once and shares it; readers go through the
process that owns the path.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import clickhouse_connect
from clickhouse_connect.driver.client import Client


def connect(dsn: str) -> Client:
    """Open a client for `dsn`. Timestamps come back timezone-aware (UTC), as the schemas require."""
    parsed = urlparse(dsn)
    if parsed.scheme == "chdb":
        # Created here, owner only (chdb would create it 0755, and not the folders above it).
        folder = Path(parsed.path)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
    return clickhouse_connect.get_client(dsn=dsn, tz_mode="aware")
