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
    deployment: str = ""  # its inkctl.deployment label ("" when it has none)

    @property
    def running(self) -> bool:
        return self.state == "running"


def ps_format(runtime: str) -> str:
    """One line per container: name, state, and its deployment and recipe-hash labels, tab-separated."""
    labels = [f"{LABEL_PREFIX}deployment", f"{LABEL_PREFIX}recipe-hash"]
    if runtime == "podman":
        return "\t".join(["{{.Names}}", "{{.State}}", *('{{index .Labels "%s"}}' % k for k in labels)])
    return "\t".join(["{{.Names}}", "{{.State}}", *('{{.Label "%s"}}' % k for k in labels)])


def probe_argv(runtime: str, deployment: str) -> tuple[str, ...]:
    return (runtime, "ps", "--all", "--filter", f"label={LABEL_PREFIX}deployment={deployment}",
            "--format", ps_format(runtime))


def parse_ps(host: str, text: str) -> list[Found]:
    """The lines ``ps --format ps_format(...)`` printed: every container listed, whatever its deployment."""
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if parts and parts[0].strip():
            parts += [""] * (4 - len(parts))
            out.append(Found(host, parts[0].strip(), normal_state(parts[1]), parts[3].strip(), parts[2].strip()))
    return out


def of_deployment(found: list[Found], deployment: str) -> list[Found]:
    return [f for f in found if f.deployment == deployment]


def probe_host(host: str, transport: Transport, runtime: str, deployment: str) -> list[Found]:
    res = transport.run(probe_argv(runtime, deployment), timeout=30)
    if not res.ok:
        raise ps_failed(host, runtime, res.exit_code, res.err_text())
    return of_deployment(parse_ps(host, res.text()), deployment)


def ps_failed(host: str, runtime: str, code: int, err: str) -> HostError:
    return HostError(host, "runtime", f"{runtime} ps failed with exit code {code}: {err.strip()[-300:]}",
                     hint=f"is {runtime} installed and running on {host}, and may the SSH user use it?")


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
