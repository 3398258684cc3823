"""The argv check: the engine's own word on every argv this host will run, read inside the image
the image check found (``execute/deploy/proof.py``)."""

from __future__ import annotations

from inkctl.execute.deploy.preflight.report import FAIL, NOT_RUN, OK, SKIPPED, WARN, Host
from inkctl.execute.hosts.transport import Transport


def check_argv(h: Host, t: Transport) -> None:
    if not h.image_id:
        h.put("argv", NOT_RUN, "the image is not on the host")
        return
    if "argv" in h.skip:
        h.put("argv", SKIPPED, "skipped (--skip-check)")
        return
    from inkctl.execute.deploy.proof import prove_host

    found = prove_host(h.recipe, h.plan, h.name, t, h.image_id, h.proof_pins)
    status = {"ok": OK, "warn": WARN, "fail": FAIL}[found.status]
    h.put("argv", status, found.detail, found.hint, seconds=sum(v.seconds for v in found.verdicts))
