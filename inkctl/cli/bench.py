"""``smoke``, ``bench`` and ``results``: prove a running server answers right, measure it, compare.

Each command works against a deployment (RECIPE --hosts FILE: the URL, model and checks come
from the plan) or against any OpenAI-compatible server (--url URL --model NAME).

Thin: ``inkctl.api.measure.serving`` finds the server, ``api.smoke`` checks it, ``api.bench`` runs the
sweep and saves the run, ``api.results`` reads runs back; these functions check the flags,
call them and print (``cli/show/benchtable.py``, ``cli/show/smoketable.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import AcceptOpt, HostsOpt, OutputOpt, SetOpt, output_format
from inkctl.errors import UsageError

UrlOpt = typer.Option(None, "--url", help="Base URL of an OpenAI-compatible server (http://host:port), instead of a deployment.")
ModelOpt = typer.Option(None, "--model", help="Model name to request (default: the recipe's served name; with --url alone, the one model the server lists).")
ApiKeyEnvOpt = typer.Option(None, "--api-key-env", help="Name of an environment variable holding the server's API key.")
ResultsDirOpt = typer.Option(Path("bench-results"), "--results-dir", help="Where runs are saved and read.")
DEFAULT_CONCURRENCY = "1,2,4,8,16,32,64"


def _where(recipe: Optional[Path], hosts: Optional[Path], set_, url: Optional[str], model: Optional[str],
           command: str, api_key: Optional[str] = None):
    """The server to talk to (``inkctl.api.measure.serving.where``: a fleet through its router)."""
    from inkctl.api.measure.serving import where
    from inkctl.api.target import Target

    target = Target.of(recipe, hosts, set_) if recipe is not None else None
    return where(target, url, model, command, api_key)


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
    from inkctl.api.measure.smoke import Ask
    from inkctl.api.measure.smoke import smoke as api_smoke

    fmt = output_format(output)
    where = _where(recipe, hosts, set_, url, model, "smoke", _api_key(api_key_env))
    ask = Ask(prompts=tuple(prompt or ()), expect=expect, reasoning=reasoning, tools=tools)
    checked = api_smoke(where, ask, timeout_s=timeout, api_key=_api_key(api_key_env))
    if fmt == "json":
        from dataclasses import asdict

        print(json.dumps({"url": where.base_url, "model": where.model, "ok": not checked.failed,
                          "checks": [asdict(r) for r in checked.results]}, indent=2))
    else:
        from inkctl.cli.show.smoketable import smoke_table

        print(smoke_table(checked.results))
    failure = checked.failure()
    if failure is not None:
        if fmt == "json":
            raise typer.Exit(1)
        raise failure


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
    from inkctl.api.measure import bench as api_bench

    fmt = output_format(output)
    if api not in ("chat", "completions"):
        raise UsageError(f"--api {api!r}: use chat or completions")
    if fmt_ not in ("vllm", "llama-benchy"):
        raise UsageError(f"--format {fmt_!r}: use vllm or llama-benchy")
    rates = _numbers(request_rate, float, "--request-rate") if request_rate else None
    opts = api_bench.options(
        goodput or [], plot, concurrencies=_concurrencies(concurrency, rates), rates=rates, api=api,
        num_prompts=num_prompts, duration=duration, input_len=input_len, output_len=output_len, dataset=dataset,
        tokenizer=tokenizer, timeout=timeout, seed=seed, llama_benchy=fmt_ == "llama-benchy",
        results_dir=results_dir, accept_new=accept_new_host_keys)
    where = _where(recipe, hosts, set_, url, model, "bench", _api_key(api_key_env))
    run = api_bench.prepare(where, opts, _api_key(api_key_env))
    from inkctl.cli.show.benchtable import point_header, point_line

    slo = bool(goodput)
    if fmt == "text":
        print(f"bench {where.model} at {run.url}")
        print(f"prompts: {'random, ' + str(input_len) + ' tokens in / ' + str(output_len) + ' out' if not dataset else dataset}")
        print(point_header(slo))
    progress = _Progress(run.n_prompts) if fmt == "text" else None
    measured = run.measure(lambda data: _point(progress, point_line(data, slo)) if fmt == "text" else None,
                           on_request=progress)
    _say_measured(measured, fmt)


class _Progress:
    """Progress inside a point, on a terminal's stderr only: one line rewritten in place, at most
    every half second, cleared before the point's row prints."""

    def __init__(self, total: Optional[int]):
        import sys

        from inkctl.cli.show.terminal import _isatty

        self.total, self.on = total, _isatty(sys.stderr)
        self.last = 0.0
        self.shown = False

    def __call__(self, conc, rate, done: int, failed: int) -> None:
        import sys
        import time

        if not self.on or time.monotonic() - self.last < 0.5:
            return
        from inkctl.cli.show.benchtable import progress_text

        self.last = time.monotonic()
        sys.stderr.write("\r" + progress_text(conc, rate, done, failed, self.total) + "\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            import sys

            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def _point(progress: Optional[_Progress], line: str) -> None:
    if progress is not None:
        progress.clear()
    print(line, flush=True)


def _concurrencies(concurrency: Optional[str], rates) -> Optional[list]:
    """A rate sweep is capped only when -c says so; a concurrency sweep has a default."""
    if concurrency is not None:
        return _numbers(concurrency, int, "--concurrency")
    return None if rates else _numbers(DEFAULT_CONCURRENCY, int, "--concurrency")


def _say_measured(measured, fmt: str) -> None:
    run_dir, extra = measured.run_dir, measured.extra
    if fmt == "json":
        print(json.dumps({"run": run_dir.name, "path": str(run_dir), "points": measured.points}, indent=2))
    else:
        from inkctl.cli.show.terminal import relative

        print(f"saved {relative(str(run_dir.resolve()))} ({len(measured.names)} point file(s)"
              f"{', ' + ', '.join(extra) if extra else ''})")
    failed = measured.failed
    if failed and fmt == "text":
        print(f"{failed} request(s) failed; each point file counts the reasons (inkctl.errors)")


def _numbers(text: str, kind, flag: str) -> list:
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected comma-separated numbers, e.g. 1,2,4,8")
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{flag} {text!r}: expected positive numbers")
    return values


# ---------------------------------------------------------------------------------- results

def _boots(results_dir: Path, refs: list[str], fmt: str) -> None:
    from inkctl.api.measure import results as api_results
    from inkctl.cli.show.boottable import boot_compare, boot_table

    if not refs:
        _list_boots(results_dir, fmt)
        return
    loaded = api_results.load_boots(results_dir, refs)
    if fmt == "json":
        print(json.dumps({i: rec for i, rec in loaded} if len(loaded) == 2 else loaded[0][1], indent=2))
    elif len(loaded) == 1:
        print(loaded[0][0])
        print(boot_table(loaded[0][1]))
    else:
        print(boot_compare(loaded[0][0], loaded[0][1], loaded[1][0], loaded[1][1]))


def _list_boots(results_dir: Path, fmt: str) -> None:
    from inkctl.api.measure import results as api_results

    listing = api_results.list_boots(results_dir)
    if fmt == "json":
        print(json.dumps(listing, indent=2))
    elif not listing:
        print(f"no boot records under {api_results.boots_dir(results_dir)} (inkctl up saves one per boot)")
    else:
        for b in listing:
            print(b["id"])


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
    fmt = output_format(output)
    runs = list(runs or [])
    if len(runs) > 2:
        raise UsageError("results takes at most two runs")
    if boots:
        if recipe or plot:
            raise UsageError("--recipe and --plot are for bench runs, not --boots")
        _boots(results_dir, runs, fmt)
    elif not runs:
        if recipe or plot:
            flag = "--recipe FILE" if recipe else "--plot"
            raise UsageError("--recipe and --plot need a run",
                             hint=f"name a run (inkctl results lists them): inkctl results RUN {flag}")
        _list_runs(results_dir, fmt)
    else:
        _one_run(results_dir, runs, recipe, plot, fmt)


def _list_runs(results_dir: Path, fmt: str) -> None:
    from inkctl.api.measure import results as api_results
    from inkctl.cli.show.benchtable import runs_table

    listing = api_results.list_runs(results_dir)
    print(json.dumps(listing, indent=2) if fmt == "json" else runs_table(listing, results_dir))


def _one_run(results_dir: Path, runs: list[str], recipe: Optional[Path], plot: bool, fmt: str) -> None:
    """A run compared with another or with a recipe, plotted, or shown."""
    from inkctl.api.measure import results as api_results

    run = api_results.load_run(results_dir, runs[0])
    if len(runs) == 2:
        _compare(run, api_results.load_run(results_dir, runs[1]), fmt)
    elif recipe is not None:
        _against_recipe(run, recipe, fmt)
    elif plot:
        print(f"wrote {api_results.plot(run)}")
    else:
        _show(run, fmt)


def _compare(a, b, fmt: str) -> None:
    from inkctl.api.measure import results as api_results
    from inkctl.cli.show.benchtable import compare_table

    rows = api_results.compare_runs(a, b)
    print(json.dumps({"a": a.name, "b": b.name, "rows": rows}, indent=2) if fmt == "json"
          else compare_table(rows, a.name, b.name))


def _against_recipe(run, recipe: Path, fmt: str) -> None:
    from inkctl.api.measure import results as api_results
    from inkctl.cli.show.benchtable import recipe_table

    cmp = api_results.against_recipe(run, recipe)
    if not cmp.same_model and fmt == "text":
        from inkctl.cli.show.terminal import plain

        plain(stderr=True).print(f"note: {run.name} measured {run.meta.get('model')}; the recipe serves "
                                 f"{cmp.recipe_model}: the numbers below compare two models", markup=False)
    print(json.dumps({"run": run.name, "recipe": str(recipe), "run_model": run.meta.get("model"),
                      "recipe_model": cmp.recipe_model, "same_model": cmp.same_model, "rows": cmp.rows}, indent=2)
          if fmt == "json" else recipe_table(cmp.rows, run.name))


def _show(run, fmt: str) -> None:
    from inkctl.cli.show.benchtable import point_header, point_line

    meta = run.meta
    if fmt == "json":
        print(json.dumps({"run": run.name, **meta, "results": run.points}, indent=2))
        return
    print(f"{run.name}: {meta.get('model')} at {meta.get('url')}")
    slo = any(p.get("request_goodput") is not None for p in run.points)
    print(point_header(slo))
    for p in run.points:
        print(point_line(p, slo))
    boot = (meta.get("provenance") or {}).get("boot")
    if boot:  # how the deployment it measured had booted (up's latest boot record then)
        from inkctl.cli.show.boottable import boot_table

        print(f"booted as {boot.get('id')}:")
        print(boot_table(boot))
