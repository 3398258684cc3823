"""``smoke`` below the command line: the checks (the recipe's, the prompts given, a default),
sent to a running server (``api/measure/serving.py`` says which) and judged (``inkctl.smoke``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from inkctl.api.measure.serving import CHAT, Where
from inkctl.errors import InkctlError, UsageError

if TYPE_CHECKING:
    from inkctl.plan.smoke import SmokeCheck
    from inkctl.smoke.result import SmokeResult


@dataclass(frozen=True)
class Ask:
    """What to check besides (or instead of) the recipe's checks."""

    prompts: tuple[str, ...] = ()
    expect: Optional[str] = None  # with prompts: the answer must contain this
    reasoning: bool = False  # also check reasoning comes back in its own field
    tools: bool = False  # also check a tool call comes back with JSON arguments


@dataclass
class Checked:
    url: str  # the chat completions URL asked
    results: list[SmokeResult] = field(default_factory=list)

    @property
    def failed(self) -> list[SmokeResult]:
        return [r for r in self.results if not r.ok]

    def failure(self) -> InkctlError | None:
        """The error to end with when a check failed (None: all passed)."""
        from inkctl.execute.deploy.smoke import failure_message

        failed = self.failed
        if not failed:
            return None
        unreachable = all(r.error and r.error.startswith("cannot connect") for r in failed)
        return InkctlError(failure_message(self.url, self.results),
                           hint="nothing answers there: is the server up and the port right (a port-forward still "
                                "running)?" if unreachable else
                                "the server answers, but not right: check the model, its parsers and the engine's log")


def smoke(where: Where, ask: Ask, *, timeout_s: float, api_key: Optional[str] = None) -> Checked:
    """Send the checks to ``where`` and judge the answers; never raises for what the server
    answers (``Checked.failure``)."""
    from inkctl.smoke.run import run_checks

    checks = checks_for(where, ask)
    url = where.base_url + CHAT
    return Checked(url, run_checks(url, where.model, checks, timeout_s=timeout_s, api_key=api_key or where.api_key))


def checks_for(where: Where, ask: Ask) -> list[SmokeCheck]:
    from inkctl.plan.smoke import SmokeCheck, smoke_checks

    if ask.expect is not None and not ask.prompts:
        raise UsageError("--expect goes with --prompt")
    if ask.prompts:
        checks = [SmokeCheck(prompt=p, contains=ask.expect) for p in ask.prompts]
    elif where.loaded is not None:
        checks = list(smoke_checks(where.loaded.recipe))
    else:
        checks = [SmokeCheck(prompt="What is 17 x 23? Answer with the number.", contains="391")]
    return checks + _capabilities(ask, {c.kind for c in checks})


def _capabilities(ask: Ask, kinds: set[str]) -> list[SmokeCheck]:
    from inkctl.plan.smoke import WEATHER_TOOL, SmokeCheck

    extra = []
    if ask.reasoning and "reasoning" not in kinds:
        extra.append(SmokeCheck(prompt="Is 221 a prime number? Think step by step, then answer yes or no.",
                                kind="reasoning", max_tokens=512))
    if ask.tools and "tools" not in kinds:
        extra.append(SmokeCheck(prompt="What is the weather in Paris right now? Use the tool.", kind="tools",
                                max_tokens=256, tool=json.dumps(WEATHER_TOOL, sort_keys=True)))
    return extra
