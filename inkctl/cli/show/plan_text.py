"""A plan for people: per rank, or every step (``--full``); files once; the header with the hashes
to compare."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.cli.show.shell_text import _shell, image_index
from inkctl.cli.show.terminal import escape
from inkctl.plan.quote import command_line

if TYPE_CHECKING:
    from inkctl.plan.step import Plan, Put


def _put_body(step: Put) -> str:
    from inkctl.plan.step import EnvFile

    c = step.content
    if isinstance(c, EnvFile):
        return c.render()
    if isinstance(c, str):
        return c
    return ""


def identity(plan: Plan, recipe) -> str:
    """``recipe R`` or, with an inventory, ``recipe R (deployment D)``: the recipe's own hash (the same
    with or without --hosts) and the deployment's (the containers' label, which covers the inventory).
    `plan` and `status` say it the same way."""
    alone = _recipe_alone_hash(plan, recipe) if recipe is not None and plan.hosts and not plan.hosts[0].placeholder else None
    if alone is not None and alone != plan.recipe_hash:
        return f"recipe {alone} (deployment {plan.recipe_hash})"
    return f"recipe {plan.recipe_hash}"


def parallel_text(r) -> str:
    """``TP=4 PP=1 DP=2 EP`` (DP only above 1; EP when expert parallelism is on, with its size)."""
    a = r.engine.args
    text = f"TP={a.tensor_parallel} PP={a.pipeline_parallel}"
    if a.data_parallel.size > 1:
        text += f" DP={a.data_parallel.size}" + (" (attention)" if a.data_parallel.attention else "")
    if a.expert is not None and a.expert.enabled:
        text += f" EP={a.expert.size}" if a.expert.size else " EP"
    return text


def _plan_head(out, plan: Plan, loaded) -> None:
    r = loaded.recipe if loaded else None
    head = f"[bold]{escape(plan.deployment)}[/]  {identity(plan, r)}"
    if r is not None:
        head += (f"  {r.engine.kind} {escape(r.engine.version)}, {parallel_text(r)},"
                 f" {r.hardware.nodes} host(s) x {r.hardware.gpus_per_host} {r.hardware.accelerator}")
    out.print(head)
    if r is not None and "deployment" in identity(plan, r):
        out.print("[dim]compare the recipe hash with another `plan`; `status` compares the deployment hash "
                  "(the containers' inkctl.recipe-hash label, which covers the inventory)[/]")
    src = loaded.hosts_source if loaded else None
    if plan.hosts and plan.hosts[0].placeholder:
        out.print("[dim]hosts: placeholders (no --hosts given); <hostN.field> stands for a value from the inventory[/]")
    elif src:
        out.print(f"[dim]hosts from {escape(src)}[/]")


def _print_nccl(out, loaded, only_host: str | None) -> None:
    """Each host's NCCL settings: the value and where it comes from, or what up reads from the host."""
    from inkctl.api.paper.plan import nccl_settings

    rows = nccl_settings(loaded)
    if not rows:
        return
    out.print("NCCL per host [dim](RDMA: what nothing pins is read from each host's sysfs by up's preflight)[/]")
    for host, settings in rows:
        for s in settings if only_host in (None, host) else ():
            value = f"[yellow]{escape(str(s.value))}[/]" if s.derived else escape(str(s.value))
            out.print(f"  {escape(host)}  {s.name}={value}  [dim]({escape(s.source)})[/]")


def _recipe_alone_hash(plan: Plan, recipe) -> str | None:
    """The hash the same recipe has without an inventory (what `plan` without --hosts shows)."""
    from inkctl.plan.identity import recipe_hash

    for st in plan.stages:
        for step in st.steps:
            spec = getattr(step, "container", None)
            if spec is not None and getattr(spec, "image", None):
                return recipe_hash(recipe, None, spec.image)
    return None


