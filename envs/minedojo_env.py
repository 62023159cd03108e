"""The optional MineDojo backend: the same interface as env.CrafterEnv over a Minecraft task.

    env = env.make_env("minedojo:craft_wooden_pickaxe", seed=0)         # a task of the table below
    env = env.make_env("minedojo:harvest_milk_with_empty_bucket_and_cow")  # any MineDojo task id

Tasks are named `minedojo:<task_id>`. The five first tasks of the Plan4MC tech tree (TASKS: log, planks,
stick, crafting table, wooden pickaxe) carry a prerequisite chain, a description and hand-written reference
skills (reference/minedojo_skills.py); they are built on MineDojo's documented Harvest meta task
(`minedojo.make(task_id="harvest", target_names=<item>, target_quantities=1)`), whose success is that many
of the item in the inventory. Any other `<task_id>` goes to `minedojo.make` as it is (MineDojo's
programmatic tasks); an id MineDojo does not know is a ValueError naming it.

The `minedojo` package itself is imported only when such an env is built, so this file imports anywhere
(INSTALL_HELP says what MineDojo needs). Crafter tasks need none of it.

NOT RUN AGAINST A REAL MINEDOJO HERE: MineDojo could not be installed on the machine this was written on.
The adapter follows MineDojo's documentation and source (observation keys, the action space
MultiDiscrete([3, 3, 4, 25, 25, 8, 244, 36]), `is_successful`) and the reduced action space of the
released RL-GPT/Plan4MC trainers; tests/test_minedojo.py checks the mapping against a stand-in with those
documented spaces (and, for the table's tasks, the vanilla wood recipes): all that has been verified.

Read top to bottom: the reduced action space -> the tasks -> the env -> the primitive API for code actions.
"""

from __future__ import annotations

import difflib
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
# The reduced action space: 12 movement/camera choices x 3 functional choices = Discrete(36). MineDojo's full
# space is MultiDiscrete([3, 3, 4, 25, 25, 8, 244, 36]): forward/back, left/right, jump/sneak/sprint, camera
# pitch delta, camera yaw delta (bin 12 = 0 degrees, 15 degrees a bin), functional (0 noop, 1 use, 2 drop,
# 3 attack, 4 craft, 5 equip, 6 place, 7 destroy), the craft argument (an index into ALL_CRAFT_SMELT_ITEMS)
# and the equip/place/destroy argument (an inventory slot). RL-GPT's (Plan4MC's) trainer turns 30 degrees a step.

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


# ----------------------------------------------------------------------------------------------
# Tasks: the first Plan4MC tasks, each "have 1 <item>" (a Harvest meta task), with the chain before it. Step
# limits are this project's choice (Plan4MC's differ per biome), generous: bare-handed, a log takes dozens of steps.

HARVEST_TASK_ID = "harvest"  # MineDojo's meta task: target_names + target_quantities, success = in inventory
KNOWN: list[tuple[str, str, int, tuple[str, ...], str]] = [  # name, item, max steps, chain, description
    ("harvest_log", "log", 1000, (),
     "Get 1 log: find a tree, face its trunk and hold attack until a log drops (dozens of steps bare-handed)."),
    ("craft_planks", "planks", 1000, ("log",),
     "Get 1 planks: get a log, then craft planks from it (1 log gives 4 planks, no table needed)."),
    ("craft_stick", "stick", 1500, ("log", "planks"),
     "Get 1 stick: get a log, craft planks, then craft sticks (2 planks give 4 sticks)."),
    ("craft_crafting_table", "crafting_table", 1500, ("log", "planks"),
     "Get 1 crafting_table in the inventory: get a log, craft planks, craft a crafting table from 4 planks."),
    ("craft_wooden_pickaxe", "wooden_pickaxe", 2000, ("log", "planks", "stick", "crafting_table"),
     "Get 1 wooden_pickaxe: 3 logs make enough planks for sticks (2 planks), a crafting table (4 planks) "
     "and the pickaxe (3 planks + 2 sticks), which is crafted with the table placed nearby."),
]


def _task(name: str, item: str | None, max_steps: int, chain: tuple[str, ...], description: str) -> Task:
    """A task of the table has 1 `item` in the inventory as its test (what MineDojo's Harvest task checks,
    target_quantities=1); any other task is judged by MineDojo's own check."""
    own = {"game": "MineDojo's own success check of this task (is_successful)"}
    success = {"inventory": {item: 1}} if item else own
    return Task(PREFIX + name, success, max_steps, chain, description, tuple(ACTIONS), tuple(TRACKED))


