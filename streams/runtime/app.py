"""The Faust application. Agents and tables are registered on it by the topology modules of later stages."""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import signal
import sys
import threading
from typing import Any

import faust

from core.settings import Settings
from core.topics import DEADLETTER_MAX_BYTES, compacted_topics
from streams.runtime import faust_delivery, faust_fixes
from streams.runtime.stacks import task_stacks


def create_app(settings: Settings) -> faust.App:
    faust_fixes.apply(compacted=compacted_topics(settings))
    faust_delivery.apply()
    if not settings.kafka_bootstrap_servers:
        raise ValueError("kafka_bootstrap_servers is not set (start one with `ctxbudget kafka up`)")
    datadir = settings.private_data_dir() / "faust"  # Faust creates only the last level
    return faust.App(
        settings.faust_app_id,
        broker=[f"kafka://{server}" for server in settings.kafka_bootstrap_servers.split(",")],
        datadir=str(datadir),
        store="memory://",
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication_factor,
        # Our own topics are created with explicit configs by core.topics before the worker starts; Faust still
        # declares its internal ones (table changelogs, the assignor's leader topic).
        topic_allow_declare=True,
        # Faust's 60 s default makes every group join slow on one broker; 10 s still tolerates a GC pause.
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
        # /healthz, /readyz and /metrics (streams/runtime/observability.py) on Faust's own web server.
        web_enabled=settings.worker_web_port is not None,
        web_port=settings.worker_web_port or 6066,
        web_bind=settings.worker_web_bind,
        # At least once, made lossless by the topology (outputs, then state, confirmed before offsets are acked).
        # Faust's exactly_once was tried here: its transactional producers fail on every rebalance
        # ("IN_TRANSACTION -> IN_TRANSACTION", ProducerFenced) with aiokafka 0.14, so a second worker breaks it.
        processing_guarantee="at_least_once",
        # Keys and values stay bytes through Faust: decoding (and dead-lettering what fails) is ours, with the codecs
        # of `schemas`. (A per-topic faust.Schema for this stops agents from consuming once a table exists.)
        producer_max_request_size=DEADLETTER_MAX_BYTES,  # the largest record of any topic (core.topics)
        key_serializer="raw",
        value_serializer="raw",
    )


GC_THRESHOLDS = (100_000, 100, 100)
"""The cyclic collector's thresholds in a worker (CPython's defaults: 700, 10, 10)."""


def collect_less() -> None:
    """A worker holds every owned state decoded (a few dozen objects per thread) and allocates fast while it folds:
    at the default thresholds, full collections that walk every one of those objects come often enough to rival
    the folds themselves at ten thousand threads (`bench/engine_bench.py` prints the batch function with both).
    The states are immutable trees, not cycles; the collector still runs, only less often."""
    gc.set_threshold(*GC_THRESHOLDS)


class Worker(faust.Worker):
    """Faust's worker with a bounded shutdown and without its start-up spinner.

    Faust's stop awaits every service in turn, unbounded: one that never finishes keeps the process alive after
    Ctrl-C, and a second Ctrl-C is ignored. Here a stop that outlasts `shutdown_seconds`, or a second signal, ends
    the process the way a kill would, which the topology is built to survive (offsets are committed only for what is
    applied and confirmed), after writing every thread's and task's stack to stderr to show what the stop awaited.

    To make the spinner turn on every log message, Faust sets the root logger to DEBUG for the life of the process,
    whatever level was configured: every debug call in aiokafka and Faust (several per record sent) then built a
    LogRecord that the handlers dropped, 15% of an engine worker's samples in a profile."""

    def __init__(self, *services: Any, shutdown_seconds: float, **kwargs: Any) -> None:
        super().__init__(*services, **kwargs)
        self.shutdown_seconds = shutdown_seconds
        collect_less()

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        self.spinner = None

    def _schedule_shutdown(self, received: signal.Signals) -> None:
        if self._signal_stop_time:
            self._abandon(f"{received.name} received again while stopping")
            return
        super()._schedule_shutdown(received)
        watchdog = threading.Timer(
            self.shutdown_seconds, self._abandon, [f"still stopping {self.shutdown_seconds:g} s after {received.name}"]
        )
        watchdog.daemon = True
        watchdog.start()

    def _abandon(self, why: str) -> None:
        """Exit now, from whichever thread notices (the loop may be the thing that is stuck)."""
        err = sys.__stderr__
        assert err is not None
        print(f"shutdown abandoned: {why}. Exiting without it; uncommitted inputs are read again on restart.", file=err)
        faulthandler.dump_traceback(file=err, all_threads=True)
        print(*task_stacks(self.loop), sep="\n", file=err)
        err.flush()
        os._exit(1)
