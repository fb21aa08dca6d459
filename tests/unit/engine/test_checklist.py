"""The fold builds a thread's wrap-up checklist again only when what it reads (the work-state facts, the handoff
package, the last compaction) changed, so every state it writes must still carry the checklist of its own inputs."""

from __future__ import annotations

from datetime import timedelta

from core.actions import wrap_up_checklist
from core.engine_config import EngineConfig
from streams.batching import InputMessage
from streams.engine.batch import process_batch, tick_all
from streams.engine.fold import ThreadSlot
from streams.simulator import SimulationConfig, generate

CONFIG = EngineConfig()


def test_every_state_the_fold_writes_carries_the_checklist_of_its_inputs() -> None:
    fleet = SimulationConfig(threads=12, projects=2, turns_per_thread=60, seed=3)
    messages = [
        InputMessage(r.topic, 0, i, r.key, r.value, fleet.start + timedelta(seconds=i))
        for i, r in enumerate(generate(fleet))
    ]
    slots: dict[str, ThreadSlot] = {}
    written = []
    for start in range(0, len(messages), 40):
        batch = messages[start : start + 40]
        states = process_batch(batch, slots.get, {}.get, batch[-1].timestamp, CONFIG, "").states
        if start % 400 == 0:  # now and then the timer too (staleness, expired packages)
            states |= tick_all(slots.items(), batch[-1].timestamp + timedelta(minutes=5), CONFIG).states
        slots |= states
        written += [slot.state for slot in states.values() if slot.state is not None]
    assert any(state.wrap_up_checklist.files for state in written)  # the fleet's facts and packages fill them
    assert any(state.compaction_count for state in written)
    for state in written:
        assert state.wrap_up_checklist == wrap_up_checklist(state)
