"""The optional MineDojo backend: the same interface as env.CrafterEnv over a Minecraft task.

    env = env.make_env("minedojo:harvest_milk_with_empty_bucket_and_cow", seed=0)

Tasks are named `minedojo:<task_id>`; the `minedojo` package itself is imported only when such an
env is built, so this file imports anywhere. MineDojo itself (`pip install minedojo`)
pins gym 0.21 and needs JDK 8 and a Minecraft build; see
https://docs.minedojo.org/sections/getting_started/install.html. Crafter tasks need none of it.

NOT RUN AGAINST A REAL MINEDOJO HERE: MineDojo could not be installed on the machine this was
written on. The adapter follows MineDojo's documentation and source (observation keys, the
MultiDiscrete([3, 3, 4, 25, 25, 8, 244, 36]) action space, `is_successful`) and the reduced action
space of the released RL-GPT/Plan4MC trainers; tests/test_minedojo.py checks the mapping against a
stand-in with those documented spaces, which is all that has been verified.

Read top to bottom: the reduced action space -> the env -> the primitive API for code actions.
"""

from __future__ import annotations

import importlib

import gymnasium as gym
import numpy as np

from core import PrimitiveAPI, Task

PREFIX = "minedojo:"  # task names `minedojo:<task_id>` are MineDojo's; every other name is Crafter's

INSTALL_HELP = (
    "The MineDojo backend needs the `minedojo` package, which could not be imported. MineDojo pins "
    "gym==0.21, needs JDK 8 (and xvfb or MINEDOJO_HEADLESS=1 on a headless machine) and compiles "
    "Minecraft on first use: install JDK 8, then `pip install minedojo` into this environment, following "
    "https://docs.minedojo.org/sections/getting_started/install.html, and check it with MineDojo's "
    "validate_install.py script. Crafter tasks (every task not named `minedojo:...`, e.g. `collect_wood`) "
    "need none of this."
)


class MineDojoNotInstalled(ImportError):
    """Raised instead of a bare ModuleNotFoundError so the user learns what to install and why."""


# ----------------------------------------------------------------------------------------------
# The reduced action space: 12 movement/camera choices x 3 functional choices = Discrete(36).
# MineDojo's full space is MultiDiscrete([3, 3, 4, 25, 25, 8, 244, 36]): forward/back, left/right,
# jump/sneak/sprint, camera pitch delta, camera yaw delta (bin 12 = 0 degrees, 15 degrees a bin),
# functional (0 noop, 1 use, 2 drop, 3 attack, 4 craft, 5 equip, 6 place, 7 destroy), the craft
# argument (an index into MineDojo's ALL_CRAFT_SMELT_ITEMS) and the equip/place/destroy argument (an
# inventory slot). The released RL-GPT (Plan4MC) trainer turns the camera 2 bins = 30 degrees a step.

NVEC = (3, 3, 4, 25, 25, 8, 244, 36)
CAMERA_CENTRE, CAMERA_BIN_DEGREES, CAMERA_STEP_BINS = 12, 15, 2
NOOP_VECTOR = np.array([0, 0, 0, CAMERA_CENTRE, CAMERA_CENTRE, 0, 0, 0], np.int64)
FN_USE, FN_ATTACK, FN_CRAFT, FN_EQUIP, FN_PLACE = 1, 3, 4, 5, 6

WALK = {"forward": {0: 1}, "back": {0: 2}, "left": {1: 1}, "right": {1: 2}}  # {index: value} to set
# name, {MultiDiscrete index: value}; order as in the released trainer's `transform_action`
MOVES: list[tuple[str, dict[int, int]]] = [
    ("noop", {}), *WALK.items(),
    ("jump", {2: 1}), ("sneak", {2: 2}), ("sprint", {2: 3}),
    ("pitch-30", {3: CAMERA_CENTRE - CAMERA_STEP_BINS}), ("pitch+30", {3: CAMERA_CENTRE + CAMERA_STEP_BINS}),
    ("yaw-30", {4: CAMERA_CENTRE - CAMERA_STEP_BINS}), ("yaw+30", {4: CAMERA_CENTRE + CAMERA_STEP_BINS}),
]
FUNCTIONALS: list[tuple[str, int]] = [("noop", 0), ("use", FN_USE), ("attack", FN_ATTACK)]
ACTIONS: list[str] = [f"{m}/{f}" for m, _ in MOVES for f, _ in FUNCTIONALS]  # index = 3 * move + functional


