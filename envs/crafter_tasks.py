"""Crafter's tasks (one per achievement, a few with a success test of their own, and the whole benchmark)
and the game's rules as the prompts show them, read from Crafter's own data.yaml (crafter.constants) so they
never drift from the game: the task records the slow agent reads, and the recipe table of the API doc
(crafter_api.CrafterAPI.RECIPES).

Data, not code: crafter_env.py plays these tasks; env.get_task finds them with MineDojo's.
"""

from __future__ import annotations

from collections import Counter

from crafter import constants

from core import Task, success_problems, unknown_task

ACTIONS: list[str] = list(constants.actions)  # Crafter's 17 primitive actions, index = action id
ITEMS: list[str] = list(constants.items)  # the 16 inventory entries, in observation order
ACHIEVEMENTS: list[str] = list(constants.achievements)  # the 22 achievements of the benchmark
CREATURES = ["cow", "zombie", "skeleton", "arrow", "plant", "ripe_plant"]  # named in the view over their cell
CELLS: list[str] = list(constants.materials) + CREATURES  # what CrafterAPI.view() can name (besides player, unknown)


# ----------------------------------------------------------------------------------------------
# The game's rules, one line each.


def _rule(kind: str, name: str) -> str:
    """Crafter's rule for collecting, placing or making a thing, read from its data.yaml (crafter.constants)
    so the prompts never drift from the game: task descriptions and the API doc's table share it."""
    r = getattr(constants, kind)[name]
    if kind == "collect":
        text = f"needs {_count(r['require']) + ' (kept)' if r['require'] else 'nothing'}; gives {_count(r['receive'])}"
        text += f" with probability {r['probability']}" if "probability" in r else ""
        return text + (f"; leaves {r['leaves']}" if r["leaves"] != name else "")
    if kind == "place":
        return f"uses {_count(r['uses'])}; the facing cell must be {'/'.join(r['where'])} with no creature on it"
    return f"uses {_count(r['uses'])}; needs {' and '.join('a ' + n for n in r['nearby'])} nearby"


def source_of(item: str) -> str | None:
    """The cell that `do` collects `item` from (wood: tree, drink: water, stone: stone), or None."""
    return next((cell for cell, rule in constants.collect.items() if item in rule["receive"]), None)


def gained(achievement: str) -> str | None:
    """The inventory item one unlock of an achievement adds (collect_wood: wood, make_wood_pickaxe:
    wood_pickaxe); None where it adds none (place_*, eat_*, defeat_*, wake_up)."""
    verb, _, thing = achievement.partition("_")
    if verb == "collect":
        return thing if source_of(thing) else None
    return thing if verb == "make" else None


def chain_uses(achievements: tuple[str, ...]) -> dict[str, int]:
    """Units of each inventory item a chain of achievements needs, by the recipes: what its place and make
    steps use, summed, and one of each tool a collect step requires (tools are kept); e.g. collect_wood,
    place_table, make_wood_pickaxe: 3 wood. The final step's own item counts once (collect_stone: 1 stone)."""
    uses: Counter = Counter()
    for a in achievements:
        verb, _, thing = a.partition("_")
        if verb in ("place", "make"):
            uses.update(getattr(constants, verb)[thing]["uses"])
        elif verb == "collect" and (source := source_of(thing)):
            for tool, n in constants.collect[source]["require"].items():
                uses[tool] = max(uses[tool], n)
    if achievements and (last := gained(achievements[-1])):
        uses[last] = max(uses[last], 1)
    return dict(uses)


def task_uses(task: Task) -> dict[str, int]:
    """Units of each item a task needs: its chain's (chain_uses), and at least what its success test says
    the inventory must hold (collect_3_stone: 3 stone, not the chain's 1)."""
    uses = chain_uses(task.chain)
    for item, n in task.success.get("inventory", {}).items():
        uses[item] = max(uses.get(item, 0), n)
    return uses


