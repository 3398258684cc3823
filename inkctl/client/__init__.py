"""The streaming OpenAI-compatible client (used by smoke and bench)."""
