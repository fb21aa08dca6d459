"""The fleet's compaction point per key, folded from finished compactions (`core.fleet_points`): threshold ones only,
a robust bounded median, a move told once with its evidence."""

from __future__ import annotations

from datetime import timedelta

from core.fleet_points import MIN_SAMPLES, Learned, describe_move, key_of, learn, moved_events, version_family
from core.profiles import CodexProfile
from schemas import TriggerMode
from schemas.compaction_points import CompactionPoint
from tests.unit.compaction_points.builders import CLAUDE_DEFAULT, T0, finished


def run(
    tokens: list[int], start: int = 0, state: CompactionPoint | None = None, default: int = CLAUDE_DEFAULT, **kw
) -> tuple[CompactionPoint | None, list[Learned]]:
    steps = []
    for minute, value in enumerate(tokens, start):
        step = learn(state, finished(value, minute, **kw), default)
        state = step.point or state
        steps.append(step)
    return state, steps


def test_only_threshold_compactions_teach() -> None:
    manual = learn(None, finished(176_000, 0, mode=TriggerMode.MANUAL), CLAUDE_DEFAULT)
    reactive = learn(None, finished(27_030, 1), CLAUDE_DEFAULT)  # "prompt is too long", at any size
    beyond = learn(None, finished(230_000, 2, window=1_000_000), CLAUDE_DEFAULT)
    unmeasured = learn(None, finished(None, 3), CLAUDE_DEFAULT)
    assert [s.point for s in (manual, reactive, beyond, unmeasured)] == [None] * 4
    taught = learn(None, finished(176_000, 4), CLAUDE_DEFAULT).point
    assert taught is not None
    assert ([s.tokens_before for s in taught.samples], taught.compactions) == ([176_000], 1)


def test_no_point_before_enough_samples_then_the_robust_median() -> None:
    state, _ = run([176_000] * (MIN_SAMPLES - 1))
    assert state is not None
    assert state.compaction_point_tokens is None  # the formula's stands
    state, _ = run([178_000, 140_000, 177_000, 177_500], start=MIN_SAMPLES, state=state)
    assert state is not None
    assert state.compaction_point_tokens == 177_000  # the 140,000 outlier does not drag it
    assert (state.band_low_tokens, state.band_high_tokens) == (170_720, 181_280)  # around 176,000, first announced


def test_a_move_is_told_once_with_the_evidence_of_the_new_point() -> None:
    state, steps = run([177_000, 176_800, 177_200])
    assert state is not None
    assert (state.compaction_point_tokens, [s.moved for s in steps]) == (177_000, [False] * 3)  # the formula's: quiet
    state, steps = run([150_000] * 6, start=10, state=state)
    assert state is not None
    assert [s.moved for s in steps] == [False, False, False, True, False, False]
    midway = steps[2].point
    assert midway is not None
    assert midway.compaction_point_tokens == 177_000  # the median passes 163,400 on its way: no thread compacts there
    assert (state.compaction_point_tokens, state.previous_point_tokens, state.moves) == (150_000, 177_000, 1)
    assert (state.compactions, state.since, state.moved_at) == (
        6,
        T0 + timedelta(minutes=10),
        T0 + timedelta(minutes=13),
    )
    assert describe_move(state.model_copy(update={"compactions": 4})) == (
        "Claude Code 2.1.x on claude-sonnet-4-5 now compacts at 150k (was 177k, 4 compactions since 08:10)"
    )


def test_the_move_is_told_to_every_project_whose_threads_compacted_on_the_key() -> None:
    state, _ = run([177_000] * 3, project="proj-1")
    state, steps = run([150_000] * 4, start=10, state=state, project="proj-2")
    assert state is not None
    assert steps[-1].moved
    events = moved_events(state)
    assert [(e.project_id, e.compaction_point_tokens, e.previous_point_tokens) for e in events] == [
        ("proj-1", 150_000, 177_000),
        ("proj-2", 150_000, 177_000),
    ]
    assert len({e.event_id for e in events}) == 2
    assert events[0].reason == describe_move(state)


def test_a_first_point_away_from_the_formula_is_a_move_too() -> None:
    """Codex with `model_auto_compact_token_limit` lowered: the vendor's (or the user's) point, not the catalog's."""
    default = CodexProfile().default_point(258_400)
    state, steps = run([200_500, 200_900, 201_300], default=default, tool="codex", model="gpt-5.5",
                       window=258_400, version="0.169.0")  # fmt: skip
    assert state is not None
    assert [s.moved for s in steps] == [False, False, True]
    assert (state.compaction_point_tokens, state.previous_point_tokens) == (200_900, default)
    assert describe_move(state).startswith("Codex 0.169.x on gpt-5.5 now compacts at 201k (was 245k, 3 compactions")


def test_a_repeat_of_a_kept_sample_changes_nothing() -> None:
    state, _ = run([176_000, 177_000])
    assert learn(state, finished(177_000, 1), CLAUDE_DEFAULT).point is None


def test_patch_releases_of_a_line_learn_together_and_models_and_windows_apart() -> None:
    assert version_family("2.1.328") == version_family("2.1.330") == "2.1.x"
    assert version_family(None) == ""
    assert key_of(finished(1, 0, version="2.1.328")) == key_of(finished(1, 0, version="2.1.330"))
    assert key_of(finished(1, 0)) != key_of(finished(1, 0, model="claude-opus-4-5"))
    assert key_of(finished(1, 0)) != key_of(finished(1, 0, window=1_000_000))
    assert key_of(finished(1, 0).model_copy(update={"context_window_tokens": None})) is None
