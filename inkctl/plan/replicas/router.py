"""One router container on one host, what a fleet's router and a gateway have in common. Pure.

Both are a deployment of their own (``NAME-router``, ``NAME-gateway``) with one container,
named, labelled and hashed from its image and command line; both start it with the same step,
take it down with the same two steps, and take the same serving flags (the real routers,
vllm-router and sglang-router, spell these alike). What differs is the caller's: the program
and its mode, and the stages after the start (a fleet: health and one completion; a gateway:
health, registering each model's engine, one completion per model).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

from inkctl import runtimes
from inkctl.plan.container import container_name, labels
from inkctl.plan.deploy import _url_host, deployment_dir
from inkctl.plan.step import Container, Plan, PlannedHost, Run, Stage
from inkctl.recipe.hosts import Host
from inkctl.runtimes.spec import ContainerSpec

ROUTER_ROLE = "router"


def serving_flags(port: int, policy: str, prometheus_port: int, interval_s: int, breaker_failures: int, *,
                  urls: Sequence[str] | None = None, mode: Sequence[str] = ()) -> list[str]:
    """The flags every router of ours is started with: where it listens, its workers (``urls``,
    when given on its command line) or its ``mode``, the policy, its exporter, and how fast a dead
    replica is taken out and a restarted one taken back."""
    return ["--host", "0.0.0.0", "--port", str(port),
            *(["--worker-urls", *urls] if urls is not None else []), *mode,
            "--policy", policy,
            "--prometheus-host", "0.0.0.0", "--prometheus-port", str(prometheus_port),
            "--health-check-interval-secs", str(interval_s),
            # a replica brought back by watch --restart takes traffic at its first good health check,
            # not after the breaker's default minute
            "--cb-timeout-duration-secs", str(interval_s),
            # the retries of a request to a dead replica open its breaker, the next retry goes elsewhere
            "--cb-failure-threshold", str(breaker_failures)]


@dataclass(frozen=True)
class RouterBox:
    """A router's container on ``host``: ``what`` names it in step purposes ("router", "gateway")."""

    deployment: str
    host: Host
    runtime: str
    image: str
    argv: tuple[str, ...]
    what: str = "router"
    placeholder: bool = False  # a plan without an inventory: the address is "<host.address>"

    @property
    def container(self) -> str:
        return container_name(self.deployment, 0)

    @property
    def recipe_hash(self) -> str:
        return hashlib.sha256("\0".join([self.image, *self.argv]).encode()).hexdigest()[:12]

    @property
    def address(self) -> str:
        return f"<{self.host.name}.address>" if self.placeholder else self.host.ssh_address

    def base_url(self, port: int) -> str:
        return f"http://{_url_host(self.address)}:{port}"

    @property
    def state_dir(self) -> str:
        return deployment_dir(self.host, self.deployment)

    @property
    def watch(self) -> tuple[tuple[str, str, int], ...]:
        """What a health wait watches: this one container."""
        return ((self.host.name, self.container, 0),)

    def start(self, purpose: str) -> Run:
        spec = ContainerSpec(
            name=self.container, image=self.image, entrypoint=self.argv[0], command=self.argv[1:],
            labels=tuple(labels(self.deployment, self.recipe_hash, 0, self.host.name, ROUTER_ROLE)), network="host")
        return Run(host=self.host.name, rank=0, purpose=purpose, argv=runtimes.get(self.runtime).run(spec), container=spec)

    def plan(self, stages: tuple[Stage, ...]) -> Plan:
        """The router's plan: ``stages`` (the first starts it: ``start``), and its removal."""
        rt, name = runtimes.get(self.runtime), self.host.name
        teardown = (Run(host=name, rank=0, purpose=f"remove the {self.what}", argv=rt.remove(self.container), ok_codes=(0, 1)),
                    Run(host=name, rank=0, purpose=f"remove inkctl's files for the {self.what}",
                        argv=("rm", "-rf", "--", self.state_dir)))
        planned = (PlannedHost(name=name, address=self.address, rank=0, runtime=self.runtime, state_dir=self.state_dir,
                               placeholder=self.placeholder),)
        return Plan(deployment=self.deployment, recipe_hash=self.recipe_hash, hosts=planned, stages=stages,
                    containers=(Container(host=name, rank=0, name=self.container, role=ROUTER_ROLE),), teardown=teardown)
