"""``smoke``, ``bench`` and ``results``: prove a running server answers right, measure it, compare.

Each command works against a deployment (RECIPE --hosts FILE: the URL, model and checks come
from the plan) or against any OpenAI-compatible server (--url URL --model NAME).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import AcceptOpt, HostsOpt, OutputOpt, SetOpt, output_format
from inkctl.errors import InkctlError, UsageError

UrlOpt = typer.Option(None, "--url", help="Base URL of an OpenAI-compatible server (http://host:port), instead of a deployment.")
ModelOpt = typer.Option(None, "--model", help="Model name to request (default: the recipe's served name; with --url alone, the one model the server lists).")
ApiKeyEnvOpt = typer.Option(None, "--api-key-env", help="Name of an environment variable holding the server's API key.")
ResultsDirOpt = typer.Option(Path("bench-results"), "--results-dir", help="Where runs are saved and read.")
CHAT = "/v1/chat/completions"
DEFAULT_CONCURRENCY = "1,2,4,8,16,32,64"


class Where:
    """The server to talk to and what the recipe (if any) says about it."""

    def __init__(self, base_url: str, model: str, loaded=None, plan=None, fleet: dict | None = None):
        self.base_url, self.model, self.loaded, self.plan = base_url.rstrip("/"), model, loaded, plan
        self.fleet = fleet  # a fleet's router: replicas, router kind, policy


def _where(recipe: Optional[Path], hosts: Optional[Path], set_, url: Optional[str], model: Optional[str],
           command: str, api_key: Optional[str] = None) -> Where:
    if recipe is None and url is None:
        raise UsageError(f"{command} needs a RECIPE (with --hosts) or --url URL --model NAME")
    loaded = plan = None
    base = None
    fleet_info = None
    if recipe is not None and url is not None and hosts is None:
        # a recipe for its checks and model, the server at --url (a port-forward, a proxy): no hosts
        from inkctl.cli.options import overrides
        from inkctl.recipe.source import load_recipe
        from inkctl.scrub import arm_for

        loaded = load_recipe(recipe, overrides(set_))
        arm_for(loaded.recipe)
    elif recipe is not None:
        from inkctl.cli.options import load_target

        from inkctl.recipe.source import load_recipe

        from inkctl.cli.options import overrides

        if load_recipe(recipe, overrides(set_), hosts).recipe.fleet is not None:
            # a fleet is measured through its router; provenance comes from replica 0
            from inkctl.api.fleet import load_fleet
            from inkctl.api.target import Target
            from inkctl.execute.deploy.fleet import replica_loaded

            loaded, fleet = load_fleet(Target.of(recipe, hosts, set_), command)
            rep = fleet.replicas[0]
            loaded, plan, base = replica_loaded(loaded, rep), rep.plan, fleet.url
            r = fleet.router_spec
            fleet_info = {"replicas": len(fleet.replicas), "router": r.kind, "policy": r.policy_name, "url": fleet.url}
        else:
            loaded, plan, _ = load_target(recipe, hosts, set_, command)
        from inkctl.plan.step import WaitHealth

        health = next((s for s in plan.steps() if isinstance(s, WaitHealth)), None)
        if base is None and health is not None and health.answer_url:
            base = health.answer_url[: -len(CHAT)] if health.answer_url.endswith(CHAT) else health.answer_url
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--url {url!r}: give a base URL such as http://10.0.0.5:8000")
        base = url.rstrip("/")
        for suffix in (CHAT, "/v1/completions", "/v1"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
    if base is None:
        raise UsageError(f"{command}: the plan has no server URL; pass --url")
    name = model or (loaded.recipe.model.name if loaded else None)
    if not name:
        from inkctl.client.models import the_one_model

        name = the_one_model(base, command, api_key)
    return Where(base, name, loaded, plan, fleet_info)


# smoke and bench: a running deployment's recipe, or none with --url
RunningRecipeArg = typer.Argument(None, metavar="[RECIPE]", help="The recipe of a running deployment: a file or a bundled recipe's name (with --url: no --hosts needed).")

def _api_key(env: Optional[str]) -> Optional[str]:
    if env is None:
        return None
    import os

    value = os.environ.get(env)
    if not value:
        raise UsageError(f"--api-key-env {env}: that environment variable is not set")
    return value


# ---------------------------------------------------------------------------------- smoke

@app.command()
def smoke(
    recipe: Optional[Path] = RunningRecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    url: Optional[str] = UrlOpt,
    model: Optional[str] = ModelOpt,
    prompt: Optional[List[str]] = typer.Option(None, "--prompt", help="Check this prompt instead of the recipe's (repeatable)."),
    expect: Optional[str] = typer.Option(None, "--expect", help="With --prompt: the answer must contain this text."),
    reasoning: bool = typer.Option(False, "--reasoning", help="Also check reasoning comes back in its own field (default with a recipe: its capabilities)."),
    tools: bool = typer.Option(False, "--tools", help="Also check a tool call comes back with JSON arguments (default with a recipe: its capabilities)."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds allowed per check."),
    api_key_env: Optional[str] = ApiKeyEnvOpt,
    output: str = OutputOpt,
) -> None:
    """Send the smoke checks to a running server and judge the answers (exit 1 when any fails)."""
    fmt = output_format(output)
    where = _where(recipe, hosts, set_, url, model, "smoke", _api_key(api_key_env))
    checks = _checks(where, prompt, expect, reasoning, tools)
    from inkctl.execute.deploy.smoke import failure_message
    from inkctl.smoke.run import run_checks

    results = run_checks(where.base_url + CHAT, where.model, checks, timeout_s=timeout, api_key=_api_key(api_key_env))
    failed = [r for r in results if not r.ok]
    if fmt == "json":
        from dataclasses import asdict

        print(json.dumps({"url": where.base_url, "model": where.model, "ok": not failed,
                          "checks": [asdict(r) for r in results]}, indent=2))
    else:
        from inkctl.smoke.table import smoke_table

        print(smoke_table(results))
    if failed:
        if fmt == "json":
            raise typer.Exit(1)
        unreachable = all(r.error and r.error.startswith("cannot connect") for r in failed)
        raise InkctlError(failure_message(where.base_url + CHAT, results),
                          hint="nothing answers there: is the server up and the port right (a port-forward still "
                               "running)?" if unreachable else
                               "the server answers, but not right: check the model, its parsers and the engine's log")


def _checks(where: Where, prompts, expect, reasoning: bool, tools: bool):
    from inkctl.plan.smoke import WEATHER_TOOL, SmokeCheck, smoke_checks

    if expect is not None and not prompts:
        raise UsageError("--expect goes with --prompt")
    if prompts:
        checks = [SmokeCheck(prompt=p, contains=expect) for p in prompts]
    elif where.loaded is not None:
        checks = list(smoke_checks(where.loaded.recipe))
    else:
        checks = [SmokeCheck(prompt="What is 17 x 23? Answer with the number.", contains="391")]
    kinds = {c.kind for c in checks}
    if reasoning and "reasoning" not in kinds:
        checks.append(SmokeCheck(prompt="Is 221 a prime number? Think step by step, then answer yes or no.",
                                 kind="reasoning", max_tokens=512))
    if tools and "tools" not in kinds:
        checks.append(SmokeCheck(prompt="What is the weather in Paris right now? Use the tool.", kind="tools",
                                 max_tokens=256, tool=json.dumps(WEATHER_TOOL, sort_keys=True)))
    return checks


# ---------------------------------------------------------------------------------- bench

@app.command()
def bench(
    recipe: Optional[Path] = RunningRecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    url: Optional[str] = UrlOpt,
    model: Optional[str] = ModelOpt,
    api: str = typer.Option("chat", "--api", help="chat (/v1/chat/completions) or completions (/v1/completions)."),
    concurrency: Optional[str] = typer.Option(None, "--concurrency", "-c", help=f"Max concurrency per point, comma-separated: a sweep (default {DEFAULT_CONCURRENCY}; with --request-rate: no cap unless given)."),
    request_rate: Optional[str] = typer.Option(None, "--request-rate", help="Requests/s per point, comma-separated, Poisson arrivals (capped by the first --concurrency when given)."),
    num_prompts: Optional[int] = typer.Option(None, "--num-prompts", "-n", min=1, help="Requests per point (default: 4 x concurrency, at least 16)."),
    duration: Optional[float] = typer.Option(None, "--duration", min=0.1, help="Seconds per point instead of a number of requests."),
    input_len: int = typer.Option(512, "--input-len", min=1, help="Random prompts: input tokens."),
    output_len: int = typer.Option(128, "--output-len", min=1, help="Output tokens per request (max_tokens, ignore_eos)."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="JSONL prompts ({\"prompt\": ...} or {\"messages\": [...]}, optional max_tokens) instead of random ones."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Hugging Face tokenizer for exact input lengths (needs transformers)."),
    goodput: Optional[List[str]] = typer.Option(None, "--goodput", help="SLO NAME:MS for goodput, NAME in ttft, tpot, e2el (repeatable)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds allowed per request."),
    seed: int = typer.Option(0, "--seed", help="Random seed for prompts and arrivals."),
    fmt_: str = typer.Option("vllm", "--format", help="vllm (always written) or llama-benchy (written too)."),
    plot: bool = typer.Option(False, "--plot", help="Also write plot.png (needs matplotlib, the 'plot' extra)."),
    results_dir: Path = ResultsDirOpt,
    api_key_env: Optional[str] = ApiKeyEnvOpt,
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
) -> None:
    """Measure a running server: a sweep of concurrency or request rate, vllm bench serve's metrics."""
    from inkctl.bench import load, report
    from inkctl.bench.metrics import parse_slos

    fmt = output_format(output)
    if api not in ("chat", "completions"):
        raise UsageError(f"--api {api!r}: use chat or completions")
    if fmt_ not in ("vllm", "llama-benchy"):
        raise UsageError(f"--format {fmt_!r}: use vllm or llama-benchy")
    rates = _numbers(request_rate, float, "--request-rate") if request_rate else None
    # a rate sweep is capped only when -c says so; a concurrency sweep has a default
    concurrencies = (_numbers(concurrency, int, "--concurrency") if concurrency is not None
                     else None if rates else _numbers(DEFAULT_CONCURRENCY, int, "--concurrency"))
    slos = parse_slos(goodput or [])
    if plot:
        _require_matplotlib()
    where = _where(recipe, hosts, set_, url, model, "bench", _api_key(api_key_env))
    tok = load.load_tokenizer(tokenizer) if tokenizer else None
    biggest = max(concurrencies) if concurrencies else 1
    n_prompts = num_prompts if num_prompts is not None or duration is not None else max(16, 4 * biggest)
    prompts = (load.file_prompts(dataset, output_len) if dataset else
               load.random_prompts(max(n_prompts or 0, biggest, 16), input_len, output_len, seed, tok))
    target = load.Target(where.base_url, where.model, api=api, api_key=_api_key(api_key_env), timeout_s=timeout)
    provenance = _provenance(where, accept_new_host_keys, tokenizer, results_dir)
    when = report.now()
    run_dir = report.new_run_dir(results_dir, where.model, when)
    saved: list[dict] = []
    names: list[str] = []
    from inkctl.bench.table import point_line, point_header

    if fmt == "text":
        print(f"bench {where.model} at {target.url}")
        print(f"prompts: {'random, ' + str(input_len) + ' tokens in / ' + str(output_len) + ' out' if not dataset else dataset}")
        print(point_header())

    def done(point) -> None:
        data = report.vllm_point(point, model=where.model, api=api, num_prompts_asked=n_prompts, slos_ms=slos or None,
                                 provenance=provenance, when=when)
        name = report.point_name(point)
        report.write_json(run_dir / f"{name}.json", data)
        runlog.event("point", name=name, file=str(run_dir / f"{name}.json"),
                     **{k: data.get(k) for k in ("completed", "failed", "request_throughput", "output_throughput",
                                                 "median_ttft_ms", "median_itl_ms") if k in data})
        saved.append(data)
        names.append(name)
        if fmt == "text":
            print(point_line(data), flush=True)
        if not data["completed"]:
            raise _NothingDone()

    from inkctl import runlog

    runlog.note(results=str(run_dir), url=target.url)
    try:
        points = load.sweep(target, prompts, concurrencies=concurrencies, rates=rates, num_prompts=n_prompts,
                            duration_s=duration, on_point=done, seed=seed)
    except (KeyboardInterrupt, _NothingDone) as e:
        kept = any(p["completed"] for p in saved)
        if kept:  # the points measured so far stay a run
            _write_run(run_dir, when, where, api, input_len, output_len, dataset, slos, names, provenance)
        else:
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)  # nothing measured: no run to list
        if isinstance(e, KeyboardInterrupt):
            raise
        raise InkctlError(_nothing_done(saved[-1], target.url) + (f" (saved {run_dir}: the points before)" if kept else ""),
                          hint="check --url and --model (inkctl smoke --url URL says what the server answers)") from None
    _write_run(run_dir, when, where, api, input_len, output_len, dataset, slos, names, provenance)
    extra = []
    if fmt_ == "llama-benchy":
        report.write_json(run_dir / "llama-benchy.json", report.llama_benchy(
            points, model=where.model, prompt_size=input_len, response_size=output_len, when=when))
        extra.append("llama-benchy.json")
    if plot:
        from inkctl.bench.plot import plot_run

        plot_run(saved, f"{where.model} ({run_dir.name})", run_dir / "plot.png")
        extra.append("plot.png")
    if fmt == "json":
        print(json.dumps({"run": run_dir.name, "path": str(run_dir), "points": saved}, indent=2))
    else:
        from inkctl.cli.render import relative

        print(f"saved {relative(str(run_dir.resolve()))} ({len(names)} point file(s)"
              f"{', ' + ', '.join(extra) if extra else ''})")
    failed = sum(p["failed"] for p in saved)
    if failed and fmt == "text":
        print(f"{failed} request(s) failed; each point file counts the reasons (inkctl.errors)")


