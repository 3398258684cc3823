"""What a deployment has on its hosts, read by probe at run time (never assumed from the plan).

``up`` asks before it starts anything (a second ``up`` must not fight the first one's
containers, nor roll them back); ``down`` asks to know what to remove. Both ask by label
(``inkctl.deployment=<name>``), so a container renamed or left by an older recipe is found too.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from inkctl.execute.transport import HostError, Transport
from inkctl.plan.container import LABEL_PREFIX


@dataclass(frozen=True)
class Found:
    host: str
    name: str
    state: str  # running | exited | created | ...
    recipe_hash: str


def _format(runtime: str) -> str:
    label = f"{LABEL_PREFIX}recipe-hash"
    if runtime == "podman":
        return "{{.Names}}\t{{.State}}\t{{index .Labels \"%s\"}}" % label
    return "{{.Names}}\t{{.State}}\t{{.Label \"%s\"}}" % label


def probe_argv(runtime: str, deployment: str) -> tuple[str, ...]:
    return (runtime, "ps", "--all", "--filter", f"label={LABEL_PREFIX}deployment={deployment}",
            "--format", _format(runtime))


def probe_host(host: str, transport: Transport, runtime: str, deployment: str) -> list[Found]:
    res = transport.run(probe_argv(runtime, deployment), timeout=30)
    if not res.ok:
        raise HostError(host, "runtime", f"{runtime} ps failed with exit code {res.exit_code}: {res.err_text().strip()[-300:]}",
                        hint=f"is {runtime} installed and running on {host}, and may the SSH user use it?")
    out = []
    for line in res.text().splitlines():
        parts = line.split("\t")
        if parts and parts[0].strip():
            parts += [""] * (3 - len(parts))
            out.append(Found(host, parts[0].strip(), normal_state(parts[1]), parts[2].strip()))
    return out


def normal_state(text: str) -> str:
    """docker prints the state (``running``); podman 4.3 prints its status (``Up 2 minutes``)."""
    t = text.strip().lower()
    if t.startswith("up "):
        return "running"
    for word in ("exited", "created", "paused", "restarting", "removing", "dead", "stopped"):
        if t.startswith(word):
            return word
    return t


def probe_all(hosts: list[tuple[str, str]], transports: dict[str, Transport], deployment: str
              ) -> tuple[dict[str, list[Found]], dict[str, HostError]]:
    """(host, runtime) pairs -> what each has, and the hosts that could not be asked."""
    found: dict[str, list[Found]] = {}
    errors: dict[str, HostError] = {}

    def one(item):
        host, runtime = item
        try:
            found[host] = probe_host(host, transports[host], runtime, deployment)
        except HostError as e:
            errors[host] = e

    todo = [(h, r) for h, r in hosts if h in transports]
    if len(todo) == 1:
        one(todo[0])
    elif todo:
        with ThreadPoolExecutor(max_workers=min(64, len(todo)), thread_name_prefix="probe") as pool:
            list(pool.map(one, todo))
    return found, errors