def target(task: Task) -> str | None:
    """The item a task of the table harvests (its test's one inventory item); None for any other task."""
    return next(iter(task.success.get("inventory", {})), None)


TASKS: dict[str, Task] = {PREFIX + n: _task(n, *rest) for n, *rest in KNOWN}
DEFAULT_MAX_STEPS = 500  # a MineDojo task id outside the table


def get_task(name: str) -> Task:
    """The task record of `minedojo:<task_id>`: the table's, or a plain record for any other id (only
    MineDojo knows its own ids; MineDojoEnv turns its ValueError for an unknown one into a message
    naming the id, with close matches from this table only)."""
    task_id = name.removeprefix(PREFIX)
    if not task_id:
        raise ValueError(f"{name!r} names no MineDojo task: write minedojo:<task_id>, e.g. "
                         f"{', '.join(TASKS)}")
    if name in TASKS:
        return TASKS[name]
    return _task(task_id, None, DEFAULT_MAX_STEPS, (), f"The MineDojo task {task_id}.")


def _unknown_id(task_id: str, error: ValueError) -> ValueError:
    """MineDojo's ValueError for an id it does not know, as a sentence naming it. The hint compares ids
    without the shared `minedojo:` and offers only this table's tasks (a Crafter name would not run here)."""
    close = difflib.get_close_matches(task_id, [n.removeprefix(PREFIX) for n in TASKS], n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(PREFIX + c for c in close)}?" if close else ""
    return ValueError(f"MineDojo does not know the task id {task_id!r} ({error}).{hint} Tasks with reference "
                      f"skills: {', '.join(TASKS)}; any MineDojo task id works as minedojo:<task_id>.")


# ----------------------------------------------------------------------------------------------
# The Gymnasium env over MineDojo's old gym API.


