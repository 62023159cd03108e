"""The MineDojo adapter against a stand-in: MineDojo cannot be installed here, so a fake `minedojo`
module with MineDojo's documented observation keys and MultiDiscrete action space records every
action it receives. Run: python -m pytest -q tests/test_minedojo.py
"""

import sys
import types

import numpy as np
import pytest

import env
import minedojo_env
from core import api_doc

NVEC = [3, 3, 4, 25, 25, 8, 244, 36]
CRAFT_ITEMS = ["stick", "planks", "crafting_table", "wooden_pickaxe"] + [f"item_{i}" for i in range(240)]
EMPTY = ("air", 0)


class FakeMineDojo:
    """A tiny world with MineDojo's old gym API: every 3rd attack yields a log, crafting planks turns
    one log into 4 planks, equip/place act on the given inventory slot, walking forward moves +z."""

    def __init__(self, task_id, image_size, seed=None, **kwargs):
        self.task_id, self.image_size, self.seed = task_id, tuple(image_size), seed
        self.action_space = types.SimpleNamespace(nvec=np.array(NVEC))
        self.task_prompt = f"fake {task_id}"
        self.actions: list[list[int]] = []
        self.success_after: int | None = None  # number of steps after which the task succeeds
        self.die_after: int | None = None
        self.start_slots = [("log", 2), ("dirt", 5), EMPTY, EMPTY, ("log", 3)]

    @property
    def is_successful(self) -> bool:
        return self.success_after is not None and len(self.actions) >= self.success_after

    def reset(self):
        self.slots = (self.start_slots + [EMPTY] * 36)[:36]
        self.hand, self.pos, self.hits, self.actions = "air", np.zeros(3), 0, []
        return self._obs()

    def _add(self, name, n):
        i = next((i for i, s in enumerate(self.slots) if s[0] == name), None)
        i = i if i is not None else next(i for i, s in enumerate(self.slots) if s == EMPTY)
        self.slots[i] = (name, self.slots[i][1] + n)

    def step(self, action):
        a = [int(v) for v in action]
        assert len(a) == 8 and all(0 <= v < n for v, n in zip(a, NVEC, strict=True)), a
        self.actions.append(a)
        self.pos[2] += {1: 1.0, 2: -1.0}.get(a[0], 0.0)
        if a[5] == 3:
            self.hits += 1
            if self.hits % 3 == 0:
                self._add("log", 1)
        elif a[5] == 4 and CRAFT_ITEMS[a[6]] == "planks":
            i = next(i for i, s in enumerate(self.slots) if s[0] == "log")
            self.slots[i] = (self.slots[i][0], self.slots[i][1] - 1) if self.slots[i][1] > 1 else EMPTY
            self._add("planks", 4)
        elif a[5] == 5:
            self.hand = self.slots[a[7]][0]
        elif a[5] == 6:
            name, n = self.slots[a[7]]
            self.slots[a[7]] = (name, n - 1) if n > 1 else EMPTY
        done = self.is_successful or (self.die_after is not None and len(self.actions) >= self.die_after)
        return self._obs(), 0.25, done, {}

    def _obs(self):
        h, w = self.image_size
        rgb = (np.arange(3 * h * w) % 251).astype(np.uint8).reshape(3, h, w)  # every pixel different
        return {
            "rgb": rgb,
            "inventory": {"name": np.array([s[0] for s in self.slots]),
                          "quantity": np.array([float(s[1]) for s in self.slots])},
            "equipment": {"name": np.array([self.hand] + ["air"] * 5), "quantity": np.zeros(6)},
            "life_stats": {"life": np.array([20.0]), "food": np.array([20.0])},
            "location_stats": {"pos": self.pos.copy(), "yaw": np.zeros(1), "pitch": np.zeros(1)},
            "voxels": {"block_name": np.full((3, 3, 3), "air")},
            "masks": {"action_type": np.ones(8, bool), "craft_smelt": np.ones(244, bool)},
        }

    def close(self):
        pass


@pytest.fixture
def fake(monkeypatch):
    """Install the stand-in as `minedojo` (and the MineDojo module holding the craft list); returns
    the list of fake envs `minedojo.make` has built."""
    made = []
    mod = types.ModuleType("minedojo")

    def make(task_id, image_size, **kwargs):
        made.append(FakeMineDojo(task_id, image_size, **kwargs))
        return made[-1]

    mod.make = make
    mc = types.ModuleType("minedojo.sim.mc_meta.mc")
    mc.ALL_CRAFT_SMELT_ITEMS = CRAFT_ITEMS
    for name, m in [("minedojo", mod), ("minedojo.sim", types.ModuleType("minedojo.sim")),
                    ("minedojo.sim.mc_meta", types.ModuleType("minedojo.sim.mc_meta")),
                    ("minedojo.sim.mc_meta.mc", mc)]:
        monkeypatch.setitem(sys.modules, name, m)
    return made


