"""Options shared by several commands, declared once."""

from __future__ import annotations

from typing import List, Optional

import typer

from inkctl.cli.common.values import output_format as output_format
from inkctl.cli.common.values import overrides as overrides
from inkctl import runtimes

HostsOpt = typer.Option(None, "--hosts", metavar="FILE", help="Inventory file (YAML with a list 'hosts:'); wins over hosts in the recipe.")
SetOpt = typer.Option(None, "--set", metavar="KEY=VALUE", help=(
    "Override a recipe field: dotted.path=value (repeatable). Where the field is a string the value is "
    "taken as written (env values also take numbers and true/false, as text); elsewhere it is read as "
    "YAML: 8001, true, null, [a, b], {k: v}."))
OutputOpt = typer.Option("text", "--output", "-o", help="text or json.")


AcceptOpt = typer.Option(False, "--accept-new-host-keys",
                         help="Trust hosts whose key is not in known_hosts yet (and record it there). A changed key is always refused.")


def accepted(host: str, name: str, key_type: str, fp: str) -> None:
    """What a command that reads hosts (doctor, status, logs) says on stderr when
    --accept-new-host-keys trusted a new key."""
    import sys

    print(f"trusted the new host key of {host}: {key_type} {fp} (added {name} to known_hosts)", file=sys.stderr)


def load_target(recipe, hosts, set_: Optional[List[str]], command: str):
    """What every command that touches hosts starts with: the recipe, its hosts, its plan
    (``inkctl.api.target.load_target``). Returns (loaded, plan, image) where image is the built
    image the plan runs, if any."""
    from inkctl.api.target import Target
    from inkctl.api.target import load_target as api_load_target

    return api_load_target(Target.of(recipe, hosts, set_), command)


RecipeArg = typer.Argument(..., metavar="RECIPE", show_default=False,
                           help="A recipe file, or the name of a bundled recipe (see inkctl recipes).")


# supervision: watch and up --watch
RestartOpt = typer.Option(False, "--restart", help="On a failure take the whole deployment down and bring it up again.")
HookOpt = typer.Option(None, "--hook", help="Command run on each failure (argv, split like a shell would, never run by one); the event is in $INKCTL_EVENT as JSON.")
StuckAfterOpt = typer.Option(300.0, "--stuck-after", min=0, help="Seconds with requests waiting (or running) and no token generated, read from the head's /metrics, before the engine counts as stuck: a failure like a crashed rank (0: not checked).")
IntervalOpt = typer.Option(2.0, "--interval", min=0.2, help="Seconds between checks of every rank, host and the health endpoint.")
MaxRestartsOpt = typer.Option(3, "--max-restarts-per-hour", min=1, help="With --restart: give up after this many restarts in an hour.")
BackoffOpt = typer.Option(5.0, "--backoff", min=0.0, help="With --restart: seconds before the first restart (doubling each time, up to 300).")
SocketFallbackOpt = typer.Option(False, "--allow-socket-fallback", help="With network.rdma: NCCL falling back to TCP sockets is a warning, not a failure (for the up of a restart).")


# Slurm: `export slurm` and `up --slurm` (and the Slurm side of down/status/logs/watch)
PartitionOpt = typer.Option(None, "--partition", "-p", help="Slurm partition (#SBATCH --partition; default: Slurm's default).")
AccountOpt = typer.Option(None, "--account", "-A", help="Slurm account to charge (#SBATCH --account).")
TimeOpt = typer.Option(None, "--time", "-t", help="Time limit, e.g. 4:00:00 or 2-00:00 (#SBATCH --time).")
GpusOpt = typer.Option(None, "--gpus-per-node", min=0, help="GPUs to ask per node (GRES). Default: hardware.gpus_per_host; 0: ask for none.")
_ON_NODE, _IN_TASK = runtimes.names(), runtimes.in_task_names()


def _one_of(words) -> str:
    return ", ".join(words[:-1]) + f" or {words[-1]}"


ContainerOpt = typer.Option(None, "--container", metavar="|".join((*_ON_NODE, *_IN_TASK)), help=(
    f"How ranks start their container: {_one_of(_ON_NODE)} on the node (default: the recipe's container.runtime), "
    "pyxis (srun --container-image) or apptainer."))
JobDirOpt = typer.Option(None, "--job-dir", help="A directory every node shares, for the job's files (hotfixes, env files, output). Default: the directory sbatch runs in.")

def slurm_container(value: Optional[str], set_: Optional[List[str]], recipe) -> tuple[str, list[str]]:
    """``--container`` -> (the script's container mode, the --set overrides): ``api.slurm``'s."""
    from inkctl.api.slurm import container_mode

    return container_mode(value, overrides(set_), recipe)
