"""A broker outage in the logs and in readiness: the Kafka client's flood of errors becomes one line when the broker
goes away, a reminder at most every `remind_seconds`, one line when it is back; the probe says if it answers."""

from __future__ import annotations

import asyncio
import logging
import socket

from core.health import KafkaProbe
from core.logs import KafkaOutageLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(message: str, name: str = "aiokafka.conn", level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def _passed(outage: KafkaOutageLog, record: logging.LogRecord) -> logging.LogRecord | None:
    return record if outage.filter(record) else None


def test_an_outage_of_client_errors_is_one_line_then_a_reminder_per_interval() -> None:
    clock = Clock()
    outage = KafkaOutageLog(remind_seconds=30, clock=clock)
    shown = []
    for step in range(10_000):  # 100 s of client errors, 100 per second
        clock.now = step / 100
        record = _record('Unable connect to "127.0.0.1:9092": [Errno 111] Connect call failed')
        if outage.filter(record):
            shown.append((clock.now, record.getMessage()))
    assert [at for at, _ in shown] == [0.0, 30.0, 60.0, 90.0]
    assert "Unable connect" in shown[0][1]
    assert "still unreachable after 30 s" in shown[1][1]
    assert "2999 Kafka client lines held back" in shown[1][1]


def test_the_broker_coming_back_ends_the_outage_with_one_line_and_the_next_error_starts_another(caplog) -> None:
    clock = Clock()
    outage = KafkaOutageLog(remind_seconds=30, clock=clock)
    assert _passed(outage, _record("Unable to update metadata from [1]"))
    clock.now = 5
    assert not _passed(outage, _record("Unable to update metadata from [1]"))
    with caplog.at_level(logging.INFO, logger="core.logs"):
        outage.reachable(True)
        outage.reachable(True)  # no news: no line
    assert [r.getMessage() for r in caplog.records] == [
        "Kafka reachable again after 5 s (1 Kafka client lines held back)"
    ]
    assert caplog.records[0].levelno == logging.WARNING
    assert _passed(outage, _record("Unable to update metadata from [1]"))


def test_the_probe_noticing_first_says_so_once_and_holds_the_client_errors_back(caplog) -> None:
    clock = Clock()
    outage = KafkaOutageLog(remind_seconds=30, clock=clock)
    with caplog.at_level(logging.INFO, logger="core.logs"):
        outage.reachable(False)
        outage.reachable(False)
    assert [r.getMessage() for r in caplog.records] == ["Kafka unreachable: the pipeline waits for the broker"]
    assert not _passed(outage, _record('Unable connect to "127.0.0.1:9092"'))


def test_other_loggers_and_lower_levels_pass_untouched_during_an_outage() -> None:
    outage = KafkaOutageLog(remind_seconds=30, clock=Clock())
    outage.reachable(False)
    assert _passed(outage, _record("an agent crashed", name="streams.engine"))
    assert _passed(outage, _record("debug detail", level=logging.DEBUG))


def test_a_coordinator_not_yet_available_while_the_broker_answers_is_below_warning() -> None:
    """A fresh broker's group coordinator loads after the broker answers: expected at a first start, not a warning."""
    outage = KafkaOutageLog(remind_seconds=30, clock=Clock())
    record = _record("Group Coordinator Request failed: [Error 15] GroupCoordinatorNotAvailableError",
                     name="aiokafka.consumer.group_coordinator")  # fmt: skip
    outage.filter(record)
    assert (record.levelno, record.levelname) == (logging.INFO, "INFO")
    dead = _record("Marking the coordinator dead (node 1)for group ctxbudget.", level=logging.WARNING)
    assert not _passed(outage, dead)
    assert _passed(outage, _record('Unable connect to "127.0.0.1:9092"'))  # a real outage still shows


async def test_the_kafka_probe_follows_a_listening_port() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = KafkaProbe(f"127.0.0.1:{port}", cache_seconds=0)
        assert await probe.reachable()
    assert not await probe.reachable()
    assert not await KafkaProbe(f"127.0.0.1:1,127.0.0.1:{port}", cache_seconds=0).reachable()
    await asyncio.sleep(0)
