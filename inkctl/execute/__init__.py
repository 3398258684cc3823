"""Doing it on hosts. events.py: the typed progress every executor emits (execute never prints).

hosts/      reaching hosts          state/      what they have
image/      images                  supervise/  running ranks
deploy/     up and down
"""
