"""Fit, forecast and diagnose a training log from Python.

    python examples/fit_and_diagnose.py [LOG]

LOG is any log grpojax reads (a TRL ``trainer_state.json``, a verl or OpenRLHF console log, a
TensorBoard folder, a W&B CSV export, grpojax JSONL); by default the simulated TRL run shipped with the
tests. Prints the least-squares fit of the reward-curve laws, a forecast of the last tenth of the run
from its first 30%, and the diagnosis. About a minute on 2 CPU cores, most of it compiling.
"""

from __future__ import annotations

import pathlib
import sys

from grpojax.diagnose import diagnose
from grpojax.fit import fit_all_laws, forecast_window
from grpojax.logs import read_log

DEFAULT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "quickstart" / "trainer_state.json"


def main(path: str | pathlib.Path = DEFAULT) -> None:
    run = read_log(path)
    steps, reward = run.series("reward_mean")
    print(f"{run.name}: {len(steps)} reward points, steps {steps[0]:g}-{steps[-1]:g}")

    for law, fit in fit_all_laws(steps, reward).items():
        print(f"  {law:<12} {fit.status:<20} R² {float(fit.r2):.3f}  AIC {float(fit.aic):.1f}")

    fc = forecast_window(run, prefix=0.3, bounds=(0.0, 1.0))
    first, last = fc.window
    truth = reward[(steps > first) & (steps <= last)].mean()
    print(f"  forecast of the mean over steps {first:g}-{last:g} from the first 30%: {fc.mean:.3f} "
          f"[{fc.lo:.3f}, {fc.hi:.3f}] (90%, {fc.status}); measured {truth:.3f}")

    report = diagnose(run)
    for mode, result in report.results.items():
        print(f"  {mode:<24} {result.verdict:<18} {result.reason}")
        if result.advice:
            print(f"  {'':<24} advice: {result.advice}")


if __name__ == "__main__":
    main(*sys.argv[1:])
