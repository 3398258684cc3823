"""The model's weights on every host: pinned (``inkctl lock``), copied once from the Hub and
then host to host (``inkctl weights``), verified, and checked before ``up``. The manifest
itself is data: ``inkctl.recipe.manifest``, beside the lock file.

hub.py        the Hub (huggingface_hub on this machine): revision and file metadata
onhost.py     a stdlib-only program run on the hosts inside the engine image: scan, fetch, serve
distribute.py runs onhost.py on every host: who has what, download once, copy host to host
preflight.py  names and sizes of the pinned files on every host, for ``up`` and ``doctor``
"""
