"""Analysts' read-only SQL: one statement, run by the process that owns the database, under ClickHouse's `readonly=1`.

Every query opens a client of its own on the deployment's DSN (chdb: a new handle on the engine the process already
runs) whose session gets the row and time limits, then `readonly=1` last: once set, neither a statement nor a
`SETTINGS` clause can change any setting. The sinks' client is never touched, so nothing can leak into its session
(clickhouse-connect's per-call settings on chdb are applied with SET and restored after, and a restore under
`readonly=1` fails, leaving the shared session read-only).

ClickHouse's parser (`formatQuery`) refuses a second statement; `readonly=1` refuses writes, DDL and settings, but
not reads outside the pipeline (the scalar `file()` read any file the process could, `url()` any address). So a
query may touch only what an allow-list names, checked on its syntax tree (`EXPLAIN AST`, which runs nothing) before
it runs:

- the statement is a SELECT (or a UNION / INTERSECT / EXCEPT of them): not SHOW, DESCRIBE (it infers a table
  function's schema by reading its source), EXPLAIN, EXISTS, KILL, USE, nor a write (refused by readonly anyway);
- no `INTO OUTFILE` (embedded ClickHouse is a local client: it would write a file on this machine);
- each function is one of `system.functions` in a computing category (strings, dates, arrays, aggregates...) or a
  few harmless ones of "Other" (`SAFE_OTHER`); never file, AI, dictionary, introspection or server facts;
- each table function generates rows (`TABLE_FUNCTIONS`: numbers, values...); never file, url, s3, remote, mysql,
  executable, merge...;
- each table it reads, as ClickHouse resolves it (`EXPLAIN QUERY TREE`, once nothing outside can run), is in the
  pipeline's own database (or `system.one`, the row a SELECT without FROM reads): not another table of `system`,
  `information_schema` nor another database.

The session bounds what a query may take: rows and bytes of its result, memory, time (`SqlLimits`).
"""

from __future__ import annotations

import re
import threading
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
    max_result_bytes: int = 32 * 1024 * 1024
    max_memory_bytes: int = 512 * 1024 * 1024

    def session_settings(self, result_limits: bool = True) -> dict[str, str | int | float]:
        """The query's session: without `result_limits` for the checks' own client, whose answers (a syntax tree,
        the list of functions) are ours, not the analyst's, and may be longer than a result may."""
        result = {"max_result_rows": self.max_result_rows, "max_result_bytes": self.max_result_bytes}
        # `readonly` last: after it the session accepts no further setting.
        return {
            **(result if result_limits else {}),
            "result_overflow_mode": "throw",
            "max_memory_usage": self.max_memory_bytes,
            "max_execution_time": self.max_execution_seconds,
            "readonly": 1,
        }


SELECT_KINDS = frozenset({"SelectWithUnionQuery", "SelectIntersectExceptQuery"})
TABLE_FUNCTIONS = frozenset(
    {"numbers", "numbers_mt", "zeros", "zeros_mt", "values", "generateSeries", "generate_series", "null"}
)
"""Table functions that generate rows from their arguments alone."""
SAFE_CATEGORIES = frozenset(
    {
        "Aggregate Functions", "Arithmetic", "Arrays", "Bit", "Bitmap", "Comparison", "Conditional", "Dates and Times",
        "Distance", "Encoding", "Encryption", "Financial", "Geo", "Geo Polygon", "Hash", "IP Address", "JSON",
        "Logical", "Machine Learning", "Map", "Mathematical", "Null", "NumericIndexedVector", "QBit", "Random Number",
        "Rounding", "String", "String Replacement", "String Search", "String Splitting", "Time Series", "Time Window",
        "Tuple", "Type Conversion", "URL", "UUID",
    }
)  # fmt: skip
"""Categories of `system.functions` that compute on their arguments (URL functions parse URLs, they fetch none)."""
SAFE_OTHER = frozenset(
    {
        "bar", "blockNumber", "blockSize", "byteSize", "countDigits", "currentDatabase", "defaultValueOfArgumentType",
        "defaultValueOfTypeName", "finalizeAggregation", "formatReadableDecimalSize", "formatReadableQuantity",
        "formatReadableSize", "formatReadableTimeDelta", "getSizeOfEnumType", "getSubcolumn", "identity", "ignore",
        "indexHint", "initializeAggregation", "isConstant", "isDecimalOverflow", "lowCardinalityIndices",
        "lowCardinalityKeys", "materialize", "neighbor", "parseISO8601Duration", "parseReadableSize",
        "parseReadableSizeOrNull", "parseReadableSizeOrZero", "parseTimeDelta", "rowNumberInAllBlocks",
        "rowNumberInBlock", "runningAccumulate", "runningDifference", "runningDifferenceStartingWithFirstValue",
        "sleep", "sleepEachRow", "throwIf", "toColumnTypeName", "toTypeName", "transform", "variantElement",
        "variantType", "visibleWidth",
    }
)  # fmt: skip
"""Functions of the "Other" category that compute on their arguments (the rest read files, settings, the server's
host, ports, users, macros, Join tables...)."""
NO_TABLE = "system.one"
"""What a SELECT without FROM reads: one row, one column `dummy` = 0."""
SYNTAX_FUNCTIONS = frozenset({"lambda", "exists", "grouping"})
"""Nodes the parser writes as functions that `system.functions` does not list."""

_REFUSED_KINDS = {"KillQueryQuery": "KILL is refused: it could stop the pipeline's own queries"}
_AST_LINE = re.compile(r"^( *)(\w+)(?: (\S+))?")
_TABLE = re.compile(r"\bTABLE id: \d+.*?, table_name: ([^,\s]+)")
_TABLE_FUNCTION = re.compile(r"\bTABLE_FUNCTION id: \d+.*?, table_function_name: ([^,\s]+)")


