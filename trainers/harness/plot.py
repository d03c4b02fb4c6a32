"""``pettingllm plot RUN_DIR``: the curves of a run's ``metrics.jsonl`` as one PNG.

Uses matplotlib's Agg backend, so it works on headless machines and in CI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Panels: a title and the metric-name prefixes drawn in it.
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward", ("reward/mean", "reward/agent/")),
    ("reward per turn", ("reward/turn/",)),
    # The tree's rate is the best-of-N search's, not the policy's: drawn with, never as, eval/success_rate.
    ("success rate", ("eval/success_rate", "tree/success_rate", "rollout/success_rate")),
    ("degenerate groups", ("groups/degenerate_frac",)),
    ("PPO: clip fraction and KL", ("clip_frac", "kl")),
    ("seconds per step", ("time/generate", "time/env", "time/update")),
)


def read_metrics(path: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


#: Curves drawn with a shaded band between two other metrics (their 95 % interval).
BANDS: dict[str, tuple[str, str]] = {"eval/success_rate": ("eval/success_ci_low", "eval/success_ci_high")}

#: Marker and line style of the i-th curve of a panel: curves that coincide (a per-agent reward
#: equal to the mean, KL at 0 beside a clip fraction at 0) stay distinguishable.
STYLES: tuple[tuple[str, str], ...] = (("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("x", "--"),
                                       ("P", "-."), ("*", ":"))


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw every panel of :data:`PANELS` for ``run_dir``; returns the PNG paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    if not rows:
        raise ValueError(f"{run_dir / 'metrics.jsonl'} has no metrics yet")
    fig = draw_metrics(rows, str(run_dir))
    target = Path(out) if out else run_dir / "curves.png"
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return [target]


def draw_metrics(rows: list[dict[str, float]], title: str) -> Any:
    """The figure of :data:`PANELS` for metric ``rows``.

    Steps are integers on the x axis; each curve of a panel has its own marker and line
    style, and after the first a smaller, hollow marker, so curves that coincide all stay
    visible; legends sit under their panel, never over the curves."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    keys = sorted({k for row in rows for k in row})
    fig, axes = plt.subplots(2, 3, figsize=(15, 9), constrained_layout=True)
    for ax, (panel, prefixes) in zip(axes.flat, PANELS, strict=True):
        panel_keys = [k for k in keys if any(k == p or (p.endswith("/") and k.startswith(p)) for p in prefixes)]
        for i, key in enumerate(panel_keys):
            points = [(row["step"], row[key]) for row in rows if key in row]
            marker, style = STYLES[i % len(STYLES)]
            (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], linestyle=style, marker=marker,
                              markersize=max(3.0, 7.0 - i), markerfacecolor="none" if i else None,
                              markevery=max(1, len(points) // 25), label=key)
            if key in BANDS:
                low, high = BANDS[key]
                band = [(row["step"], row[low], row[high]) for row in rows if low in row and high in row]
                if band:
                    ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band],
                                    color=line.get_color(), alpha=0.2, label=f"{key} 95 % CI")
        ax.set_title(panel)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.lines:
            ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.suptitle(title)
    return fig
