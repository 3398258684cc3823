"""A plan for machines: every stage and step as JSON (``plan -o json``). Secret values stay ``***``;
an API key shows as its secret's name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inkctl.plan.quote import command_line

if TYPE_CHECKING:
    from inkctl.plan.step import Plan


def step_json(s) -> dict:
    from inkctl.plan.step import EnvFile, Put, Register, Run, Smoke, WaitFor, WaitHealth

    d: dict[str, Any] = {"kind": s.kind, "host": s.host, "rank": s.rank, "purpose": s.purpose}
    if isinstance(s, (Run, WaitFor)):
        d["argv"] = list(s.argv)
        d["command"] = command_line(s.argv)
    if isinstance(s, Run):
        d["ok_codes"] = list(s.ok_codes)
        if s.files:
            from inkctl.plan.files import files_dir, remote_argv

            d["files"] = [step_json(f) for f in s.files]
            d["files_dir"] = files_dir(s)
            d["remote_argv"] = list(remote_argv(s))
    if isinstance(s, WaitFor):
        d.update(timeout_s=s.timeout_s, interval_s=s.interval_s, expect=s.expect, expect_count=s.expect_count)
    if isinstance(s, Put):
        d.update(path=s.path, mode=oct(s.mode), sha256=s.sha256)
        if isinstance(s.content, EnvFile):
            d["content"] = s.content.render()
        elif isinstance(s.content, str):
            d["content"] = s.content
        else:
            d["bytes"] = len(s.content)
    if isinstance(s, WaitHealth):
        d.update(url=s.url, timeout_s=s.timeout_s, interval_s=s.interval_s,
                 watch=[{"host": h, "container": c, "rank": r} for h, c, r in s.watch],
                 answer_url=s.answer_url, model=s.model)
    if isinstance(s, Smoke):
        d.update(url=s.url, model=s.model, checks=[c.as_dict() for c in s.checks])
    if getattr(s, "api_key", None):  # the secret's name, never its value
        d["api_key"] = s.api_key
    if isinstance(s, Register):
        d.update(url=s.url, workers=[{"url": u, "model": m} for u, m in s.workers])
    return d


def plan_json(plan: Plan) -> dict:
    return {
        "deployment": plan.deployment,
        "recipe_hash": plan.recipe_hash,
        "hosts": [{"name": h.name, "address": h.address, "rank": h.rank, "runtime": h.runtime,
                   "state_dir": h.state_dir, "placeholder": h.placeholder} for h in plan.hosts],
        "containers": [{"host": c.host, "rank": c.rank, "name": c.name, "role": c.role} for c in plan.containers],
        "stages": [{"name": st.name, "description": st.description, "steps": [step_json(s) for s in st.steps]}
                   for st in plan.stages],
        "teardown": [step_json(s) for s in plan.teardown],
    }
