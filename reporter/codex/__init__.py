"""Codex: its rollout files and app-server (readings and session events), the app-server client the relay asks the
agent through, and its hooks' config and trust."""