class _NothingDone(Exception):
    """A point completed no request: the server will not answer the next one either."""


def _nothing_done(point: dict, url: str) -> str:
    errors = point.get("inkctl", {}).get("errors") or {}
    why = "; ".join(f"{n} x {e}" for e, n in sorted(errors.items(), key=lambda kv: -kv[1])[:3]) or "no answer"
    return f"no request completed against {url}: {why}"


def _write_run(run_dir: Path, when, where: Where, api: str, input_len: int, output_len: int, dataset, slos,
               names: list[str], provenance: dict) -> None:
    from inkctl.bench import report

    report.write_json(run_dir / "run.json", {
        "date": when.isoformat(timespec="seconds"), "model": where.model, "url": where.base_url, "api": api,
        "input_len": None if dataset else input_len, "output_len": output_len,
        "dataset": str(dataset) if dataset else None, "goodput_slos_ms": slos, "points": names, "provenance": provenance})


def _numbers(text: str, kind, flag: str) -> list:
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected comma-separated numbers, e.g. 1,2,4,8")
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{flag} {text!r}: expected positive numbers")
    return values


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from inkctl.extras import missing

        raise missing("plot", "--plot", "matplotlib") from None


def _provenance(where: Where, accept_new: bool, tokenizer: Optional[str], results_dir: Optional[Path] = None) -> dict:
    prov: dict = {"url": where.base_url, "tokenizer": tokenizer}
    if where.fleet:
        prov["fleet"] = where.fleet  # through the router: how many replicas, which policy
    if where.loaded is None:
        return prov
    if where.plan is None:  # a recipe and --url, no hosts to ask: what the recipe says
        from inkctl.plan.identity import recipe_hash

        prov["recipe"] = {"name": where.loaded.recipe.name, "hash": recipe_hash(where.loaded.recipe)}
        return prov
    from inkctl.bench.provenance import deployment_provenance

    prov.update(deployment_provenance(where.loaded, where.plan, accept_new=accept_new))
    if results_dir is not None:  # how the deployment measured booted: its latest boot record (inkctl up)
        from inkctl.bench import boots

        last = boots.previous(results_dir, where.plan.deployment)
        prov["boot"] = {"id": last[0], **last[1]} if last else None
    return prov


