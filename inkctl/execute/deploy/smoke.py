"""Smoke checks as a plan step: prove the healthy server answers right, and measure how fast.

The checks (prompts with expected answers, capability checks) come from the plan; sending and
judging them lives in ``inkctl.smoke``, shared with the ``inkctl smoke`` command.
"""

from __future__ import annotations

from inkctl.errors import InkctlError
from inkctl.smoke.result import SmokeResult
from inkctl.plan.step import Smoke


class SmokeFailed(InkctlError):
    pass


def failure_message(url: str, results) -> str:
    bad = [r for r in results if not r.ok]
    lines = "\n".join(f"  {r.prompt!r}: {r.error}" for r in bad)
    return f"{len(bad)} of {len(results)} smoke check(s) failed at {url}:\n{lines}"


class Unguarded(InkctlError):
    pass


def check_guarded(url: str, model: str) -> str:
    """A completion without the API key must get 401; what to say when it does."""
    from inkctl.smoke.guard import status_without_key

    status, error = status_without_key(url, model)
    if status != 401:
        got = f"HTTP {status}" if status is not None else f"no answer ({error})"
        raise Unguarded(f"{url}: a request without the API key got {got}, not 401: the endpoint is not guarded",
                        hint="the engine did not take the key: check the engine's log for its API key setting, "
                             "and that nothing in engine.args.extra or container.env overrides it")
    return f"api key: a request without it gets 401 at {url}"


def run_smoke(step: Smoke, api_key: str | None = None) -> tuple[SmokeResult, ...]:
    from inkctl.smoke.run import run_checks

    results = tuple(run_checks(step.url, step.model, step.checks, timeout_s=step.timeout_s, api_key=api_key))
    if any(not r.ok for r in results):
        raise SmokeFailed(failure_message(step.url, results),
                          hint="the server is healthy but its answers are wrong; check the model, its parsers "
                               "(reasoning, tool calls) and the engine's log")
    return results
