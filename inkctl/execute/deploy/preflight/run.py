"""Preflight run: every host's checks in parallel from its answer to the combined probe, the
weights check after them, one report, and the failure when any check failed."""

from __future__ import annotations

from typing import AbstractSet as Set

from inkctl.execute.deploy.preflight import fabric
from inkctl.execute.deploy.preflight.argv import check_argv
from inkctl.execute.deploy.preflight.gpus import check_gpu_free, check_gpus
from inkctl.execute.deploy.preflight.image import check_image
from inkctl.execute.deploy.preflight.memory import check_memory
from inkctl.execute.deploy.preflight.network import check_network
from inkctl.execute.deploy.preflight.places import check_paths, check_ports
from inkctl.execute.deploy.preflight.planned import host_image, mount_sources
from inkctl.execute.deploy.preflight.report import (CHECKS, FAIL, NOT_RUN, OK, SKIPPED, CheckResult, Host, PreflightFailed,
                                                    PreflightReport, check_names, ordered)
from inkctl.execute.deploy.preflight.runtime import check_name, check_runtime
from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError, Transport
from inkctl.execute.state.fabric import Fabric
from inkctl.execute.state.probe import HostAnswer, run_launch_probe
from inkctl.plan.step import Plan
from inkctl.recipe.model import Recipe


def probe_one(recipe: Recipe, plan: Plan, t: Transport, *, image: str | None = None, lock=None) -> HostAnswer:
    """One host's answer to the combined probe (taking the deploy lock first when ``lock`` is given)."""
    ph = plan.host(t.name)
    return run_launch_probe(t, ph.runtime, host_image(recipe, plan, image),
                            [src for _, src in mount_sources(recipe, plan, t.name)],
                            lock.probe_args(t.name) if lock is not None else None, address=ph.cluster_address)


def run_preflight(recipe: Recipe, plan: Plan, transports: dict[str, Transport], *, skip: Set[str] = frozenset(),
                  image: str | None = None, sink=None, answers: dict[str, HostAnswer] | None = None,
                  weights=None, proof_pins: dict[str, dict] | None = None) -> list[CheckResult]:
    """Check every host of ``plan`` in parallel; raise PreflightFailed (an InkctlError) if any check fails.

    ``image`` is the image the plan runs when it is not engine.image.ref (a built image).
    ``sink`` (an event sink) receives one PreflightReport (pass or fail) before anything is
    raised; the error carries every result too (``PreflightFailed.results``). A host missing from ``transports`` (or an Unreachable) fails its ssh check.
    ``answers`` are the hosts' answers to the combined probe when the caller ran it
    (``probe_one`` per host); without them each host is probed here. ``weights`` (inkctl.weights.preflight)
    checks the pinned model's files on every host. ``proof_pins``: the lock file's argv-proof
    verdicts by key (``inkctl.execute.deploy.proof``).
    """
    skip = check_names(skip)
    per_host = each(lambda name: _host_checks(recipe, plan, name, transports.get(name), skip, image,
                                              None if answers is None else answers.get(name), proof_pins or {}),
                     [h.name for h in plan.hosts], name="preflight")
    results = _with_fabric([r for checks, _ in per_host for r in checks], recipe, plan, skip,
                           {h.name: f for h, (_, f) in zip(plan.hosts, per_host) if f is not None})
    if weights is not None:
        checked = weights.check(plan, transports) if "weights" not in skip else {}
        results = _with_weights(results, checked, plan, skip)
    failed_any = any(r.failed for r in results)
    if sink is not None:
        sink.emit(PreflightReport(ok=not failed_any, results=tuple(results)))
    failed = [r for r in results if r.failed]
    if failed:
        where = ", ".join(f"{r.host} ({r.check})" for r in failed)
        message = f"preflight failed on {where}: nothing was launched"
        # the weights and fabric checks name what is wrong and what fixes it: worth the message itself
        # (the fabric's rails as read stay in the table)
        message += "".join(f"\n  {r.host}: {fabric.problems(r) if r.check == 'fabric' else r.detail}"
                           + (f"\n    {r.hint}" if r.hint else "")
                           for r in failed if r.check in ("weights", "fabric"))
        raise PreflightFailed(message, results)
    return results


