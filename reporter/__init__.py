"""The worker-side reporter: turns real agent tools' output into snapshots and session events (spec 5).

Sources (Claude Code transcripts and status line, Codex app-server notifications and rollout files, our own session
events) become readings; the cadence of spec 5.1 decides when a reading is sent; a delivery (the 5.2 HTTP endpoint or
Kafka) carries it.

One package per agent tool (`claude_code/`, `codex/`), each listed once in `tools.py`; beside them what every tool
shares: `delivery/`, `hooks/`, `relay/`, and the loop (`reporter.py`, `readings.py`, `cadence.py`, `jsonl_tailer.py`).
"""
