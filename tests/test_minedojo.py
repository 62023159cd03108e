"""The MineDojo adapter against a stand-in (tests/minedojo_stand_in.py: MineDojo cannot be installed here, so a
fake `minedojo` module with MineDojo's documented observation keys and MultiDiscrete action space records every
action it receives): the adapter first, then the reference skills and what the agents are shown. train.py's four
modes end to end on it: tests/test_minedojo_train.py. Run: python -m pytest -q tests/test_minedojo.py
"""

import json
import sys

import numpy as np
import pytest

import env
from core import SubAction, api_doc
from envs import minedojo_env
from fast_agent import FastAgent
from llm import LLMError, Reply
from reference import minedojo_skills
from slow_agent import SlowAgent, plan_messages
from tests import minedojo_stand_in
from tests.minedojo_stand_in import CRAFT_ITEMS, RAW, RECIPES


@pytest.fixture
def fake(monkeypatch):
    """The MineDojo stand-in, installed for this test: the fake envs `minedojo.make` has built."""
    return minedojo_stand_in.install(monkeypatch)


# The paper's 12 movement choices written out in MineDojo's documented terms, independently of the
# module: [forward/back, left/right, jump/sneak/sprint, pitch bin, yaw bin]; camera bin 12 = 0 deg.
EXPECTED_MOVES = [
    [0, 0, 0, 12, 12], [1, 0, 0, 12, 12], [2, 0, 0, 12, 12], [0, 1, 0, 12, 12], [0, 2, 0, 12, 12],
    [0, 0, 1, 12, 12], [0, 0, 2, 12, 12], [0, 0, 3, 12, 12],
    [0, 0, 0, 10, 12], [0, 0, 0, 14, 12], [0, 0, 0, 12, 10], [0, 0, 0, 12, 14],
]
EXPECTED_FUNCTIONAL = [0, 1, 3]  # noop, use, attack


def test_each_reduced_action_reaches_minedojo_as_the_right_vector(fake):
    e = minedojo_env.MineDojoEnv(RAW, seed=3, max_steps=100)
    assert fake[0].seed == 3 and fake[0].image_size == (64, 64) and e.action_space.n == 36
    assert e.task.name == "minedojo:" + RAW and e.task.description == f"fake {RAW}"
    e.reset(seed=3)
    for a in range(36):
        e.step(a)
    expected = [m + [f, 0, 0] for m in EXPECTED_MOVES for f in EXPECTED_FUNCTIONAL]
    assert fake[0].actions == expected
    assert (minedojo_env.ACTIONS[0], minedojo_env.ACTIONS[35]) == ("noop/noop", "yaw+30/attack")


def test_step_takes_a_full_vector_and_rejects_bad_actions(fake):
    e = minedojo_env.MineDojoEnv(RAW)
    e.reset()
    e.step(np.array([1, 0, 1, 12, 20, 4, 2, 0]))
    assert fake[0].actions[-1] == [1, 0, 1, 12, 20, 4, 2, 0]
    for bad in (36, -1, [0] * 7, [0, 0, 0, 25, 12, 0, 0, 0]):
        with pytest.raises(ValueError):
            e.step(bad)


def test_observation_image_and_inventory_counts(fake):
    e = minedojo_env.MineDojoEnv(RAW)
    fake[0].start_slots = [("log", 2), ("crafting table", 1), ("air", 0), ("log2", 3), ("log", 64),
                           ("cobblestone", 40), ("cobblestone", 40), ("wooden pickaxe", 1)]
    obs, info = e.reset()
    assert obs["image"].shape == (64, 64, 3) and obs["image"].dtype == np.uint8
    rgb = fake[0]._obs()["rgb"]
    assert obs["image"][5, 7, 2] == rgb[2, 5, 7] and obs["image"][63, 0, 1] == rgb[1, 63, 0]
    inv = dict(zip(minedojo_env.TRACKED, obs["inventory"].tolist(), strict=True))
    assert inv["log"] == 64  # 2 + 3 (log2 is a log) + 64 = 69, clipped at one stack
    assert (inv["crafting_table"], inv["wooden_pickaxe"], inv["cobblestone"], inv["planks"]) == (1, 1, 64, 0)
    assert e.observation_space.contains(obs)
    api = e.make_api(10)
    assert api.inventory() == {"log": 69, "crafting_table": 1, "cobblestone": 80, "wooden_pickaxe": 1}


