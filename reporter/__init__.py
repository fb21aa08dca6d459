"""The worker-side reporter: turns real agent tools' output into snapshots and session events (spec 5).

Sources (Codex app-server notifications, Codex rollout files, our own session events) become readings; the cadence
of spec 5.1 decides when a reading is sent; a delivery (the 5.2 HTTP endpoint or Kafka) carries it.
"""
