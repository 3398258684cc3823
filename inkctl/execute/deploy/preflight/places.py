"""The paths check (the required mount sources exist) and the ports check (the head's ports are
free, or held by this deployment)."""

from __future__ import annotations

from inkctl.execute.deploy.preflight.planned import planned_ports
from inkctl.execute.deploy.preflight.report import FAIL, OK, Host
from inkctl.execute.state.probe import Sections, listening_ports


def check_paths(h: Host, s: Sections, mounts: list[tuple[int, str]]) -> None:
    if not mounts:
        h.put("paths", OK, "no host paths to check")
        return
    out, _, _ = s.get("paths")
    answers = out.splitlines()
    missing = [(i, src) for (i, src), a in zip(mounts, answers + ["missing"] * len(mounts)) if a != "present"]
    if missing:
        i, src = missing[0]
        raw = h.recipe.container.mounts[i].source
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        where = f" from container.mounts[{i}].source {raw}" if raw != src else f" (container.mounts[{i}].source)"
        h.put("paths", FAIL, f"{src} does not exist{where}{more}",
              f"create it on {h.name}, or set the right value in that host's vars in the inventory")
        return
    h.put("paths", OK, "present: " + ", ".join(src for _, src in mounts))


def check_ports(h: Host, s: Sections, own_running: list[str]) -> None:
    wanted = planned_ports(h.recipe, h.rank)
    if not wanted:
        h.put("ports", OK, "no fixed port on a worker")
        return
    out, _, _ = s.get("listen")
    busy = listening_ports(out)
    taken = [(p, what) for p, what in wanted if p in busy]
    free = ", ".join(f"{p} ({what})" for p, what in wanted)
    if taken and own_running:
        h.put("ports", OK, f"{', '.join(str(p) for p, _ in taken)} held, presumably by this deployment ({', '.join(own_running)})")
    elif taken:
        p, what = taken[0]
        h.put("ports", FAIL, "in use: " + ", ".join(f"{p} ({what})" for p, what in taken),
              f"stop what listens on {p} on {h.name} (ss -ltnp 'sport = :{p}'), or change the port in the recipe")
    else:
        h.put("ports", OK, "free: " + free)
