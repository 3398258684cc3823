"""Presenting: one renderer for people (rich) and one for machines (JSON). Secrets show as ***."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from inkctl.errors import InkctlError, Problem, RecipeInvalid
from inkctl.plan.quote import command_line

if TYPE_CHECKING:
    from rich.console import Console

    from inkctl.plan.step import Plan, Put

_CONSOLES: dict[str, Any] = {}


def console(stderr: bool = False) -> "Console":
    key = "err" if stderr else "out"
    if key not in _CONSOLES:
        from rich.console import Console

        stream = sys.stderr if stderr else sys.stdout
        # on a terminal lines wrap at its width (by words, as rich does); piped, a line stays whole
        _CONSOLES[key] = Console(stderr=stderr, highlight=False, soft_wrap=not _isatty(stream))
    return _CONSOLES[key]


class Plain:
    """A small printer for the paper commands (validate, plan) and errors: rich's look for the few
    styles we use, without importing rich (bench/startup.py measures why). Markup is the subset
    ``[red]``, ``[dim]``, ``[bold cyan]``, ... ``[/]``; colour only on a terminal, never with NO_COLOR."""

    CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}

    def __init__(self, stream):
        import os

        self.stream = stream
        self._line = ""  # what a print(..., end="") left on the current line, as it shows
        self.color = stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"

    def _markup(self, text: str) -> str:
        import re

        def tag(m: "re.Match[str]") -> str:
            if m.group(0).startswith("\\"):  # escaped: the text itself
                return m.group(0)[1:]
            words = m.group(1).split()
            if m.group(1) == "/":
                return "\x1b[0m" if self.color else ""
            if not all(w in self.CODES for w in words):
                return m.group(0)
            return f"\x1b[{';'.join(self.CODES[w] for w in words)}m" if self.color else ""

        return re.sub(r"\\?\[(/|[a-z ]+)\]", tag, text)

    def print(self, text: str = "", *, end: str = "\n", markup: bool = True, style: str | None = None, **_) -> None:
        if markup:
            text = self._markup(text)
        if style and self.color:
            text = self._markup(f"[{style}]") + text + "\x1b[0m"
        width = terminal_width(self.stream)
        if width and end == "\n":
            # what this line already shows (a print(..., end="") before) is folded with it, so the
            # break and the hanging indent follow the whole line, not a column count
            before = self._line
            lines = text.split("\n")
            first = fold(before + lines[0], width)
            first[0] = first[0][len(before):]
            text = "\n".join(first + [ln for rest in lines[1:] for ln in fold(rest, width)])
        self._line = "" if end == "\n" else self._line + visible(text)
        self.stream.write(text + end)


def visible(text: str) -> str:
    """The text as the screen shows it: without colour codes."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text) if "\x1b" in text else text


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width(stream) -> int | None:
    """The width lines must fit: the terminal's (COLUMNS wins, as everywhere); None when piped."""
    import os

    if not _isatty(stream):
        return None
    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols <= 0:
        try:
            cols = os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            return None
    return cols if cols >= 20 else None


_ANSI = None