def _count(items: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in items.items())


def recipe_table() -> str:
    """Every rule of Crafter's data.yaml, one line each: the recipe table of the API doc (CrafterAPI.RECIPES)."""
    verbs = {"collect": "`do` facing", "place": "place", "make": "make"}
    return "\n".join(["Recipes (Crafter's data.yaml; \"nearby\" is the 3x3 square around the player, diagonals "
                      "included; inventory counts are capped at 9):"]
                     + [f"- {verbs[kind]} {name}: {_rule(kind, name)}"
                        for kind in verbs for name in getattr(constants, kind)])


# ----------------------------------------------------------------------------------------------
# Tasks: one per achievement, plus the whole benchmark.

# Prerequisite chains, each the one before plus what it adds (the tech tree, in order).
_WOOD = ("collect_wood",)
_TABLE = _WOOD + ("place_table",)
_PICKAXE = _TABLE + ("make_wood_pickaxe",)
_STONE = _PICKAXE + ("collect_stone",)
_STONE_PICKAXE = _STONE + ("make_stone_pickaxe",)
_IRON = _STONE_PICKAXE + ("collect_coal", "place_furnace", "collect_iron")
# name, step limit, prerequisite achievements in order, description; each task's success test is its
# achievement unlocked ({"achievement": name})
_TASK_ROWS: list[tuple[str, int, tuple[str, ...], str]] = [
    ("collect_wood", 300, (), f"Collect wood: face a tree and `do` ({_rule('collect', 'tree')})."),
    ("place_table", 500, _WOOD, f"Place a crafting table ({_rule('place', 'table')})."),
    ("make_wood_pickaxe", 750, _TABLE, f"Make a wood pickaxe ({_rule('make', 'wood_pickaxe')})."),
    ("make_wood_sword", 750, _TABLE, f"Make a wood sword ({_rule('make', 'wood_sword')})."),
    ("collect_stone", 1000, _PICKAXE, f"Mine stone: face stone and `do` ({_rule('collect', 'stone')})."),
    ("place_stone", 1000, _STONE, f"Place a stone block ({_rule('place', 'stone')})."),
    ("collect_coal", 1000, _PICKAXE, f"Mine coal: face coal and `do` ({_rule('collect', 'coal')})."),
    ("make_stone_pickaxe", 1500, _STONE, f"Make a stone pickaxe ({_rule('make', 'stone_pickaxe')})."),
    ("make_stone_sword", 1500, _STONE, f"Make a stone sword ({_rule('make', 'stone_sword')})."),
    ("place_furnace", 1500, _STONE, f"Place a furnace ({_rule('place', 'furnace')})."),
    ("collect_iron", 2500, _STONE_PICKAXE, f"Mine iron: face iron and `do` ({_rule('collect', 'iron')})."),
    ("make_iron_pickaxe", 3000, _IRON, f"Make an iron pickaxe ({_rule('make', 'iron_pickaxe')})."),
    ("make_iron_sword", 3000, _IRON, f"Make an iron sword ({_rule('make', 'iron_sword')})."),
    ("collect_diamond", 5000, _IRON + ("make_iron_pickaxe",),
     f"Mine a diamond: face a diamond and `do` ({_rule('collect', 'diamond')})."),
    ("collect_drink", 300, (), f"Drink water: face water and `do` ({_rule('collect', 'water')})."),
    ("collect_sapling", 300, (), f"Collect a sapling: face grass and `do` ({_rule('collect', 'grass')})."),
    ("place_plant", 500, ("collect_sapling",), f"Plant a sapling ({_rule('place', 'plant')})."),
    ("eat_plant", 2000, ("collect_sapling", "place_plant"),
     "Eat a plant: plant a sapling, protect it until it is ripe, then face it and `do`."),
    ("eat_cow", 500, (), "Eat a cow: face a cow and `do` until it is defeated (3 hits bare-handed)."),
    ("defeat_zombie", 1000, (), "Defeat a zombie (they appear on grass, mostly at night): face it and `do`."),
    ("defeat_skeleton", 2000, (), "Defeat a skeleton (they live in dark cave tunnels): face it and `do`."),
    ("wake_up", 1000, (), "Sleep when energy is low and wake up again once energy is restored."),
]

