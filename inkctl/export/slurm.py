"""recipe -> one sbatch script that runs the plan under Slurm. Pure: no I/O.

The script comes from the very plan ``up`` runs: ``build_plan`` on stand-in hosts whose
addresses, names and state directory are tokens; ``quote.shell_words`` turns each token into a
shell variable the job sets from its allocation (the head is the first host of
``$SLURM_JOB_NODELIST``, a rank is ``$SLURM_NODEID``). With an inventory (``--hosts``) the job
asks for exactly those nodes and a rank is chosen by node name, with the inventory's values.

One ``srun`` step starts every rank (``--kill-on-bad-exit``: a rank that fails ends the others);
each rank writes its secrets env file from the job's environment or a file at run time (the
values are never in the script), checks the pinned image, starts the container with the plan's
own argv, follows its log and removes it when the step ends or is cancelled. The batch script
writes the hotfixes (sha256 checked), waits for health and names the rank and host that failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inkctl.errors import InkctlError
from inkctl.export.slurm_rank import RANK_FUNCTIONS, STATUS_DIR, batch_functions
from inkctl import runtimes
from inkctl.runtimes.task import not_expressed
from inkctl.plan.deploy import build_plan
from inkctl.plan.quote import command_line, shell_words
from inkctl.plan.step import EnvFile, Plan, Run, SecretRef, WaitFor, WaitHealth
from inkctl.recipe.engine_registry import spec_of
from inkctl.recipe.fields import referenced_vars
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe

# tokens in the stand-in plan -> the shell variables the job sets
HEAD = "inkctl-slurm-head-address"
NODE = "inkctl-slurm-node-address"
NODE_NAME = "inkctl-slurm-node-name"
STATE = "/inkctl-slurm-job-dir"
_BUILTIN = {HEAD: "INK_HEAD_ADDR", NODE: "INK_NODE_ADDR", NODE_NAME: "SLURMD_NODENAME", STATE: "INK_DIR"}
_BUILTIN_VARS = {"HOST_ADDRESS", "HEAD_ADDRESS", "HOST", "RANK"}
CONTAINER_MODES = ("runtime", *runtimes.in_task_names())
COMMENT = "inkctl-recipe-hash="  # the job's comment: which version of the recipe it runs
TIME_RE = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$|^(infinite|UNLIMITED)$")
SBATCH_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:=+\-\[\]]+$")


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gpus_per_node: int | None = None  # None: the recipe's gpus_per_host; 0: ask for none (no GRES)
    container: str = "runtime"  # "runtime" (the recipe's docker/podman) | "pyxis" | "apptainer"
    job_dir: str | None = None  # a shared directory for the job's files; default: the submit directory
    vars: tuple[tuple[str, str], ...] = ()  # values for the recipe's ${VARS}, baked into the script

    def check(self) -> None:
        if self.container not in CONTAINER_MODES:
            raise InkctlError(f"--container {self.container!r}: expected one of {', '.join(CONTAINER_MODES)}", exit_code=2)
        for flag, v in (("--partition", self.partition), ("--account", self.account)):
            if v is not None and not SBATCH_VALUE_RE.match(v):
                raise InkctlError(f"{flag} {v!r}: not a Slurm name (letters, digits, '_.,-')", exit_code=2)
        if self.time is not None and not TIME_RE.match(self.time):
            raise InkctlError(f"--time {self.time!r}: expected a Slurm time (MINUTES, HH:MM:SS, D-HH:MM, ...)",
                              hint="e.g. --time 4:00:00 or --time 2-00:00", exit_code=2)
        if self.job_dir is not None and (not self.job_dir.startswith("/") or "\n" in self.job_dir):
            raise InkctlError(f"--job-dir {self.job_dir!r}: expected an absolute path (a directory every node shares)",
                              exit_code=2)


@dataclass(frozen=True)
class SlurmJob:
    name: str  # the job name: inkctl-<deployment>
    script: str
    plan: Plan
    secrets: tuple[str, ...]
    env_vars: tuple[str, ...]  # recipe ${VARS} the job reads from its environment
    notes: tuple[str, ...]  # what the script does not do that `up` does


def job_name(deployment: str) -> str:
    return f"inkctl-{deployment}"


def stand_in_hosts(recipe: Recipe, user_vars: dict[str, str]) -> tuple[list[Host], list[str]]:
    """Hosts whose values are tokens; the recipe's own ${VARS} without a value come from the job's environment."""
    referenced = referenced_vars(recipe.model_dump(mode="json"))
    from_env = sorted(referenced - _BUILTIN_VARS - set(user_vars))
    vars_ = {n: _var_token(n) for n in from_env}
    vars_.update(user_vars)
    vars_["HOST"] = NODE_NAME
    hosts = [Host(name=f"rank{i}", address=HEAD if i == 0 else NODE, vars=vars_, state_dir=STATE)
             for i in range(recipe.hardware.nodes)]
    return hosts, from_env


def _var_token(name: str) -> str:
    return f"inkctl-slurm-var-{name}"




def export_slurm(recipe: Recipe, options: SlurmOptions, *, hosts: list[Host] | None = None, image: str | None = None,
                 image_pin: str | None = None, hotfix_pins: dict[str, str] | None = None,
                 hotfix_files: dict[str, bytes] | None = None, weights_pinned: bool = False,
                 weights=None) -> SlurmJob:
    """The sbatch script. ``hosts``: an inventory (its names are Slurm node names, in rank order).
    ``image_pin``: the lock's digest or image id of the image, asserted on every node before it starts.
    ``weights``: (the host cache template, the lock's model manifest): every pinned file's size is
    asserted on every node the same way."""
    options.check()
    env_vars: list[str] = []
    if hosts is None:
        hosts_, env_vars = stand_in_hosts(recipe, dict(options.vars))
        by_name = False
    else:
        hosts_ = [h.model_copy(update={"state_dir": STATE}) for h in hosts]
        by_name = True
    plan = build_plan(recipe, hosts_, read_fabric=False, image=image, hotfix_pins=hotfix_pins, hotfix_files=hotfix_files,
                      weights_pinned=weights_pinned)
    checks: dict[int, tuple[tuple[str, int], ...]] = {}  # rank -> (path on its node, size) of every pinned file
    if weights is not None:
        from inkctl.plan.hostvars import HostContext
        from inkctl.recipe.manifest import repo_folder

        template, m = weights
        for rank, h in enumerate(hosts_):
            cache = HostContext(host=h, rank=rank, head=hosts_[0], placeholder=False).expand(template, "model.weights.cache")
            base = f"{cache}/{repo_folder(m.repo)}/snapshots/{m.revision}"
            checks[rank] = tuple((f"{base}/{f.path}", f.size) for f in m.files)
    tokens = dict(_BUILTIN)
    tokens.update({_var_token(n): n for n in env_vars})
    return _Script(recipe, options, plan, tokens, by_name, hosts, env_vars, image_pin, checks).job()


class _Script:
    def __init__(self, recipe, options, plan, tokens, by_name, hosts, env_vars, image_pin, weights_check):
        self.r, self.o, self.plan, self.tokens = recipe, options, plan, tokens
        self.by_name, self.hosts, self.env_vars = by_name, hosts, env_vars
        self.image_pin, self.weights_check = image_pin, weights_check
        self.name = job_name(recipe.name)
        self.rt = recipe.container.runtime
        self.notes: list[str] = []

    def sh(self, argv) -> str:
        return shell_words(list(argv), self.tokens)

    def wrapped(self, prefix: str, argv, indent: str) -> list[str]:
        """``prefix ARGV`` on one line, or when long, one option (and its value) per line."""
        words = [self.sh([a]) for a in argv]
        line = f"{prefix} {' '.join(words)}"
        if len(indent) + len(line) <= 100:
            return [line]
        out, cur = [], prefix
        for w in words:
            if w.startswith("-") and cur != prefix and len(cur) > len(prefix) + 12:
                out.append(cur + " \\")
                cur = "    " + w
            else:
                cur += " " + w
        out.append(cur)
        return out

    def job(self) -> SlurmJob:
        if self.o.container != "runtime":
            eng = self.r.engine
            if spec_of(eng.kind).serves_in_head(self.r):
                raise InkctlError(f"{spec_of(eng.kind).name} over Ray runs `vllm serve` inside the Ray head's container: --container "
                                  f"{self.o.container} has no such container", exit_code=2,
                                  hint="use --container runtime (docker/podman on the nodes), or engine.multinode: native")
            for c in self.plan.containers:
                for gap in not_expressed(self._spec(c.rank), self.o.container):
                    if gap not in self.notes:
                        self.notes.append(gap)
        lines = self._header() + self._sbatch() + self._prologue() + self._files() + self._rank_script() + self._launch()
        return SlurmJob(self.name, "\n".join(lines) + "\n", self.plan, tuple(self.r.secrets), tuple(self.env_vars),
                        tuple(self.notes))

    def _recipe_alone(self) -> str:
        """The recipe's own hash, as `inkctl plan RECIPE` (no inventory) shows it."""
        from inkctl.plan.identity import recipe_hash

        image = next((s.container.image for s in self.plan.steps() if isinstance(s, Run) and s.container), None)
        return recipe_hash(self.r, None, image)

    # --- the header: what a reviewer needs before submitting -----------------------------------
    def _header(self) -> list[str]:
        r = self.r
        out = ["#!/bin/bash",
               f"# {self.name}: {r.name} under Slurm, written by `inkctl export slurm`.",
               f"# Job hash {self.plan.recipe_hash} (its --comment; `up --slurm` compares it), "
               f"recipe hash {self._recipe_alone()}",
               "# (what `inkctl plan RECIPE` shows). Every rank runs the plan's own argv;",
               "# one srun step starts them all.",
               "#",
               "# Rendezvous from the allocation: the head (rank 0) is the first host of",
               "# $SLURM_JOB_NODELIST, a rank is " + ("chosen by node name (the inventory's order)." if self.by_name
                                                   else "$SLURM_NODEID."),
               "#",
               "# Secrets: never in this script; read when the job runs, from the file named by",
               "# $INKCTL_SECRETS_FILE (NAME=value lines, mode 0600), else the job's environment:"]
        out += [f"#   {k}" + (f" (inkctl up reads it from {s.describe()})" if s else "") for k, s in r.secrets.items()] \
            or ["#   (none)"]
        if self.env_vars:
            out += ["#", "# Host values the recipe references, read from the job's environment:"]
            out += [f"#   {n}" for n in self.env_vars]
        out += ["#",
                "# Files (hotfixes, env files, rank status) go to a directory every node shares:",
                f"#   {self._job_dir_text()}/{self.name}-$SLURM_JOB_ID",
                f"# Ready: the output says 'inkctl: ready' once {r.health_path} answers on the head.",
                "# Check: sbatch --test-only THIS_FILE   Stop: scancel JOBID (each rank removes",
                "# its container)."]
        return out

    def _job_dir_text(self) -> str:
        return self.o.job_dir or "$SLURM_SUBMIT_DIR"

    def _sbatch(self) -> list[str]:
        r, o = self.r, self.o
        gpus = r.hardware.gpus_per_host if o.gpus_per_node is None else o.gpus_per_node
        lines = [f"#SBATCH --job-name={self.name}", f"#SBATCH --comment={COMMENT}{self.plan.recipe_hash}",
                 f"#SBATCH --nodes={r.hardware.nodes}", "#SBATCH --ntasks-per-node=1", "#SBATCH --exclusive"]
        if gpus:
            lines.append(f"#SBATCH --gpus-per-node={gpus}")
        if self.by_name:
            lines.append(f"#SBATCH --nodelist={','.join(h.name for h in self.hosts)}")
        for flag, v in (("partition", o.partition), ("account", o.account), ("time", o.time)):
            if v:
                lines.append(f"#SBATCH --{flag}={v}")
        if o.job_dir:
            lines.append(f"#SBATCH --chdir={o.job_dir}")
        lines.append(f"#SBATCH --output={self.name}-%j.out")
        return ["", *lines]

    def _prologue(self) -> list[str]:
        return ["", "set -uo pipefail",
                f'INK_DIR="$PWD/{self.name}-$SLURM_JOB_ID"',
                'INK_HEAD_HOST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
                'INK_HEAD_ADDR=$(getent ahostsv4 "$INK_HEAD_HOST" | awk \'NR == 1 {print $1}\')',
                'export INK_DIR INK_HEAD_HOST INK_HEAD_ADDR',
                f'mkdir -p "$INK_DIR/{STATUS_DIR}" || exit 1',
                'echo "inkctl: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST; head $INK_HEAD_HOST ($INK_HEAD_ADDR)"',
                *batch_functions()]

    # --- files every rank reads: hotfixes and their wrapper, the engine's own files, sha256 checked
    def _files(self) -> list[str]:
        def shared(p) -> bool:
            d = self.plan.host(p.host).state_dir
            return p.path.startswith((f"{d}/hotfix/", f"{d}/engine/"))

        puts = [p for p in self.plan.puts() if p.rank in (0, None) and not isinstance(p.content, EnvFile) and shared(p)]
        if not puts:
            return []
        if all("/engine/" not in p.path for p in puts):
            out = ["", "# hotfixes: written here, each checked against its pin (and again in the container)"]
        else:
            out = ["", "# files the ranks read (hotfixes, the engine's own): written here, each checked against its sha256"]
        dirs = list(dict.fromkeys(p.path.rsplit("/", 1)[0] for p in puts))
        out.append(f"mkdir -p {self.sh(dirs)} || exit 1")
        seen = set()
        for p in puts:
            if p.path in seen:
                continue
            seen.add(p.path)
            data = p.content if isinstance(p.content, bytes) else str(p.content).encode()
            path = self.sh([p.path])
            out += _write_file(path, data)
            out.append(f"chmod {p.mode:o} {path}")
            if p.sha256:
                out.append(f"check_sha256 {path} {p.sha256} || exit 1")
        return out

    # --- the rank script -----------------------------------------------------------------------
    def _rank_script(self) -> list[str]:
        key = '"$SLURMD_NODENAME"' if self.by_name else '"$SLURM_NODEID"'
        body = ["#!/bin/bash", "# one rank, on every node of the allocation (srun --ntasks-per-node=1);",
                "# `rank.sh cleanup` only removes this node's container", "set -uo pipefail",
                'INK_NODE_ADDR=$(getent ahostsv4 "$SLURMD_NODENAME" | awk \'NR == 1 {print $1}\')',
                'export INK_NODE_ADDR', *RANK_FUNCTIONS, "", f"case {key} in"]
        for c in self.plan.containers:
            label = self.hosts[c.rank].name if self.by_name else str(c.rank)
            body.append(f"  {label})")
            body += ["    " + x if x else "" for x in self._rank_body(c)]
            body.append("    ;;")
        body += ['  *) echo "inkctl: no rank for node $SLURMD_NODENAME (SLURM_NODEID $SLURM_NODEID)" >&2; exit 3 ;;',
                 "esac",
                 'if [ "${1:-}" = cleanup ]; then remove_container; exit 0; fi',
                 "trap stop_rank TERM INT HUP",
                 "rank_steps"]
        return ["", "# the rank script: every rank's steps from the plan", f'cat > "$INK_DIR/rank.sh" <<\'{_EOF_RANK}\'',
                *body, _EOF_RANK, 'chmod 755 "$INK_DIR/rank.sh"']

    def _secret_specs(self, env: EnvFile) -> list[str]:
        """``VAR=SECRET:env:NAME`` / ``VAR=SECRET:file:PATH`` for ``secret_env``: each value read
        where the recipe says, as ``up`` reads it (the job's environment or a file on the node)."""
        out = []
        for var, ref in env.entries:
            if not isinstance(ref, SecretRef):
                continue
            src = self.r.secrets[ref.name]
            out.append(f"{var}={ref.name}:env:{src.env}" if src.env else f"{var}={ref.name}:file:{src.file}")
        return out

    def _rank_body(self, c) -> list[str]:
        rank, rt, mode = c.rank, self.rt, self.o.container
        out = [f"INK_RANK={rank}", f"INK_CONTAINER={c.name}"]
        if mode == "runtime":
            out += [f"INK_RM=({self.sh(runtimes.get(rt).remove(c.name))})",
                    f"INK_LOGS=({self.sh(runtimes.get(rt).logs(c.name, follow=True))})",
                    f"INK_WAIT=({self.sh(runtimes.get(rt).wait(c.name))})"]
        out.append("rank_steps() {")
        steps = []
        env = next((p for p in self.plan.puts() if p.rank == rank and isinstance(p.content, EnvFile)), None)
        if env is not None:
            out.insert(2, f"INK_ENV_FILE={self.sh([env.path])}")
            steps.append('secret_env "$INK_ENV_FILE" ' + self.sh(self._secret_specs(env.content)))
        if mode != "runtime":
            return out + ["  " + x for x in steps + self._foreground(rank)] + ["}"]
        steps.append("remove_container")
        starts = [s for st in self.plan.stages for s in st.steps
                  if getattr(s, "rank", None) == rank and isinstance(s, (Run, WaitFor))]
        steps += self._before_start(rank, starts)
        steps += [x for s in starts for x in self._start_step(s)]
        steps.append("follow_container")
        return out + ["  " + x for x in steps] + ["}"]

    def _before_start(self, rank: int, starts: list) -> list[str]:
        """What a rank checks before its container starts: the pinned image, the weights' sizes,
        and (Ray) the head's ports it joins."""
        steps = []
        image = next((s.container.image for s in starts if isinstance(s, Run) and s.container is not None), None)
        if image and self.image_pin:
            inspect = runtimes.get(self.rt).image_inspect(image, format='{{.Id}} {{range .RepoDigests}}{{.}} {{end}}')
            steps.append(f"check_image {command_line([self.image_pin])} {self.sh(inspect)}")
        steps += [f"check_size {self.sh([path])} {size}" for path, size in self.weights_check.get(rank, ())]
        engine = spec_of(self.r.engine.kind)
        if rank > 0 and engine.serves_in_head(self.r):  # the workers join a cluster the head opens first
            steps += [f'wait_tcp "$INK_HEAD_ADDR" {port} {int(self.r.health.timeout_s)}' for port, _ in engine.ports(self.r)]
        return steps

    def _start_step(self, s) -> list[str]:
        if isinstance(s, WaitFor):
            return [f"wait_until {int(s.timeout_s)} {command_line([s.expect or '', str(s.expect_count)])} {self.sh(s.argv)}"]
        return self.wrapped("start_container" if s.container is not None else "run_step", s.argv, "      ")

    def _spec(self, rank: int):
        return next(s.container for s in self.plan.steps()
                    if isinstance(s, Run) and s.rank == rank and s.container is not None)

    def _foreground(self, rank: int) -> list[str]:
        """pyxis (this script already runs inside the image) or apptainer: the engine in the foreground."""
        spec, how = self._spec(rank), runtimes.in_task(self.o.container)
        steps = [f"run_step {self.sh(s.argv)}" for st in self.plan.stages for s in st.steps
                 if isinstance(s, Run) and s.rank == rank and s.container is None]
        if spec.env_file:
            steps.append('load_env "$INK_ENV_FILE"' + (f" {how.env_prefix}" if how.env_prefix else ""))
        if how.exports_env:
            steps += [f"export {self.sh([f'{k}={v}'])}" for k, v in spec.env]
        gpus = any(o in ("--gpus", "--device") for o in spec.options)
        return steps + self.wrapped("run_foreground", how.foreground(spec, gpus), "      ")

    # --- the step and the health wait ----------------------------------------------------------
    def _launch(self) -> list[str]:
        health = next(s for s in self.plan.steps() if isinstance(s, WaitHealth))
        url = self.sh([health.url])
        srun = ["--ntasks-per-node=1", "--kill-on-bad-exit=1", "--label"]
        if self.o.container != "runtime":
            srun += runtimes.in_task(self.o.container).srun_flags(self._spec(0), STATE)
        step = self.wrapped("srun", [*srun, "bash", f"{STATE}/rank.sh"], "")
        return ["", "# one step, every rank; a rank that fails ends the others (--kill-on-bad-exit)",
                *step[:-1], step[-1] + " &",
                "INK_STEP=$!",
                f"wait_health {url} {int(health.timeout_s)} {health.interval_s:g}",
                "INK_RC=$?",
                'if [ "$INK_RC" = 0 ]; then wait "$INK_STEP"; INK_RC=$?; fi',
                f"report_ranks {self.r.hardware.nodes}",
                'exit "$INK_RC"']


_EOF_RANK = "INKCTL_RANK_SCRIPT"


def _write_file(path: str, data: bytes) -> list[str]:
    """A file's bytes as a heredoc: as text when it is text without the delimiter, else base64."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = None
    if text is not None and text.endswith("\n") and "INKCTL_FILE_END" not in text and "\r" not in text:
        return [f"cat > {path} <<'INKCTL_FILE_END'", *text[:-1].split("\n"), "INKCTL_FILE_END"]
    import base64

    enc = base64.b64encode(data).decode()
    return [f"base64 -d > {path} <<'INKCTL_FILE_END'", *(enc[i:i + 76] for i in range(0, len(enc), 76)), "INKCTL_FILE_END"]


__all__ = ["SlurmOptions", "SlurmJob", "export_slurm", "job_name"]