def fold(line: str, width: int) -> list[str]:
    """One line as screen lines of at most WIDTH visible columns: broken between words, the rest
    indented 4 more than the line; a word wider than the screen is cut where the screen ends.
    An ``inkctl ...`` command in the line stays copy-pasteable: a break inside it ends with
    `` \\`` (the shell's line continuation); the command ends at a word ending in ``;`` or ``,``
    or at a lone ``/``. (A plan's argv is broken by ``_shell`` before it gets here.)"""
    import re

    global _ANSI
    if _ANSI is None:
        _ANSI = re.compile(r"\x1b\[[0-9;]*m")

    def vis(t: str) -> int:
        return len(_ANSI.sub("", t)) if "\x1b" in t else len(t)

    if vis(line) <= width:
        return [line]
    lead = re.match(r"((?:\x1b\[[0-9;]*m)+)( +)", line)  # a style opened before the indent: indent first
    if lead:
        line = lead.group(2) + lead.group(1) + line[lead.end():]
    indent = len(line) - len(line.lstrip(" "))
    hang = " " * min(indent + 4, width // 3)
    out: list[str] = []
    cur = " " * indent
    in_cmd = False  # the words so far are inside an inkctl command
    for word in line.lstrip(" ").split(" "):
        bare = _ANSI.sub("", word)
        if in_cmd and (bare == "/" or bare.startswith("(")):  # prose again: "X / Y", "X (what it does)"
            in_cmd = False
        room = width - (2 if in_cmd else 0)  # a break inside a command needs room for " \\"
        if cur.strip() and vis(cur) + 1 + vis(word) > room:
            out.append(cur + (" \\" if in_cmd else ""))
            cur = hang
        elif cur.strip():
            cur += " "
        cur += word
        if bare in ("inkctl", "$"):
            in_cmd = True
        elif in_cmd and bare.endswith((";", ",")):
            in_cmd = False
        while vis(cur) > width and "\x1b" not in cur:  # one word wider than the screen
            out.append(cur[:width])
            cur = hang + cur[width:]
    out.append(cur)
    return out


def screen_width() -> int:
    """The width output must fit where no terminal says it: COLUMNS, else 80."""
    import os

    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    return cols if cols >= 20 else 80


class Folded:
    """A text stream that folds every line it is given to ``width`` (``fold``) before passing it
    on: what a command prints to a pipe or a file fits a screen as it does on a terminal. A
    line is passed on when it ends; ``flush`` passes on what there is of it and remembers the
    column, so the rest of the line is folded as if it had come at once."""

    def __init__(self, stream, width: int):
        self.stream, self.width = stream, width
        self._pending = ""  # the unfinished line
        self._column = 0  # what of the unfinished line was already passed on (flush)

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            *lines, self._pending = self._pending.split("\n")
            out = []
            for line in lines:
                out += self._fold(line)
                self._column = 0
            self.stream.write("".join(x + "\n" for x in out))
        return len(text)

    def _fold(self, line: str) -> list[str]:
        col = self._column
        got = fold(" " * col + line, self.width)
        got[0] = got[0][col:]
        return got

    def flush(self) -> None:
        if self._pending:
            *done, last = self._fold(self._pending)
            self.stream.write("".join(x + "\n" for x in done) + last)
            self._column = len(last) if done else self._column + len(last)
            self._pending = ""
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # fileno, encoding, errors, buffer ...: the stream's own
        return getattr(self.stream, name)


def relative(text: str) -> str:
    """Absolute paths in TEXT as paths relative to the current directory where that is shorter:
    what the user typed, and what fits a screen (a bundled recipe inside site-packages too)."""
    import os
    import re

    try:
        cwd = os.getcwd()
    except OSError:
        return text

    def short(m: "re.Match[str]") -> str:
        path = m.group(0)
        tail = ""
        while path and path[-1] in ".,;)":  # the sentence's punctuation, not the path's
            path, tail = path[:-1], path[-1] + tail
        if path == cwd:  # the directory itself: its name says more than "."
            return m.group(0)
        try:
            rel = os.path.relpath(path, cwd)
        except ValueError:
            return m.group(0)
        under = rel != os.pardir and not rel.startswith(os.pardir + os.sep)  # ../x is no help: a path under the cwd only
        return (rel if under and len(rel) < len(path) else path) + tail

    return re.sub(r"(?<![\w.~/-])/(?:[\w.@+-]+/?)+", short, text)


def plain(stderr: bool = False) -> Plain:
    return Plain(sys.stderr if stderr else sys.stdout)


def escape(text: str) -> str:
    """Text that prints as itself inside Plain's markup: a backslash before anything that looks
    like a style tag (``[red]``, ``[/]``), as rich does; any other text is returned unchanged."""
    import re

    return re.sub(r"\[(/|[a-z ]+)\]", lambda m: "\\" + m.group(0), text)


def print_error(e: InkctlError) -> None:
    from inkctl.scrub import active

    scrub = active()  # every error passes the one scrubber
    e.message, e.hint = relative(scrub.text(e.message)), relative(scrub.text(e.hint)) if e.hint else e.hint
    out = plain(stderr=True)
    if isinstance(e, RecipeInvalid):
        errors = [p for p in e.problems if p.severity == "error"]
        out.print(f"[red]error:[/] {len(errors)} problem{'s' if len(errors) != 1 else ''} found", markup=True)
        print_problems(e.problems, strict=False, stream=sys.stderr)
        return
    out.print("[red]error:[/] ", end="")
    out.print(e.message, markup=False)
    if e.hint:
        out.print("[dim]hint:[/] ", end="")
        out.print(e.hint, markup=False)


def print_problems(problems: list[Problem], *, strict: bool, stream=None) -> None:
    out = plain(stderr=stream is sys.stderr)
    for p in problems:
        color = "red" if p.severity == "error" or strict else "yellow"
        out.print(f"  [{color}]{p.severity}[/] " + (f"{p.code} " if p.code else ""), end="")
        text = relative(f"{p.location}: {p.path + ': ' if p.path else ''}{p.message}")
        out.print(text, markup=False)
        if p.hint:
            out.print("      hint: " + relative(p.hint), markup=False, style="dim")


# --- plan ---------------------------------------------------------------------------------

RUN_FLAGS_WITHOUT_VALUE = {"--detach", "-d", "--rm", "--init", "--privileged", "--interactive", "-i", "--tty", "-t",
                           "--read-only", "-it", "--no-healthcheck"}


def image_index(argv: tuple[str, ...]) -> int | None:
    """Where the image is in ``docker|podman run ...``: the first word that is no option nor an option's value."""
    if len(argv) < 3 or argv[1] != "run":
        return None
    i = 2
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-"):
            return i
        i += 1 if ("=" in a or a in RUN_FLAGS_WITHOUT_VALUE) else 2
    return None


def _shell(argv: tuple[str, ...], width: int = 78) -> str:
    """Copy-pasteable: one quoted command, continued with backslashes; lines break only before a
    --flag (kept with its values) or before the image, which starts its own line."""
    text = command_line(argv)
    if len(text) <= width - 6:
        return text
    from shlex import quote
    from shlex import split as shlex_split

    img = image_index(argv)
    units: list[tuple[bool, str]] = []  # (starts a line, words)
    for i, a in enumerate(argv):
        if not units or a.startswith("--") or i == img:
            units.append((i == img, quote(a)))
        else:
            units[-1] = (units[-1][0], units[-1][1] + " " + quote(a))
    limit = width - 8
    fitted: list[tuple[bool, str]] = []
    for own_line, words in units:  # a unit wider than a line: its words on lines of their own
        if len(words) <= limit:
            fitted.append((own_line, words))
            continue
        raw = shlex_split(words)
        parts = [_script(a, limit) if len(quote(a)) > limit and k and raw[k - 1] == "-c" else quote(a)
                 for k, a in enumerate(raw)]
        fitted.append((own_line, parts[0]))
        fitted += [(False, w) for w in parts[1:]]
    units = fitted
    lines: list[str] = []
    for own_line, words in units:
        if lines and not own_line and len(lines[-1]) + 1 + len(words) <= limit:
            lines[-1] += " " + words
        else:
            lines.append(words)
    return " \\\n      ".join(lines)


def _script(script: str, limit: int) -> str:
    """An ``sh -c`` script wider than a line, quoted, broken at spaces outside its own quotes with
    a backslash-newline inside the quotes: the shell that runs the script joins those lines again
    (a line continuation), so the copy runs the same script."""
    from shlex import quote

    words: list[str] = []
    cur, q, esc = "", None, False
    for ch in script:
        if esc:
            cur, esc = cur + ch, False
        elif ch == "\\" and q != "'":
            cur, esc = cur + ch, True
        elif q is not None:
            cur, q = cur + ch, (None if ch == q else q)
        elif ch in "'\"":
            cur, q = cur + ch, ch
        elif ch == " ":
            words, cur = words + [cur], ""
        else:
            cur += ch
    words.append(cur)
    lines = [""]
    for w in words:
        shown = len(quote(w))  # how wide it prints once quoted
        if lines[-1] and len(quote(lines[-1])) + 1 + shown > limit - 4:
            lines.append(w)
        else:
            lines[-1] = f"{lines[-1]} {w}" if lines[-1] else w
    return quote(" \\\n        ".join(lines))


def _put_body(step: Put) -> str:
    from inkctl.plan.step import EnvFile

    c = step.content
    if isinstance(c, EnvFile):
        return c.render()
    if isinstance(c, str):
        return c
    return ""


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


def identity(plan: Plan, recipe) -> str:
    """``recipe R`` or, with an inventory, ``recipe R (deployment D)``: the recipe's own hash (the same
    with or without --hosts) and the deployment's (the containers' label, which covers the inventory).
    `plan` and `status` say it the same way."""
    alone = _recipe_alone_hash(plan, recipe) if recipe is not None and plan.hosts and not plan.hosts[0].placeholder else None
    if alone is not None and alone != plan.recipe_hash:
        return f"recipe {alone} (deployment {plan.recipe_hash})"
    return f"recipe {plan.recipe_hash}"


def _plan_head(out, plan: Plan, loaded) -> None:
    r = loaded.recipe if loaded else None
    head = f"[bold]{escape(plan.deployment)}[/]  {identity(plan, r)}"
    if r is not None:
        head += (f"  {r.engine.kind} {escape(r.engine.version)}, TP={r.engine.args.tensor_parallel}"
                 f" PP={r.engine.args.pipeline_parallel}, {r.hardware.nodes} host(s) x {r.hardware.gpus_per_host} {r.hardware.accelerator}")
    out.print(head)
    src = loaded.hosts_source if loaded else None
    if plan.hosts and plan.hosts[0].placeholder:
        out.print("[dim]hosts: placeholders (no --hosts given); <hostN.field> stands for a value from the inventory[/]")
    elif src:
        out.print(f"[dim]hosts from {escape(src)}[/]")


def _print_nccl(out, loaded, only_host: str | None) -> None:
    """Each host's NCCL settings: the value and where it comes from, or what up reads from the host."""
    from inkctl.api.plan import nccl_settings

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
               next_command: str | None = None) -> None:
    """``full``: every stage and step with file contents. Otherwise per rank: host, role, image and
    the launch argv; files every host gets the same shown once; what follows the launch in a line."""
    _plan_head(out, plan, loaded)
    if loaded is not None and getattr(loaded, "recipe", None) is not None:
        _print_nccl(out, loaded, only_host)
    if full:
        _print_full(out, plan, only_host)
    else:
        _print_concise(out, plan, only_host)
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


