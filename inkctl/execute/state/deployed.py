"""What a deployment has on its hosts, read by probe at run time (never assumed from the plan).

``up`` asks before it starts anything (a second ``up`` must not fight the first one's
containers, nor roll them back); ``down`` asks to know what to remove. Both ask by label
(``inkctl.deployment=<name>``), so a container renamed or left by an older recipe is found too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

from inkctl.execute.hosts.transport import HostError, Transport
from inkctl import runtimes
from inkctl.runtimes.spec import LABEL_PREFIX


@dataclass(frozen=True)
class ContainerState:
    """One container as its runtime reports it, from whichever command asked: ``ps --format``
    lines (name, state, labels), ``inspect --format`` lines (state, exit code, finish time) or
    ``container inspect`` JSON (everything). What a command did not print stays empty."""

    host: str
    name: str
    state: str  # running | exited | created | paused | restarting | dead | ...
    exit_code: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    image: str = ""  # the reference it was started from
    image_id: str = ""  # sha256:<hex>
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def deployment(self) -> str | None:
        return self.labels.get(LABEL_PREFIX + "deployment")

    @property
    def recipe_hash(self) -> str | None:
        return self.labels.get(LABEL_PREFIX + "recipe-hash")

    @property
    def rank(self) -> int | None:
        r = self.labels.get(LABEL_PREFIX + "rank", "")
        return int(r) if r.isdigit() else None

    @property
    def role(self) -> str | None:
        return self.labels.get(LABEL_PREFIX + "role")

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def image_id_short(self) -> str:
        return self.image_id.removeprefix("sha256:")[:12]


def parse_ps(host: str, text: str) -> list[ContainerState]:
    """The lines ``ps --format runtimes.get(...).ps_format()`` printed: every container listed, whatever its deployment."""
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if parts and parts[0].strip():
            parts += [""] * (4 - len(parts))
            labels = {k: v.strip() for k, v in ((LABEL_PREFIX + "deployment", parts[2]),
                                                 (LABEL_PREFIX + "recipe-hash", parts[3])) if v.strip()}
            out.append(ContainerState(host, parts[0].strip(), normal_state(parts[1]), labels=labels))
    return out


def parse_inspect_lines(host: str, text: str) -> dict[str, ContainerState]:
    """The lines ``inspect --format INSPECT_FORMAT`` printed, by container name."""
    seen = {}
    for line in text.splitlines():
        parts = line.strip().lstrip("/").split("|")
        if len(parts) == 4:
            name, state, code, finished = parts
            try:
                exit_code: int | None = int(code)
            except ValueError:
                exit_code = None
            seen[name] = ContainerState(host, name, state, exit_code=exit_code, finished_at=parse_time(finished))
    return seen


def parse_inspect(text: str, host: str = "") -> list[ContainerState]:
    """Containers from ``<runtime> container inspect`` JSON (an array; empty text is none).
    Both runtimes print it; the shapes of docker and podman are read alike."""
    text = text.strip()
    if not text:
        return []
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"container inspect did not answer JSON ({e.msg} at {e.pos})") from None
    out = []
    for it in items or []:
        st = it.get("State") or {}
        cfg = it.get("Config") or {}
        state = st.get("Status") or ("running" if st.get("Running") else "unknown")
        state = {"configured": "created", "stopped": "exited"}.get(state, state)
        image_id = it.get("Image") or ""
        if image_id and not image_id.startswith("sha256:"):
            image_id = "sha256:" + image_id  # podman prints the bare hex
        out.append(ContainerState(
            host=host,
            name=(it.get("Name") or "").lstrip("/"),
            state=state,
            exit_code=None if state in ("running", "created") else st.get("ExitCode"),
            started_at=parse_time(st.get("StartedAt")),
            finished_at=parse_time(st.get("FinishedAt")),
            image=it.get("ImageName") or cfg.get("Image") or "",
            image_id=image_id,
            labels=dict(cfg.get("Labels") or {}),
        ))
    return out


def parse_time(text: str | None) -> datetime | None:
    """A runtime's timestamp: RFC 3339 with nanoseconds ('2026-11-29T16:21:24.123456789Z' or
    '+02:00') or podman's '2026-11-29 16:21:24.1 +0000 UTC', offset kept; the zero time is None."""
    if not text or text.startswith("0001-01-01"):
        return None
    t = text.strip().replace("Z", "+00:00")
    if t[10:11] == " ":  # podman's Go time: '2026-11-29 16:21:24.1 +0000 UTC'; the zone's name is dropped
        parts = t.split()
        t = parts[0] + "T" + parts[1] + (parts[2][:3] + ":" + parts[2][3:] if len(parts) > 2 else "+00:00")
    head, dot, rest = t.partition(".")
    if dot:  # at most microseconds: the fraction's leading digits, then the offset as it was
        n = len(rest) - len(rest.lstrip("0123456789"))
        t = f"{head}.{rest[:n][:6].ljust(6, '0')}{rest[n:]}"
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def of_deployment(found: list[ContainerState], deployment: str) -> list[ContainerState]:
    return [f for f in found if f.deployment == deployment]


def list_deployment(host: str, transport: Transport, rt: str, deployment: str) -> list[ContainerState]:
    """The deployment's containers on one host (``ps --all`` by label)."""
    res = transport.run(runtimes.get(rt).ps(deployment=deployment), timeout=30)
    if not res.ok:
        raise ps_failed(host, rt, res.exit_code, res.err_text())
    return of_deployment(parse_ps(host, res.text()), deployment)


def ps_failed(host: str, rt: str, code: int, err: str) -> HostError:
    return HostError(host, "runtime", f"{rt} ps failed with exit code {code}: {err.strip()[-300:]}",
                     hint=f"is {rt} installed and running on {host}, and may the SSH user use it?")


def normal_state(text: str) -> str:
    """docker prints the state (``running``); podman 4.3 and nerdctl print its status (``Up 2
    minutes``, ``Up``, ``Exited (0) 3 minutes ago``)."""
    t = text.strip().lower()
    if t == "up" or t.startswith("up "):
        return "running"
    for word in ("exited", "created", "paused", "restarting", "removing", "dead", "stopped"):
        if t.startswith(word):
            return word
    return t