def full_action(parts: dict[int, int]) -> np.ndarray:
    """MineDojo's 8-vector: the noop with the given {index: value} entries set."""
    vec = NOOP_VECTOR.copy()
    for i, v in parts.items():
        vec[i] = v
    return vec


def to_multidiscrete(action: int) -> np.ndarray:
    """Reduced action index (0..35) -> MineDojo's 8-vector. Index 0 is the full noop."""
    move, functional = divmod(int(action), len(FUNCTIONALS))
    return full_action({**MOVES[move][1], 5: FUNCTIONALS[functional][1]})


# Inventory entries in the observation: the tech tree up to a diamond, plus the harvest tasks'
# items. MineDojo names items with spaces ("crafting table"); they are compared with underscores.
TRACKED: list[str] = [
    "log", "planks", "stick", "crafting_table", "wooden_pickaxe", "cobblestone", "stone_pickaxe",
    "coal", "furnace", "torch", "iron_ore", "iron_ingot", "iron_pickaxe", "diamond", "bucket",
    "milk_bucket", "water_bucket", "shears", "wool",
]
SAME_AS = {"log2": "log"}  # acacia/dark-oak logs are a second block id in Minecraft 1.11
MAX_COUNT = 64  # observation counts are clipped at one stack; MineDojoAPI.inventory() is exact


def item_name(name: str) -> str:
    """MineDojo's display name ("crafting table") -> the technical name used here ("crafting_table")."""
    name = str(name).replace(" ", "_")
    return SAME_AS.get(name, name)


def inventory_counts(raw_inventory: dict) -> dict[str, int]:
    """Sum MineDojo's per-slot names/quantities into item -> count (empty slots are "air")."""
    counts: dict[str, int] = {}
    for name, qty in zip(raw_inventory["name"], raw_inventory["quantity"], strict=True):
        name = item_name(name)
        if name != "air" and qty > 0:
            counts[name] = counts.get(name, 0) + int(qty)
    return counts


def get_task(name: str) -> Task:
    """The task record of `minedojo:<task_id>`. Any id is accepted here: only MineDojo knows its own
    ids, and MineDojoEnv turns its ValueError for an unknown one into a message naming the id."""
    task_id = name.removeprefix(PREFIX)
    if not task_id:
        raise ValueError(f"{name!r} names no MineDojo task: write minedojo:<task_id>, e.g. "
                         "minedojo:harvest_milk_with_empty_bucket_and_cow")
    return Task(PREFIX + task_id, None, 500, (), f"The MineDojo task {task_id}.", tuple(ACTIONS), tuple(TRACKED))


# ----------------------------------------------------------------------------------------------
# The Gymnasium env over MineDojo's old gym API.


