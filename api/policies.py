"""The threshold policies the 5.2 answer classifies with: the `policies` topic, read whole, the newest per project.

This is what the engine's global policy table holds (the same records, the same key check, the same fallback through
`policy_for`), so the level the API answers is the one the engine computes for the same snapshot.
"""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaConsumer

from api.topic_reader import current_positions, end_offsets
from schemas import Codec, DecodeError, ThresholdPolicy
from streams.engine.levels import policy_for

log = logging.getLogger(__name__)

POLICY_CODEC = Codec(ThresholdPolicy)


class PolicyBook:
    def __init__(self) -> None:
        self._policies: dict[str, ThresholdPolicy] = {}

    def policy(self, project_id: str) -> ThresholdPolicy:
        """The project's policy, else the `*` default, else spec 4's defaults."""
        return policy_for(project_id, self._policies.get)

    def apply(self, key: bytes | None, value: bytes | None) -> bool:
        """Take one record of the topic; an invalid one (the engine dead-letters it) changes nothing."""
        try:
            policy = POLICY_CODEC.decode(value)
        except DecodeError:
            return False
        if key != policy.project_id.encode():
            return False
        self._policies[policy.project_id] = policy
        return True

    async def catch_up(self, consumer: AIOKafkaConsumer) -> None:
        """Read up to the topic's end as of now, so the first answers use the current policies."""
        ends = await end_offsets(consumer)
        while any(position < ends[p] for p, position in (await current_positions(consumer)).items()):
            await self._read(consumer, timeout_ms=500)

    async def follow(self, consumer: AIOKafkaConsumer) -> None:
        """Apply new policies as they come, until cancelled."""
        while True:
            await self._read(consumer, timeout_ms=1_000)

    async def _read(self, consumer: AIOKafkaConsumer, timeout_ms: int) -> None:
        batches = await consumer.getmany(timeout_ms=timeout_ms)
        for records in batches.values():
            for record in records:
                if not self.apply(record.key, record.value):
                    log.debug("ignored invalid policy at %s:%s", record.partition, record.offset)
