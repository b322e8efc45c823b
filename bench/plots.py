"""The benchmark reports' plotting house style: one look for every figure, one way to
write it. Matplotlib runs headless (Agg) wherever this is imported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DPI = 80


def style(ax: Any) -> None:
    """One plot's small tick labels and light grid."""
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


def save(fig: Any, out: Path, *, legend: Any) -> None:
    """``fig`` with its legend on ``legend`` (an axes), laid out, written to ``out`` and
    closed."""
    legend.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
