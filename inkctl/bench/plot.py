"""A PNG of a run: throughput, p99 TTFT and p99 TPOT against concurrency or request rate (matplotlib,
optional)."""

from __future__ import annotations

from pathlib import Path

from inkctl.errors import InkctlError


def plot_run(points: list[dict], title: str, path: Path) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from inkctl.extras import missing

        raise missing("plot", "--plot", "matplotlib") from None
    pts, x, xlabel = plot_axis(points)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    axes[0].plot(x, [p["output_throughput"] for p in pts], marker="o", label="output tok/s")
    axes[0].plot(x, [p["total_token_throughput"] for p in pts], marker="o", label="total tok/s")
    axes[0].set_ylabel("tokens/s")
    axes[0].legend()
    axes[1].plot(x, [p["p99_ttft_ms"] for p in pts], marker="o", color="tab:red")
    axes[1].set_ylabel("p99 TTFT (ms)")
    axes[2].plot(x, [p["p99_tpot_ms"] for p in pts], marker="o", color="tab:green")
    axes[2].set_ylabel("p99 TPOT (ms)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_axis(points: list[dict]) -> tuple[list[dict], list[float], str]:
    """The points in plotting order, their x values and the x label: a request-rate sweep is
    plotted against the rate asked for, a concurrency sweep against max concurrency."""
    def rate(p: dict) -> float | None:
        r = p.get("request_rate")
        return float(r) if isinstance(r, (int, float)) else None

    rated = sorted(((r, p) for p in points if (r := rate(p)) is not None), key=lambda rp: rp[0])
    if rated:
        return [p for _, p in rated], [r for r, _ in rated], "request rate (req/s)"
    pts = sorted((p for p in points if p.get("max_concurrency")), key=lambda p: p["max_concurrency"])
    if not pts:
        raise InkctlError("nothing to plot: the run has no points")
    return pts, [p["max_concurrency"] for p in pts], "max concurrency"
