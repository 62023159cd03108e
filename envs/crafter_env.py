"""The Crafter backend: the Gymnasium env over Crafter and the primitive API that code actions are
written against. Its tasks and the game's rules as the prompts show them are crafter_tasks.py's.

Read top to bottom: which Crafter -> world seeds -> the env -> the primitive API.
env.py builds envs of every backend (env.make_env); this file knows only Crafter.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from pathlib import Path

import crafter
import crafter.constants as C
import gymnasium as gym
import numpy as np

from core import PrimitiveAPI
from envs import fastcrafter
from envs.crafter_tasks import ACHIEVEMENTS, ACTIONS, ALIASES, ITEMS, TASKS, get_task, recipe_table  # noqa: F401

DIRECTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
VIEW_W, VIEW_H = 9, 7  # the world part of the agent's local view; the player stands at its centre


# ----------------------------------------------------------------------------------------------
# Which Crafter. fastcrafter.Env (the default) gives the same game bit for bit, several times faster;
# "original" keeps crafter.Env for checking. Both keep each chunk's creatures insertion-ordered:
# upstream Crafter iterates a `set` in memory-address order, so which zombie or cow despawns differs
# between runs with the same seed and actions (the statistics of the game are unchanged: only the
# order of an iteration becomes fixed). The original is changed per instance, never globally.

CRAFTER_IMPLS = ("fast", "original")


def make_crafter(impl: str = "fast", **kwargs) -> crafter.Env:
    """A Crafter env (crafter.Env's own arguments) of the chosen implementation. CrafterEnv may choose the
    seed of the next world itself (`world.next_seed`, see world_seed) instead of Crafter's
    hash((seed, episode)), so the seed a stats row records is the one the world was generated from."""
    if impl not in CRAFTER_IMPLS:
        raise ValueError(f"crafter_impl must be one of {CRAFTER_IMPLS}, not {impl!r}")
    env = fastcrafter.Env(semantic=False, **kwargs) if impl == "fast" else crafter.Env(**kwargs)  # see CrafterEnv
    world, world_reset = env._world, env._world.reset

    def reset(seed: int | None = None) -> None:
        world_reset(world.__dict__.pop("next_seed", seed))
        if impl == "original":
            world._chunks = defaultdict(fastcrafter.OrderedChunk)

    world.reset = reset
    return env


# ----------------------------------------------------------------------------------------------
# World seeds: every episode's world is drawn from (run seed, stream, rank, env index, episode number),
# so runs of different seeds, the ranks of one run, the envs of one rank and successive episodes of one
# env all play different worlds, and evaluation never plays a world training saw.

SUBTASK_REWARD = 0.5  # the curriculum's current sub-task, reached: half the task's own success reward of 1
TRAIN, EVAL = 0, 1  # seed streams: training worlds get even world seeds, evaluation worlds odd ones


def world_seed(run_seed: int, stream: int, rank: int, index: int, episode: int) -> int:
    """The seed Crafter generates one episode's world from, in [0, 2**31 - 1) as Crafter's own are.

    A SeedSequence hash of the five numbers, so nearby run seeds give unrelated worlds (reset seeds
    `seed + i` would make `--seed 1` and `--seed 2` play mostly the same worlds). Its parity is the stream,
    so a training world and an evaluation world are never the same; within a stream two episodes share
    a world only by a 30-bit hash collision (about 1 in 20 for 10,000 episodes against 10,000 others).
    """
    h = np.random.SeedSequence([run_seed, stream, rank, index, episode]).generate_state(1)[0]
    return int(h % 2**30) * 2 + stream


# ----------------------------------------------------------------------------------------------
# The Gymnasium env over Crafter.


class CrafterEnv(gym.Env):
    """Crafter as a Gymnasium 1.x env with a task: success terminates, the task's step limit truncates.

    Observation: {"image": (64, 64, 3) uint8, Crafter's own render; "inventory": (16,) uint8 counts}.
    Crafter's `semantic` map is deliberately not passed on: it is the whole world, not what the agent sees.

    Worlds: the n-th reset (n = 0, 1, ...) plays world_seed(seed, stream, rank, index, n) (the trainer's
    envs; `seed` None draws a run seed from numpy's global RNG). reset(seed=s) instead plays the worlds
    crafter.Env(seed=s) plays, hash((s, n + 1)) % (2**31 - 1) from then on, so a seed means what it
    means in Crafter (demos, dry runs and tests pick worlds that way).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(self, task: str = "collect_wood", seed: int | None = None, crafter_reward: bool = False,
                 max_steps: int | None = None, stats_path: str | Path | None = None,
                 shaping: dict[str, float] | None = None, render_mode: str | None = None,
                 stream: int = TRAIN, rank: int = 0, index: int = 0, crafter_impl: str = "fast"):
        self.task = get_task(task)
        self.set_shaping(shaping)
        self.run_seed = int(np.random.randint(0, 2**31 - 1)) if seed is None else int(seed)
        self.seed_key, self.episode_number, self._crafter_seed = (stream, rank, index), -1, None
        self.iteration = 0  # the RL-GPT iteration, written into stats rows (the trainer sets it)
        self.max_steps = max_steps or self.task.max_steps
        self.crafter_reward = crafter_reward or self.task.achievement is None
        self.stats_path = Path(stats_path) if stats_path else None
        self.held_rows: list[dict] | None = None  # a list: rows are kept here, not written (write_held_rows)
        self.render_mode = render_mode
        self._crafter = make_crafter(crafter_impl, seed=0, reward=True, length=None)  # its seed is unused: see reset
        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, (64, 64, 3), np.uint8),
            "inventory": gym.spaces.Box(0, 9, (len(ITEMS),), np.uint8),
        })
        self.action_space = gym.spaces.Discrete(len(ACTIONS))
        self.frames: list[np.ndarray] | None = None  # set to [] to record every frame (GIFs)
        self._image: np.ndarray | None = None
        self.world_seed, self._length, self._crafter_return, self._end = None, 0, 0.0, ""  # no episode yet
        self._achievements = dict.fromkeys(ACHIEVEMENTS, 0)
        self.set_subtask(None)

    def _obs(self, image: np.ndarray) -> dict:
        self._image = image
        inv = self._crafter._player.inventory
        return {"image": image, "inventory": np.fromiter((inv[k] for k in ITEMS), np.uint8, len(ITEMS))}

    def set_shaping(self, shaping: dict[str, float] | None) -> None:
        """Inventory item -> reward per unit gained (the slow agent's menu); may change between iterations."""
        unknown = set(shaping or {}) - set(ITEMS)
        if unknown:
            raise ValueError(f"shaping weights for unknown inventory items {sorted(unknown)}; known: {ITEMS}")
        self.shaping = dict(shaping or {})

    def set_subtask(self, subtask: str | None) -> None:
        """The curriculum's current sub-task (an achievement), or None. Reaching it for the first time in
        an episode is worth SUBTASK_REWARD more; it does not end the episode, so every episode still
        plays for the whole task, and the whole task's success is what every table counts."""
        if subtask is not None and subtask not in ACHIEVEMENTS:
            raise ValueError(f"a Crafter sub-task is an achievement, not {subtask!r}; known: {ACHIEVEMENTS}")
        self.subtask = subtask  # reached already in the episode going on: no bonus for the past
        self._subtask_done = subtask is not None and self._achievements.get(subtask, 0) > 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._crafter_seed, self.episode_number = int(seed), -1
        self.episode_number += 1
        if self._crafter_seed is None:
            self.world_seed = world_seed(self.run_seed, *self.seed_key, self.episode_number)
        else:  # Crafter's own derivation (crafter.Env.reset)
            self.world_seed = hash((self._crafter_seed, self.episode_number + 1)) % (2**31 - 1)
        self._crafter._world.next_seed = self.world_seed  # read by the world reset of make_crafter
        image = self._crafter.reset()
        self._length, self._return, self._crafter_return, self._end = 0, 0.0, 0.0, ""
        self._achievements, self._subtask_done = dict.fromkeys(ACHIEVEMENTS, 0), False
        if self.frames is not None:
            self.frames = [image]
        return self._obs(image), {}

    def step(self, action):
        before = dict(self._crafter._player.inventory) if self.shaping else None
        health = self._crafter._player.health
        image, reward, dead, cinfo = self._crafter.step(int(action))
        self._length += 1
        self._crafter_return += cinfo["reward"]
        goal = self.task.achievement
        success = goal is not None and cinfo["achievements"][goal] > 0
        if goal is not None:
            reward = float(success) + (reward if self.crafter_reward else 0.0)
        if before is not None:
            inv = cinfo["inventory"]
            reward += sum(w * max(0, inv[k] - before[k]) for k, w in self.shaping.items())
        if self.subtask and not self._subtask_done and cinfo["achievements"][self.subtask] > 0:
            self._subtask_done = True
            reward += SUBTASK_REWARD if self.subtask != goal else 0.0  # the task's own success pays already
        self._return += reward
        self._achievements = cinfo["achievements"]
        terminated = bool(dead or success)
        truncated = not terminated and self._length >= self.max_steps
        info = {"prim_steps": 1, "success": success}
        if terminated or truncated:
            self._end = "success" if success else f"died: {self._death_cause(health)}" if dead else "time limit"
            info["episode"] = {"r": self._return, "l": self._length, "success": success,
                               "achievements": sum(v > 0 for v in cinfo["achievements"].values()),
                               "seed": self.world_seed, "subtask": self.subtask or "",
                               "subtask_success": self._subtask_done}
            if self.stats_path and self.held_rows is not None:
                self.held_rows.append(self.stats_row())
            elif self.stats_path:
                self._write_stats(self.stats_row(), self.stats_path)
        if self.frames is not None:
            self.frames.append(image)
        return self._obs(image), reward, terminated, truncated, info

    def initiation_state(self, with_view: bool) -> tuple[dict[str, int], set[str] | None]:
        """What code actions' initiation conditions read (core.can_start): the inventory, and with `with_view`
        the names in the view as the API sees them (read once for all of a step's code actions)."""
        return self._crafter._player.inventory, view_set(self._crafter) if with_view else None

    def stats_row(self) -> dict:
        """The episode so far as one row of Crafter's Recorder format (length, reward, achievement_*),
        so Crafter's own scripts read it, plus its world `seed` and the `iteration` it ended in.
        The trainer also asks for it at the end of a run, for the episodes still going then."""
        row = {"length": self._length, "reward": round(self._crafter_return, 1)}
        row.update({f"achievement_{k}": v for k, v in self._achievements.items()})
        return dict(row, seed=self.world_seed, iteration=self.iteration, end=self._end)

    def _death_cause(self, health_before: int) -> str:
        """What took the player's last health on this step, by Crafter's rules (crafter/objects.py): lava
        kills at once; a zombie next to the player hits for 2 (7 asleep) and then waits 5 steps; an empty
        food, drink or energy meter drains 1 health now and then; a skeleton shoots arrows (2) from at most 5
        cells, so one within 8 is taken for the shooter. Else a zombie hit and was despawned in the same step."""
        player, world = self._crafter._player, self._crafter._world
        if world[player.pos][0] == "lava":
            return "lava"
        near = [(type(o).__name__, o) for o in world.objects if o is not player and o.distance(player) <= 8]
        if any(kind == "Zombie" and o.cooldown == 5 and o.distance(player) <= 1 for kind, o in near):
            return "zombie"
        empty = [name for m, name in (("food", "hunger"), ("drink", "thirst"), ("energy", "fatigue"))
                 if player.inventory[m] == 0]
        if empty and health_before <= 1:
            return " and ".join(empty)
        return "arrow" if any(kind == "Skeleton" for kind, _ in near) else "zombie"

    def write_held_rows(self) -> None:
        """Write the rows held since `held_rows` was set to a list (env.CodeActionVectorEnv), stop holding."""
        for row in self.held_rows or ():
            self._write_stats(row, self.stats_path)
        self.held_rows = None

    @staticmethod
    def _write_stats(row: dict, path: Path) -> None:
        """Append one row. One short `write` on a file opened for appending is atomic on Linux, so
        vector-env workers (and ranks) can share the file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def render(self):
        return self._image

    def make_api(self, budget: int, gamma: float = 1.0) -> CrafterAPI:
        return CrafterAPI(self, budget, gamma)


# ----------------------------------------------------------------------------------------------
# The primitive API for Crafter (the step accounting is core.PrimitiveAPI's).


class CrafterAPI(PrimitiveAPI):
    """Crafter for code actions. Positions are (dx, dy) relative to the player: dx > 0 is right, dy > 0 is
    down; the api sees dx in -4..4 and dy in -3..3 (night's darkness hides nothing from it). Cell names:
    materials water, grass, stone, path, sand, tree, lava, coal, iron, diamond, table, furnace; creatures
    cow, zombie, skeleton and arrow, and plant (a growing sapling) and ripe_plant, each named instead of
    the material under it; "player" at (0, 0); "unknown" outside the world. Walkable: grass, sand, path;
    walking into lava is death; everything else, creatures included, blocks. Inventory health, food,
    drink and energy (0..9): food falls by 1 about every 25 steps, drink every 20, energy every 30 (slower
    asleep); health recovers while none of them is 0, falls while one is, and the episode ends at 0.
    Zombies hit for 2 (7 on a sleeping player), arrows for 2. A cow takes 3 hits, a zombie 5, a skeleton
    3 (a sword hits for 2, 3 or 5: the best one held counts). Every acting call takes real environment
    steps, one per action."""

    RECIPES = recipe_table()
    _QUERIES = ("view", "inventory", "facing", "in_front", "steps_left")  # read the state only: sandbox/host.py

    def _cell(self, dx: int, dy: int) -> str:
        x, y = self._env._crafter._player.pos.tolist()
        return _name(*self._env._crafter._world[x + dx, y + dy])

    def view(self) -> list[list[str]]:
        """The visible 9x7 cells as names (a creature or plant hides the material under it):
        view()[dy + 3][dx + 4]; the player is view()[3][4]."""
        return view_names(self._env._crafter)

    def nearest(self, name: str) -> tuple[int, int] | None:
        """(dx, dy) of the visible cell holding `name` with the least |dx| + |dy| (ties: smaller dx, then
        smaller dy; what blocks the way is ignored), or None."""
        view = self.view()
        return next(((dx, dy) for _, dx, dy in _BY_DISTANCE if view[dy + 3][dx + 4] == name), None)

    def inventory(self) -> dict[str, int]:
        """Counts (0..9) by these keys: health, food, drink, energy, sapling, wood, stone, coal, iron, diamond,
        wood_pickaxe, stone_pickaxe, iron_pickaxe, wood_sword, stone_sword, iron_sword."""
        return dict(self._env._crafter._player.inventory)

    def facing(self) -> tuple[int, int]:
        """The direction the player faces, as (dx, dy)."""
        return tuple(int(v) for v in self._env._crafter._player.facing)

    def in_front(self) -> str:
        """The name of the cell the player faces (what `do` and `place` act on; a creature or plant there
        is named, not the material under it)."""
        return self._cell(*self.facing())

    def move(self, direction: str, times: int = 1) -> bool:
        """Step left/right/up/down `times` times. A blocked step only turns the player to face that way.
        Returns True if the player ended on a different cell."""
        start = tuple(self._env._crafter._player.pos)
        for _ in range(times):
            self._act(ACTIONS.index("move_" + _direction(direction)))
        return tuple(self._env._crafter._player.pos) != start

    def do(self, times: int = 1) -> bool:
        """Interact with the facing cell `times` times: collect a material (see Recipes), hit a creature,
        drink water, eat a ripe plant. Returns True if the inventory changed (counts stop at 9, and hits
        before the last one change nothing)."""
        before = self.inventory()
        for _ in range(times):
            self._act(ACTIONS.index("do"))
        return self.inventory() != before

    def place(self, item: str) -> bool:
        """Place stone, table, furnace or plant on the facing cell (see Recipes). True if it was placed."""
        if item not in C.place:
            raise ValueError(f"place() takes one of {sorted(C.place)}, not {item!r}")
        self._act(ACTIONS.index("place_" + item))
        return self.in_front() == item

    def make(self, item: str) -> bool:
        """Craft wood/stone/iron_pickaxe or _sword (see Recipes: a table nearby, for iron a furnace too).
        True if its count went up."""
        if item not in C.make:
            raise ValueError(f"make() takes one of {sorted(C.make)}, not {item!r}")
        before = self.inventory()[item]
        self._act(ACTIONS.index("make_" + item))
        return self.inventory()[item] > before

    def sleep(self, times: int = 1) -> None:
        """Sleep `times` steps. The player falls asleep only with energy below 9, then sleeps whatever is
        chosen (every action becomes sleep) until energy is 9 again (1 per about 11 steps: up to ~100 steps
        from 0) or it is hurt; waking up is the wake_up achievement. No call says whether the
        player sleeps; inventory()["energy"] rising shows it."""
        for _ in range(times):
            self._act(ACTIONS.index("sleep"))

    def noop(self, times: int = 1) -> None:
        """Wait `times` steps."""
        for _ in range(times):
            self._act(ACTIONS.index("noop"))

    def go_to(self, name: str, max_steps: int = 20) -> bool:
        """Walk to the visible `name` nearest by walking path and face it, in at most `max_steps` steps
        (each also counts against steps_left()). The path is a breadth-first search over the walkable cells
        of the 9x7 view, redone before every step, so moving creatures are followed and a target the view
        gives no path to is passed over for the next nearest. Returns True when facing `name`; False as
        soon as no visible `name` can be reached (at once, with no step, if none can), or when `max_steps`
        run out."""
        for _ in range(max_steps):
            if self.in_front() == name:
                return True
            step = self._first_step(name)
            if step is None:
                return False
            self._act(ACTIONS.index("move_" + step))
        return self.in_front() == name

    def _first_step(self, name: str) -> str | None:
        """Breadth-first search over the visible walkable cells; the first move towards `name`."""
        view = self.view()
        grid = {(dx, dy): view[dy + 3][dx + 4] for dy in range(-3, 4) for dx in range(-4, 5)}
        first: dict[tuple[int, int], str | None] = {(0, 0): None}
        queue = deque([(0, 0)])
        while queue:
            x, y = queue.popleft()
            for word, (ux, uy) in DIRECTIONS.items():
                nxt = (x + ux, y + uy)
                if grid.get(nxt) == name:  # stand here and face it: a blocked move only turns
                    return first[(x, y)] or word
                if nxt not in first and grid.get(nxt) in C.walkable:
                    first[nxt] = first[(x, y)] or word
                    queue.append(nxt)
        return None


def _view_box(crafter) -> tuple[int, int, int, int]:
    """x0, x1, y0, y1 of the 9x7 cells around the player: the api's view."""
    x, y = crafter._player.pos.tolist()
    return x - 4, x + 5, y - 3, y + 4


def view_names(crafter) -> list[list[str]]:
    """The 9x7 cells around the player as names, rows from top: [dy + 3][dx + 4] (CrafterAPI.view)."""
    world, (x0, x1, y0, y1) = crafter._world, _view_box(crafter)
    if hasattr(world, "cell_names"):  # fastcrafter: the same names from two slices of its maps
        return world.cell_names(x0, x1, y0, y1, _name)
    return [[_name(*world[x, y]) for x in range(x0, x1)] for y in range(y0, y1)]


def view_set(crafter) -> set[str]:
    """The names of view_names as a set, for code actions' initiation conditions."""
    world = crafter._world
    if hasattr(world, "names_in"):  # fastcrafter: from the ids in the same two slices
        return world.names_in(*_view_box(crafter), _name)
    return {name for row in view_names(crafter) for name in row}


def _name(material: str | None, obj: object) -> str:
    """A cell's name in the api: its creature or object if any, else its material ("unknown" off the world)."""
    if obj is not None:
        name = type(obj).__name__.lower()
        return "ripe_plant" if name == "plant" and obj.ripe else name
    return material or "unknown"


# the visible cells but the player's, closest first (walking distance ignored), ties by dx, then dy
_BY_DISTANCE = sorted((abs(dx) + abs(dy), dx, dy) for dy in range(-3, 4) for dx in range(-4, 5) if (dx, dy) != (0, 0))


def _direction(word: str) -> str:
    if word not in DIRECTIONS:
        raise ValueError(f"direction must be one of {list(DIRECTIONS)}, not {word!r}")
    return word
