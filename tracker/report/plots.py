"""The pictures of ``tracker report``: each function takes plain rows and returns PNG bytes.

Matplotlib is imported inside each function (Agg backend), so importing this module costs
nothing; every figure names its units and says what a marker means.

A value no axis can hold (:func:`drawable`: a metric near a float's largest, 1.7e308, an infinity, a
latency of 1e-300 ms on a log axis) is left out of its picture, which says so in a line at its foot
(:func:`figure_png`): until 0.9.14 matplotlib's arithmetic on such an axis overflowed, numpy's RuntimeWarnings
on stderr ("overflow encountered in exp") and, for a speed probe, a layer or a loader's throughput, a
traceback and no report.
"""

from __future__ import annotations

import io
import math
from typing import Any, Sequence

DPI = 110
#: The largest magnitude a picture draws: an axis of 1e300 overflows in matplotlib's margins and a log
#: axis's powers of ten; 1e150 leaves such an axis a float's range over.
DRAWN_MOST = 1e150
#: The least magnitude above zero a picture draws: a log axis from 1e-300 to 30 ms spans past a float's range.
DRAWN_LEAST = 1e-150
#: Of the values a picture leaves out, how many its note names.
NOTE_NAMES = 3


def drawable(value: float | None) -> bool:
    """Whether a picture draws ``value``: a finite number from ``DRAWN_LEAST`` to ``DRAWN_MOST`` in
    magnitude, or zero; not None (absent) nor NaN, an infinity or a number past those bounds."""
    return value is not None and math.isfinite(value) and (value == 0 or DRAWN_LEAST <= abs(value) <= DRAWN_MOST)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def said(value: float | None) -> str:
    """A value as a picture's note names one it left out: in 4 significant digits (``1.7e+308``), ``absent``
    where None."""
    return "absent" if value is None else f"{value:.4g}"


def figure_png(fig: Any, left_out: Sequence[str] = ()) -> bytes:
    """``fig`` as PNG bytes; where it left values out (``left_out``: each in words, ``latency 1.7e+308 ms
    at batch 2``), a line at its foot saying so, naming the first ``NOTE_NAMES``."""
    plt = _pyplot()
    if left_out:
        more = len(left_out) - NOTE_NAMES
        fig.text(0.01, 0.01, f"not drawn, past what an axis holds: {'; '.join(left_out[:NOTE_NAMES])}"
                 + (f"; {more} more" if more > 0 else ""), fontsize=7, color="0.35", ha="left", va="bottom")
        fig.tight_layout(rect=(0, 0.05, 1, 1))
    else:
        fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _plain_log_labels(ax: Any, which: str = "y") -> None:
    """Plain numbers on a log axis (``which``: "y" or "x"): 2x, 3x and 5x of each decade labelled
    besides its powers of ten (a value such as 14 or 155 ms can then be read off between its labels;
    on an x axis past two decades, the powers alone); an axis spanning less than a decade gets evenly
    spaced round ticks instead (780 to 1,500 MB had labels only up to 1,000, the decade's last tick).
    matplotlib's own labels of an axis spanning a decade or two ran into each other ("3x10^1 4x10^1",
    a predicted-vs-measured picture's until 0.9.34)."""
    import math

    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if which == "y" else ax.get_xlim()
    narrow = lo > 0 and hi / lo < 10
    if narrow:
        ticks = [t for t in MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= t <= hi]
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_minor_locator(NullLocator())
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        return

    wide_x = which == "x" and lo > 0 and hi / lo > 100  # a row of labels past two decades: the powers of ten alone

    def minor(v: float, _: object) -> str:
        lead = round(v / 10 ** math.floor(math.log10(v))) if v > 0 else 0
        return f"{v:g}" if not wide_x and lead in (2, 3, 5) else ""

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(minor))


#: A log axis spans at least this ratio (top over bottom): values that lie within half a percent of
#: each other (a network's peak memory across batch sizes) are not stretched into a steep line.
MIN_LOG_SPAN = 1.5


def _least_span(ax: Any) -> None:
    import math

    lo, hi = ax.get_ylim()
    if lo > 0 and hi / lo < MIN_LOG_SPAN:
        middle = math.sqrt(lo * hi)
        ax.set_ylim(middle / math.sqrt(MIN_LOG_SPAN), middle * math.sqrt(MIN_LOG_SPAN))


