"""The runtime check (it answers ``ps``) and the name check (no other deployment holds a planned
container name): both read the same ``ps --all``."""

from __future__ import annotations

from inkctl import runtimes
from inkctl.execute.deploy.preflight.report import FAIL, OK, Host, last_line
from inkctl.execute.state.deployed import ContainerState, parse_ps
from inkctl.execute.state.probe import Sections


def check_runtime(h: Host, s: Sections) -> bool:
    """The runtime answers when it lists its containers (the same ``ps`` serves the name check)."""
    out, err, rc = s.get("containers")
    rt = h.runtime
    if rc == 127:
        h.put("runtime", FAIL, f"{rt} is not installed (not on the SSH user's PATH)",
              f"install {rt} on {h.name}, or set container.runtime to the one it has")
        return False
    if rc != 0:
        why = last_line(err, out) or f"exit {rc}"
        h.put("runtime", FAIL, f"{rt} is installed but not answering (runtime down): {why}",
              runtimes.get(rt).not_answering(h.name))
        return False
    found = parse_ps(h.name, out)
    running = sum(1 for c in found if c.running)
    h.put("runtime", OK, f"{rt} answering: {len(found)} container{'s' if len(found) != 1 else ''} ({running} running)")
    return True


def check_name(h: Host, s: Sections) -> list[str]:
    """Fails on a planned name held by a container of another deployment; returns our own running ones."""
    out, _, _ = s.get("containers")
    planned = {c.name for c in h.plan.containers if c.host == h.name}
    found: list[ContainerState] = [c for c in parse_ps(h.name, out) if c.name in planned]
    foreign = [c for c in found if c.deployment != h.plan.deployment]
    ours = [c for c in found if c.deployment == h.plan.deployment]
    if foreign:
        c = foreign[0]
        owner = f"deployment {c.deployment!r}" if c.deployment else "no inkctl label"
        h.put("name", FAIL, f"{c.name} is taken by another container ({owner}, {c.state})",
              f"remove it on {h.name} ({h.runtime} rm -f {c.name}) or rename the deployment")
        return []
    if ours:
        states = ", ".join(f"{c.name} {c.state}" for c in ours)
        h.put("name", OK, f"this deployment's containers exist ({states}); up replaces or keeps them")
    else:
        h.put("name", OK, "free: " + ", ".join(c.name for c in h.plan.containers if c.host == h.name))
    return [c.name for c in ours if c.running]
