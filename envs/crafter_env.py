"""The Crafter backend: the Gymnasium env over Crafter. The primitive API that code actions are written
against is crafter_api.py's; the tasks and the game's rules as the prompts show them are crafter_tasks.py's.

Read top to bottom: which Crafter -> world seeds -> the env.
env.py builds envs of every backend (env.make_env); this file knows only Crafter.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import crafter
import gymnasium as gym
import numpy as np

from core import succeeded
from envs import fastcrafter
from envs.crafter_api import CrafterAPI, view_set
from envs.crafter_tasks import ACHIEVEMENTS, ACTIONS, ALIASES, ITEMS, TASKS, get_task, recipe_table  # noqa: F401

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
        self.crafter_reward = crafter_reward or not self.task.success
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
        success = succeeded(self.task.success, cinfo["achievements"], cinfo["inventory"], self._length, not dead)
        if self.task.success:
            reward = float(success) + (reward if self.crafter_reward else 0.0)
        if before is not None:
            inv = cinfo["inventory"]
            reward += sum(w * max(0, inv[k] - before[k]) for k, w in self.shaping.items())
        if self.subtask and not self._subtask_done and cinfo["achievements"][self.subtask] > 0:
            self._subtask_done = True
            reward += SUBTASK_REWARD if self.subtask != self.task.achievement else 0.0  # the task's own pays already
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
        so Crafter's own scripts read it, plus its world `seed`, the `iteration` it ended in, how it ended, and
        for a task whose success test reads the inventory, the inventory at the end.
        The trainer also asks for it at the end of a run, for the episodes still going then."""
        row = {"length": self._length, "reward": round(self._crafter_return, 1)}
        row.update({f"achievement_{k}": v for k, v in self._achievements.items()})
        row = dict(row, seed=self.world_seed, iteration=self.iteration, end=self._end)
        if "inventory" in self.task.success:  # what the test reads (env.row_success); other tasks' rows keep Crafter's
            player = self._crafter._player  # None before the first reset
            row["inventory"] = dict(player.inventory) if player else {}
        return row

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