# The paper's 12 movement choices written out in MineDojo's documented terms, independently of the
# module: [forward/back, left/right, jump/sneak/sprint, pitch bin, yaw bin]; camera bin 12 = 0 deg.
EXPECTED_MOVES = [
    [0, 0, 0, 12, 12], [1, 0, 0, 12, 12], [2, 0, 0, 12, 12], [0, 1, 0, 12, 12], [0, 2, 0, 12, 12],
    [0, 0, 1, 12, 12], [0, 0, 2, 12, 12], [0, 0, 3, 12, 12],
    [0, 0, 0, 10, 12], [0, 0, 0, 14, 12], [0, 0, 0, 12, 10], [0, 0, 0, 12, 14],
]
EXPECTED_FUNCTIONAL = [0, 1, 3]  # noop, use, attack


def test_each_reduced_action_reaches_minedojo_as_the_right_vector(fake):
    e = minedojo_env.MineDojoEnv("harvest_log", seed=3, max_steps=100)
    assert fake[0].seed == 3 and fake[0].image_size == (64, 64) and e.action_space.n == 36
    assert e.task.name == "minedojo:harvest_log" and e.task.description == "fake harvest_log"
    e.reset(seed=3)
    for a in range(36):
        e.step(a)
    expected = [m + [f, 0, 0] for m in EXPECTED_MOVES for f in EXPECTED_FUNCTIONAL]
    assert fake[0].actions == expected
    assert (minedojo_env.ACTIONS[0], minedojo_env.ACTIONS[35]) == ("noop/noop", "yaw+30/attack")


def test_step_takes_a_full_vector_and_rejects_bad_actions(fake):
    e = minedojo_env.MineDojoEnv("harvest_log")
    e.reset()
    e.step(np.array([1, 0, 1, 12, 20, 4, 2, 0]))
    assert fake[0].actions[-1] == [1, 0, 1, 12, 20, 4, 2, 0]
    for bad in (36, -1, [0] * 7, [0, 0, 0, 25, 12, 0, 0, 0]):
        with pytest.raises(ValueError):
            e.step(bad)


def test_observation_image_and_inventory_counts(fake):
    e = minedojo_env.MineDojoEnv("harvest_log")
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
    e = minedojo_env.MineDojoEnv("harvest_log", max_steps=50)
    e.reset()
    fake[0].success_after = 3
    results = [e.step(0) for _ in range(3)]
    assert [r[1] for r in results] == [0.0, 0.0, 1.0]
    _, _, terminated, truncated, info = results[-1]
    assert terminated and not truncated and info["success"] and info["prim_steps"] == 1
    assert info["episode"] == {"r": 1.0, "l": 3, "success": True}
    assert "episode" not in results[0][4] and not results[0][4]["success"]


def test_death_terminates_without_success_and_the_step_limit_truncates(fake):
    e = minedojo_env.MineDojoEnv("harvest_log", max_steps=4, minedojo_reward=True)
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


def test_camera_calls_split_into_15_degree_bins(fake):
    e = minedojo_env.MineDojoEnv("harvest_log")
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
    e = minedojo_env.MineDojoEnv("harvest_log")
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
    e = env.make_env("minedojo:harvest_log", seed=1, code_actions=[MAKE_AND_PLACE_PLANKS])
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
    e = env.make_env("minedojo:harvest_log", code_actions=[MAKE_AND_PLACE_PLANKS], max_macro_steps=2)
    e.reset()
    _, _, terminated, _, info = e.step(36)
    assert info["prim_steps"] == 2 and not terminated and "stopped" in info["code_error"]
    e = env.make_env("minedojo:harvest_log", code_actions=[MAKE_AND_PLACE_PLANKS])
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

    check_env(minedojo_env.MineDojoEnv("harvest_log"), skip_render_check=True)


def test_shaping_rewards_tracked_item_gains(fake):
    e = minedojo_env.MineDojoEnv("harvest_log", shaping={"log": 0.5, "planks": 0.1})
    e.reset()
    rewards = [e.step(2)[1] for _ in range(3)]  # noop/attack: the fake drops a log every 3rd hit
    assert rewards == [0.0, 0.0, 0.5]
    craft_planks = minedojo_env.full_action({5: 4, 6: CRAFT_ITEMS.index("planks")})
    assert e.step(craft_planks)[1] == pytest.approx(0.4)  # one log spent (no penalty), 4 planks gained
    with pytest.raises(ValueError):
        minedojo_env.MineDojoEnv("harvest_log", shaping={"dirt": 1.0})


def test_a_code_action_that_takes_no_step_costs_one_minedojo_noop(fake):
    idle = env.CodeAction("idle", "def idle(api):\n    return len(api.inventory()) > 0\n")
    e = env.make_env("minedojo:harvest_log", code_actions=[idle])
    e.reset()
    info = e.step(36)[4]
    assert fake[0].actions == [minedojo_env.NOOP_VECTOR.tolist()]
    assert info["prim_steps"] == 1 and info["code_ok"]