def batch_scaling_png(title: str, lines: Sequence[dict[str, Any]]) -> bytes:
    """Latency and peak memory against batch size, one line per network of ``lines``.

    Each line: ``label``, ``batch_sizes``, ``latency_ms``, ``peak_mem_mb`` (lists, memory
    items may be None), ``latency_ci_rel`` (a list, items may be None; optional), ``oom_batch`` (the smallest batch that failed out of memory, or None)
    and ``oom_cap_mb`` (the memory cap it failed under, None: the device's own memory: a cap on
    what the child adds to what it held, ``--memory-limit-mb``, so a peak may lie above it). A
    failure is a red cross on the batch axis itself, under a dotted line at that batch: nothing
    was measured there, so it is drawn at no latency or memory. The batch axis is labelled at the
    sizes drawn, as whole numbers.
    """
    plt = _pyplot()
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    from tracker.profile.stats import IMPRECISE_CI_REL

    fig, (ax_lat, ax_mem) = plt.subplots(1, 2, figsize=(10, 4.2))
    many = len(lines) > 10
    oom_drawn = loose_drawn = False
    sizes: set[int] = set()
    left_out: list[str] = []
    for i, line in enumerate(lines):
        colour = plt.cm.viridis(i / max(1, len(lines) - 1)) if many else f"C{i % 10}"
        bs = line["batch_sizes"]
        sizes.update(bs)
        name = f"{line['label']} " if len(lines) > 1 else ""
        left_out += [f"{name}{what} {said(v)} {unit} at batch {b}" for what, unit, key in
                     (("latency", "ms", "latency_ms"), ("peak memory", "MB", "peak_mem_mb"))
                     for b, v in zip(bs, line[key]) if v is not None and not drawable(v)]
        latency = [v if drawable(v) else None for v in line["latency_ms"]]  # one left out: a gap in its line
        ax_lat.plot(bs, latency, "o-", ms=3.5, lw=1.2, color=colour, label=line["label"])
        # a latency measured too imprecisely to read (95 % CI over IMPRECISE_CI_REL): a hollow ring around
        # it (since 0.9.0: a demo's step measured beside another process, ±1,031 %, read as slower than the next)
        loose = [(b, v) for b, v, ci in zip(bs, latency, line.get("latency_ci_rel") or [None] * len(bs))
                 if v is not None and ci is not None and ci > IMPRECISE_CI_REL]
        if loose:
            ax_lat.scatter([b for b, _ in loose], [v for _, v in loose], s=70, facecolors="none", edgecolors="red",
                           lw=1, zorder=4, label=None if loose_drawn else f"95 % CI over {100 * IMPRECISE_CI_REL:g} %")
            loose_drawn = True
        mem = [(b, m) for b, m in zip(bs, line["peak_mem_mb"]) if drawable(m)]
        if mem:
            ax_mem.plot([b for b, _ in mem], [m for _, m in mem], "o-", ms=3.5, lw=1.2, color=colour)
        oom = line.get("oom_batch")
        if oom is not None:
            sizes.add(oom)
            cap = line.get("oom_cap_mb")
            for ax in (ax_lat, ax_mem):
                ax.axvline(oom, ls=":", color=colour, lw=1)
                ax.scatter([oom], [0.02], marker="x", s=50, color="red", zorder=5, clip_on=False,
                           transform=ax.get_xaxis_transform(),
                           label=None if oom_drawn else "out of memory (first batch that failed)")
                if cap:
                    # the cap is on what the child adds to what it held (--memory-limit-mb), not its peak
                    ax.annotate(f"cap +{cap:g} MB", (oom, 0.05), xycoords=ax.get_xaxis_transform(), fontsize=6,
                                color="red", ha="right", rotation=90, va="bottom")
            oom_drawn = True
    ticks = sorted(sizes)
    if len(ticks) > 12:  # many sizes: powers of two only
        ticks = [t for t in ticks if t & (t - 1) == 0] or ticks[::max(1, len(ticks) // 8)]
    measured = {ax_lat: any(drawable(v) for line in lines for v in line["latency_ms"]),
                ax_mem: any(drawable(v) for line in lines for v in line["peak_mem_mb"])}
    ran = {ax_lat: any(v is not None for line in lines for v in line["latency_ms"]),
           ax_mem: any(v is not None for line in lines for v in line["peak_mem_mb"])}
    for ax, what in ((ax_lat, "latency per iteration (ms)"), (ax_mem, "peak memory (MB)")):
        ax.set_xscale("log", base=2)
        if not measured[ax]:  # only failures (no batch fitted under a cap): a log axis of nothing was a
            # matplotlib traceback, and no report, until 0.9.6
            ax.set_ylim(1, 10)
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(NullLocator())
            ax.yaxis.set_minor_locator(NullLocator())
            ax.text(0.5, 0.5, "no value an axis holds" if ran[ax] else "no batch size ran", transform=ax.transAxes,
                    ha="center", va="center", fontsize=9, color="0.4")
        else:
            ax.set_yscale("log")
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        if measured[ax]:
            _least_span(ax)
            _plain_log_labels(ax)
        ax.set(xlabel="batch size", ylabel=what)
        ax.grid(alpha=0.3, which="both")
    ax_lat.set_title(title, fontsize=10 if len(title) <= 60 else 8)
    ax_mem.set_title("peak memory" + ("; x = first batch that ran out of memory" if oom_drawn else ""), fontsize=9)
    handles, labels = ax_lat.get_legend_handles_labels()
    if len(labels) <= 14:
        ax_lat.legend(handles, labels, fontsize=7)
    else:  # many pruning levels: the colour bar order is the label order
        ax_lat.legend(handles[:1] + handles[-1:], [labels[0] + " …", "… " + labels[-1]], fontsize=7)
    return figure_png(fig, left_out)


#: Of a function layer's op_type (its functions, ``getitem+contiguous+pad+roll+...``), what a label shows.
OP_LABEL_CHARS = 32


def _short(op_type: str | None) -> str:
    op = op_type or "?"
    return op if len(op) <= OP_LABEL_CHARS else op[:OP_LABEL_CHARS - 1] + "…"


def layer_breakdown_png(title: str, layers: Sequence[dict[str, Any]], network_ms: float, top: int = 15) -> bytes:
    """Where a network's time goes: its slowest layers alone, and the sum per operator type.

    ``layers``: ``layer_name``, ``op_type`` and ``latency_ms`` of every layer timed alone.
    """
    plt = _pyplot()
    fig, (ax_top, ax_op) = plt.subplots(1, 2, figsize=(11, max(3.5, 0.28 * min(top, len(layers)) + 1.2)),
                                        gridspec_kw={"width_ratios": [3, 2]})
    left_out = [f"{l['layer_name']} {said(l['latency_ms'])} ms" for l in layers if not drawable(l["latency_ms"])]
    left_out += [] if drawable(network_ms) else [f"the network's latency {said(network_ms)} ms"]
    count, layers = len(layers), [l for l in layers if drawable(l["latency_ms"])]
    total = sum(l["latency_ms"] for l in layers)
    slowest = sorted(layers, key=lambda l: l["latency_ms"], reverse=True)[:top][::-1]
    ax_top.barh([f"{l['layer_name']} ({_short(l['op_type'])})" for l in slowest], [l["latency_ms"] for l in slowest],
                color="C0")
    ax_top.set(xlabel="latency alone (ms)", title=f"{title}: {len(slowest)} slowest of {count} layers")
    ax_top.tick_params(axis="y", labelsize=7)
    by_op: dict[str, float] = {}
    for l in layers:
        by_op[_short(l["op_type"])] = by_op.get(_short(l["op_type"]), 0.0) + l["latency_ms"]
    ops = sorted(by_op, key=by_op.get)  # type: ignore[arg-type]
    ax_op.barh(ops, [100 * by_op[o] / total for o in ops], color="C1")
    ax_op.set(xlabel="share of the sum of layers (%)",  # two lines: one was cut off at the figure's edge
              title=f"sum of layers {total:.2f} ms" + (f"\n= {total / network_ms:.2f}x the network ({network_ms:.2f} ms)"
                                                       if drawable(network_ms) and network_ms else ""))
    ax_op.title.set_fontsize(9)
    ax_op.tick_params(axis="y", labelsize=8)
    for ax in (ax_top, ax_op):
        ax.grid(alpha=0.3, axis="x")
    return figure_png(fig, left_out)


def predicted_vs_measured_png(title: str, measured: Sequence[float], predicted: Sequence[float],
                              groups: Sequence[str], unit: str) -> bytes:
    """Held-out predictions against measurements on log axes, coloured by ``groups`` (families),
    with the ±10 % band and the MAPE of those drawn in the title. A pair a log axis cannot hold (a
    value at or below zero, or not :func:`drawable`) is left out and said at the foot: an infinity or
    a zero was a ValueError (``geomspace``) and no picture until 0.9.15."""
    plt = _pyplot()
    import numpy as np

    kept = [drawable(m) and drawable(q) and m > 0 and q > 0 for m, q in zip(measured, predicted)]
    left_out = [f"measured {said(m)} {unit}, predicted {said(q)}" for m, q, k in zip(measured, predicted, kept) if not k]
    y, p, g = (np.asarray([v for v, k in zip(values, kept) if k], kind)
               for values, kind in ((measured, float), (predicted, float), (groups, object)))
    fig, ax = plt.subplots(figsize=(5.5, 5.2))
    families = sorted(set(g))
    for i, f in enumerate(families):
        sel = g == f
        ax.scatter(y[sel], p[sel], s=14, label=f, color=plt.cm.tab20(i % 20))
    lo, hi = (float(min(y.min(), p.min())) * 0.8, float(max(y.max(), p.max())) * 1.25) if len(y) else (1.0, 10.0)
    ref = np.geomspace(lo, hi, 50)
    ax.plot(ref, ref, "k--", lw=1)
    ax.fill_between(ref, ref * 0.9, ref * 1.1, color="0.85", zorder=0, label="±10 %")
    err = np.abs(p / y - 1)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel=f"measured ({unit})",
           ylabel=f"predicted, network held out ({unit})")
    for which in ("x", "y"):
        _plain_log_labels(ax, which)
    scored = (f"MAPE {100 * err.mean():.1f} %, {100 * (err <= 0.1).mean():.0f} % within ±10 %" if len(y)
              else "no prediction drawn")
    ax.set_title(f"{title}\n{scored}", fontsize=9)
    if len(families) <= 14:
        ax.legend(fontsize=6, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    return figure_png(fig, left_out)


def data_wait_png(title: str, settings: Sequence[dict[str, Any]]) -> bytes:
    """Share of step time spent waiting for data per loader setting, throughput beside it.

    ``settings``: ``label``, ``data_wait_fraction``, ``images_per_s``, ``is_best`` and ``input_size``.
    """
    plt = _pyplot()
    fig, (ax_wait, ax_tp) = plt.subplots(1, 2, figsize=(10, max(3.2, 0.35 * len(settings) + 1.2)), sharey=True)
    labels = [s["label"] for s in settings]
    colours = ["C2" if s["is_best"] else "C0" for s in settings]
    left_out = [f"{s['label']} {what} {said(s[key])}" for s in settings for what, key in
                (("waiting share", "data_wait_fraction"), ("images/s", "images_per_s")) if not drawable(s[key])]

    def bar(value: float) -> float:  # one left out: no bar (NaN), its label kept
        return value if drawable(value) else math.nan

    ax_wait.barh(labels, [100 * bar(s["data_wait_fraction"]) for s in settings], color=colours)
    ax_wait.set(xlabel="time waiting for data (% of step)", xlim=(0, 100), title=title)
    ax_wait.title.set_fontsize(10)
    ax_tp.barh(labels, [bar(s["images_per_s"]) for s in settings], color=colours)
    apart = len({s.get("input_size") for s in settings}) > 1  # data_loading's is_best: the fastest of each input size
    ax_tp.set(xlabel="images/s", title="throughput (green: fastest setting" + (" of each input size)" if apart else ")"))
    ax_tp.title.set_fontsize(9)
    ax_wait.invert_yaxis()  # the first setting on top (the axes share y)
    for ax in (ax_wait, ax_tp):
        ax.grid(alpha=0.3, axis="x")
        ax.tick_params(axis="y", labelsize=8)
    return figure_png(fig, left_out)


def machine_speed_png(title: str, runs: Sequence[dict[str, Any]]) -> bytes:
    """The machine's speed over time: the speed probe's median beside each measurement (``runs``:
    ``end_time``, a datetime, and ``speed_probe_ms``, in time order), their median as a line, the
    10th and 90th percentiles as a band."""
    import statistics

    plt = _pyplot()
    timed = [(r, float(r["speed_probe_ms"])) for r in runs]
    left_out = [f"{said(p)} ms at {r['end_time']:%Y-%m-%d %H:%M}" for r, p in timed if not drawable(p)]
    runs, probes = [r for r, p in timed if drawable(p)], [p for _, p in timed if drawable(p)]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    ax.plot([r["end_time"] for r in runs], probes, ".", ms=4, alpha=0.6, color="C0")
    if probes:
        median = statistics.median(probes)
        ax.axhline(median, color="C3", lw=1, label=f"median {median:.3g} ms")
    if len(probes) >= 10:
        deciles = statistics.quantiles(probes, n=10)
        ax.axhspan(deciles[0], deciles[-1], color="C3", alpha=0.08, label=f"10th-90th percentile {deciles[0]:.3g}-{deciles[-1]:.3g} ms")
    ax.set(ylabel="speed probe (ms; higher: slower)", title=title)
    ax.title.set_fontsize(10)
    ax.grid(alpha=0.3)
    if probes:
        ax.legend(fontsize=8, loc="best")
    fig.autofmt_xdate()
    return figure_png(fig, left_out)
