"""train.py on the MineDojo stand-in (tests/minedojo_stand_in.py), every mode, the reference backend, tiny
budgets; and its errors for a task it cannot run. Run: python -m pytest -q tests/test_minedojo_train.py"""

import json
import re

import pytest

import env
import train
from envs import minedojo_env
from tests import minedojo_stand_in
from tests.minedojo_stand_in import RAW


@pytest.fixture
def fake(monkeypatch):
    """The MineDojo stand-in, installed for this test: the fake envs `minedojo.make` has built."""
    return minedojo_stand_in.install(monkeypatch)


@pytest.fixture
def taken(monkeypatch):
    """Every action index the run's CodeActionWrapper envs were given (base actions and code actions)."""
    seen, step = [], env.CodeActionWrapper.step

    def spy(self, action):
        seen.append(int(action))
        return step(self, action)

    monkeypatch.setattr(env.CodeActionWrapper, "step", spy)
    return seen


def train_on(tmp_path, task: str, mode: str, total_steps: int = 128):
    argv = ["--task", task, "--mode", mode, "--llm", "reference", "--iterations", "1", "--total-steps",
            str(total_steps), "--num-envs", "2", "--num-steps", "16", "--eval-episodes", "1",
            "--checkpoint-every", "10000", "--runs-dir", str(tmp_path), "--run-name", "r"]
    assert train.main(argv) == 0
    d = tmp_path / "r"
    return d, json.loads((d / "iter_1" / "stats.json").read_text())


def test_rl_mode_writes_the_eval_gif_from_minedojo_frames(fake, tmp_path):
    import imageio

    d, stats = train_on(tmp_path, "minedojo:harvest_log", "rl")
    frames = imageio.mimread(d / "iter_1" / "eval.gif")
    assert stats["env_steps"] >= 128 and len(frames) == stats["eval_mean_length"] + 1  # reset + each step


def test_code_mode_calls_the_program_after_minedojos_own_actions(fake, taken, tmp_path):
    d, stats = train_on(tmp_path, "minedojo:craft_wooden_pickaxe", "code", total_steps=200)
    assert set(taken) == {len(minedojo_env.ACTIONS)}  # the program's index is n_base = 36, every decision
    assert stats["code_actions"]["solve_task"]["chosen"] > 0 and stats["eval_success_rate"] == 1.0
    assert "chop_log(api)" in (d / "iter_1" / "skills" / "solve_task.py").read_text()


def test_rl_config_mode_never_takes_a_masked_action_and_sets_the_shaping(fake, taken, tmp_path, monkeypatch):
    shaping, set_shaping = [], minedojo_env.MineDojoEnv.set_shaping
    monkeypatch.setattr(minedojo_env.MineDojoEnv, "set_shaping",
                        lambda self, s: (shaping.append(s), set_shaping(self, s))[1])
    d, stats = train_on(tmp_path, "minedojo:craft_planks", "rl+config")
    masked = json.loads((d / "iter_1" / "plan.json").read_text())["rl_config"]["mask_actions"]
    assert len(masked) == 12 and len(taken) > 100
    assert not {minedojo_env.ACTIONS[a] for a in taken} & set(masked)
    assert all(a[5] != minedojo_env.FN_USE for f in fake for a in f.actions)
    assert {"log": 0.1} in shaping and stats["code_actions"] == {}


def test_rlgpt_mode_uses_the_minedojo_reference_skills(fake, taken, tmp_path):
    d, stats = train_on(tmp_path, "minedojo:craft_planks", "rlgpt", total_steps=400)
    plan = json.loads((d / "iter_1" / "plan.json").read_text())
    assert [s["name"] for s in plan["subactions"]] == ["find_tree", "chop_log", "craft_planks"]
    chop = stats["code_actions"]["chop_log"]
    assert chop["chosen"] > 0 and chop["success_rate"] > 0 and not chop["errors"], chop
    assert {36, 37} & set(taken)  # the code actions come right after MineDojo's 36


@pytest.mark.parametrize("task", ["minedojo:collect_wood", "minedojo:harvest_logs"])
def test_an_unknown_minedojo_task_id_exits_2_naming_it(fake, task, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--task", task, "--mode", "rl", "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and repr(task.removeprefix("minedojo:")) in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    hint = re.search(r"Did you mean (.*?)\?", err)
    suggested = hint.group(1).split(", ") if hint else []
    assert set(suggested) <= set(minedojo_env.TASKS), suggested  # MineDojo tasks only, never a Crafter name
    if task == "minedojo:harvest_logs":
        assert suggested == ["minedojo:harvest_log"]


@pytest.mark.parametrize("mode", ["code", "rlgpt"])
def test_the_reference_backend_on_a_minedojo_task_without_reference_skills_exits_2(fake, mode, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--task", "minedojo:" + RAW, "--mode", mode, "--llm", "reference", "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"minedojo:{RAW} needs an LLM" in err and list(tmp_path.iterdir()) == []