def print_plan(out, plan: Plan, loaded=None, only_host: str | None = None, *, full: bool = False,
               next_command: str | None = None, verdicts: dict | None = None) -> None:
    """``full``: every stage and step with file contents. Otherwise per rank: host, role, image and
    the launch argv; files every host gets the same shown once; what follows the launch in a line.
    ``verdicts``: (host, rank) -> what the engine said of that rank's argv (api.plan.argv_verdicts)."""
    _plan_head(out, plan, loaded)
    if loaded is not None and getattr(loaded, "recipe", None) is not None:
        _print_nccl(out, loaded, only_host)
    here = {h.name for h in (getattr(loaded, "hosts", None) or []) if h.runs_here}
    if full:
        _print_full(out, plan, only_host)
    else:
        _print_concise(out, plan, only_host, here, verdicts or {})
    if next_command:
        out.print(f"\n[bold]next:[/] {escape(next_command)}")


def _print_full(out, plan: Plan, only_host: str | None) -> None:
    for h in plan.hosts:
        role = "head" if h.rank == 0 else "worker"
        out.print(f"  rank {h.rank} ({role}): {escape(h.name)}  {escape(h.address)}  {h.runtime}  state {escape(h.state_dir)}")
    total = len(plan.stages)
    for i, st in enumerate(plan.stages, 1):
        steps = [s for s in st.steps if only_host in (None, s.host)]
        out.print(f"\n[bold cyan]stage {i}/{total}: {st.name}[/] [dim]— {escape(st.description)}[/]")
        for s in steps:
            who = f"[magenta]{escape(s.host)}[/]/r{s.rank}" if s.rank is not None else f"[magenta]{escape(s.host)}[/]"
            out.print(f"  {who}  [dim]# {escape(s.purpose)}[/]")
            out.print(_step_text(s), markup=False)
        if i < total:
            out.print("  [dim]── barrier: every host finishes this stage before the next starts ──[/]")
    _print_teardown(out, plan, only_host)


def _print_teardown(out, plan: Plan, only_host: str | None) -> None:
    if plan.teardown:
        out.print("\n[bold]on failure, Ctrl-C or down[/] [dim](each host, in order)[/]")
        for s in plan.teardown:
            if only_host in (None, s.host):
                out.print(f"  {s.host}: " + command_line(s.argv), markup=False)


def _put_summary(s: Put) -> str:
    meta = f"(mode {oct(s.mode)[2:]}"
    if s.sha256:
        meta += f", sha256 {s.sha256[:12]}"
    elif isinstance(s.content, bytes):
        meta += ", sha256 UNPINNED"
    if isinstance(s.content, bytes):
        meta += f", {len(s.content)} bytes" if s.content else ", file not present locally"
    elif isinstance(s.content, str):
        meta += f", {len(s.content.splitlines())} lines"
    return meta + ")"


def _print_concise(out, plan: Plan, only_host: str | None, here: set[str] = frozenset(),  # type: ignore[assignment]
                   verdicts: dict | None = None) -> None:
    from inkctl.plan.step import Put, Register, Run, Smoke, WaitFor, WaitHealth

    hosts = {h.name: h for h in plan.hosts}
    steps = [s for st in plan.stages for s in st.steps if only_host in (None, s.host)]
    launch = [s for s in steps if isinstance(s, (Run, WaitFor))]
    puts = [s for s in steps if isinstance(s, Put)] + [f for s in steps if isinstance(s, Run) for f in s.files]
    _print_ranks(out, plan, launch, only_host, here, verdicts or {})
    for s in (s for s in launch if s.rank is None):
        out.print(f"\n  [magenta]{escape(s.host)}[/]  [dim]# {escape(s.purpose)}[/]")
        out.print(_step_text(s, files=False), markup=False)
    if puts:
        _print_files(out, puts, [h for h in hosts if only_host in (None, h)])
    for a in (s for s in steps if isinstance(s, (WaitHealth, Smoke, Register))):
        out.print(f"\n  [dim]# {escape(a.purpose)}[/]")
        out.print(_step_text(a), markup=False)
    out.print("\n[dim]stages: " + " -> ".join(st.name for st in plan.stages) + "; on failure, Ctrl-C or down every"
              " container this run started is removed (inkctl plan --full: every step)[/]")