def _print_concise(out, plan: Plan, only_host: str | None) -> None:
    from inkctl.plan.step import Put, Register, Run, Smoke, WaitFor, WaitHealth

    hosts = {h.name: h for h in plan.hosts}
    steps = [s for st in plan.stages for s in st.steps if only_host in (None, s.host)]
    launch = [s for s in steps if isinstance(s, (Run, WaitFor))]
    puts = [s for s in steps if isinstance(s, Put)] + [f for s in steps if isinstance(s, Run) for f in s.files]
    _print_ranks(out, plan, launch, only_host)
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


def _print_ranks(out, plan: Plan, launch: list, only_host: str | None) -> None:
    """Each rank: where it runs, its image, and its launch steps."""
    from inkctl.plan.step import Run

    hosts = {h.name: h for h in plan.hosts}
    for c in plan.containers:
        if only_host not in (None, c.host):
            continue
        h = hosts[c.host]
        out.print(f"\n[bold]rank {c.rank}[/]  {c.role}  [magenta]{escape(c.host)}[/]  {escape(h.address)}  {h.runtime}")
        for s in [s for s in launch if s.rank == c.rank and s.host == c.host]:
            img = image_index(s.argv) if isinstance(s, Run) else None
            if img is not None:
                out.print(f"  image  {escape(s.argv[img])}")
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


def recipe_listing(rows: list[dict], width: int = 80) -> str:
    """Two or three lines a recipe on an 80-column screen: the name (what plan, up and init take,
    never cut) and its model; then hardware, engine, parallelism, runtime, patches and status."""
    import textwrap

    name_w = max([len(r["recipe"]) for r in rows] + [6])
    out = [f"{'recipe':<{name_w}}  model", "    hardware; engine, parallelism; runtime; patches; status", ""]
    for r in rows:
        if "error" in r:
            out.append(f"{r['recipe']:<{name_w}}  {r['error']}")
            continue
        out.append(f"{r['recipe']:<{name_w}}  {r['model']}".rstrip())
        what = (f"{r['hardware']}; {r['engine']}, {r['parallel']}; {r['runtime']}; patches {r['patches']}; "
                f"{r['status']}")
        out += textwrap.wrap(what, width - 2, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(out)
