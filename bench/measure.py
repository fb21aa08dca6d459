"""What the benchmark scripts share: a free local port and latency percentiles."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by the nearest rank below; values need not be sorted."""
    ordered = sorted(values)
    return ordered[int(q / 100 * (len(ordered) - 1))]
