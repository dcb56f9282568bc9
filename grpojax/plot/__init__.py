"""Matplotlib figures of grpojax (Agg-friendly; each function returns its Figure)."""

from grpojax.plot._diagnose import diagnosis_dashboard, draw_panel

__all__ = ["diagnosis_dashboard", "draw_panel"]
