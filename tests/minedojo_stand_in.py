"""A stand-in for the `minedojo` module: MineDojo cannot be installed here, so the `fake` fixture installs a
module with MineDojo's documented observation keys and MultiDiscrete action space, whose envs record every
action they receive. Used by tests/test_minedojo.py (the adapter, skills, prompts) and
tests/test_minedojo_train.py (train.py end to end)."""

import sys
import types

import numpy as np

NVEC = [3, 3, 4, 25, 25, 8, 244, 36]
CRAFT_ITEMS = ["stick", "planks", "crafting_table", "wooden_pickaxe"] + [f"item_{i}" for i in range(240)]
EMPTY = ("air", 0)
RAW = "harvest_wool_with_shears_and_sheep"  # one of MineDojo's own programmatic task ids, passed on as it is
KNOWN_IDS = {"harvest", RAW, "harvest_milk_with_empty_bucket_and_cow"}  # the ids the stand-in knows
# item crafted -> (what it uses, how many it makes, needs a crafting table placed nearby): vanilla Minecraft
RECIPES = {"planks": ({"log": 1}, 4, False), "stick": ({"planks": 2}, 4, False),
           "crafting table": ({"planks": 4}, 1, False), "wooden pickaxe": ({"planks": 3, "stick": 2}, 1, True)}


class FakeMineDojo:
    """A tiny world with MineDojo's old gym API: every 3rd attack yields a log, crafting follows
    RECIPES (nothing happens without the materials), equip/place act on the given inventory slot (placing
    a crafting table puts one nearby), walking forward moves +z. Slots hold MineDojo's display names
    ("crafting table"). A Harvest meta task (task_id "harvest") starts with an empty inventory and
    succeeds once the target is in it, as MineDojo's does; an id it does not know is a ValueError,
    as from `minedojo.make`."""

    def __init__(self, task_id, image_size, seed=None, target_names=None, target_quantities=1, **kwargs):
        if task_id not in KNOWN_IDS:
            raise ValueError(f"task_id {task_id} is not a valid MineDojo task")
        self.task_id, self.image_size, self.seed = task_id, tuple(image_size), seed
        self.target = (target_names.replace("_", " "), target_quantities) if task_id == "harvest" else None
        self.action_space = types.SimpleNamespace(nvec=np.array(NVEC))
        self.task_prompt = f"fake {task_id}"
        self.actions: list[list[int]] = []
        self.success_after: int | None = None  # number of steps after which the task succeeds
        self.die_after: int | None = None
        self.start_slots = [] if self.target else [("log", 2), ("dirt", 5), EMPTY, EMPTY, ("log", 3)]

    @property
    def is_successful(self) -> bool:
        if self.target:
            return self._count(self.target[0]) >= self.target[1]
        return self.success_after is not None and len(self.actions) >= self.success_after

    def reset(self):
        self.slots = (self.start_slots + [EMPTY] * 36)[:36]
        self.hand, self.pos, self.hits, self.actions, self.table_near = "air", np.zeros(3), 0, [], False
        return self._obs()

    def _count(self, name):
        return sum(n for s, n in self.slots if s == name)

    def _add(self, name, n):
        i = next((i for i, s in enumerate(self.slots) if s[0] == name), None)
        i = i if i is not None else next(i for i, s in enumerate(self.slots) if s == EMPTY)
        self.slots[i] = (name, self.slots[i][1] + n)

    def _take(self, name, n):
        for i, (s, have) in enumerate(self.slots):
            if s == name and n > 0:
                used = min(n, have)
                self.slots[i] = (s, have - used) if have > used else EMPTY
                n -= used

    def _craft(self, name):
        uses, makes, table = RECIPES.get(name, ({"nothing": 1}, 0, False))
        if all(self._count(k) >= n for k, n in uses.items()) and (self.table_near or not table):
            for k, n in uses.items():
                self._take(k, n)
            self._add(name, makes)

    def step(self, action):
        a = [int(v) for v in action]
        assert len(a) == 8 and all(0 <= v < n for v, n in zip(a, NVEC, strict=True)), a
        self.actions.append(a)
        self.pos[2] += {1: 1.0, 2: -1.0}.get(a[0], 0.0)
        if a[5] == 3:
            self.hits += 1
            if self.hits % 3 == 0:
                self._add("log", 1)
        elif a[5] == 4:
            self._craft(CRAFT_ITEMS[a[6]].replace("_", " "))
        elif a[5] == 5:
            self.hand = self.slots[a[7]][0]
        elif a[5] == 6:
            name, n = self.slots[a[7]]
            self.slots[a[7]] = (name, n - 1) if n > 1 else EMPTY
            self.table_near |= name == "crafting table"
        done = self.is_successful or (self.die_after is not None and len(self.actions) >= self.die_after)
        return self._obs(), 0.25, done, {}

    def _obs(self):
        h, w = self.image_size
        # every pixel different, and every frame (a GIF writer merges equal frames)
        rgb = ((np.arange(3 * h * w) + len(self.actions)) % 251).astype(np.uint8).reshape(3, h, w)
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


def install(monkeypatch) -> list[FakeMineDojo]:
    """Install the stand-in as `minedojo` (and the MineDojo module holding the craft list); returns
    the list of fake envs `minedojo.make` has built (the test modules' `fake` fixture)."""
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
