"""The hooks' memory on disk (`<worker state dir>/hooks-state.json`).

Hooks of several sessions run at once: a read-modify-write holds an exclusive lock on a file beside it, and the
file is replaced whole (reporter.atomic_file). It stays small: only the latest entries of each kind are kept, since
an action or a cycle older than those is over long ago.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from reporter.atomic_file import write_atomically
from reporter.hooks.actions import HookMemory

MAX_ENTRIES = 1_000


def load(path: Path) -> HookMemory:
    """The memory in `path`; an empty one when there is none or it is unreadable (the hooks then act again, once)."""
    try:
        data = json.loads(path.read_bytes())
        return HookMemory(told=dict(data.get("told", {})), blocked=dict(data.get("blocked", {})))
    except (OSError, ValueError, AttributeError, TypeError):
        return HookMemory()


def save(path: Path, memory: HookMemory) -> None:
    data = {"told": _latest(memory.told), "blocked": _latest(memory.blocked)}
    write_atomically(path, json.dumps(data, indent=1).encode())


@contextmanager
def updating(path: Path) -> Iterator[tuple[HookMemory, Callable[[], None]]]:
    """The memory under an exclusive lock, with the function that saves it before the lock is let go."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_name(f".{path.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        memory = load(path)
        yield memory, lambda: save(path, memory)


def _latest(entries: dict[str, str]) -> dict[str, str]:
    return dict(list(entries.items())[-MAX_ENTRIES:])
