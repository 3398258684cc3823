"""Before a command that starts containers touches a host: the secrets its plans need, read on
this machine, and the scrubber armed with their values in front of everything it says."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inkctl.execute.events import ScrubbingSink, Sink
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded
    from inkctl.scrub import Scrubber
    from inkctl.secret import Secret


@dataclass
class Secured:
    secrets: dict[str, Secret]  # name -> value, for the hosts' env files
    scrub: Scrubber  # armed with those values
    sink: ScrubbingSink  # the display, behind the scrubber and the run's record


def secure(loaded: Loaded, secrets: dict[str, Secret], display: Callable[[], Sink]) -> Secured:
    """The scrubber armed with ``secrets`` (``secrets_for``: read before any connection), the
    display behind it (``display()`` is called once it is armed: every event it receives is
    scrubbed and recorded in the run's record) and the recipe's warnings sent to it."""
    from inkctl import runlog
    from inkctl.execute.events import Info, ScrubbingSink
    from inkctl.scrub import arm
    from inkctl.secret import secret_values

    scrub = arm(secret_values(secrets))
    sink = ScrubbingSink(runlog.recording(display()), scrub)
    for w in loaded.warnings:
        sink.emit(Info(text=f"{w.location}: {w.path + ': ' if w.path else ''}{w.message}", level="warning"))
    return Secured(secrets, scrub, sink)


def secrets_for(loaded: Loaded, plans: Iterable[Plan]) -> dict[str, Secret]:
    """name -> value of every secret an env file of ``plans`` names (in the order they name
    them), read on this machine from ``loaded``'s secrets section: a missing one fails here,
    before any connection, and nothing is started; every one is reported at once (exit 2)."""
    from inkctl.plan.step import EnvFile
    from inkctl.secret import resolve_secrets

    plans = list(plans)
    needed = [n for p in plans for s in p.puts() if isinstance(s.content, EnvFile) for n in s.content.secret_names]
    needed += [k for p in plans for s in p.steps() if (k := getattr(s, "api_key", None))]  # requests carry it
    return resolve_secrets(loaded.recipe.secrets, needed, bearer=loaded.recipe.api_key)
