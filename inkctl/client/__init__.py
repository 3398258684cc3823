"""Clients of the servers inkctl brings up: the streaming OpenAI-compatible client (used by smoke
and bench) and the Prometheus text parser (top, supervision)."""
