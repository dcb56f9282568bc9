"""The one configuration mechanism (grpojax._config.Config): every error path is one line naming the key."""

import pathlib

import pytest
import yaml

from grpojax import ConfigError
from grpojax.grpo import TrainConfig, apply_overrides, config_to_dict, load_config, save_config, shipped_configs

BASE = load_config("tiny-arith")


@pytest.mark.parametrize("override, expected", [
    ("grpo.kref=3", "unknown key 'kref'; expected one of ['adv_eps', 'advantage'"),
    ("grpo.advantage=ppo", "grpo.advantage='ppo'; expected 'grpo', 'dr_grpo' or 'rloo'"),
    ("optim.name=lion", "optim.name='lion'; expected 'adamw' or 'sgd'"),
    ("steps=true", "steps=True; expected an integer"),
    ("steps=2.5", "steps=2.5; expected an integer"),
    ("steps=abc", "steps='abc'; expected an integer"),
    ("steps=0", "steps=0; expected >= 1"),
    ("optim.lr=.inf", "optim.lr=inf; expected a finite number"),
    ("optim.lr=-1e-3", "optim.lr=-0.001; expected a finite number > 0"),
    ("optim.momentum=1", "optim.momentum=1.0; expected a finite number < 1"),
    ("data.heldout_frac=1", "data.heldout_frac=1.0; expected a finite number < 1"),
    ('log.tensorboard="off"', "log.tensorboard='off'; expected a YAML boolean"),
    ("log.tensorboard=1", "log.tensorboard=1; expected a YAML boolean"),
    ("rewards.weights={correctness: .nan}", "rewards.weights.correctness=nan; expected a finite number"),
    ("model.hidden_size=15", "model.hidden_size=15 is not divisible by model.num_attention_heads=4"),
    ("model.eos=-1", "model.eos=-1; expected a token string or a non-negative id"),
    ("data.prompt_template=Q", "data.prompt_template='Q'; expected a template with a {question} field"),
    ("data.source=jsonl", "data.source=jsonl needs data.path"),
    ("data.max_prompt_len=40", "exceeds the context model.max_position_embeddings=40"),
    ("grpo=3", "grpo=3; expected a valid dictionary"),
    ("steps=", "steps has no value"),
    ("steps=[1,", "the value of steps is invalid YAML"),
    ("steps", "expected KEY=VALUE"),
    ("grpo.k_ref.x=1", "'k_ref' is not a config section"),
])
def test_every_bad_override_is_one_line_naming_the_key(override, expected):
    with pytest.raises(ConfigError) as exc:
        apply_overrides(BASE, [override])
    msg = str(exc.value)
    assert expected in msg and "\n" not in msg, msg


def test_numbers_yaml_reads_as_strings_are_accepted():
    cfg = apply_overrides(BASE, ["optim.lr=5e-4", "steps=7.0"])  # YAML 1.1 reads 5e-4 as a string
    assert cfg.optim.lr == 5e-4 and isinstance(cfg.optim.lr, float) and cfg.steps == 7 and isinstance(cfg.steps, int)


def test_configs_are_frozen_and_replace_validates():
    with pytest.raises(AttributeError, match=r"GRPOSection is frozen; .replace\(k_ref=...\)"):
        BASE.grpo.k_ref = 3
    assert BASE.grpo.replace(k_ref=3).k_ref == 3 and BASE.grpo.k_ref == 1
    with pytest.raises(ConfigError, match="k_ref=0; expected >= 1"):
        BASE.grpo.replace(k_ref=0)
    with pytest.raises(ConfigError, match="unknown key 'kref'"):
        BASE.replace(grpo={"kref": 2})


def test_file_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo:\n  group_size: 1\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: grpo.group_size=1; expected >= 2"):
        load_config(bad)
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="bad.yaml: expected a mapping of keys to values, got list"):
        load_config(bad)
    bad.write_text("steps: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML at line"):
        load_config(bad)


@pytest.mark.parametrize("name", shipped_configs())
def test_shipped_and_saved_configs_load_unchanged(name, tmp_path):
    """The YAML files written before the configs were pydantic models (plain nested mappings) load as they are,
    and a saved config reads back equal."""
    path = pathlib.Path(__file__).resolve().parents[1] / "grpojax" / "grpo" / "configs" / f"{name}.yaml"
    raw = yaml.safe_load(path.read_text())
    cfg = load_config(name)
    for section, values in raw.items():
        got = config_to_dict(cfg)[section]
        if isinstance(values, dict):
            assert {k: got[k] for k in values} == values
        else:
            assert got == values
    saved = save_config(cfg, tmp_path / "c.yaml")
    assert load_config(saved) == cfg
    assert TrainConfig.from_dict(config_to_dict(cfg)) == cfg


def test_list_positions_and_the_place_of_a_section_in_its_file():
    """A key inside a list is named with its position; a mapping read from inside a larger file (``key=``)
    is named from there."""
    from typing import Any

    from pydantic import Field

    from grpojax._config import Config, Int, dotted_key

    class Item(Config):
        k: Int = Field(1, ge=1)

    class Outer(Config):
        items: list[Item] = Field(default_factory=list)
        tags: dict[str, Any] = Field(default_factory=dict)

    assert dotted_key(("items", 2, "k")) == "items[2].k" and dotted_key((3, "a", "b")) == "[3].a.b"
    with pytest.raises(ConfigError, match=r"^f.yaml: items\[1\]\.k=0; expected >= 1$"):
        Outer.from_dict({"items": [{"k": 2}, {"k": 0}]}, where="f.yaml")
    with pytest.raises(ConfigError, match=r"^items\[0\]: unknown key 'j'; expected one of \['k'\]$"):
        Outer(items=[{"j": 1}])
    with pytest.raises(ConfigError, match=r"^f.yaml: grid\[3\] \(k=0\)\.k=0; expected >= 1$"):
        Item.from_dict({"k": 0}, where="f.yaml", key="grid[3] (k=0)")
    with pytest.raises(ConfigError, match=r"^members\[0\]: expected a mapping of keys to values, got int$"):
        Item.from_dict(3, key="members[0]")
    assert Item(k=2) == Item.from_dict({"k": 2.0}) and hash(Item(k=2)) == hash(Item(k=2))
