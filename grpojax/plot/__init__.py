"""Matplotlib figures of grpojax (Agg-friendly; each function returns its Figure)."""

from grpojax.plot._dynamics import predicted_trajectory_figure, threshold_comparison_figure
from grpojax.plot._diagnose import diagnosis_dashboard, draw_panel

__all__ = [
    "predicted_trajectory_figure",
    "threshold_comparison_figure",
    "diagnosis_dashboard",
    "draw_panel",
]
