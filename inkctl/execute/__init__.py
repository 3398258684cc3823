"""Doing it on hosts. events.py: the typed progress every executor emits (execute never prints).

hosts/      reaching hosts          state/      what they have
image/      images                  supervise/  running ranks
deploy/     up and down
"""

import logging as _logging

# executors log what they cannot say in an event (a checker's bug, a lock not released);
# quiet unless the command line sets logging up (--debug): no "last resort" lines on stderr
_logging.getLogger("inkctl").addHandler(_logging.NullHandler())
