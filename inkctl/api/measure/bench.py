"""``bench`` below the command line: the prompts, the sweep (``bench.load``) against a server
(``api/measure/serving.py`` says which), every point saved as it comes and the run it makes under the
results directory (``bench.report``): what ``results`` reads back (``api/measure/results.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from inkctl.api.measure.serving import Where, provenance
from inkctl.errors import InkctlError

if TYPE_CHECKING:
    from datetime import datetime

    from inkctl.bench.load import Prompt
    from inkctl.bench.load import Target as Server



@dataclass(frozen=True)
class BenchOptions:
    """What to send and how: a sweep of ``concurrencies`` (max in flight) or of ``rates``
    (requests/s, Poisson arrivals, capped by the first concurrency when given)."""

    concurrencies: Optional[list[int]] = None
    rates: Optional[list[float]] = None
    api: str = "chat"  # chat or completions
    num_prompts: Optional[int] = None  # per point (default: 4 x concurrency, at least 16)
    duration: Optional[float] = None  # seconds per point instead of a number of requests
    input_len: int = 512
    output_len: int = 128
    dataset: Optional[Path] = None  # JSONL prompts instead of random ones
    tokenizer: Optional[str] = None  # a Hugging Face tokenizer for exact input lengths
    slos: dict = field(default_factory=dict)  # goodput SLOs, name -> ms (``options``)
    timeout: float = 600.0  # per request
    seed: int = 0
    llama_benchy: bool = False  # also write llama-benchy.json
    plot: bool = False  # also write plot.png
    results_dir: Path = Path("bench-results")
    accept_new: bool = False  # trust new host keys (provenance asks the hosts)


def options(goodput: list[str], plot: bool, **kw: Any) -> BenchOptions:
    """The options with the goodput SLOs (``NAME:MS``) read, and matplotlib there for a plot."""
    from inkctl.bench.metrics import parse_slos

    slos = parse_slos(goodput)
    if plot:
        _require_matplotlib()
    return BenchOptions(slos=slos, plot=plot, **kw)


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from inkctl.extras import missing

        raise missing("plot", "--plot", "matplotlib") from None


@dataclass
class Measured:
    """A finished run: its directory, its points (as saved), their names, the extra files."""

    run_dir: Path
    points: list[dict]
    names: list[str]
    extra: list[str]

    @property
    def failed(self) -> int:
        return sum(p["failed"] for p in self.points)


class Bench:
    """A sweep ready to run (``prepare``): its prompts, its server, its run directory."""

    def __init__(self, where: Where, opts: BenchOptions, api_key: Optional[str] = None):
        from inkctl.bench import load, report

        self.where, self.opts = where, opts
        tok = load.load_tokenizer(opts.tokenizer) if opts.tokenizer else None
        concurrencies = opts.concurrencies
        biggest = max(concurrencies) if concurrencies else 1
        self.n_prompts = (opts.num_prompts if opts.num_prompts is not None or opts.duration is not None
                          else max(16, 4 * biggest))
        self.prompts: list[Prompt] = (
            load.file_prompts(opts.dataset, opts.output_len) if opts.dataset else
            load.random_prompts(max(self.n_prompts or 0, biggest, 16), opts.input_len, opts.output_len, opts.seed, tok))
        self.server: Server = load.Target(where.base_url, where.model, api=opts.api, api_key=api_key or where.api_key,
                                          timeout_s=opts.timeout)
        self.provenance = provenance(where, opts.accept_new, opts.tokenizer, opts.results_dir)
        self.when: datetime = report.now()
        self.run_dir: Path = report.new_run_dir(opts.results_dir, where.model, self.when)

    @property
    def url(self) -> str:
        return self.server.url

    def measure(self, on_point: Callable[[dict], None],
                on_request: Callable[[int | None, float | None, int, int], None] | None = None) -> Measured:
        """Run the sweep; each point is saved, recorded and handed to ``on_point`` as it comes.
        A point that completes nothing ends the sweep (InkctlError), and so does Ctrl-C: the
        points measured before stay a run; with none, the directory goes."""
        from inkctl import runlog
        from inkctl.bench import load

        o = self.opts
        saved: list[dict] = []
        names: list[str] = []
        runlog.note(results=str(self.run_dir), url=self.server.url)
        try:
            points = load.sweep(self.server, self.prompts, concurrencies=o.concurrencies, rates=o.rates,
                                num_prompts=self.n_prompts, duration_s=o.duration, seed=o.seed,
                                on_point=lambda point: self._done(point, saved, names, on_point),
                                on_request=on_request)
        except KeyboardInterrupt:
            self._keep_or_drop(saved, names)
            raise
        except _NothingDone:
            kept = self._keep_or_drop(saved, names)
            raise InkctlError(_nothing_done(saved[-1], self.server.url)
                              + (f" (saved {self.run_dir}: the points before)" if kept else ""),
                              hint="check --url and --model (inkctl smoke --url URL says what the server "
                                   "answers)") from None
        self._write_run(names)
        return Measured(self.run_dir, saved, names, self._extras(points, saved))

    def _done(self, point, saved: list[dict], names: list[str], on_point: Callable[[dict], None]) -> None:
        from inkctl import runlog
        from inkctl.bench import report

        o, run_dir = self.opts, self.run_dir
        data = report.vllm_point(point, model=self.where.model, api=o.api, num_prompts_asked=self.n_prompts,
                                 slos_ms=o.slos or None, provenance=self.provenance, when=self.when)
        name = report.point_name(point)
        report.write_json(run_dir / f"{name}.json", data)
        runlog.event("point", name=name, file=str(run_dir / f"{name}.json"),
                     **{k: data.get(k) for k in ("completed", "failed", "request_throughput", "output_throughput",
                                                 "median_ttft_ms", "median_itl_ms") if k in data})
        saved.append(data)
        names.append(name)
        on_point(data)
        if not data["completed"]:
            raise _NothingDone()

    def _keep_or_drop(self, saved: list[dict], names: list[str]) -> bool:
        """A sweep cut short: the points measured so far stay a run (True); none, no run to list."""
        kept = any(p["completed"] for p in saved)
        if kept:
            self._write_run(names)
        else:
            import shutil

            shutil.rmtree(self.run_dir, ignore_errors=True)
        return kept

    def _write_run(self, names: list[str]) -> None:
        from inkctl.bench import report

        o, w = self.opts, self.where
        report.write_json(self.run_dir / "run.json", {
            "date": self.when.isoformat(timespec="seconds"), "model": w.model, "url": w.base_url, "api": o.api,
            "input_len": None if o.dataset else o.input_len, "output_len": o.output_len,
            "dataset": str(o.dataset) if o.dataset else None, "goodput_slos_ms": o.slos, "points": names,
            "provenance": self.provenance})

    def _extras(self, points, saved: list[dict]) -> list[str]:
        from inkctl.bench import report

        o, run_dir, extra = self.opts, self.run_dir, []
        if o.llama_benchy:
            report.write_json(run_dir / "llama-benchy.json", report.llama_benchy(
                points, model=self.where.model, prompt_size=o.input_len, response_size=o.output_len, when=self.when))
            extra.append("llama-benchy.json")
        if o.plot:
            from inkctl.bench.plot import plot_run

            plot_run(saved, f"{self.where.model} ({run_dir.name})", run_dir / "plot.png")
            extra.append("plot.png")
        return extra


def prepare(where: Where, opts: BenchOptions, api_key: Optional[str] = None) -> Bench:
    """The prompts, the server, the provenance (a deployment's hosts are asked what they run),
    the run's directory: everything before the first request."""
    return Bench(where, opts, api_key)


class _NothingDone(Exception):
    """A point completed no request: the server will not answer the next one either."""


def _nothing_done(point: dict, url: str) -> str:
    errors = point.get("inkctl", {}).get("errors") or {}
    why = "; ".join(f"{n} x {e}" for e, n in sorted(errors.items(), key=lambda kv: -kv[1])[:3]) or "no answer"
    return f"no request completed against {url}: {why}"
