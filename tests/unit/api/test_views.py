from __future__ import annotations

from api.views import CompactionHistory, ThreadContextDetail


def test_a_thread_page_without_compaction_history_says_none_were_recorded() -> None:
    field = ThreadContextDetail.model_fields["compaction_history"]
    assert field.get_default(call_default_factory=True) == CompactionHistory(compaction_count=0, recent=[])