def _print_ranks(out, plan: Plan, launch: list, only_host: str | None, here: set[str] = frozenset(),  # type: ignore[assignment]
                 verdicts: dict | None = None) -> None:
    """Each rank: where it runs, its image, and its launch steps."""
    from inkctl.plan.step import Run

    hosts = {h.name: h for h in plan.hosts}
    for c in plan.containers:
        if only_host not in (None, c.host):
            continue
        h = hosts[c.host]
        local = "  [dim](this machine, no SSH)[/]" if c.host in here else ""
        out.print(f"\n[bold]rank {c.rank}[/]  {c.role}  [magenta]{escape(c.host)}[/]  {escape(h.address)}  {h.runtime}{local}")
        for s in [s for s in launch if s.rank == c.rank and s.host == c.host]:
            img = image_index(s.argv) if isinstance(s, Run) else None
            if img is not None:
                out.print(f"  image  {escape(s.argv[img])}")
                for line in (verdicts or {}).get((c.host, c.rank), []):
                    out.print(f"  argv   {escape(line)}")
            out.print(f"  [dim]# {escape(s.purpose)}[/]")
            out.print(_step_text(s, files=False), markup=False)


def _print_files(out, puts: list[Put], every: list[str]) -> None:
    """One entry per file written before the containers start; hosts that get the same one share it."""
    out.print("\n[bold]files written first[/] [dim](by each host's launch command, before its container starts;"
              " inkctl plan --full shows their contents)[/]")
    groups: dict[tuple, list[Put]] = {}
    for s in puts:
        groups.setdefault((s.path, s.purpose), []).append(s)
    for (path, purpose), same in groups.items():
        on = list(dict.fromkeys(s.host for s in same))
        where = "every host" if len(every) > 1 and sorted(on) == sorted(every) else ", ".join(on)
        out.print(f"  {escape(path)}")
        out.print(f"      [dim]{escape(purpose)}; on {escape(where)} {_put_summary(same[0])}[/]")


def _step_text(s, files: bool = True) -> str:
    from inkctl.plan.step import Put, Register, Run, Smoke, WaitFor, WaitHealth

    pad = "    "
    if isinstance(s, Run):
        if not s.files or not files:
            return pad + "$ " + _shell(s.argv)
        from inkctl.plan.files import files_dir

        writes = "\n".join(_step_text(f) for f in s.files)
        return (f"{pad}one command: writes these files under {files_dir(s)} (a tar archive on its stdin), then runs the argv\n"
                f"{writes}\n{pad}$ " + _shell(s.argv))
    if isinstance(s, WaitFor):
        cond = f" until its output shows {s.expect!r}" + (f" x{s.expect_count}" if s.expect_count > 1 else "") if s.expect else " until it exits 0"
        return f"{pad}poll every {s.interval_s:g}s for up to {s.timeout_s:g}s{cond}:\n{pad}$ {_shell(s.argv)}"
    if isinstance(s, Put):
        meta = f"{pad}write {s.path} (mode {oct(s.mode)[2:]}"
        if s.sha256:
            meta += f", sha256 {s.sha256}"
        elif isinstance(s.content, bytes):
            meta += ", sha256 UNPINNED"
        body = _put_body(s)
        if isinstance(s.content, bytes):
            return meta + (f", {len(s.content)} bytes)" if s.content else ", file not present locally)")
        return meta + "):\n" + "\n".join(pad + "  | " + line for line in body.rstrip("\n").split("\n"))
    if isinstance(s, WaitHealth):
        watch = ", ".join(f"{h}/{c}" for h, c, _ in s.watch)
        line = f"{pad}GET {s.url} every {s.interval_s:g}s until 200, timeout {s.timeout_s:g}s; an exited container fails at once ({watch})"
        if s.answer_url:
            line += f"\n{pad}then POST {s.answer_url} model={s.model}: one streamed completion must come back"
        return line
    if isinstance(s, Smoke):
        return f"{pad}POST {s.url} model={s.model}, one streamed chat completion each:\n" + "\n".join(
            f"{pad}  {c.prompt!r} (max_tokens {c.max_tokens}): {c.expectation}" for c in s.checks)
    if isinstance(s, Register):
        return (f"{pad}at {s.url}:\n{pad}  register each engine with its model, remove any other:\n"
                + "\n".join(f"{pad}    {m} -> {u}" for u, m in s.workers))
    return pad + repr(s)
