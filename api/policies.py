"""The threshold policies the 5.2 answer classifies with: the `policies` topic, read whole, the newest per project.

This is what the engine's global policy table holds (the same records, the same key check, the same fallback through
`policy_for`), so the level the API answers is the one the engine computes for the same snapshot.
"""

from __future__ import annotations

from api.topic_reader import TopicTable
from core.levels import policy_for
from schemas import Codec, DecodeError, ThresholdPolicy

POLICY_CODEC = Codec(ThresholdPolicy)


class PolicyBook(TopicTable):
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
