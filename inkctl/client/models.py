"""What a server serves: ``GET /v1/models``, for ``--url`` without ``--model``."""

from __future__ import annotations

from inkctl.errors import InkctlError, UsageError


def served_models(base_url: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> list[str]:
    """The ids ``GET BASE/v1/models`` lists; an error saying what came back otherwise."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = base_url + "/v1/models"
    try:
        r = httpx.get(url, headers=headers, timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as e:
        raise InkctlError(f"nothing answers at {base_url}: {type(e).__name__}: {e}",
                          hint="is the server up and the port right (a port-forward still running)?") from None
    if r.status_code != 200:
        raise InkctlError(f"GET {url}: HTTP {r.status_code}", hint="pass --model NAME (the name the server serves)")
    try:
        return [m["id"] for m in r.json().get("data", []) if isinstance(m, dict) and "id" in m]
    except (ValueError, AttributeError):
        raise InkctlError(f"GET {url}: not an OpenAI model list", hint="pass --model NAME") from None


def the_one_model(base_url: str, command: str, api_key: str | None = None) -> str:
    models = served_models(base_url, api_key=api_key)
    if len(models) == 1:
        return models[0]
    listed = ", ".join(models[:5]) if models else "none"
    raise UsageError(f"{command} --url needs --model NAME: {base_url} serves {len(models)} models ({listed})")