def test_success_terminates_with_reward_and_episode_info(fake):
    e = minedojo_env.MineDojoEnv(RAW, max_steps=50)
    e.reset()
    fake[0].success_after = 3
    results = [e.step(0) for _ in range(3)]
    assert [r[1] for r in results] == [0.0, 0.0, 1.0]
    _, _, terminated, truncated, info = results[-1]
    assert terminated and not truncated and info["success"] and info["prim_steps"] == 1
    assert info["episode"] == {"r": 1.0, "l": 3, "success": True}
    assert "episode" not in results[0][4] and not results[0][4]["success"]


def test_death_terminates_without_success_and_the_step_limit_truncates(fake):
    e = minedojo_env.MineDojoEnv(RAW, max_steps=4, minedojo_reward=True)
    e.reset()
    fake[0].die_after = 2
    _, reward, terminated, truncated, info = [e.step(0) for _ in range(2)][-1]
    assert terminated and not truncated and not info["success"] and reward == 0.25
    assert info["episode"] == {"r": 0.5, "l": 2, "success": False}
    e.reset()
    fake[0].die_after = None
    flags = [e.step(0)[2:4] for _ in range(4)]
    assert flags == [(False, False)] * 3 + [(False, True)]


def test_api_doc_renders_every_call(fake):
    doc = api_doc(minedojo_env.MineDojoAPI)
    for call in ("attack", "use", "craft", "equip", "place", "move", "turn", "look", "inventory", "holding",
                 "steps_left"):
        assert f"api.{call}(" in doc
    assert doc.startswith("Minecraft for code actions") and "turn(+) turns right" in doc
    assert all(line.split(": ", 1)[1] for line in doc.splitlines() if line.startswith("api."))


def test_the_doc_carries_minecrafts_recipes_as_the_stand_in_plays_them(fake):
    doc = api_doc(minedojo_env.MineDojoAPI)
    assert "Recipes (vanilla Minecraft" in doc and "within 5 blocks" in doc
    for display, (uses, makes, table) in RECIPES.items():
        item = display.replace(" ", "_")
        line = next(line for line in doc.splitlines() if f" {item}: " in line and line.startswith("- craft"))
        recipe = line.split(f" {item}: ")[1].split(";")[0]
        assert all(f"{n} {k}" in recipe for k, n in uses.items()), (item, recipe)
        assert (f"-> {makes} " in recipe) == (makes > 1), (item, recipe)
        assert line.endswith("(each needs a table)") == table, item


def test_camera_calls_split_into_15_degree_bins(fake):
    e = minedojo_env.MineDojoEnv(RAW)
    e.reset()
    api = e.make_api(20)
    api.turn(90)
    api.turn(-270)  # more than one camera step can turn: -180 then -90
    api.look(-31)  # rounds to -30: two bins up
    assert [a[3:5] for a in fake[0].actions] == [[12, 18], [12, 0], [12, 6], [10, 12]]
    assert api.move("forward", 2) and fake[0].actions[-1][:3] == [1, 0, 0]
    assert api.move("left", 1, jump=True) is False and fake[0].actions[-1][:3] == [0, 1, 1]
    with pytest.raises(ValueError):
        api.move("up")


def test_missing_items_wait_one_step_and_bad_craft_names_raise(fake):
    e = minedojo_env.MineDojoEnv(RAW)
    e.reset()
    api = e.make_api(20)
    assert api.equip("diamond") is False and api.place("furnace") is False
    assert fake[0].actions == [minedojo_env.NOOP_VECTOR.tolist()] * 2 and api.steps_left() == 18
    with pytest.raises(ValueError):
        api.craft("unobtainium")


