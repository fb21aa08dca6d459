"""SSE without a broker: the shared reader's fan-out, per-caller filtering, event ids, slow clients, heartbeats."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.event_ids import InvalidEventId, decode_event_id, encode_event_id, resume_positions
from api.events import Broadcaster, event_stream
from api.tokens import Principal, Role
from tests.unit.api.events_builders import client_event, raw_record

ALICE = Principal("alice", Role.USER, frozenset({"proj-a"}))
BOB = Principal("bob", Role.USER, frozenset({"proj-b"}))
OPS = Principal("ops", Role.OPERATOR, frozenset())


def broadcaster(queue_size: int = 100) -> Broadcaster:
    hub = Broadcaster("unused:9092", "ctx.client-events", queue_size)
    hub.positions = {0: 0, 1: 0}  # as start() would find an empty topic
    return hub


def parse(frame: bytes) -> dict[str, str]:
    fields = {}
    for line in frame.decode().splitlines():
        name, _, value = line.partition(": ")
        fields[name] = value
    return fields


async def frames(stream, count: int) -> list[dict[str, str]]:
    """The next `count` frames, however the stream chunks them (a chunk holds whatever was queued)."""
    parsed: list[dict[str, str]] = []
    while len(parsed) < count:
        parsed += [parse(frame) for frame in (await anext(stream)).split(b"\n\n") if frame]
    assert len(parsed) == count, "a chunk ran past the frames asked for"
    return parsed


@given(st.dictionaries(st.integers(0, 1023), st.integers(0, 2**63 - 1), min_size=1, max_size=64))
def test_event_ids_round_trip(positions: dict[int, int]) -> None:
    assert decode_event_id(encode_event_id(positions)) == positions


@pytest.mark.parametrize("text", ["", "0", "0:1,", "0:-1", "a:1", "0:1,0:2", "1024:0", "0:1;DROP TABLE x", "0:1 ,1:2"])
def test_a_malformed_event_id_is_refused(text: str) -> None:
    with pytest.raises(InvalidEventId):
        decode_event_id(text)


def test_resume_reads_unnamed_partitions_from_the_start_and_never_past_live() -> None:
    assert resume_positions({0: 5, 1: 99}, {0: 10, 1: 20, 2: 7}) == {0: 5, 1: 20, 2: 0}


async def test_each_caller_sees_only_the_events_of_its_projects_with_positions_as_ids() -> None:
    hub = broadcaster()
    alice = event_stream(hub, ALICE, None, heartbeat_seconds=60)
    bob = event_stream(hub, BOB, None, heartbeat_seconds=60)
    ops = event_stream(hub, OPS, None, heartbeat_seconds=60)
    for stream in (alice, bob, ops):
        assert (await frames(stream, 1))[0]["id"] == "0:0,1:0"  # the opening frame: retry hint and position
    hub.fan_out([client_event("proj-a", 0, 0), client_event("proj-b", 1, 0), client_event("proj-a", 0, 1)])

    seen_by_alice = await frames(alice, 2)
    assert [f["id"] for f in seen_by_alice] == ["0:1,1:0", "0:2,1:0"]
    assert all('"project_id":"proj-a"' in f["data"] for f in seen_by_alice)
    assert seen_by_alice[0]["event"] == "thread.handoff.required"
    assert [f["id"] for f in await frames(bob, 1)] == ["0:0,1:1"]
    assert len(await frames(ops, 3)) == 3
    assert hub.positions == {0: 2, 1: 1}
    for stream in (alice, bob, ops):
        await stream.aclose()
    assert hub.subscriber_count == 0


async def test_events_queued_while_a_client_waits_go_out_in_one_write() -> None:
    hub = broadcaster()
    stream = event_stream(hub, OPS, None, heartbeat_seconds=60)
    await frames(stream, 1)
    hub.fan_out([client_event("proj-a", 0, n) for n in range(3)])
    chunk = await anext(stream)
    assert [parse(f)["id"] for f in chunk.split(b"\n\n") if f] == ["0:1,1:0", "0:2,1:0", "0:3,1:0"]
    await stream.aclose()


async def test_clients_sent_every_event_so_far_share_one_encoded_frame() -> None:
    hub = broadcaster()
    streams = [event_stream(hub, OPS, None, heartbeat_seconds=60) for _ in range(3)]
    for stream in streams:
        await frames(stream, 1)
    hub.fan_out([client_event("proj-a", 0, 0)])
    chunks = [await anext(stream) for stream in streams]
    assert chunks[0] is chunks[1] is chunks[2]  # encoded once, not once per client
    assert parse(chunks[0])["id"] == "0:1,1:0"
    for stream in streams:
        await stream.aclose()


async def test_a_busy_stream_sends_no_heartbeat_and_an_idle_one_does_again() -> None:
    hub = broadcaster()
    stream = event_stream(hub, OPS, None, heartbeat_seconds=0.05)
    await frames(stream, 1)
    for offset in range(5):  # a write every 20 ms: never quiet for a whole heartbeat period
        hub.fan_out([client_event("proj-a", 0, offset)])
        assert not (await asyncio.wait_for(anext(stream), 1)).startswith(b": heartbeat")
        await asyncio.sleep(0.02)
    beats = [await asyncio.wait_for(anext(stream), 1) for _ in range(2)]
    assert all(beat.startswith(b": heartbeat\n") and parse(beat)["id"] == "0:5,1:0" for beat in beats)
    await stream.aclose()


async def test_ending_the_streams_ends_a_waiting_stream_at_once_and_unsubscribes_it() -> None:
    hub = broadcaster()
    stream = event_stream(hub, OPS, None, heartbeat_seconds=60)
    await frames(stream, 1)
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    hub.end_streams()  # what a server does before it stops: an open stream would hold the shutdown
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 1)
    assert hub.subscriber_count == 0


async def test_an_invalid_record_is_skipped_but_the_position_moves_on() -> None:
    hub = broadcaster()
    stream = event_stream(hub, OPS, None, heartbeat_seconds=60)
    await frames(stream, 1)
    hub.fan_out([raw_record(0, 0, b"{not json"), raw_record(0, 1, None), client_event("proj-a", 0, 2)])
    assert (await frames(stream, 1))[0]["id"] == "0:3,1:0"
    await stream.aclose()


async def test_a_slow_client_is_dropped_and_the_others_keep_every_event() -> None:
    hub = broadcaster(queue_size=2)
    slow = event_stream(hub, OPS, None, heartbeat_seconds=60)
    fast = event_stream(hub, OPS, None, heartbeat_seconds=60)
    await frames(slow, 1)
    await frames(fast, 1)
    for offset in range(4):
        hub.fan_out([client_event("proj-a", 0, offset)])
        assert (await frames(fast, 1))[0]["id"] == f"0:{offset + 1},1:0"
    with pytest.raises(StopAsyncIteration):  # its queue overflowed: the stream ends, the client resumes by id
        await frames(slow, 1)
    assert hub.subscriber_count == 1
    await fast.aclose()


async def test_an_idle_stream_sends_heartbeats_carrying_the_position() -> None:
    hub = broadcaster()
    stream = event_stream(hub, ALICE, None, heartbeat_seconds=0.01)
    await frames(stream, 1)
    hub.fan_out([client_event("proj-b", 1, 0)])  # not alice's: the id does not move past it
    beat = await asyncio.wait_for(anext(stream), 1)
    assert beat.startswith(b": heartbeat\n")
    assert parse(beat)["id"] == "0:0,1:0"
    await stream.aclose()
