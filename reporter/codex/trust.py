"""Codex's trust of hooks: `ctxbudget hooks install --tool codex --trust` does for ctxbudget's hooks what the TUI's
"Trust all" does, so `codex exec` and the app-server run them (untrusted hooks are skipped without a word).

Codex 0.169.0 runs a hook of `$CODEX_HOME/hooks.json` only when config.toml holds, for it,
`[hooks.state."<hooks.json path>:<event in snake_case>:<group index>:<handler index>"] trusted_hash = "sha256:<hex>"`,
the hex being sha256 of the compact, key-sorted JSON `{"event_name", "matcher" (only when set), "hooks": [the handler
with Codex's defaults: timeout 600, async false]}` (docs/real-tools.md; a test checks it against the real
app-server's `hooks/list`). A hook changed since it was trusted no longer matches its hash, so it stops running until
trusted again: the trust is of these exact commands.

config.toml is the user's: only the tables of the keys written here are replaced, every other line stays as it is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from reporter.atomic_file import write_atomically

CODEX_DEFAULT_HOOK_TIMEOUT = 600
_TABLE = re.compile(r"^\s*\[")


def snake_case(event: str) -> str:
    """Codex's name of an event in trust keys and hashes: PreCompact -> pre_compact."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def trust_hash(event: str, matcher: str | None, handler: dict[str, Any]) -> str:
    normalized = {
        "type": handler.get("type", "command"),
        "command": handler["command"],
        "timeout": handler.get("timeout", CODEX_DEFAULT_HOOK_TIMEOUT),
        "async": handler.get("async", False),
    }
    identity: dict[str, Any] = {"event_name": snake_case(event), "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def trust_entries(hooks_file: Path, only: Callable[[str], bool] | None = None) -> dict[str, str]:
    """key -> trusted_hash of the command hooks in a hooks.json (those whose command `only(command)` accepts, when
    given)."""
    hooks: dict[str, list[dict[str, Any]]] = json.loads(hooks_file.read_text()).get("hooks") or {}
    entries = {}
    for event, groups in hooks.items():
        for group_index, group in enumerate(groups):
            for handler_index, handler in enumerate(group.get("hooks") or []):
                if handler.get("type", "command") != "command" or (only is not None and not only(handler["command"])):
                    continue
                key = f"{hooks_file}:{snake_case(event)}:{group_index}:{handler_index}"
                entries[key] = trust_hash(event, group.get("matcher"), handler)
    return entries


def _header(key: str) -> str:
    return f"[hooks.state.{json.dumps(key)}]"


def _without_tables(config: str, headers: Collection[str]) -> list[str]:
    """config.toml's lines without the tables of `headers`, nor blank lines at its end."""
    kept: list[str] = []
    dropping = False
    for line in config.splitlines():
        if _TABLE.match(line):
            dropping = line.strip() in headers
        if not dropping:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return kept


def trusted_config(config: str, entries: dict[str, str]) -> str:
    """`config` (config.toml's text) with a `[hooks.state."<key>"]` table per entry: an existing table of the same key
    is replaced, everything else kept. Pure."""
    headers = {_header(key): value for key, value in entries.items()}
    kept = _without_tables(config, headers)
    tables = [f"{header}\ntrusted_hash = {json.dumps(value)}" for header, value in headers.items()]
    return "\n".join([*kept, *([""] if kept else []), *tables]) + "\n"


def untrusted_config(config: str, keys: Collection[str]) -> str:
    """`config` without the `[hooks.state."<key>"]` tables of `keys`; the very same text when it has none. Pure."""
    headers = {_header(key) for key in keys}
    if not any(line.strip() in headers for line in config.splitlines()):
        return config
    kept = _without_tables(config, headers)
    return "\n".join(kept) + "\n" if kept else ""


def trust(hooks_file: Path, config_file: Path, only: Callable[[str], bool] | None = None) -> int:
    """Write the trust of the hooks `only` accepts into config.toml; returns how many hooks are trusted."""
    entries = trust_entries(hooks_file, only)
    current = config_file.read_text() if config_file.exists() else ""
    updated = trusted_config(current, entries)
    if updated != current:
        write_atomically(config_file, updated.encode())
    return len(entries)


def untrust(hooks_file: Path, config_file: Path, only: Callable[[str], bool] | None = None) -> int:
    """Take the trust of the hooks `only` accepts out of config.toml, while they are still in `hooks_file` (a key
    names a hook's place there); returns how many trusts were removed."""
    current = config_file.read_text() if config_file.exists() else ""
    keys = trust_entries(hooks_file, only).keys()
    updated = untrusted_config(current, keys)
    if updated != current:
        write_atomically(config_file, updated.encode())
    present = {line.strip() for line in current.splitlines()}
    return sum(_header(key) in present for key in keys)
