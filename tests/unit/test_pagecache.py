"""Freeing the page cache on unified-memory hosts: the plan step, its answer, and what up says.

The script's answers are recorded from a DGX Spark (root: dropped) and from a host where the SSH
user is not root (denied); the e2e suite runs the real script on the test cluster's hosts.
"""

from __future__ import annotations

from inkctl.execute.events import Info
from inkctl.execute.events import Collect
from inkctl.execute.deploy.runner import Runner
from inkctl.execute.hosts.transport import Result
from inkctl.plan import pagecache
from inkctl.plan.deploy import build_plan
from inkctl.plan.step import Plan
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe

AS_ROOT = "MemAvailable:   82345012 kB\ndropped\nMemAvailable:   109876544 kB\n"
NOT_ROOT = "MemAvailable:   82345012 kB\ndenied\nMemAvailable:   82344900 kB\n"


def recipe(unified=True, **watchdog) -> Recipe:
    return Recipe.model_validate({
        "name": "t", "model": {"repo": "org/m"},
        "hardware": {"accelerator": "dgx-spark-gb10" if unified else "h200", "compute_capability": "12.1" if unified else "9.0",
                     "nodes": 2, "gpus_per_host": 1, "unified_memory": unified},
        "engine": {"kind": "vllm", "version": "v1", "image": {"ref": "img:1"}, "args": {"tensor_parallel": 2}},
        "network": {"socket_ifname": "eth0"}, "container": {"network": "host"},
        "watchdog": watchdog, "smoke": {"enabled": False}})


HOSTS = [Host(name="a", address="10.231.7.11"), Host(name="b", address="10.231.7.12")]


def test_unified_memory_plans_the_drop_first_on_every_host():
    plan = build_plan(recipe(), HOSTS)
    first = plan.stages[0]
    assert first.name == "page-cache"
    assert [(s.host, s.rank, s.argv) for s in first.steps] == [
        ("a", 0, ("sh", "-c", pagecache.SCRIPT, "inkctl-drop-page-cache")),
        ("b", 1, ("sh", "-c", pagecache.SCRIPT, "inkctl-drop-page-cache"))]
    # the script is fixed: nothing from the recipe or inventory is inside it
    assert "10.231" not in pagecache.SCRIPT and "sync" in pagecache.SCRIPT.split("; ")


def test_opt_out_and_discrete_memory_plan_no_drop():
    assert "page-cache" not in [s.name for s in build_plan(recipe(drop_page_cache=False), HOSTS).stages]
    assert "page-cache" not in [s.name for s in build_plan(recipe(unified=False), HOSTS).stages]


def test_answers_say_how_much_was_freed_or_why_not():
    d = pagecache.parse(AS_ROOT)
    assert d.allowed and round(d.freed_gib, 1) == 26.3
    assert d.describe("a") == "a: page cache dropped: MemAvailable 78.5 -> 104.8 GiB (freed 26.3 GiB)"
    n = pagecache.parse(NOT_ROOT)
    assert not n.allowed
    assert "needs root" in n.describe("b") and n.describe("b").startswith("b: could not drop the page cache")


class Answering:
    def __init__(self, name, out):
        self.name, self.out, self.calls = name, out, []

    def run(self, argv, *, timeout=None, stdin=None):
        self.calls.append(tuple(argv))
        return Result(tuple(argv), 0, self.out.encode(), b"", 0.01)

    def put(self, path, content, mode):
        raise AssertionError("nothing is written")

    def stream(self, argv, on_line, stop=None):
        return 0

    def close(self):
        pass


def test_up_reports_the_freed_memory_and_a_refusal_is_a_warning_not_a_failure():
    full = build_plan(recipe(), HOSTS)
    plan = Plan(deployment=full.deployment, recipe_hash=full.recipe_hash, hosts=full.hosts,
                stages=full.stages[:1], containers=full.containers, teardown=())
    sink = Collect()
    tr = {"a": Answering("a", AS_ROOT), "b": Answering("b", NOT_ROOT)}
    outcome = Runner(plan, tr, sink).run()
    assert outcome is not None
    infos = {e.text.split(":")[0]: e for e in sink.events if isinstance(e, Info)}
    assert infos["a"].level == "info" and "freed 26.3 GiB" in infos["a"].text
    assert infos["b"].level == "warning" and "needs root" in infos["b"].text
    assert tr["a"].calls == [("sh", "-c", pagecache.SCRIPT, "inkctl-drop-page-cache")]
