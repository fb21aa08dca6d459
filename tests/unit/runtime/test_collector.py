"""A worker runs the cyclic collector less often than Python's defaults (streams.runtime.app.collect_less)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import Settings
from streams.runtime.app import GC_THRESHOLDS, Worker, create_app


@pytest.fixture
def default_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_a_worker_sets_its_collector_thresholds(default_thresholds: None, tmp_path: Path) -> None:
    app = create_app(Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path, worker_web_port=None))
    Worker(app, loglevel="error", quiet=True, redirect_stdouts=False, shutdown_seconds=1)
    assert gc.get_threshold() == GC_THRESHOLDS
    assert GC_THRESHOLDS[0] > 700  # fewer collections than the default, never none
    assert gc.isenabled()