# The paper's MineDojo task names, mapped onto the Crafter task with the same meaning.
ALIASES = {"harvest_log": "collect_wood", "craft_crafting_table": "place_table",
           "craft_wooden_pickaxe": "make_wood_pickaxe", "craft_stone_pickaxe": "make_stone_pickaxe",
           "mine_cobblestone": "collect_stone", "mine_iron_ore": "collect_iron",
           "craft_iron_pickaxe": "make_iron_pickaxe", "obtain_diamond": "collect_diamond"}


# Tasks with a success test of their own (core.SUCCESS_KEYS): name, test, step limit, the milestones on the
# way in order (every one the test needs: they are the planner's chain and the reference plan's steps), description.
_TEST_ROWS: list[tuple[str, dict, int, tuple[str, ...], str]] = [
    ("collect_3_stone", {"inventory": {"stone": 3}}, 1000, _STONE,
     f"Hold 3 stone at once: face stone and `do`, three times ({_rule('collect', 'stone')})."),
    ("stone_tools", {"inventory": {"stone_pickaxe": 1, "stone_sword": 1}}, 2000,
     _STONE_PICKAXE + ("make_stone_sword",), f"Hold a stone pickaxe and a stone sword at once (pickaxe: "
     f"{_rule('make', 'stone_pickaxe')}; sword: {_rule('make', 'stone_sword')})."),
    ("survive_500", {"survive": 500}, 500, (),
     "Stay alive for 500 steps: drink water, eat (a cow, or a ripe plant), sleep when energy is low, and keep "
     "away from zombies, skeletons' arrows and lava. Health drains while food, drink or energy is empty."),
]


def _task(name: str, success: dict, max_steps: int, chain: tuple[str, ...], description: str) -> Task:
    """A Crafter task; its sub-tasks (the planner's chain) are achievements, each its own success test.
    A test that names an unknown achievement or item fails here, at import, rather than never succeeding."""
    problems = success_problems(success, tuple(ACHIEVEMENTS), tuple(ITEMS))
    problems += [f"milestone {a!r} is not an achievement" for a in chain if a not in ACHIEVEMENTS]
    problems += ["Crafter has no success check of its own: say the test with the other keys"] * ("game" in success)
    if problems:
        raise ValueError(f"task {name!r}: " + "; ".join(problems))
    return Task(name, success, max_steps, chain, description, tuple(ACTIONS), tuple(ITEMS),
                tuple(ACHIEVEMENTS), tuple(CELLS))


TASKS: dict[str, Task] = {row[0]: _task(row[0], {"achievement": row[0]}, *row[1:]) for row in _TASK_ROWS}
TASKS.update({row[0]: _task(*row) for row in _TEST_ROWS})
TASKS["crafter"] = _task("crafter", {}, 10000, (), (
    "The whole Crafter benchmark: unlock as many of the 22 achievements as possible in one life (Crafter's own "
    "reward: +1 the first time in an episode each achievement is unlocked, +-0.1 per health point gained or lost). "
    "With no single goal, every success rate of this task is 0.0 by definition and says nothing; it is measured "
    "by Crafter's score, exp(mean(ln(1 + p))) - 1 over the 22 achievements' unlock rates p (% of episodes)."))


def get_task(name: str) -> Task:
    """A Crafter task by name or alias; unknown names fail with the closest Crafter names, not a KeyError."""
    name = ALIASES.get(name, name)
    if name not in TASKS:
        raise unknown_task(name, list(TASKS) + list(ALIASES), "`python env.py --list` prints every task.")
    return TASKS[name]