class MineDojoEnv(gym.Env):
    """A MineDojo task as a Gymnasium 1.x env: task success terminates, `max_steps` truncates (by default
    the task's limit: the table's, else DEFAULT_MAX_STEPS).

    Observation: {"image": (H, W, 3) uint8 from MineDojo's channel-first `rgb`; "inventory": (len(TRACKED),)
    int32 counts, clipped at 64}. Action: Discrete(36), the paper's reduced space; action 0 is the full noop,
    as in Crafter (env.CodeActionWrapper charges an idle code action with it). `step` also takes a full
    MultiDiscrete 8-vector: the primitive API needs craft/equip/place, which the reduced space leaves out.
    MineDojo's seed is fixed when the simulator is built (a new world costs minutes), so `reset(seed=...)`
    only reseeds Gymnasium's own RNG. `frames = []` records the episode's frames (evaluation GIF, critic)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, task_id: str, seed: int | None = None, max_steps: int | None = None,
                 minedojo_reward: bool = False, image_size: tuple[int, int] = (64, 64),
                 shaping: dict[str, float] | None = None, minedojo_kwargs: dict | None = None,
                 render_mode: str | None = None):
        self.set_shaping(shaping)
        task = get_task(PREFIX + task_id)
        try:
            import minedojo
            mc = importlib.import_module("minedojo.sim.mc_meta.mc")
        except ImportError as e:
            raise MineDojoNotInstalled(INSTALL_HELP) from e
        kwargs = dict(minedojo_kwargs or {})
        if seed is not None:
            kwargs["seed"] = int(seed)
        make_id = task_id
        if target(task) is not None:  # a task of the table: MineDojo's Harvest meta task
            make_id = HARVEST_TASK_ID
            kwargs = {"target_names": target(task), "target_quantities": 1, **kwargs}
        try:
            self._env = minedojo.make(task_id=make_id, image_size=tuple(image_size), **kwargs)
        except ValueError as e:  # MineDojo's answer to an id it does not know
            raise _unknown_id(task_id, e) from e
        nvec = tuple(int(n) for n in self._env.action_space.nvec)
        if nvec[:6] != NVEC[:6] or nvec[7] != NVEC[7]:
            raise RuntimeError(f"MineDojo action space {nvec} is not the documented {NVEC}; the reduced "
                               "action mapping assumes 15-degree camera bins (cam_interval=15)")
        self.craft_items: list[str] = list(mc.ALL_CRAFT_SMELT_ITEMS)  # the craft argument's meaning
        self.task_id, self.minedojo_reward = task_id, minedojo_reward
        self.max_steps = max_steps or task.max_steps
        # the record Crafter tasks carry, so prompts are built alike: the table's, else MineDojo's prompt, no chain
        if target(task) is None:
            prompt = str(getattr(self._env, "task_prompt", "") or task_id)
            task = _task(task_id, None, self.max_steps, (), prompt)
        self.task = task
        self.render_mode = render_mode
        self.frames: list[np.ndarray] | None = None  # set to [] to record every frame (GIFs)
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

    def set_shaping(self, shaping: dict[str, float] | None) -> None:
        """Tracked item -> reward per unit gained (the slow agent's menu); may change between iterations."""
        unknown = set(shaping or {}) - set(TRACKED)
        if unknown:
            raise ValueError(f"shaping weights for untracked items {sorted(unknown)}; tracked: {TRACKED}")
        self.shaping = dict(shaping or {})

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._length, self._return = 0, 0.0
        obs = self._obs(self._env.reset())
        if self.frames is not None:
            self.frames = [obs["image"]]
        return obs, {}

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
        obs = self._obs(raw)
        if self.frames is not None:
            self.frames.append(obs["image"])
        return obs, reward, terminated, truncated, info

    def render(self):
        return None if self._raw is None else np.transpose(self._raw["rgb"], (1, 2, 0))

    def close(self):
        self._env.close()

    def initiation_state(self, with_view: bool) -> tuple[dict[str, int], None]:
        """What code actions' initiation conditions read (core.can_start): the inventory only, since the API
        has no view (a plan may not ask for one here, whatever `with_view` says)."""
        return inventory_counts(self._raw["inventory"]), None

    def make_api(self, budget: int, gamma: float = 1.0) -> MineDojoAPI:
        return MineDojoAPI(self, budget, gamma)


# ----------------------------------------------------------------------------------------------
# The primitive API that code actions are written against.

# Minecraft 1.11's recipes for the tracked items (vanilla; tests/minedojo_stand_in.py follows the wood ones).
RECIPE_TABLE = """Recipes (vanilla Minecraft; "table" means a crafting_table placed nearby: MineDojo's simulator \
(its Malmo craftNearby) counts a table placed in this episode within 5 blocks of the agent's head and in \
view; not checked against a real MineDojo here):
- attack a tree's log block: 1 log (bare hands work); stone: 1 cobblestone, coal ore: 1 coal (both need a \
wooden_pickaxe held); iron ore: 1 iron_ore (stone_pickaxe held); diamond ore: 1 diamond (iron_pickaxe held)
- craft planks: 1 log -> 4 planks; stick: 2 planks -> 4 sticks; crafting_table: 4 planks; torch: 1 coal + \
1 stick -> 4 torches (no table needed for these)
- craft wooden_pickaxe: 3 planks + 2 sticks; stone_pickaxe: 3 cobblestone + 2 sticks; iron_pickaxe: \
3 iron_ingot + 2 sticks; furnace: 8 cobblestone; bucket: 3 iron_ingot (each needs a table)
- craft iron_ingot: smelts 1 iron_ore, with a furnace placed nearby and fuel (coal or planks) in the inventory"""


class MineDojoAPI(PrimitiveAPI):
    """Minecraft for code actions. Items use technical names with underscores: log, planks, stick,
    crafting_table, wooden_pickaxe, cobblestone, stone_pickaxe, coal, furnace, iron_ore, iron_ingot,
    iron_pickaxe, diamond, bucket, milk_bucket, ... Each acting call takes real environment steps
    (one per attack, use, craft, equip, place or walking step; one per camera turn of up to 180
    degrees); a call that cannot act (e.g. placing an item you do not have) waits one step and
    returns False. Angles follow Minecraft: turn(+) turns right, look(+) looks down; both are
    rounded to 15 degrees."""

    RECIPES = RECIPE_TABLE

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
        """Craft or smelt `item` (see Recipes: what it uses, and whether a placed crafting_table or
        furnace must be nearby). One step. Returns True if its count went up."""
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
