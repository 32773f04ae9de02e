"""The Pareto plot of a search space: accuracy against latency, the frontier joined up."""

from __future__ import annotations

from typing import Any


def pareto_png(space: str, rows: list[dict[str, Any]], source: str, measured: list[dict[str, Any]] | None = None) -> bytes:
    """PNG bytes: every candidate (frontier ones labelled) and the frontier as a step line; with
    ``measured`` given (for a predicted frontier), the measured frontier beside it, dashed; a predicted
    latency beyond what its fingerprint learnt from is ringed. A candidate whose latency or accuracy no
    axis holds (``plots.drawable``: 1.7e308 ms was a traceback until 0.9.14) is left out, said at the foot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tracker.report.plots import drawable, figure_png, said

    def shown(r: dict[str, Any]) -> bool:
        return drawable(r["latency_ms"]) and drawable(r["accuracy"])

    left_out = [f"{r['model']} {said(r['latency_ms'])} ms, accuracy {said(r['accuracy'])}" for r in rows if not shown(r)]
    rows = [r for r in rows if shown(r)]
    measured = [r for r in measured if shown(r)] if measured else None
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    off = [r for r in rows if not r["on_frontier"]]
    on = sorted((r for r in rows if r["on_frontier"]), key=lambda r: r["latency_ms"])
    ax.scatter([r["latency_ms"] for r in off], [100 * r["accuracy"] for r in off], s=18, c="0.6", label="candidate")
    ax.step([r["latency_ms"] for r in on], [100 * r["accuracy"] for r in on], where="post", c="C0", lw=1.5)
    ax.scatter([r["latency_ms"] for r in on], [100 * r["accuracy"] for r in on], s=30, c="C0",
               label=f"frontier ({source} latency)")
    beyond = [r for r in rows if r.get("outside_trained_range")]
    if beyond:
        ax.scatter([r["latency_ms"] for r in beyond], [100 * r["accuracy"] for r in beyond], s=70, facecolors="none",
                   edgecolors="C3", lw=1, label="beyond its fingerprint's span")
    for r in on:
        ax.annotate(r["model"].removeprefix(f"{space}-"), (r["latency_ms"], 100 * r["accuracy"]), fontsize=7,
                    xytext=(4, -10), textcoords="offset points")
    if measured:
        m_on = sorted((r for r in measured if r["on_frontier"]), key=lambda r: r["latency_ms"])
        ax.step([r["latency_ms"] for r in m_on], [100 * r["accuracy"] for r in m_on], where="post", c="C1", ls="--",
                lw=1, label="frontier (measured latency)")
    ax.set(xlabel=f"latency (ms, {source})", ylabel="validation accuracy (%)", title=f"{space}: accuracy vs latency")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return figure_png(fig, left_out)
