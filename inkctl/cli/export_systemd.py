"""``inkctl export systemd RECIPE``: a unit that keeps ``inkctl watch --restart`` running on a
management machine (not on the GPU hosts: it must outlive any one of them).

The unit runs the same recipe and inventory by absolute path, restarts the watcher itself if it
dies, and leaves the deployment alone when stopped (``watch`` detaches on SIGTERM/SIGINT).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.options import HostsOpt, RecipeArg, SetOpt

CREDENTIALS = "@INKCTL_CREDENTIALS_DIRECTORY@"  # becomes systemd's %d after the ExecStart is escaped


def unit_text(recipe: Path, hosts: Optional[Path], sets: list[str], *, python: str, user: Optional[str],
              deployment: str, max_restarts: int, secrets: Optional[dict] = None) -> str:
    """RECIPE and HOSTS are absolute paths. Each secret reaches the watcher (and the ``up`` of a
    restart) the way the recipe reads it: an env var from an EnvironmentFile, a file as a
    systemd credential (LoadCredential), read from $CREDENTIALS_DIRECTORY through --set."""
    from inkctl.plan.quote import command_line

    argv = [python, "-m", "inkctl", "watch", str(recipe), "--restart",
            "--max-restarts-per-hour", str(max_restarts), "-o", "json"]
    if hosts:
        argv += ["--hosts", str(hosts)]
    for s in sets:
        argv += ["--set", s]
    secret_lines: list[str] = []
    env_names = [n for n, src in (secrets or {}).items() if src.env]
    if env_names:
        env_file = f"/etc/inkctl/{deployment}.env"
        for n in env_names:
            var = (secrets or {})[n].env
            secret_lines.append(f"# secret {n}: the line {var}=... in {env_file} (mode 0600)")
        secret_lines.append(f"EnvironmentFile={env_file}")
    for name, src in (secrets or {}).items():
        if src.file and not src.env:
            path = Path(src.file).expanduser()
            secret_lines += [f"# {name}: the file {src.file}, handed over as a credential",
                             f"LoadCredential={name}:{_systemd_literal(str(path))}"]
            argv += ["--set", f"secrets.{name}={{file: {CREDENTIALS}/{name}}}"]
    lines = [
        "[Unit]",
        f"Description=inkctl: supervise {deployment} and restart it on failure",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        *secret_lines,
        # systemd splits ExecStart like a shell does (quotes, no expansion of $ without braces): one quoting function
        f"ExecStart={_systemd_literal(command_line(argv)).replace(CREDENTIALS, '%d')}",
        f"WorkingDirectory={_systemd_literal(str(recipe.parent))}",
        "Restart=on-failure",
        "RestartSec=30",
        "# exit 2: the recipe, a secret or a flag is wrong; restarting changes nothing",
        "RestartPreventExitStatus=2",
        "KillSignal=SIGINT",
        "TimeoutStopSec=30",
    ]
    if user:
        lines.append(f"User={user}")
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def _systemd_literal(text: str) -> str:
    """systemd expands %specifiers and $VARIABLES in ExecStart even inside quotes: double them."""
    return text.replace("%", "%%").replace("$", "$$")


def systemd(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    output: Optional[Path] = typer.Option(None, "--out", help="Write the unit to FILE instead of stdout."),
    user: Optional[str] = typer.Option(None, "--user", help="Run the watcher as this user (its ~/.ssh holds the keys)."),
    max_restarts_per_hour: int = typer.Option(3, "--max-restarts-per-hour", min=1),
) -> None:
    """A systemd unit running `inkctl watch --restart` for this deployment on a management machine."""
    from inkctl.cli.options import load_target

    loaded, plan, _ = load_target(recipe, hosts, set_, "export systemd")
    text = unit_text(loaded.path.resolve(), hosts.resolve() if hosts else None, list(set_ or []),
                     python=sys.executable, user=user, deployment=plan.deployment, max_restarts=max_restarts_per_hour,
                     secrets=dict(loaded.recipe.secrets))
    if output:
        output.write_text(text)
        unit = f"inkctl-{plan.deployment}"
        # one command per line: each fits a terminal and copies on its own
        print(f"wrote {output}\n\nnext: install and start it (as root):\n"
              f"  cp {output} /etc/systemd/system/{unit}.service\n"
              f"  systemctl daemon-reload\n"
              f"  systemctl enable --now {unit}", file=sys.stderr)
    else:
        sys.stdout.write(text)
