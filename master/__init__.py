"""The example master agent (spec 8.2, issue 21): a strategy over the project views, driven over MCP.

`strategy` decides (pure, no I/O); `driver` runs rounds against the MCP tools of `ctxbudget mcp`; `cli` is
`ctxbudget master`. A real master is an LLM agent calling the same tools; this one is the baseline it can be
measured against (bench/fleet_relay.py).
"""
