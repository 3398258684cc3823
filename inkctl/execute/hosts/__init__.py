"""Reaching hosts: the transport protocol, SSH and local transports, connecting, host keys, fan-out."""