MAKE_AND_PLACE_PLANKS = env.CodeAction("make_and_place_planks", '''
def make_and_place_planks(api):
    """Chop until a log drops, turn one log into planks, hold them and place one."""
    if not api.attack(3):
        return False
    if not api.craft("planks"):
        return False
    api.equip("planks")
    return api.place("planks")
''')


def test_code_action_drives_minedojo_with_full_vectors(fake):
    e = env.make_env("minedojo:" + RAW, seed=1, code_actions=[MAKE_AND_PLACE_PLANKS])
    assert e.action_space.n == 37
    e.reset(seed=1)
    _, reward, terminated, truncated, info = e.step(36)
    attack, planks_slot = [0, 0, 0, 12, 12, 3, 0, 0], 2  # slot 2 is the first empty slot of the fake
    assert fake[0].actions == [attack] * 3 + [[0, 0, 0, 12, 12, 4, CRAFT_ITEMS.index("planks"), 0],
                                               [0, 0, 0, 12, 12, 5, 0, planks_slot],
                                               [0, 0, 0, 12, 12, 6, 0, planks_slot]]
    assert info["prim_steps"] == 6 and info["code_ok"] and info["code_error"] == ""
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert fake[0].hand == "planks" and fake[0].slots[planks_slot] == ("planks", 3)


def test_code_action_stops_at_success_and_at_the_step_budget(fake):
    e = env.make_env("minedojo:" + RAW, code_actions=[MAKE_AND_PLACE_PLANKS], max_macro_steps=2)
    e.reset()
    _, _, terminated, _, info = e.step(36)
    assert info["prim_steps"] == 2 and not terminated and "stopped" in info["code_error"]
    e = env.make_env("minedojo:" + RAW, code_actions=[MAKE_AND_PLACE_PLANKS])
    e.reset()
    fake[-1].success_after = 4
    _, reward, terminated, _, info = e.step(36)
    assert info["prim_steps"] == 4 and terminated and reward == 1.0 and info["success"] and info["code_ok"]


def test_without_minedojo_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "minedojo", None)  # makes `import minedojo` fail
    with pytest.raises(ImportError) as caught:
        env.make_env("minedojo:harvest_milk")
    assert isinstance(caught.value, minedojo_env.MineDojoNotInstalled)
    message = str(caught.value)
    for needed in ("pip install minedojo", "gym==0.21", "JDK 8", "docs.minedojo.org", "Crafter"):
        assert needed in message


def test_passes_gymnasium_check_env(fake):
    from gymnasium.utils.env_checker import check_env

    check_env(minedojo_env.MineDojoEnv(RAW), skip_render_check=True)


def test_shaping_rewards_tracked_item_gains(fake):
    e = minedojo_env.MineDojoEnv(RAW, shaping={"log": 0.5, "planks": 0.1})
    e.reset()
    rewards = [e.step(2)[1] for _ in range(3)]  # noop/attack: the fake drops a log every 3rd hit
    assert rewards == [0.0, 0.0, 0.5]
    craft_planks = minedojo_env.full_action({5: 4, 6: CRAFT_ITEMS.index("planks")})
    assert e.step(craft_planks)[1] == pytest.approx(0.4)  # one log spent (no penalty), 4 planks gained
    with pytest.raises(ValueError):
        minedojo_env.MineDojoEnv(RAW, shaping={"dirt": 1.0})


def test_a_code_action_that_takes_no_step_costs_one_minedojo_noop(fake):
    idle = env.CodeAction("idle", "def idle(api):\n    return len(api.inventory()) > 0\n")
    e = env.make_env("minedojo:" + RAW, code_actions=[idle])
    e.reset()
    info = e.step(36)[4]
    assert fake[0].actions == [minedojo_env.NOOP_VECTOR.tolist()]
    assert info["prim_steps"] == 1 and info["code_ok"]


