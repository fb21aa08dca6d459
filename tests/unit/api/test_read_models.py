"""The list readers give back what the sinks stored: a row written by a table's spec reads back as the same record, so
a field added to a stored model reaches the API from its column with no copy to extend."""

from __future__ import annotations

from pydantic import BaseModel

from api.read_models import conversation_item, project_detail
from schemas import ContextBudgetIndicator, Record
from sinks.queries import Row
from sinks.rows import TableSpec, stored
from sinks.tables import CONVERSATION_INDICATORS, PROJECT_CONTEXT_RISK
from tests.unit.sinks.records import conversation
from tests.unit.sinks.records import project_detail as stored_project


def stored_row(spec: TableSpec, record: Record) -> Row:
    return dict(zip(spec.column_names, spec.row(record, offset=7), strict=True))


def test_a_conversation_row_reads_back_as_the_item_stored() -> None:
    item = conversation(pinned=True, percent=41)
    assert conversation_item(stored_row(CONVERSATION_INDICATORS, item)) == item


def test_a_hidden_indicator_reads_back_hidden_whatever_its_columns_hold() -> None:
    item = conversation().model_copy(update={"context_budget_indicator": ContextBudgetIndicator(visible=False)})
    row = stored_row(CONVERSATION_INDICATORS, item) | {"indicator_percent": 12, "indicator_level": "urgent"}
    assert conversation_item(row) == item


def test_a_project_row_reads_back_as_the_view_stored() -> None:
    view = stored_project().model_copy(update={"new_subtask_thread_ids": ["thread-b"]})
    assert project_detail(stored_row(PROJECT_CONTEXT_RISK, view)) == view


def test_a_reader_copies_only_the_fields_kept_as_they_are() -> None:
    class Shape(BaseModel):
        key: str
        copied: int
        computed: list[int]
        skipped: str

    spec = TableSpec("shapes", stored(Shape, key="key", skip=("skipped",), computed=lambda s: len(s.computed)))
    assert spec.kept_as_is(Shape) == ("key", "copied")
