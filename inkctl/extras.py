"""The optional packages (``inkctl[plot]``, ``inkctl[k8s]``): one error when one is missing,
with the install command that works where this inkctl is installed.

``pip install 'inkctl[plot]'`` is right for nobody in particular: under pipx the packages go
into pipx's own venv (``pipx inject``), in a virtual environment (bootstrap.sh's .venv) its pip
is the one to use, and plain ``pip`` may be another Python's."""

from __future__ import annotations

import sys

from inkctl.errors import EXIT_FAILED, InkctlError

EXTRAS = {"plot": ["matplotlib"], "k8s": ["kubernetes-validate"]}


def install_command(packages: list[str]) -> str:
    """The command that installs PACKAGES into the Python running inkctl."""
    from shlex import join

    prefix = sys.prefix.replace("\\", "/")
    if "/pipx/venvs/" in prefix:
        return join(["pipx", "inject", prefix.rstrip("/").rsplit("/", 1)[-1], *packages])
    return join([sys.executable, "-m", "pip", "install", *packages])


def missing(extra: str, what: str, module: str) -> InkctlError:
    """WHAT needs the optional package MODULE (of EXTRA), which is not installed."""
    return InkctlError(f"{what} needs {module}, which is not installed", exit_code=EXIT_FAILED,
                       hint=f"install it: {install_command(EXTRAS[extra])}")
