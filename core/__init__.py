"""The budget rules the reporter, the API and the pipeline share (levels, policies, report intervals, model profiles,
snapshot precedence, handoff readiness, master actions), their settings, topic names and health checks.

Pure and light: it knows neither Faust, aiokafka, chdb, clickhouse-connect nor FastAPI, and imports nothing from
`streams`, `sinks`, `api` or `reporter` (the import contracts in pyproject.toml, checked by tests/unit/test_imports.py),
so a worker machine runs the reporter on the base install.
"""
