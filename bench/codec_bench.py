"""The engine's encoding cost in process: every output and changed slot of a simulated backlog, encoded by pydantic's
serializer (the baseline) and by `encode_record`, alternated in the same run (machines here are noisy; best of N).

    .venv/bin/python -m bench.codec_bench [--threads 2000] [--turns 8] [--projects 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime

from core.engine_config import EngineConfig
from schemas import Record
from schemas.codec import encode_record
from streams.batching import InputMessage
from streams.engine.batch import process_batch
from streams.engine.fold import ThreadSlot
from streams.simulator import SimulationConfig, generate

BATCH = 2000


def outputs(fleet: SimulationConfig) -> tuple[int, list[Record]]:
    """(input records, every record the runtime would encode for them: outputs, then each batch's changed slots)."""
    messages = [InputMessage(r.topic, 0, i, r.key, r.value) for i, r in enumerate(generate(fleet))]
    slots: dict[str, ThreadSlot] = {}
    encoded: list[Record] = []
    for start in range(0, len(messages), BATCH):
        result = process_batch(messages[start : start + BATCH], slots.get, {}.get, datetime.now(UTC),
                               EngineConfig(), "")  # fmt: skip
        encoded += [emit.record for emit in result.emits]
        encoded += result.states.values()
        slots.update(result.states)
    return len(messages), encoded


def _seconds(encode: Callable[[Record], bytes], records: list[Record]) -> float:
    started = time.perf_counter()
    for record in records:
        encode(record)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    inputs, records = outputs(SimulationConfig(threads=args.threads, projects=args.projects,
                                               turns_per_thread=args.turns, seed=1))  # fmt: skip
    kinds = {
        "pydantic to_json (baseline)": lambda r: r.__pydantic_serializer__.to_json(r),
        "encode_record": encode_record,
    }
    best = dict.fromkeys(kinds, float("inf"))
    for _ in range(args.repeats):
        for name, encode in kinds.items():
            best[name] = min(best[name], _seconds(encode, records))
    print(f"{inputs} input records, {len(records)} records encoded (outputs and changed slots); best of {args.repeats}")
    baseline = best["pydantic to_json (baseline)"]
    for name, seconds in best.items():
        print(f"  {name:28} {seconds / len(records) * 1e6:7.2f} us a record  {seconds / inputs * 1e6:7.2f} us an input"
              f"  ({baseline / seconds:.2f}x the baseline's speed)")  # fmt: skip


if __name__ == "__main__":
    main()
