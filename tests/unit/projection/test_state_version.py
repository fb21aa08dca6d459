"""A stored projection of another fold version degrades to its raw usage sample instead of vanishing."""

from __future__ import annotations

import json

from core.profiles import ProfileSet
from schemas.projection import PROJECTION_STATE_VERSION, restore_state
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from streams.projection.fold import fold
from tests.unit.projection.builders import at, message, summary, usage


def _stored_state() -> bytes:
    state = None
    for event in (message(4_000, 1), usage(4_100, 2), message(900, 3), summary(200, 4)):
        state = fold(state, event, TokenEstimator(), ProfileSet(), ProjectionConfig()).state or state
    assert state is not None
    return state.model_dump_json().encode()


def test_a_state_of_this_version_round_trips() -> None:
    stored = _stored_state()
    restored = restore_state(stored)
    assert restored is not None
    assert restored.model_dump_json().encode() == stored


def test_an_older_version_keeps_the_raw_sample_and_compaction_count() -> None:
    old = json.loads(_stored_state())
    old["state_version"] = PROJECTION_STATE_VERSION - 1
    old["surface_entries_v0"] = old.pop("surface")  # a field this version no longer knows
    restored = restore_state(json.dumps(old))
    assert restored is not None
    assert restored.state_version == PROJECTION_STATE_VERSION
    assert restored.projected_tokens == restored.pressure_tokens == 4_100
    assert restored.surface == []
    assert (restored.compaction_count, restored.last_compaction_at) == (1, at(4))
    assert restored.readings_emitted == json.loads(_stored_state())["readings_emitted"] > 0


def test_a_current_version_that_no_longer_validates_also_degrades() -> None:
    broken = json.loads(_stored_state())
    broken["sampled_surface_tokens"] = "many"
    restored = restore_state(json.dumps(broken))
    assert restored is not None
    assert restored.projected_tokens == 4_100


def test_unreadable_state_is_none() -> None:
    assert restore_state(b"not json") is None
    assert restore_state(b"[1, 2]") is None
    assert restore_state(json.dumps({"state_version": 0})) is None