# ---------------------------------------------------------------------------------- results

def _boots(results_dir: Path, refs: list[str], fmt: str) -> None:
    from inkctl.bench import boots
    from inkctl.cli.boottable import boot_compare, boot_table

    if not refs:
        listing = boots.list_boots(results_dir)
        if fmt == "json":
            print(json.dumps(listing, indent=2))
        elif not listing:
            print(f"no boot records under {results_dir / boots.SUBDIR} (inkctl up saves one per boot)")
        else:
            for b in listing:
                print(b["id"])
        return
    loaded = [boots.load(results_dir, r) for r in refs]
    if fmt == "json":
        print(json.dumps({i: rec for i, rec in loaded} if len(loaded) == 2 else loaded[0][1], indent=2))
    elif len(loaded) == 1:
        print(loaded[0][0])
        print(boot_table(loaded[0][1]))
    else:
        print(boot_compare(loaded[0][0], loaded[0][1], loaded[1][0], loaded[1][1]))


@app.command()
def results(
    runs: Optional[List[str]] = typer.Argument(None, help="No run: list them. One run: show it. Two runs: compare them (B against A)."),
    recipe: Optional[Path] = typer.Option(None, "--recipe", help="Compare the run with the results: this recipe records."),
    plot: bool = typer.Option(False, "--plot", help="Write plot.png into the run's directory (needs matplotlib)."),
    boots: bool = typer.Option(False, "--boots", help="Boot records (saved by up) instead of bench runs: none to list, one to show its phases, two to compare."),
    results_dir: Path = ResultsDirOpt,
    output: str = OutputOpt,
) -> None:
    """List saved bench runs, show one, compare two (delta % per metric), or compare one with a recipe.
    With --boots: the same for the boot records up saves (where each boot's time went)."""
    from inkctl.bench import compare, report
    from inkctl.bench.table import compare_table, point_header, point_line, recipe_table, runs_table

    fmt = output_format(output)
    runs = list(runs or [])
    if len(runs) > 2:
        raise UsageError("results takes at most two runs")
    if boots:
        if recipe or plot:
            raise UsageError("--recipe and --plot are for bench runs, not --boots")
        _boots(results_dir, runs, fmt)
        return
    if not runs:
        if recipe or plot:
            raise UsageError("--recipe and --plot need a run")
        listing = report.list_runs(results_dir)
        print(json.dumps(listing, indent=2) if fmt == "json" else runs_table(listing, results_dir))
        return
    d, meta, points = report.load_run(results_dir, runs[0])
    if len(runs) == 2:
        d2, _, points2 = report.load_run(results_dir, runs[1])
        rows = compare.compare_runs(points, points2)
        if not rows:
            raise InkctlError(f"{d.name} and {d2.name} have no point in common (same max concurrency or rate)")
        print(json.dumps({"a": d.name, "b": d2.name, "rows": rows}, indent=2) if fmt == "json"
              else compare_table(rows, d.name, d2.name))
        return
    if recipe is not None:
        from inkctl.recipe.source import load_recipe

        r = load_recipe(recipe).recipe
        measured = r.results
        if not measured:
            raise InkctlError(f"{recipe}: the recipe records no results: to compare with")
        rows = compare.compare_recipe(measured, points)
        served = {r.model.name, r.model.repo}
        other = meta.get("model") not in served
        if other and fmt == "text":
            from inkctl.cli.render import plain

            plain(stderr=True).print(f"note: {d.name} measured {meta.get('model')}; the recipe serves "
                                     f"{r.model.name}: the numbers below compare two models", markup=False)
        print(json.dumps({"run": d.name, "recipe": str(recipe), "run_model": meta.get("model"),
                          "recipe_model": r.model.name, "same_model": not other, "rows": rows}, indent=2)
              if fmt == "json" else recipe_table(rows, d.name))
        return
    if plot:
        from inkctl.bench.plot import plot_run

        path = plot_run(points, f"{meta.get('model')} ({d.name})", d / "plot.png")
        print(f"wrote {path}")
        return
    if fmt == "json":
        print(json.dumps({"run": d.name, **meta, "results": points}, indent=2))
    else:
        print(f"{d.name}: {meta.get('model')} at {meta.get('url')}")
        print(point_header())
        for p in points:
            print(point_line(p))
        boot = (meta.get("provenance") or {}).get("boot")
        if boot:  # how the deployment it measured had booted (up's latest boot record then)
            from inkctl.cli.boottable import boot_table

            print(f"booted as {boot.get('id')}:")
            print(boot_table(boot))
