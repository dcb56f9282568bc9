"""Figures of grpojax: matplotlib figures (Agg-friendly; each function returns its Figure) and the run
dashboard as SVG text written without matplotlib (:func:`diagnosis_dashboard_svg`)."""

import typing as _typing

from grpojax._lazy import lazy_names as _lazy_names

# Each figure's module is imported when the figure is first asked for: the diagnosis figures import
# grpojax.diagnose, the others only matplotlib and NumPy.
__getattr__, __dir__ = _lazy_names(__name__, {
    "comparison_figure": "grpojax.plot._compare",
    "amplitude_figure": "grpojax.plot._bandit",
    "mean_trajectory_figure": "grpojax.plot._bandit",
    "phase_diagram_figure": "grpojax.plot._bandit",
    "variance_law_figure": "grpojax.plot._bandit",
    "diagnosis_dashboard": "grpojax.plot._diagnose",
    "diagnosis_dashboard_svg": "grpojax.plot._dashboard_svg",
    "draw_panel": "grpojax.plot._diagnose",
    "finding_figure": "grpojax.plot._diagnose",
    "predicted_trajectory_figure": "grpojax.plot._dynamics",
    "threshold_comparison_figure": "grpojax.plot._dynamics",
    "fit_figure": "grpojax.plot._fit",
    "sde_convergence_figure": "grpojax.plot._sde",
    "sde_ensemble_figure": "grpojax.plot._sde",
})

if _typing.TYPE_CHECKING:  # the same names, for readers, type checkers and the API reference
    from grpojax.plot._compare import comparison_figure  # importable for the command line; not in __all__
    from grpojax.plot._bandit import amplitude_figure, mean_trajectory_figure, phase_diagram_figure, variance_law_figure
    from grpojax.plot._diagnose import diagnosis_dashboard, draw_panel, finding_figure
    from grpojax.plot._dashboard_svg import diagnosis_dashboard_svg
    from grpojax.plot._dynamics import predicted_trajectory_figure, threshold_comparison_figure
    from grpojax.plot._fit import fit_figure
    from grpojax.plot._sde import sde_convergence_figure, sde_ensemble_figure

__all__ = [
    "amplitude_figure",
    "diagnosis_dashboard",
    "diagnosis_dashboard_svg",
    "draw_panel",
    "finding_figure",
    "fit_figure",
    "mean_trajectory_figure",
    "phase_diagram_figure",
    "predicted_trajectory_figure",
    "sde_convergence_figure",
    "sde_ensemble_figure",
    "threshold_comparison_figure",
    "variance_law_figure",
]
