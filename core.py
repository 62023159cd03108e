"""What every backend and both agents share: the run's mode, the task record, the primitive API's step accounting,
code actions as text, and the slow agent's plan.

Nothing here knows a game: Crafter's tasks live in envs/crafter_tasks.py, MineDojo's in envs/minedojo_env.py, and
env.get_task finds either. Each backend's tasks carry its vocabulary (base action names, inventory
items, milestones), so a plan is checked against the game it is for. Of the project it imports only
sandbox/limits.py, for the exceptions that stop a code action, and prompts/common.py, for how the API doc says a
call runs (CALL_RULES).
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from time import perf_counter

import gymnasium as gym

from prompts.common import CALL_RULES
from sandbox.limits import EpisodeEnded, StepBudgetExceeded

# ----------------------------------------------------------------------------------------------
# Modes: what a run trains (--mode), the method and the baselines it is measured against.


class Mode(str, Enum):
    """A str, so a mode read back from config.json or a result file compares equal to its member."""

    RLGPT = "rlgpt"  # RL-GPT: the slow agent plans, the fast agent writes code actions, PPO learns the rest
    RL = "rl"  # plain PPO over the base actions: no plan, no code
    RL_CONFIG = "rl+config"  # PPO with the plan's RL config (action mask, shaping), no code action
    CODE = "code"  # one program for the whole task, no RL: the pure code-as-policy baseline

    def __str__(self) -> str:  # as the user types it (logs, run names, f-strings)
        return self.value

    @property
    def plans(self) -> bool:
        """The slow agent plans (every mode but plain PPO)."""
        return self is not Mode.RL

    @property
    def uses_plan_config(self) -> bool:
        """PPO trains with the plan's RL config (shaping, mask, the planner's curriculum)."""
        return self in (Mode.RLGPT, Mode.RL_CONFIG)


# ----------------------------------------------------------------------------------------------
# Tasks.


@dataclass(frozen=True)
class Task:
    """One task: what the slow agent reads (description, prerequisite chain, the game's vocabulary)
    and what ends an episode."""

    name: str  # as the user types it: `collect_wood`, `minedojo:harvest_log`
    success: dict = field(hash=False)  # the task's success test (see `succeeded`); {}: no single goal (the benchmark)
    max_steps: int  # primitive steps before the episode is truncated
    prerequisites: tuple[str, ...]  # the milestones normally reached first, in order (the task planner's chain)
    description: str
    actions: tuple[str, ...] = ()  # the backend's base action names, index = action id
    items: tuple[str, ...] = ()  # the inventory entries of the backend's observation (the shaping menu)
    milestones: tuple[str, ...] = ()  # what a sub-task of the plan's chain may be: each has its own success test
    cells: tuple[str, ...] = ()  # what the API's view can name (an initiation's "in_view"); () for a game without one

    @property
    def achievement(self) -> str | None:
        """The one achievement whose unlocking is the test, for a task of that kind (collect_wood); else None."""
        return self.success.get("achievement")

    @property
    def chain(self) -> tuple[str, ...]:
        """The milestones in order, the test's own achievement last where it has one: what the reference plans
        walk and the curriculum's sub-tasks come from."""
        return self.prerequisites + ((self.achievement,) if self.achievement else ())


# A success test is data, one short entry per task, every part optional, all of them required:
#   {"achievement": "collect_wood"}             the achievement is unlocked in the episode
#   {"inventory": {"stone": 3}}                  the inventory holds at least that many of each item
#   {"survive": 500}                             the player is alive after that many steps
#   {"game": "<the test in words>"}              the game's own check decides (a MineDojo task outside the table)
# {} is no test at all (Crafter's whole benchmark): no episode succeeds, the game's score measures it.
SUCCESS_KEYS = ("achievement", "inventory", "survive", "game")


def success_problems(success: dict, achievements: tuple[str, ...], items: tuple[str, ...]) -> list[str]:
    """What is wrong with a success test, given the game's achievements and inventory items: a typo in a
    task entry must fail at import, not silently never succeed."""
    out = [f"unknown success key {k!r}; known: {list(SUCCESS_KEYS)}" for k in success if k not in SUCCESS_KEYS]
    if "achievement" in success and success["achievement"] not in achievements:
        out.append(f"success achievement {success['achievement']!r} is not one of {list(achievements)}")
    for item, n in success.get("inventory", {}).items():
        if item not in items or isinstance(n, bool) or not isinstance(n, int) or n < 1:
            out.append(f"success inventory {item!r}: {n!r} must be a known item ({list(items)}) held >= 1 times")
    if "survive" in success and (isinstance(success["survive"], bool) or not isinstance(success["survive"], int)
                                 or success["survive"] < 1):
        out.append(f"success survive {success['survive']!r} must be a whole number of steps >= 1")
    return out


def succeeded(success: dict, achievements: Mapping[str, int], inventory: Mapping[str, int], length: int,
              alive: bool) -> bool:
    """The one evaluation of a success test (see SUCCESS_KEYS), over an episode's state: achievements unlocked
    (name -> count), the inventory (item -> count), steps played and whether the player is alive. The env
    calls it every step, and every table, statistic and result judges a finished episode by it (env.row_success)."""
    if not success:
        return False
    if "game" in success:
        raise ValueError(f"this task's success is the game's own check ({success['game']}), not evaluated here")
    if "achievement" in success and achievements.get(success["achievement"], 0) < 1:
        return False
    if any(inventory.get(item, 0) < n for item, n in success.get("inventory", {}).items()):
        return False
    return "survive" not in success or (alive and length >= success["survive"])


def success_in_words(success: dict) -> str:
    """The test in words, as the planner and the critic read it (one clause per part)."""
    if "game" in success:
        return success["game"]
    parts = []
    if "achievement" in success:
        parts.append(f"the achievement {success['achievement']} is unlocked")
    if success.get("inventory"):
        held = " and ".join(f"{n} {item}" for item, n in success["inventory"].items())
        parts.append(f"the inventory holds at least {held}")
    if "survive" in success:
        parts.append(f"the player is still alive after {success['survive']} env steps of the episode")
    if not parts:
        return "no single goal, so no episode counts as a success (the game's own score measures the run)"
    return " and ".join(parts) + " (checked after every step; the episode ends as soon as it holds)"


def unknown_task(name: str, known: list[str], listing: str) -> ValueError:
    """The error for a task nobody knows: the closest names *of the same backend*, then where to look."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return ValueError(f"unknown task {name!r}.{hint} {listing}")


# ----------------------------------------------------------------------------------------------
# The primitive API: the only thing model code can touch.


class PrimitiveAPI:
    """Counts and bounds the environment steps a code action takes; backends add the actual calls.

    Everything underscored is invisible to model code (the sandbox rejects `_` names), so the env
    object and the counters cannot be reached or changed from a code action.

    The macro action's return: `_reward` is the semi-MDP return sum_i gamma**i * r_i over the `_steps`
    env steps taken, which CodeActionWrapper hands to PPO as the transition's reward (PPO then discounts the next
    value by gamma**_steps, see ppo.compute_gae); `_earned` is the plain sum, what the critic reads.
    """

    def __init__(self, env: gym.Env, budget: int, gamma: float = 1.0):
        self._env, self._budget, self._gamma = env, budget, gamma
        self._steps, self._reward, self._earned, self._last = 0, 0.0, 0.0, None  # _reward: sum of gamma**i * r_i
        self._env_time = 0.0  # seconds inside env.step: off the code's clock (sandbox/host.py), bounded by `budget`

    def _act(self, action):
        """Take one real environment step; stop the code action when the budget or the episode ends."""
        if self._last is not None and (self._last[2] or self._last[3]):
            raise EpisodeEnded()
        if self._steps >= self._budget:
            raise StepBudgetExceeded(f"step budget of {self._budget} env steps spent")
        start = perf_counter()
        self._last = self._env.step(action)
        self._env_time += perf_counter() - start
        self._reward += self._gamma ** self._steps * self._last[1]
        self._earned += self._last[1]
        self._steps += 1
        if self._last[2] or self._last[3]:
            raise EpisodeEnded()
        return self._last

    def steps_left(self) -> int:
        """How many more environment steps this code action may take before it is stopped."""
        return self._budget - self._steps


def api_doc(api_class: type, budget: int = 64) -> str:
    """The API's doc as the agents' prompts show it: the class note, the game's recipe table (the class's
    RECIPES), how a call runs with `budget` steps (the run's --max-macro-steps), then one entry per call."""
    lines = [inspect.cleandoc(api_class.__doc__)]
    if getattr(api_class, "RECIPES", ""):
        lines.append(api_class.RECIPES)
    lines += [CALL_RULES.format(budget=budget), ""]
    for cls in reversed(api_class.__mro__):
        for name, fn in vars(cls).items():
            if not name.startswith("_") and callable(fn):
                doc = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
                sig = str(inspect.signature(fn, eval_str=True))
                sig = sig.replace("(self, ", "(").replace("(self)", "()")
                lines.append(f"api.{name}{sig}: {doc}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Code actions.


@dataclass(frozen=True)
class CodeAction:
    """A code action as text, so it can travel to vector-env worker processes and into checkpoints."""

    name: str
    source: str
    doc: str = ""
    entry: str = ""  # the function to call; defaults to `name`
    replaces: str = ""  # the code action this one rewrites (v1 of a v2): PPO starts it from that one's logits
    initiation: dict = field(default_factory=dict, hash=False)  # where it may start (can_start); {}: anywhere

    @property
    def function(self) -> str:
        return self.entry or self.name


# An initiation condition's parts (the plan's "initiation"), each optional; all given must hold. The view's
# parts exist only for a game whose API has a view (Task.cells).
INITIATION_KEYS = ("inventory", "inventory_below", "in_view", "in_view_any", "not_in_view")
VIEW_KEYS = ("in_view", "in_view_any", "not_in_view")


def can_start(initiation: dict, inventory: dict[str, int], visible: set[str] | None) -> bool:
    """A code action's initiation condition (the options framework's initiation set): every item of
    "inventory" held at least that many times, every item of "inventory_below" held fewer times than that
    (a tool not yet made: {"wood_pickaxe": 1}; a meter that is low: {"energy": 6}), every name of "in_view"
    somewhere in view, when "in_view_any" is given at least one of its names in view, and none of the names
    of "not_in_view" in view (`visible`; None for a game whose API has no view, where the plan may not ask
    for it). The policy may choose the action only where this holds: a call that could not start would cost
    a decision for nothing."""
    if any(inventory.get(item, 0) < n for item, n in initiation.get("inventory", {}).items()):
        return False
    if any(inventory.get(item, 0) >= n for item, n in initiation.get("inventory_below", {}).items()):
        return False
    if visible is None:
        return True
    any_of = initiation.get("in_view_any")
    return all(name in visible for name in initiation.get("in_view", [])) and \
        (not any_of or any(name in visible for name in any_of)) and \
        not any(name in visible for name in initiation.get("not_in_view", []))


def initiation_text(initiation: dict) -> str:
    """An initiation condition in words, as the critic, the code writer and the logs read it."""
    parts = [f"holds at least {n} {item}" for item, n in initiation.get("inventory", {}).items()]
    parts += [f"holds fewer than {n} {item}" for item, n in initiation.get("inventory_below", {}).items()]
    parts += [f"{name} in view" for name in initiation.get("in_view", [])]
    if initiation.get("in_view_any"):
        parts.append(" or ".join(initiation["in_view_any"]) + " in view (at least one)")
    if initiation.get("not_in_view"):
        parts.append("none of " + ", ".join(initiation["not_in_view"]) + " in view")
    return "; ".join(parts) if parts else "in any state (no initiation condition)"


# ----------------------------------------------------------------------------------------------
# The slow agent's plan.

MAX_SUBACTIONS = 16  # each code sub-action widens the RL action space (the whole tech tree needs 15)
SHAPING_RANGE = (0.0, 1.0)  # never worth more than the task's own success reward of 1
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


@dataclass
class SubAction:
    name: str  # snake_case; a code sub-action's code action (and function) gets this name
    how: str  # "code" (the fast agent writes it) or "rl" (left to PPO)
    spec: str  # what it must do, for the code writer
    reason: str = ""  # why code or RL
    reuse: bool = False  # a code sub-action taken as it is from the skill library (skill_library.py)
    subtask: str = ""  # the sub-task of the plan's chain it serves ("": the task as a whole)
    rl_config: dict = field(default_factory=dict)  # an "rl" sub-action's own menu (shaping, mask_actions),
    # used on top of the plan's while its sub-task is the one being trained (see curriculum.py)
    initiation: dict = field(default_factory=dict)  # a "code" sub-action's: where it may start (can_start)


@dataclass
class Plan:
    """What the slow agent decided for one iteration; train.py saves it with the run."""

    task: str
    subtasks: list[str]  # the task planner's chain for long tasks, else empty
    subactions: list[SubAction]
    rl_config: dict = field(default_factory=lambda: {"shaping": {}, "mask_actions": []})

    @property
    def code_subactions(self) -> list[SubAction]:
        return [s for s in self.subactions if s.how == "code"]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, task: Task | None = None) -> Plan:
        """Build and validate a plan; ValueError lists every problem, worded for the model to fix.
        With `task`, the RL menu is checked against that task's game (its actions and items)."""
        rl = d.get("rl_config") or {}
        plan = cls(task=str(d.get("task", "")), subtasks=[str(s) for s in d.get("subtasks", [])],
                   subactions=[SubAction(**{k: s.get(k, "") for k in ("name", "how", "spec", "reason", "subtask")},
                                         reuse=s.get("reuse", False), rl_config=dict(s.get("rl_config") or {}),
                                         initiation=dict(s.get("initiation") or {}))
                               for s in d.get("subactions", [])],
                   rl_config={"shaping": dict(rl.get("shaping", {})), "mask_actions": list(rl.get("mask_actions", [])),
                              **({"follow_order": True} if rl.get("follow_order") is True else {})})
        problems = _plan_problems(plan, task) + _menu_problems(rl, "rl_config", task, whole_plan=True)
        if problems:
            raise ValueError("; ".join(problems))
        return plan


def _plan_problems(plan: Plan, task: Task | None) -> list[str]:
    """Everything wrong with a plan: names, `how`, and the RL menu (only known items and actions)."""
    out = []
    names = [s.name for s in plan.subactions]
    if not 1 <= len(names) <= MAX_SUBACTIONS:
        out.append(f"give 1 to {MAX_SUBACTIONS} sub-actions, not {len(names)}")
    for s in plan.subactions:
        if not isinstance(s.name, str) or not NAME_RE.match(s.name):
            out.append(f"sub-action name {s.name!r} is not snake_case")
        if s.how not in ("code", "rl"):
            out.append(f"sub-action {s.name!r} has how={s.how!r}; it must be \"code\" or \"rl\"")
        if not str(s.spec).strip():
            out.append(f"sub-action {s.name!r} has an empty spec")
        if s.reuse not in (True, False) or (s.reuse and s.how != "code"):
            out.append(f"sub-action {s.name!r} has reuse={s.reuse!r}; only a \"code\" sub-action may say true")
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        out.append(f"duplicate sub-action names {dups}; names must be unique")
    for s in plan.subactions:
        if s.subtask and s.subtask not in plan.subtasks:
            out.append(f"sub-action {s.name!r} serves subtask {s.subtask!r}, which is not in \"subtasks\"")
        if s.rl_config and s.how != "rl":
            out.append(f"sub-action {s.name!r} has an rl_config; only an \"rl\" sub-action may")
        out += _menu_problems(s.rl_config, f"{s.name}.rl_config", task)
        out += _initiation_problems(s, task)
    if task is not None and task.milestones:
        out += [f"subtask {t!r} has no success test; sub-tasks are chosen from {list(task.milestones)}"
                for t in plan.subtasks if t not in task.milestones]
    return out


def _initiation_problems(s: SubAction, task: Task | None) -> list[str]:
    """What is wrong with a sub-action's initiation: only a "code" one has it; "inventory" and "inventory_below"
    are counts (at least 1) of known items, "in_view" and "in_view_any" names the game's view shows (a game
    without a view offers only the inventory's parts); a condition that can never hold is refused too."""
    init, where = s.initiation, f"{s.name}.initiation"
    if not init:
        return []
    if s.how != "code":
        return [f"sub-action {s.name!r} has an initiation; only a \"code\" sub-action may"]
    keys = INITIATION_KEYS if task is None or task.cells else tuple(k for k in INITIATION_KEYS if k not in VIEW_KEYS)
    out = [f"{where}.{k} is not on the menu (only {', '.join(keys)})" for k in init if k not in keys]
    counts = {k: init.get(k, {}) for k in ("inventory", "inventory_below")}
    names = {k: init.get(k, []) for k in VIEW_KEYS}
    if not all(isinstance(v, dict) for v in counts.values()) or not all(isinstance(v, list) for v in names.values()):
        return out + [f"{where}: inventory and inventory_below must be objects of item: count, in_view, "
                      "in_view_any and not_in_view lists of names"]
    for key, items in counts.items():
        for item, n in items.items():
            if task is not None and item not in task.items:
                out.append(f"{where}.{key}: {item!r} is not an inventory item; choose from {list(task.items)}")
            elif isinstance(n, bool) or not isinstance(n, int) or n < 1:
                out.append(f"{where}.{key}[{item!r}] = {n!r} must be a whole number of at least 1")
    never = [item for item, n in counts["inventory"].items()
             if isinstance(counts["inventory_below"].get(item), int) and counts["inventory_below"][item] <= n]
    out += [f"{where} can never hold: it asks for at least {counts['inventory'][item]} {item} and fewer than "
            f"{counts['inventory_below'][item]}" for item in never]
    if "in_view_any" in init and not names["in_view_any"]:
        out.append(f"{where}.in_view_any is empty; give at least one name, or leave it out")
    hidden = set(names["not_in_view"])
    both = sorted(hidden & set(names["in_view"])) or \
        (sorted(names["in_view_any"]) if names["in_view_any"] and hidden >= set(names["in_view_any"]) else [])
    if both:
        out.append(f"{where} can never hold: {both} must be in view and not in view")
    if task is not None and task.cells:
        out += [f"{where}.{key}: {name!r} is not a cell name; choose from {list(task.cells)}"
                for key, listed in names.items() for name in listed if name not in task.cells]
    return out


def _menu_problems(rl_config: dict, where: str, task: Task | None, whole_plan: bool = False) -> list[str]:
    """What is off the RL menu in one rl_config: only shaping (known items, bounded weights), mask_actions
    (known base actions, never all of them) and, for the whole plan's, follow_order (true or false)."""
    menu = ("shaping", "mask_actions", "follow_order") if whole_plan else ("shaping", "mask_actions")
    out = [f"{where}.{k} is not on the menu (only {', '.join(menu)})" for k in rl_config if k not in menu]
    if rl_config.get("follow_order", False) not in (True, False):
        out.append(f"{where}.follow_order must be true or false, not {rl_config['follow_order']!r}")
    lo, hi = SHAPING_RANGE
    for item, w in dict(rl_config.get("shaping") or {}).items():
        if task is not None and item not in task.items:
            out.append(f"{where}.shaping: {item!r} is not an inventory item; choose from {list(task.items)}")
        elif isinstance(w, bool) or not isinstance(w, int | float) or not lo <= w <= hi:
            out.append(f"{where}.shaping[{item!r}] = {w!r} must be a number from {lo} to {hi}")
    mask = list(rl_config.get("mask_actions") or [])
    if task is not None:
        out += [f"{where}.mask_actions: {a!r} is not a base action" for a in mask if a not in task.actions]
        if len(set(mask)) >= len(task.actions):
            out.append(f"{where}.mask_actions may not mask every base action")
    return out
