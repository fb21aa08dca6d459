"""Claude Code: its transcripts (readings and session events), its status line, and its hooks' config."""