class MineDojoEnv(gym.Env):
    """A MineDojo task as a Gymnasium 1.x env: task success terminates, `max_steps` truncates.

    Observation: {"image": (H, W, 3) uint8 from MineDojo's channel-first `rgb`; "inventory":
    (len(TRACKED),) int32 counts, clipped at 64}. Action: Discrete(36), the paper's reduced space;
    action 0 is the full noop, as in Crafter (env.CodeActions charges an idle code action with it).
    `step` also takes a full MultiDiscrete 8-vector: the primitive API needs craft/equip/place,
    which the reduced space leaves out. MineDojo's seed is fixed when the simulator is built (a new
    world costs minutes), so `reset(seed=...)` only reseeds Gymnasium's own RNG.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, task_id: str, seed: int | None = None, max_steps: int = 500,
                 minedojo_reward: bool = False, image_size: tuple[int, int] = (64, 64),
                 shaping: dict[str, float] | None = None, minedojo_kwargs: dict | None = None,
                 render_mode: str | None = None):
        self.shaping = dict(shaping or {})  # tracked item -> reward per unit gained, as for Crafter tasks
        unknown = set(self.shaping) - set(TRACKED)
        if unknown:
            raise ValueError(f"shaping weights for untracked items {sorted(unknown)}; tracked: {TRACKED}")
        try:
            import minedojo
            mc = importlib.import_module("minedojo.sim.mc_meta.mc")
        except ImportError as e:
            raise MineDojoNotInstalled(INSTALL_HELP) from e
        kwargs = dict(minedojo_kwargs or {})
        if seed is not None:
            kwargs["seed"] = int(seed)
        self._env = minedojo.make(task_id=task_id, image_size=tuple(image_size), **kwargs)
        nvec = tuple(int(n) for n in self._env.action_space.nvec)
        if nvec[:6] != NVEC[:6] or nvec[7] != NVEC[7]:
            raise RuntimeError(f"MineDojo action space {nvec} is not the documented {NVEC}; the reduced "
                               "action mapping assumes 15-degree camera bins (cam_interval=15)")
        self.craft_items: list[str] = list(mc.ALL_CRAFT_SMELT_ITEMS)  # the craft argument's meaning
        self.task_id, self.max_steps, self.minedojo_reward = task_id, max_steps, minedojo_reward
        # the same record Crafter tasks carry, so prompts are built the same way; MineDojo has no chain
        prompt = str(getattr(self._env, "task_prompt", "") or task_id)
        self.task = Task(PREFIX + task_id, None, max_steps, (), prompt, tuple(ACTIONS), tuple(TRACKED))
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, (*image_size, 3), np.uint8),
            "inventory": gym.spaces.Box(0, MAX_COUNT, (len(TRACKED),), np.int32),
        })
        self.action_space = gym.spaces.Discrete(len(ACTIONS))
        self._raw: dict | None = None  # MineDojo's last observation, read by the primitive API

    def _obs(self, raw: dict) -> dict:
        self._raw = raw
        counts = inventory_counts(raw["inventory"])
        inv = np.array([min(counts.get(k, 0), MAX_COUNT) for k in TRACKED], np.int32)
        image = np.ascontiguousarray(np.transpose(raw["rgb"], (1, 2, 0)), dtype=np.uint8)  # (3,H,W)->(H,W,3)
        return {"image": image, "inventory": inv}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._length, self._return = 0, 0.0
        return self._obs(self._env.reset()), {}

    def step(self, action):
        vec = np.asarray(action, np.int64)
        if vec.ndim == 0:
            if not 0 <= int(vec) < len(ACTIONS):
                raise ValueError(f"action {int(vec)} is outside the reduced space 0..{len(ACTIONS) - 1}")
            vec = to_multidiscrete(int(vec))
        elif vec.shape != (len(NVEC),) or np.any(vec < 0) or np.any(vec >= np.array(NVEC)):
            raise ValueError(f"a full MineDojo action is 8 ints below {NVEC}, not {action!r}")
        before = inventory_counts(self._raw["inventory"]) if self.shaping else {}
        raw, reward, done, _ = self._env.step(vec)
        self._length += 1
        success = bool(getattr(self._env, "is_successful", False))  # MineDojo's MetaTaskBase property
        reward = float(success) + (float(reward) if self.minedojo_reward else 0.0)
        if self.shaping:
            after = inventory_counts(raw["inventory"])
            reward += sum(w * max(0, after.get(k, 0) - before.get(k, 0)) for k, w in self.shaping.items())
        self._return += reward
        terminated = bool(done or success)  # done without success: the agent died (or MineDojo ended it)
        truncated = not terminated and self._length >= self.max_steps
        info = {"prim_steps": 1, "success": success}
        if terminated or truncated:
            info["episode"] = {"r": self._return, "l": self._length, "success": success}
        return self._obs(raw), reward, terminated, truncated, info

    def render(self):
        return None if self._raw is None else np.transpose(self._raw["rgb"], (1, 2, 0))

    def close(self):
        self._env.close()

    def make_api(self, budget: int, gamma: float = 1.0) -> MineDojoAPI:
        return MineDojoAPI(self, budget, gamma)


# ----------------------------------------------------------------------------------------------
# The primitive API that code actions are written against.


class MineDojoAPI(PrimitiveAPI):
    """Minecraft for code actions. Items use technical names with underscores: log, planks, stick,
    crafting_table, wooden_pickaxe, cobblestone, stone_pickaxe, coal, furnace, iron_ore, iron_ingot,
    iron_pickaxe, diamond, bucket, milk_bucket, ... Each acting call takes real environment steps
    (one per attack, use, craft, equip, place or walking step; one per camera turn of up to 180
    degrees); a call that cannot act (e.g. placing an item you do not have) waits one step and
    returns False. Angles follow Minecraft: turn(+) turns right, look(+) looks down; both are
    rounded to 15 degrees."""

    def _slot(self, item: str) -> int | None:
        names = [item_name(n) for n in self._env._raw["inventory"]["name"]]
        return names.index(item) if item in names else None

    def _position(self) -> np.ndarray:
        return np.array(self._env._raw["location_stats"]["pos"], float)

    def inventory(self) -> dict[str, int]:
        """Item name -> count, summed over all inventory slots (empty slots left out)."""
        return inventory_counts(self._env._raw["inventory"])

    def holding(self) -> str:
        """The item in the main hand ("air" when empty)."""
        return item_name(self._env._raw["equipment"]["name"][0])

    def attack(self, times: int = 1) -> bool:
        """Attack/mine what the crosshair points at, `times` steps in a row (breaking a block takes many
        steps: a log needs dozens bare-handed). Returns True if the inventory changed."""
        before = self.inventory()
        for _ in range(times):
            self._act(full_action({5: FN_ATTACK}))
        return self.inventory() != before

    def use(self) -> bool:
        """Use the held item on what the crosshair points at (e.g. a bucket on a cow). True if the
        inventory changed."""
        before = self.inventory()
        self._act(full_action({5: FN_USE}))
        return self.inventory() != before

    def craft(self, item: str) -> bool:
        """Craft or smelt `item` (a crafting table or furnace must be nearby where the recipe needs one).
        Returns True if its count went up."""
        if item not in self._env.craft_items:
            raise ValueError(f"craft() takes a craftable item such as planks, stick, crafting_table, "
                             f"wooden_pickaxe, furnace or iron_ingot, not {item!r}")
        before = self.inventory().get(item, 0)
        self._act(full_action({5: FN_CRAFT, 6: self._env.craft_items.index(item)}))
        return self.inventory().get(item, 0) > before

    def equip(self, item: str) -> bool:
        """Hold `item` from the inventory in the main hand. True if it is held afterwards."""
        slot = self._slot(item)
        self._act(NOOP_VECTOR if slot is None else full_action({5: FN_EQUIP, 7: slot}))
        return self.holding() == item

    def place(self, item: str) -> bool:
        """Place `item` (a block such as crafting_table, furnace or cobblestone) where the crosshair
        points. True if one left the inventory."""
        slot, before = self._slot(item), self.inventory().get(item, 0)
        self._act(NOOP_VECTOR if slot is None else full_action({5: FN_PLACE, 7: slot}))
        return self.inventory().get(item, 0) < before

    def move(self, direction: str, times: int = 1, jump: bool = False) -> bool:
        """Walk forward/back/left/right (relative to where the agent faces) `times` steps, jumping
        each step if `jump` (to climb a block). Returns True if the position changed."""
        if direction not in WALK:
            raise ValueError(f"direction must be one of {list(WALK)}, not {direction!r}")
        start = self._position()
        for _ in range(times):
            self._act(full_action({**WALK[direction], 2: 1 if jump else 0}))
        return bool(np.any(np.abs(self._position() - start) > 1e-6))

    def turn(self, yaw_degrees: float) -> None:
        """Turn right (+) or left (-) by `yaw_degrees`."""
        for bins in _camera_steps(yaw_degrees):
            self._act(full_action({4: CAMERA_CENTRE + bins}))

    def look(self, pitch_degrees: float) -> None:
        """Tilt the view down (+) or up (-) by `pitch_degrees` (Minecraft stops at straight up/down)."""
        for bins in _camera_steps(pitch_degrees):
            self._act(full_action({3: CAMERA_CENTRE + bins}))


def _camera_steps(degrees: float) -> list[int]:
    """Split a turn into camera deltas of at most 180 degrees (12 bins of 15 degrees) each."""
    bins = int(round(float(degrees) / CAMERA_BIN_DEGREES))
    steps = []
    while bins:
        step = max(-CAMERA_CENTRE, min(CAMERA_CENTRE, bins))
        steps.append(step)
        bins -= step
    return steps
