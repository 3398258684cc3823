"""The model's weights on every host: pinned (``inkctl lock``), fetched once and relayed host
to host along a chain (``inkctl weights``), verified, and checked before ``up``. The manifest
itself is data: ``inkctl.recipe.manifest``, beside the lock file.

hub.py        the Hub (huggingface_hub on this machine): revision and file metadata
onhost.py     a stdlib-only program run on the hosts inside the engine image: scan, relay
distribute.py the hosts of a copy, their scan (who has what), the progress events
relay.py      the chain: one onhost.py relay per host, the Hub once, every host writing and
              forwarding at once
preflight.py  names and sizes of the pinned files on every host, for ``up`` and ``doctor``
cachecopy.py  ``inkctl cache``'s copy: a compile cache host to host on the same relay
"""
