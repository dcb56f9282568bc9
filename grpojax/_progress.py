"""The project's rich progress bar (one definition for the library and the command line)."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def progress(console=None) -> Progress:
    """A rich progress bar with the project's columns: description, bar, done/total, elapsed time.

    Use it as a context manager, or ``start()``/``stop()`` it around a loop. ``console``: where it draws
    (rich's default console when None).
    """
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)
