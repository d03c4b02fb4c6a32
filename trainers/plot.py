"""``pettingllm plot RUN_DIR``: the curves of a run's ``metrics.jsonl`` as one PNG.

Uses matplotlib's Agg backend, so it works on headless machines and in CI.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Panels: a title and the metric-name prefixes drawn in it.
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward", ("reward/mean", "reward/agent/")),
    ("reward per turn", ("reward/turn/",)),
    ("success rate", ("success_rate",)),
    ("degenerate groups", ("groups/degenerate_frac",)),
    ("PPO: clip fraction and KL", ("clip_frac", "kl")),
    ("seconds per step", ("time/generate", "time/env", "time/update")),
)


def read_metrics(path: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw every panel of :data:`PANELS` for ``run_dir``; returns the PNG paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    if not rows:
        raise ValueError(f"{run_dir / 'metrics.jsonl'} has no metrics yet")
    keys = sorted({k for row in rows for k in row})
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), constrained_layout=True)
    for ax, (title, prefixes) in zip(axes.flat, PANELS, strict=True):
        for key in (k for k in keys if any(k == p or (p.endswith("/") and k.startswith(p)) for p in prefixes)):
            points = [(row["step"], row[key]) for row in rows if key in row]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="." if len(points) < 30 else None,
                    label=key)
        ax.set_title(title)
        ax.set_xlabel("step")
        if ax.lines:
            ax.legend(fontsize="small")
    fig.suptitle(str(run_dir))
    target = Path(out) if out else run_dir / "curves.png"
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return [target]