# ----------------------------------------------------------------------------------------------
# The tasks of the table and their hand-written reference skills.


@pytest.mark.parametrize("task", list(minedojo_env.TASKS))
def test_each_tasks_whole_task_program_solves_it_on_the_stand_in(fake, task):
    program = minedojo_skills.whole_task_program(task, 64)
    e = env.make_env(task, code_actions=[program])
    item = minedojo_env.target(env.get_task(task))
    assert fake[0].task_id == "harvest" and fake[0].target == (item.replace("_", " "), 1)
    e.reset()
    calls = []
    for _ in range(30):
        _, reward, terminated, truncated, info = e.step(36)
        calls.append(info["code_error"])
        if terminated or truncated:
            break
    assert terminated and info["success"] and reward >= 1.0 and not any(calls), calls


@pytest.mark.parametrize("task", list(minedojo_env.TASKS))
def test_the_reference_backend_plans_minedojo_and_its_skills_pass_the_dry_run(fake, task):
    doc = api_doc(minedojo_env.MineDojoAPI)
    plan = SlowAgent(None).plan(env.get_task(task), doc)
    assert {s.name for s in plan.code_subactions} <= set(minedojo_skills.SKILLS) and plan.code_subactions
    assert all("\n" not in s.spec for s in plan.subactions)  # one paragraph each, as the prompts list them
    fast = FastAgent(None, dry_run_task=task)
    for sub in plan.code_subactions:
        action = fast.write(sub, doc)
        assert action is not None and action.doc.startswith(minedojo_skills.LABEL), fast.last_attempts


class Offline:
    """An LLM that records what it was sent and is never reachable."""

    def __init__(self):
        self.sent = []

    def chat(self, messages, **kwargs):
        self.sent.append(messages)
        raise LLMError("offline")


class Scripted(Offline):
    """An LLM that answers every request with one reply."""

    def __init__(self, reply: dict):
        super().__init__()
        self.reply = reply

    def chat(self, messages, **kwargs):
        self.sent.append(messages)
        self.schema = kwargs.get("json_schema")
        return Reply(json.dumps(self.reply), self.reply, {}, "scripted", 0.0, 1)


def test_a_long_minedojo_task_is_not_asked_for_a_chain_no_curriculum_reads(fake):
    task = env.get_task("minedojo:craft_wooden_pickaxe")  # 4 prerequisites: a long chain
    plan = {"subtasks": [], "rl_config": {}, "subactions": [
        {"name": "craft_all", "how": "code", "spec": "Craft planks, sticks, a table and the pickaxe.", "reason": "r"}]}
    llm = Scripted(plan)
    assert SlowAgent(llm).plan(task, api_doc(minedojo_env.MineDojoAPI)).subtasks == []  # accepted as it is
    user = llm.sent[0][-1]["content"]
    assert "no curriculum runs on MineDojo" in user and "Training follows the chain" not in user
    initiation = llm.schema["properties"]["subactions"]["items"]["properties"]["initiation"]  # no view to test
    assert set(initiation["properties"]) == {"inventory", "inventory_below"}


def test_prompts_name_minecraft_and_show_a_minedojo_example(fake):
    task = env.get_task("minedojo:craft_stick")
    doc = api_doc(minedojo_env.MineDojoAPI)
    system, user = (m["content"] for m in plan_messages(task, doc))
    assert "Minecraft (MineDojo)" in system and "Crafter" not in system + user and "log -> planks" in user
    assert '"initiation": {"inventory"' in user and "in_view" not in user  # its API has no view to test,
    assert not any(w in user for w in ("view()", "targets in view", "a meter", "go_to"))  # nor meters, nor go_to
    llm = Offline()
    assert FastAgent(llm, dry_run_task=task.name).write(SubAction("craft_sticks", "code", "Craft sticks."), doc) is None
    system, user = (m["content"] for m in llm.sent[0])
    assert "Minecraft (MineDojo)" in system and "Crafter" not in system + user
    assert "def milk_cow(api)" in user and "drink_water" not in user
