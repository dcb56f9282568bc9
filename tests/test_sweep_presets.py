"""The named sweep grids of grpojax.sweep (the presets of `grpojax sweep --preset`)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from grpojax.sweep import PRESETS, sweep_preset
from grpojax.sweep._presets import SweepPreset


def _rows(preset: SweepPreset, *names):
    return sorted(zip(*(preset.grid.columns[n].tolist() for n in names)))


def test_presets_are_the_documented_grids():
    assert sorted(PRESETS) == ["group-size", "stability", "transition"]
    st = sweep_preset("stability", 3)
    assert (st.num_steps, st.x, st.y) == (8000, "eta_rel", "k_ref")
    assert _rows(st, "eta_rel", "k_ref") == sorted(itertools.product([0.8, 1.0, 1.2], [2.0, 4.0, 8.0]))
    assert set(st.grid.columns["mu"]) == {0.9} and set(st.grid.columns["group_size"]) == {65536.0}
    assert set(st.grid.columns["p_init"]) == {0.8} and set(st.grid.columns["p_star"]) == {0.8}

    tr = sweep_preset("transition", 2)
    assert (tr.num_steps, tr.x, tr.y) == (2000, "eta", "k_ref")
    assert _rows(tr, "eta", "k_ref") == sorted(itertools.product([0.004, 1.0], [1.0, 2.0, 4.0, 8.0, 16.0]))
    assert set(tr.grid.columns["group_size"]) == {4096.0} and set(tr.grid.columns["p_init"]) == {0.7}

    gs = sweep_preset("group-size", 3, num_steps=64)
    assert (gs.num_steps, gs.x, gs.y) == (64, "eta", "group_size")
    etas = sorted(set(gs.grid.columns["eta"].tolist()))
    np.testing.assert_allclose(etas, [0.01, 0.0707106781, 0.5], rtol=1e-9)  # geometric: sqrt(0.01 * 0.5)
    assert sorted(set(gs.grid.columns["group_size"].tolist())) == [4.0, 16.0, 64.0, 256.0]
    assert len(gs.grid) == 12 and set(gs.grid.columns["k_ref"]) == {4.0}


@pytest.mark.parametrize(("kwargs", "needle"), [
    (dict(name="nope"), "nope"),
    (dict(name="stability", size=1), "size"),
    (dict(name="stability", size=2.5), "size"),
    (dict(name="transition", num_steps=0), "num_steps"),
])
def test_bad_preset_arguments_are_value_errors(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        sweep_preset(**kwargs)
