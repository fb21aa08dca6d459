"""The worker side's one state directory (`CTXBUDGET_WORKER_STATE_DIR`, default `$XDG_STATE_HOME/ctxbudget`, else
`~/.local/state/ctxbudget`), shared by `ctxbudget report`, the hooks, the status line and `handoff write`.

Those commands run in the agent's working directory, so nothing of theirs may default to a path relative to it: it
would land in the user's repository, in the package's files and in its saved patch. The directory also holds a
`.gitignore` of `*`, so that a state directory a user put inside a work tree stays out of `git status` and of the
pending patch (`git add -A`) all the same.

Layout:
- `spool/` (a second reporter at once: `spool-2/`, ...; reporter.delivery.spool.claim_spool): the reporter's snapshots,
  relay outbox, pending session events, app-server thread state, rejected records;
- `handoff-write/`: the outbox of `handoff write` (several agents may run it at once: one at a time, under its lock);
- `agent_handoffs/`: the agents' parts, where the relay finds them (reporter.relay.inbox);
- `patches/`: the pending patches packages link;
- `hooks-state.json`, `hooks.jsonl`: the hooks' memory and, without Kafka, their session events;
- `statusline-spool/`: the status line's own spool;
- `claude-code.json`, `rollouts.json`: the tailers' read positions.
"""

from __future__ import annotations

from pathlib import Path

from core.settings import Settings

SPOOL = "spool"
HANDOFF_WRITE = "handoff-write"
INBOX = "agent_handoffs"
PATCHES = "patches"
HOOK_STATE = "hooks-state.json"
HOOK_EVENTS = "hooks.jsonl"
STATUSLINE_SPOOL = "statusline-spool"
IGNORE_ALL = "*\n"


def state_dir(settings: Settings | None = None) -> Path:
    """The state directory, created with its `.gitignore`."""
    directory = (settings or Settings()).worker_state_dir
    ignore = directory / ".gitignore"
    if not ignore.exists():
        directory.mkdir(parents=True, exist_ok=True)
        ignore.write_text(IGNORE_ALL)
    return directory