def _host_checks(recipe: Recipe, plan: Plan, name: str, t: Transport | None, skip: set[str], image: str | None,
                 answer: HostAnswer | None = None, proof_pins: dict[str, dict] | None = None,
                 ) -> tuple[list[CheckResult], Fabric | None]:
    """The host's checks, and its fabric as read (judged with the others' by ``_with_fabric``)."""
    ph = plan.host(name)
    image = host_image(recipe, plan, image)
    h = Host(recipe, plan, name, ph.rank, ph.runtime, skip, image, image != recipe.engine.image.ref, {},
             proof_pins=proof_pins or {})
    mounts = mount_sources(recipe, plan, name)
    if answer is None:
        if t is None:
            answer = HostAnswer(name, None, None, HostError(name, "unreachable", "not connected"))
        else:
            answer = run_launch_probe(t, ph.runtime, image, [src for _, src in mounts], address=ph.cluster_address)
    if answer.error is not None:
        e = answer.error
        h.results["ssh"] = CheckResult(name, ph.rank, "ssh", FAIL, e.reason, e.hint)
        for c in CHECKS[1:]:
            h.put(c, NOT_RUN, "host unreachable")
        return ordered(h), None
    # an answer without an error carries its result and sections, and came from a transport
    assert answer.result is not None and answer.sections is not None and t is not None
    how = "local: this machine, no SSH" if getattr(t, "local", False) else "connected"
    h.results["ssh"] = CheckResult(name, ph.rank, "ssh", OK, f"{how} ({answer.result.seconds:.2f} s for the probe)")
    s = answer.sections
    runtime_ok = check_runtime(h, s)
    check_gpus(h, s)
    check_gpu_free(h, s)
    check_memory(h, s)
    own: list[str] = []
    if runtime_ok:
        own = check_name(h, s)
        check_image(h, s, t)
        check_argv(h, t)
    else:
        h.put("name", NOT_RUN, f"{h.runtime} is not answering")
        h.put("image", NOT_RUN, f"{h.runtime} is not answering")
        h.put("argv", NOT_RUN, f"{h.runtime} is not answering")
    check_paths(h, s, mounts)
    check_ports(h, s, own)
    check_network(h, s)
    h.put("fabric", NOT_RUN, "judged with the other hosts")
    return ordered(h), fabric.read(s)


def _with_fabric(results: list[CheckResult], recipe: Recipe, plan: Plan, skip: set[str],
                 fabrics: dict[str, Fabric]) -> list[CheckResult]:
    """Each host's fabric row, judged over the hosts that answered."""
    judged = fabric.judge(recipe, plan, fabrics) if fabrics else {}
    out = []
    for r in results:
        if r.check == "fabric" and r.host in judged:
            status, detail, hint = judged[r.host]
            if "fabric" in skip:
                status, detail, hint = SKIPPED, "skipped (--skip-check)" + (f"; would be: {detail}" if status == FAIL else ""), None
            f = fabrics[r.host]
            r = CheckResult(r.host, r.rank, "fabric", status, detail, hint,
                            fabric.as_data(f, f.address or plan.host(r.host).cluster_address))
        out.append(r)
    return out


def _with_weights(results: list[CheckResult], checked: dict, plan: Plan, skip: set[str]) -> list[CheckResult]:
    """Each host's weights check after its others (the table groups rows by host)."""
    out: list[CheckResult] = []
    for h in plan.hosts:
        rows = [r for r in results if r.host == h.name]
        ssh_failed = any(r.check == "ssh" and r.failed for r in rows)
        if "weights" in skip:
            extra = CheckResult(h.name, h.rank, "weights", SKIPPED, "skipped (--skip-check)")
        elif ssh_failed or h.name not in checked:
            extra = CheckResult(h.name, h.rank, "weights", NOT_RUN, "host unreachable")
        else:
            status, detail, hint = checked[h.name]
            extra = CheckResult(h.name, h.rank, "weights", status, detail, hint)
        out += rows + [extra]
    return out
