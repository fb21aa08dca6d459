"""Logging for every process: one JSON object per line (python-json-logger) or plain text, at a configured level.

Context travels as `extra=` fields (thread_id, project_id, reason, offsets), which the JSON formatter writes as keys.
The wiring never logs record values at INFO: dead letters and alerts are logged by id and reason (streams.metrics).
`logging_config` is a `logging.config.dictConfig` dict, so Faust's worker (`faust.Worker(logging_config=...)`),
uvicorn (`log_config=`) and the CLI all take the same one.

While the broker is away, aiokafka logs every failed connection, metadata request and coordinator lookup, thousands
of lines a second: `KafkaOutageLog` (a filter on the handler) turns an outage into one line when it starts, a
reminder every `remind_seconds` with the count held back, and one when the broker is back (`reachable`, told by the
process's Kafka probe, core/health.py).
"""

from __future__ import annotations

import logging.config
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

LogFormat = Literal["json", "text"]

JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVEL_ALIASES = {"WARN": "WARNING"}
REMIND_SECONDS = 30.0
KAFKA_CLIENT_LOGGERS = ("aiokafka",)
COORDINATOR_LOADING = (
    "GroupCoordinatorNotAvailable",
    "CoordinatorLoadInProgress",
    "NotCoordinatorForGroup",
    "Marking the coordinator dead",
)
"""What aiokafka logs while a broker that answers has not loaded (or has just moved) its group coordinator: a fresh
broker does so after it answers. Below warning; a coordinator that never comes is the rebalance watch's to report."""
log = logging.getLogger(__name__)


class KafkaOutageLog(logging.Filter):
    """Holds back the Kafka client's warnings and errors while the broker is unreachable (see the module doc)."""

    def __init__(
        self,
        remind_seconds: float = REMIND_SECONDS,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.remind_seconds = remind_seconds
        self.level = level
        self.clock = clock
        self._lock = threading.Lock()  # the client logs from the loop, Faust's and chdb's threads may log too
        self._since: float | None = None
        self._last_line = 0.0
        self._held = 0
        self._held_total = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not record.name.startswith(KAFKA_CLIENT_LOGGERS):
            return True
        message = record.getMessage()
        now = self.clock()
        with self._lock:
            if self._since is None:
                if any(marker in message for marker in COORDINATOR_LOADING):
                    record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
                    return record.levelno >= self.level
                self._begin(now)
                note = f"Kafka unreachable? Such lines are held back, with a reminder every {self.remind_seconds:g} s"
                record.msg, record.args = f"{message} ({note})", None
                return True
            if now - self._last_line < self.remind_seconds:
                self._held += 1
                self._held_total += 1
                return False
            held, self._held, self._last_line = self._held, 0, now
            since = self._since
        record.msg = (
            f"Kafka still unreachable after {now - since:.0f} s: {held} Kafka client lines held back; latest: {message}"
        )
        record.args = None
        return True

    def reachable(self, up: bool) -> None:
        """What the process's Kafka probe found: the transitions are the outage's first and last lines."""
        now = self.clock()
        with self._lock:
            if up == (self._since is None):
                return
            if up:
                since, held, self._since = self._since, self._held_total, None
            else:
                self._begin(now)
        if up:
            assert since is not None
            log.warning("Kafka reachable again after %.0f s (%d Kafka client lines held back)", now - since, held)
        else:
            log.warning("Kafka unreachable: the pipeline waits for the broker")

    def _begin(self, now: float) -> None:
        self._since = self._last_line = now
        self._held = self._held_total = 0


KAFKA_OUTAGE = KafkaOutageLog()
"""The process's one filter: its handler holds it, and its Kafka probe tells it when the broker comes and goes."""


def _kafka_outage(level: str) -> KafkaOutageLog:
    KAFKA_OUTAGE.level = logging.getLevelName(level)
    return KAFKA_OUTAGE


def logging_config(level: str, fmt: LogFormat) -> dict[str, Any]:
    formatter: dict[str, Any] = (
        {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": JSON_FIELDS,
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
        if fmt == "json"
        else {"format": TEXT_FORMAT}
    )
    level = LEVEL_ALIASES.get(level.upper(), level.upper())
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "filters": {"kafka_outage": {"()": _kafka_outage, "level": level}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "default", "filters": ["kafka_outage"]}},
        "root": {"level": level, "handlers": ["stderr"]},
    }


def configure_logging(level: str, fmt: LogFormat) -> None:
    logging.config.dictConfig(logging_config(level, fmt))