@dataclass(frozen=True)
class Functions:
    """The functions a query may call: exact names, lower-cased names of the case-insensitive ones, and the
    aggregate combinators (`countIf`, `sumState`...)."""

    exact: frozenset[str]
    folded: frozenset[str]
    aggregates: frozenset[str]
    combinators: tuple[str, ...]

    def allowed(self, name: str) -> bool:
        if name in self.exact or name.lower() in self.folded or name in SYNTAX_FUNCTIONS:
            return True
        for combinator in self.combinators:  # longest first: MergeState before State
            if name.endswith(combinator) and len(name) > len(combinator):
                base = name.removesuffix(combinator)
                if base in self.aggregates or base.lower() in self.folded or self.allowed(base):
                    return True
        return False


_functions: Functions | None = None
_functions_lock = threading.Lock()


def allowed_functions(client: Client) -> Functions:
    """The allow-list, from this ClickHouse's own `system.functions` (read once per process)."""
    global _functions
    with _functions_lock:
        if _functions is None:
            rows = client.query(
                "SELECT name, categories, alias_to, case_insensitive, is_aggregate FROM system.functions"
            ).result_rows
            safe = {name for name, categories, alias, _, _ in rows if not alias and _safe(name, categories)}
            safe |= {name for name, _, alias, _, _ in rows if alias and alias in safe}
            folded = {name.lower() for name, _, _, insensitive, _ in rows if insensitive and name in safe}
            aggregates = {name for name, _, _, _, aggregate in rows if aggregate and name in safe}
            combinators = client.query("SELECT name FROM system.aggregate_function_combinators").result_rows
            ordered = tuple(sorted((name for (name,) in combinators), key=len, reverse=True))
            _functions = Functions(frozenset(safe), frozenset(folded), frozenset(aggregates), ordered)
        return _functions


def _safe(name: str, categories: str) -> bool:
    return name in SAFE_OTHER or (bool(categories) and set(categories.split(", ")) <= SAFE_CATEGORIES)


def run_readonly(dsn: str, query: str, fmt: SqlFormat, limits: SqlLimits) -> bytes:
    """The result of `query` in `fmt`, as ClickHouse formats it; SqlRefused when it was refused or failed.
    Blocking: call it from a thread."""
    try:
        checks = _readonly_client(dsn, limits.session_settings(result_limits=False))
        client = _readonly_client(dsn, limits.session_settings())
    except DatabaseError as error:
        raise SqlUnavailable(f"the database cannot be opened for a query: {error}") from error
    try:
        statement = _single_statement(checks, query)
        _refuse_outside(checks, statement)
        return client.raw_query(statement, fmt=fmt.clickhouse)
    except ClickHouseError as error:
        raise SqlRefused(str(error)) from error
    finally:
        checks.close()
        client.close()


def _readonly_client(dsn: str, settings: dict[str, str | int | float]) -> Client:
    return clickhouse_connect.get_client(dsn=dsn, tz_mode="aware", settings=settings)


def _single_statement(client: Client, query: str) -> str:
    """ClickHouse's canonical text of the one statement in `query` (comments and a trailing `;` dropped); its parser
    refuses an empty query, a syntax error and a second statement."""
    rows = client.query("SELECT formatQuery({query:String})", parameters={"query": query}).result_rows
    return rows[0][0]


def _refuse_outside(client: Client, statement: str) -> None:
    """Refuse `statement` unless all it touches is on the allow-lists (module docstring). The syntax tree first (the
    parser runs nothing): its kind, `INTO OUTFILE` (a string literal among the top node's own children is only ever
    its target or compression), each function and table function; then the tables as ClickHouse resolves them."""
    tree = client.raw_query(f"EXPLAIN AST {statement}", fmt="TSVRaw").decode().splitlines()
    kind = tree[0].split(" ", 1)[0] if tree else ""
    if kind in _REFUSED_KINDS:
        raise SqlRefused(_REFUSED_KINDS[kind])
    if kind not in SELECT_KINDS:
        raise SqlRefused(f"only a SELECT may run here (this is {kind or 'nothing'})")
    if any(line.startswith(" Literal ") for line in tree[1:]):
        raise SqlRefused("INTO OUTFILE is refused: choose the output with the format parameter")
    functions = allowed_functions(client)
    parents: list[str] = []
    for line in tree:
        match = _AST_LINE.match(line)
        if match is None:
            continue
        depth, node, name = len(match[1]), match[2], match[3]
        del parents[depth:]
        if node == "Function" and name is not None:
            if parents and parents[-1] == "TableExpression":
                if name not in TABLE_FUNCTIONS:
                    raise SqlRefused(f"the table function {name} is refused: a query reads the pipeline's tables")
            elif not functions.allowed(name):
                raise SqlRefused(f"the function {name} is refused: it reaches outside the pipeline's tables")
        parents.append(node)
    resolved = client.raw_query(f"EXPLAIN QUERY TREE {statement}", fmt="TSVRaw").decode()
    database = client.query("SELECT currentDatabase()").result_rows[0][0]
    for table in _TABLE.findall(resolved):
        if not table.startswith(f"{database}.") and table != NO_TABLE:
            raise SqlRefused(f"the table {table} is refused: a query reads the tables of {database} only")
    for name in _TABLE_FUNCTION.findall(resolved):
        if name not in TABLE_FUNCTIONS:
            raise SqlRefused(f"the table function {name} is refused: a query reads the pipeline's tables")
