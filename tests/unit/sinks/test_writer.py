"""Inserting a batch: the token goes with every attempt, transient failures are retried with capped backoff."""

from __future__ import annotations

from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from sinks.tables import ALERT_TRANSITIONS
from sinks.writer import Backoff, is_transient, write_batch


class ScriptedClient:
    """Raises the scripted errors in turn, then accepts; records every insert call."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls: list[dict[str, Any]] = []

    def insert(self, table: str, rows: Any, *, column_names: list[str], settings: dict[str, str]) -> None:
        self.calls.append({"table": table, "rows": rows, "columns": column_names, "settings": settings})
        if self.errors:
            raise self.errors.pop(0)


def test_backoff_grows_to_its_cap_and_stops_after_the_attempts() -> None:
    assert list(Backoff(first_seconds=1, cap_seconds=5, factor=2, attempts=6).delays()) == [1, 2, 4, 5, 5]


def test_backoff_without_an_attempt_limit_never_ends() -> None:
    delays = Backoff(first_seconds=1, cap_seconds=3).delays()
    assert [next(delays) for _ in range(100)][-1] == 3


def test_transient_failures_are_retried_with_the_same_token_until_the_insert_lands() -> None:
    client = ScriptedClient(OperationalError("reset"), DatabaseError("too many parts", code=252))
    slept: list[float] = []
    rows = [("a",)]
    write_batch(client, ALERT_TRANSITIONS, rows, "tok", backoff=Backoff(first_seconds=0.5), sleep=slept.append)
    assert slept == [0.5, 1.0]
    assert len(client.calls) == 3
    assert {c["settings"]["insert_deduplication_token"] for c in client.calls} == {"tok"}
    assert client.calls[0]["columns"] == list(ALERT_TRANSITIONS.column_names)


def test_a_permanent_error_is_raised_at_once() -> None:
    client = ScriptedClient(DatabaseError("no such column", code=16))
    with pytest.raises(DatabaseError):
        write_batch(client, ALERT_TRANSITIONS, [], "tok", sleep=lambda _: None)
    assert len(client.calls) == 1


def test_retries_stop_after_the_attempts_and_the_error_surfaces() -> None:
    client = ScriptedClient(*[OperationalError("down")] * 5)
    with pytest.raises(OperationalError):
        write_batch(client, ALERT_TRANSITIONS, [], "tok", backoff=Backoff(attempts=3), sleep=lambda _: None)
    assert len(client.calls) == 3


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (OperationalError("x"), True),
        (ConnectionRefusedError(), True),
        (DatabaseError("x", code=241), True),
        (DatabaseError("x", code=60), False),
        (ValueError("x"), False),
    ],
)
def test_only_transport_and_load_errors_are_transient(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient
