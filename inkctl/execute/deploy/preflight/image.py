"""The image check: the plan's image on the host (by the pinned digest), pulled when the recipe
allows it (the only second round trip of a preflight)."""

from __future__ import annotations

from inkctl.execute.deploy.preflight.report import FAIL, OK, Host, last_line
from inkctl.execute.hosts.transport import HostError, Transport
from inkctl.execute.state.probe import PULL, Sections, image_ids
from inkctl import runtimes
from inkctl.runtimes.spec import repository

PULL_TIMEOUT_S = 3600


def check_image(h: Host, s: Sections, t: Transport) -> None:
    out, err, rc = s.get("image")
    pin = None if h.built else h.recipe.engine.image.digest
    may_pull = h.recipe.engine.image.pull and not h.built and "image" not in h.skip
    found = image_ids(out) if rc == 0 else None
    if found is not None and (pin is None or _matches(found, pin)):
        iid, _ = found
        h.image_id = iid
        h.put("image", OK, f"{h.image} present ({iid[:19]})" + (", matches the pinned digest" if pin else ""))
        return
    if not may_pull:
        if found is None:
            hint = ("build it first: inkctl build" if h.built else
                    f"load it on {h.name} (docker save {h.image} | ssh {h.name} {h.runtime} load), or set engine.image.pull: true")
            h.put("image", FAIL, f"{h.image} is not on the host", hint)
        else:
            h.put("image", FAIL, f"{h.image} on the host is {found[0][:19]}, not the pinned {pin}",
                  f"put the pinned image on {h.name} ({h.runtime} pull {repository(h.image)}@{pin}), "
                  "or update engine.image.digest (inkctl lock)")
        return
    src = f"{repository(h.image)}@{pin}" if pin else h.image
    why = "missing" if found is None else f"{found[0][:19]}, not the pinned digest"
    try:
        res = t.run(["sh", "-c", PULL, "inkctl-pull", runtimes.get(h.runtime).command, src, h.image], timeout=PULL_TIMEOUT_S)
    except HostError as e:
        h.put("image", FAIL, f"{h.image} was {why}; the pull was cut off: {e.reason}")
        return
    pulled = image_ids(res.text()) if res.ok else None
    if pulled is None or (pin and not _matches(pulled, pin)):
        h.put("image", FAIL, f"{h.image} was {why}; pulling {src} failed: {last_line(res.err_text()) or f'exit {res.exit_code}'}",
              "check the registry is reachable from the host, or load the image by hand")
        return
    h.image_id = pulled[0]
    h.put("image", OK, f"{h.image} was {why}: pulled {src} ({pulled[0][:19]})")


def _matches(found: tuple[str, list[str]], pin: str) -> bool:
    iid, digests = found
    return iid == pin or any(d.endswith("@" + pin) for d in digests)
