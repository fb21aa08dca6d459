"""Analysts' read-only SQL: one statement, run by the process that owns the database, under ClickHouse's `readonly=1`.

Every query opens a client of its own on the deployment's DSN (chdb: a new handle on the engine the process already
runs) whose session gets the row and time limits, then `readonly=1` last: once set, neither a statement nor a
`SETTINGS` clause can change any setting. The sinks' client is never touched, so nothing can leak into its session
(clickhouse-connect's per-call settings on chdb are applied with SET and restored after, and a restore under
`readonly=1` fails, leaving the shared session read-only).

ClickHouse judges the statement: its parser (`formatQuery`) refuses a second statement, and `readonly=1` refuses
writes, DDL and SET with its own message. Two things `readonly=1` lets through are refused here: `KILL` (it could
stop the pipeline's own queries, which run as the same user) and `INTO OUTFILE` (embedded ClickHouse is a local
client: it would write a file on this machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import clickhouse_connect
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, DatabaseError


class SqlFormat(StrEnum):
    JSON = "json"
    CSV = "csv"
    TSV = "tsv"

    @property
    def clickhouse(self) -> str:
        return _CLICKHOUSE_FORMATS[self]

    @property
    def media_type(self) -> str:
        return _MEDIA_TYPES[self]


_CLICKHOUSE_FORMATS = {
    SqlFormat.JSON: "JSONEachRow",
    SqlFormat.CSV: "CSVWithNames",
    SqlFormat.TSV: "TabSeparatedWithNames",
}
_MEDIA_TYPES = {
    SqlFormat.JSON: "application/x-ndjson",
    SqlFormat.CSV: "text/csv; charset=utf-8",
    SqlFormat.TSV: "text/tab-separated-values; charset=utf-8",
}


class SqlUnavailable(RuntimeError):
    """The database could not be opened for the query: the server's condition, not the query's fault."""


class SqlRefused(ValueError):
    """The statement was not run, or ClickHouse stopped it: the message says why (ClickHouse's own when it decided)."""


@dataclass(frozen=True)
class SqlLimits:
    max_result_rows: int
    max_execution_seconds: float

    def session_settings(self) -> dict[str, str | int | float]:
        # `readonly` last: after it the session accepts no further setting.
        return {
            "max_result_rows": self.max_result_rows,
            "result_overflow_mode": "throw",
            "max_execution_time": self.max_execution_seconds,
            "readonly": 1,
        }


_REFUSED_KINDS = {"KillQueryQuery": "KILL is refused: it could stop the pipeline's own queries"}


def run_readonly(dsn: str, query: str, fmt: SqlFormat, limits: SqlLimits) -> bytes:
    """The result of `query` in `fmt`, as ClickHouse formats it; SqlRefused when it was refused or failed.
    Blocking: call it from a thread."""
    try:
        client = _readonly_client(dsn, limits)
    except DatabaseError as error:
        raise SqlUnavailable(f"the database cannot be opened for a query: {error}") from error
    try:
        statement = _single_statement(client, query)
        kind = _refuse_side_effects(client, statement)
        # SET takes no FORMAT clause: run as it is, ClickHouse refuses it under readonly with its own message.
        return client.raw_query(statement, fmt=None if kind == "Set" else fmt.clickhouse)
    except ClickHouseError as error:
        raise SqlRefused(str(error)) from error
    finally:
        client.close()


def _readonly_client(dsn: str, limits: SqlLimits) -> Client:
    return clickhouse_connect.get_client(dsn=dsn, tz_mode="aware", settings=limits.session_settings())


def _single_statement(client: Client, query: str) -> str:
    """ClickHouse's canonical text of the one statement in `query` (comments and a trailing `;` dropped); its parser
    refuses an empty query, a syntax error and a second statement."""
    rows = client.query("SELECT formatQuery({query:String})", parameters={"query": query}).result_rows
    return rows[0][0]


def _refuse_side_effects(client: Client, statement: str) -> str:
    """The statement's kind, from its syntax tree (`EXPLAIN AST`): the top node, and a string literal among the top
    node's own children is only ever the `INTO OUTFILE` target (or its compression)."""
    tree = client.raw_query(f"EXPLAIN AST {statement}", fmt="TSVRaw").decode().splitlines()
    kind = tree[0].split(" ", 1)[0] if tree else ""
    if kind in _REFUSED_KINDS:
        raise SqlRefused(_REFUSED_KINDS[kind])
    if any(line.startswith(" Literal ") for line in tree[1:]):
        raise SqlRefused("INTO OUTFILE is refused: choose the output with the format parameter")
    return kind
