"""`POST /api/v1/sql` and `ctxbudget sql` on real ClickHouse (embedded chdb by default), through the HTTP app.

The app gets the session's ClickHouse client as the sinks' client; each query runs on a read-only client of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.app import create_app
from api.events import Broadcaster
from api.policies import PolicyBook
from api.server import running
from api.services import KafkaServices
from api.settings import ApiSettings, token_secret
from api.thread_book import ThreadBook
from api.tokens import Role
from core.settings import Settings
from sinks.migrations import migrate
from tests.unit.api.fakes import RecordingPublisher, bearer

pytestmark = pytest.mark.clickhouse

ROWS = 5
LIMITS = ApiSettings(
    sql_max_result_rows=20,
    sql_max_execution_seconds=1.0,
    sql_max_result_bytes=4 * 1024 * 1024,
    sql_max_memory_bytes=256 * 1024 * 1024,
)


def sql_app(clickhouse: Any, clickhouse_dsn: str, data_dir: Path) -> tuple[FastAPI, bytes]:
    settings = Settings(
        clickhouse_dsn=clickhouse_dsn, data_dir=data_dir, topic_prefix="t.", kafka_bootstrap_servers="unused:9092"
    )
    secret = token_secret(settings, LIMITS)

    @contextlib.asynccontextmanager
    async def services() -> AsyncIterator[KafkaServices]:
        broadcaster = Broadcaster("unused:9092", "t.client-events", 10)
        yield KafkaServices(RecordingPublisher(), PolicyBook(), broadcaster, ThreadBook())

    return create_app(settings, clickhouse, LIMITS, services=services, secret=secret), secret


@pytest.fixture
def table(clickhouse: Any) -> Iterator[str]:
    """A table of the sinks' database with ROWS rows, written through the sinks' client."""
    name = f"sql_probe_{uuid.uuid4().hex[:8]}"
    clickhouse.command(f"CREATE TABLE {name} (n UInt32, label String) ENGINE = MergeTree ORDER BY n")
    clickhouse.command(f"INSERT INTO {name} SELECT number, concat('row-', toString(number)) FROM numbers({ROWS})")
    yield name
    clickhouse.command(f"DROP TABLE IF EXISTS {name}")


@pytest.fixture
def served(clickhouse: Any, clickhouse_dsn: str, tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    app, secret = sql_app(clickhouse, clickhouse_dsn, tmp_path)
    with TestClient(app) as client:
        yield client, bearer(Role.OPERATOR, "analyst", secret=secret)


def post(client: TestClient, headers: dict[str, str], query: str, fmt: str = "json") -> httpx.Response:
    return client.post(f"/api/v1/sql?format={fmt}", content=query, headers=headers)


@pytest.mark.parametrize(
    ("fmt", "media_type", "expected"),
    [
        ("json", "application/x-ndjson", b'{"n":0,"label":"row-0"}\n{"n":1,"label":"row-1"}\n'),
        ("csv", "text/csv", b'"n","label"\n0,"row-0"\n1,"row-1"\n'),
        ("tsv", "text/tab-separated-values", b"n\tlabel\n0\trow-0\n1\trow-1\n"),
    ],
)
def test_each_format_is_clickhouses_own(served, table, fmt: str, media_type: str, expected: bytes) -> None:
    client, operator = served
    answer = post(client, operator, f"SELECT n, label FROM {table} WHERE n < 2 ORDER BY n", fmt)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith(media_type)
    assert answer.content == expected


def test_a_trailing_semicolon_and_comments_are_one_statement(served, table) -> None:
    client, operator = served
    answer = post(client, operator, f"-- how many\nSELECT count() AS c FROM {table} /* all */ ;\n")
    assert answer.status_code == 200, answer.text
    assert orjson.loads(answer.content) == {"c": ROWS}


ONLY_SELECT = "only a SELECT may run here"
REFUSED = {
    "insert": ("INSERT INTO {t} VALUES (99, 'x')", ONLY_SELECT),
    "insert-select": ("INSERT INTO {t} SELECT number, 'x' FROM numbers(3)", ONLY_SELECT),
    "create": ("CREATE TABLE {t}_copy (n UInt8) ENGINE = Memory", ONLY_SELECT),
    "drop": ("DROP TABLE {t}", ONLY_SELECT),
    "truncate": ("TRUNCATE TABLE {t}", ONLY_SELECT),
    "alter": ("ALTER TABLE {t} DELETE WHERE 1", ONLY_SELECT),
    "set": ("SET readonly = 0", ONLY_SELECT),
    "second-statement": ("SELECT 1; DROP TABLE {t}", "Multi-statements are not allowed"),
    "two-selects": ("SELECT 1; SELECT 2", "Multi-statements are not allowed"),
    "settings-readonly": ("SELECT count() FROM {t} SETTINGS readonly = 0", "Cannot modify 'readonly' setting"),
    "settings-row-limit": ("SELECT * FROM {t} SETTINGS max_result_rows = 0", "Cannot modify 'max_result_rows'"),
    "settings-memory": ("SELECT 1 SETTINGS max_memory_usage = 0", "Cannot modify 'max_memory_usage'"),
    "kill": ("KILL QUERY WHERE 1", "KILL is refused"),
    "into-outfile": ("SELECT 1 INTO OUTFILE '{out}'", "INTO OUTFILE is refused"),
    "empty": ("  ", "Empty query"),
    # Reads outside the pipeline's tables (issue 38, 2): the scalar file() read any file readonly=1 let through.
    "file-function": ("SELECT * FROM file('/etc/hostname', 'LineAsString')", "the table function file is refused"),
    "file-scalar": ("SELECT file('{secret}') AS s", "the function file is refused"),
    "file-scalar-nested": ("SELECT n FROM {t} WHERE n = length(upper(file('/proc/self/environ')))", "function file"),
    "file-scalar-subquery": ("SELECT (SELECT file('/etc/hostname')) AS s", "the function file is refused"),
    "url": ("SELECT * FROM url('http://127.0.0.1:9/', 'LineAsString')", "the table function url is refused"),
    "s3": ("SELECT * FROM s3('http://127.0.0.1:9/b/k', 'CSV')", "the table function s3 is refused"),
    "remote": ("SELECT * FROM remote('127.0.0.1:9', system.one)", "the table function remote is refused"),
    "executable": ("SELECT * FROM executable('id', 'TSV', 'x String')", "the table function executable is refused"),
    "merge": ("SELECT * FROM merge('system', '^one$')", "the table function merge is refused"),
    "filesystem": ("SELECT filesystemAvailable() AS b", "the function filesystemAvailable is refused"),
    "settings-leak": ("SELECT getSetting('max_memory_usage') AS s", "the function getSetting is refused"),
    "host": ("SELECT hostName() AS h", "the function hostName is refused"),
    "dictionary": ("SELECT dictGet('d', 'v', 1) AS v", "the function dictGet is refused"),
    "ai": ("SELECT aiGenerate('hello') AS v", "the function aiGenerate is refused"),
    "system-table": ("SELECT name FROM system.tables", "the table system.tables is refused"),
    "system-in": ("SELECT n FROM {t} WHERE (label, label) IN system.build_options", "table system.build_options"),
    "system-subquery": ("SELECT n FROM {t} WHERE label IN (SELECT name FROM system.tables)", "table system.tables"),
    "system-join": ("SELECT n FROM {t} AS a JOIN system.settings AS s ON 1 = 1", "table system.settings is refused"),
    "information-schema": ("SELECT * FROM information_schema.tables", "the table information_schema.tables"),
    "show": ("SHOW TABLES FROM system", ONLY_SELECT),
    "describe-file": ("DESCRIBE file('/etc/hostname')", ONLY_SELECT),
    "explain": ("EXPLAIN SELECT file('/etc/hostname')", ONLY_SELECT),
}


@pytest.mark.parametrize("kind", list(REFUSED))
def test_writes_ddl_settings_and_a_second_statement_are_refused_with_clickhouses_message(
    served, table, clickhouse, tmp_path, kind: str
) -> None:
    client, operator = served
    query, message = REFUSED[kind]
    out = tmp_path / "out.tsv"
    secret = tmp_path / "api-token-secret"
    answer = post(client, operator, query.format(t=table, out=out, secret=secret))
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["detail"]
    assert secret.read_text().strip() not in answer.text
    assert not out.exists()
    # Nothing changed, and the sinks' own session is as writable as before.
    assert clickhouse.query(f"SELECT count() FROM {table}").result_rows == [(ROWS,)]
    assert clickhouse.query("SELECT value FROM system.settings WHERE name = 'readonly'").result_rows == [("0",)]
    clickhouse.command(f"INSERT INTO {table} VALUES (100, 'sink')")
    assert clickhouse.query(f"SELECT count() FROM {table}").result_rows == [(ROWS + 1,)]


def test_a_result_over_the_row_limit_is_refused(served) -> None:
    client, operator = served
    assert post(client, operator, f"SELECT number FROM numbers({LIMITS.sql_max_result_rows})").status_code == 200
    answer = post(client, operator, f"SELECT number FROM numbers({LIMITS.sql_max_result_rows + 1})")
    assert answer.status_code == 400
    assert "Limit for result exceeded" in answer.json()["detail"]


ALLOWED = {
    "combinator": ("SELECT countIf(n > 1) AS c, sumState(n) IS NOT NULL AS s FROM {t}", b'{"c":3,"s":1}\n'),
    "window": ("SELECT n, row_number() OVER (ORDER BY n DESC) AS r FROM {t} ORDER BY n LIMIT 1", b'{"n":0,"r":5}\n'),
    "lambda-cte-join": (
        "WITH c AS (SELECT n FROM {t}) SELECT arraySum(arrayMap(x -> x * 2, groupArray(c.n))) AS s"
        " FROM c JOIN numbers(3) AS g ON c.n = g.number",
        b'{"s":6}\n',
    ),
    "in-subquery-case-insensitive": (
        "select COUNT() as c from {t} where n IN (SELECT number FROM numbers(2)) AND lower(label) LIKE 'row-%'",
        b'{"c":2}\n',
    ),
    "dates-strings-json": (
        "SELECT toDate('2026-01-02') + 1 AS d, JSONExtractString('{{\"a\":\"b\"}}', 'a') AS j",
        b'{"d":"2026-01-03","j":"b"}\n',
    ),
}


@pytest.mark.parametrize("kind", list(ALLOWED))
def test_analysts_sql_over_the_pipelines_tables_still_runs(served, table, kind: str) -> None:
    client, operator = served
    query, expected = ALLOWED[kind]
    answer = post(client, operator, query.format(t=table))
    assert answer.status_code == 200, answer.text
    assert answer.content == expected


def test_a_result_over_the_byte_limit_and_a_query_over_the_memory_limit_are_stopped(served) -> None:
    client, operator = served
    # 20 rows (the row limit) of 1 MB each: over the byte limit; a groupArray of 2e8 numbers: over the memory limit.
    answer = post(client, operator, "SELECT repeat('x', 999999 + number % 2) AS x FROM numbers(20)")
    assert answer.status_code == 400
    assert "Limit for result exceeded" in answer.json()["detail"]
    answer = post(client, operator, "SELECT length(groupArray(number)) AS n FROM numbers(200000000)")
    assert answer.status_code == 400
    assert "memory limit exceeded" in answer.json()["detail"]


def test_the_embedded_databases_folder_is_its_owners_only(clickhouse, clickhouse_dsn) -> None:
    if clickhouse_dsn.startswith("chdb://"):  # a server's folders are its own
        assert Path(clickhouse_dsn.removeprefix("chdb://")).stat().st_mode & 0o777 == 0o700


def test_a_query_over_the_time_limit_is_stopped(served) -> None:
    client, operator = served
    started = time.monotonic()
    answer = post(client, operator, "SELECT sleep(3)")
    assert answer.status_code == 400
    assert "Timeout exceeded" in answer.json()["detail"]
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(
    ("role", "projects", "status"), [(Role.WORKER, ("p",), 403), (Role.USER, ("p",), 403), (Role.OPERATOR, (), 200)]
)
def test_only_an_operator_may_run_sql(served, clickhouse, clickhouse_dsn, tmp_path, role, projects, status) -> None:
    client, _ = served
    secret = token_secret(Settings(data_dir=tmp_path), LIMITS)
    answer = post(client, bearer(role, "someone", *projects, secret=secret), "SELECT 1 AS one")
    assert answer.status_code == status, answer.text
    assert post(client, {}, "SELECT 1").status_code == 401


ANALYTICS_VIEWS = (
    "analytics_level_time",
    "analytics_compactions_daily",
    "analytics_urgent_to_handoff_ready",
    "analytics_alert_response",
    "analytics_projection_daily",
    "analytics_forecast_comparison",
)


@pytest.mark.parametrize("view", ANALYTICS_VIEWS)
def test_every_analytics_view_answers(served, clickhouse, view: str) -> None:
    migrate(clickhouse)
    client, operator = served
    answer = post(client, operator, f"SELECT count() AS rows FROM {view}")
    assert answer.status_code == 200, answer.text
    assert set(orjson.loads(answer.content)) == {"rows"}


async def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streams", "sql", *args, env=env, stdout=-1, stderr=-1
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def test_the_command_line_queries_the_served_api_without_blocking_it(
    clickhouse, clickhouse_dsn, tmp_path, table
) -> None:
    app, _ = sql_app(clickhouse, clickhouse_dsn, tmp_path)
    async with running(app, "127.0.0.1", 0) as url:
        env = {**os.environ, "CTXBUDGET_DATA_DIR": str(tmp_path)}  # the token is minted from this data dir's secret
        env.pop("CTXBUDGET_API_TOKEN", None)
        code, out, err = await cli(env, f"SELECT n, label FROM {table} ORDER BY n LIMIT 2", "--api-url", url)
        assert (code, out, err) == (0, "n\tlabel\n0\trow-0\n1\trow-1\n", "")

        code, out, err = await cli(env, f"DROP TABLE {table}", "--api-url", url, "--format", "csv")  # refused
        assert code == 1
        assert out == ""
        assert "400" in err
        assert "only a SELECT may run here" in err

        code, _, err = await cli({**env, "CTXBUDGET_API_TOKEN": "x.y.z"}, "SELECT 1", "--api-url", url)
        assert code == 1
        assert "401" in err

        # A slow query runs in a thread: the API and the sinks' client go on meanwhile.
        async with httpx.AsyncClient(base_url=url) as client:
            secret = token_secret(Settings(data_dir=tmp_path), LIMITS)
            slow = asyncio.create_task(
                client.post(
                    "/api/v1/sql", content="SELECT sleep(0.8)", headers=bearer(Role.OPERATOR, "a", secret=secret)
                )
            )
            await asyncio.sleep(0.2)
            started = time.monotonic()
            assert (await client.get("/healthz")).status_code == 200
            await asyncio.to_thread(clickhouse.command, f"INSERT INTO {table} VALUES (7, 'during')")
            assert time.monotonic() - started < 0.5
            assert not slow.done()
            assert (await slow).status_code == 200
