"""Clients of the servers inkctl brings up: what their HTTP endpoints say, parsed once."""
