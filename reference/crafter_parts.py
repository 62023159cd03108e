"""The Crafter routine taken apart: each behaviour of reference/crafter_program.py's `solve_task` as a code
action of its own, for the reference `rlgpt` plan of `crafter`. The RL agent then chooses among them (and
its base actions) where the routine follows one fixed order of priorities.

Written by hand by the project's engineers; never LLM output. Each part is one entry function over the
routine's own helpers (its grid, routes, fighting, shelter, crafting and collecting code, with `solve_task`
itself left out), so a part does exactly what the routine does at that point of its order, and each has an
initiation condition: the states where it can act (a call outside them would refuse at once). No part plays
the whole game: which part runs when is what the RL agent learns.

    python -m reference.crafter_parts          # every part with its initiation
"""

from __future__ import annotations

import re

from core import initiation_text
from reference import crafter_program, crafter_progress
from reference.crafter_progress import FURNACE_STONE, TABLE_WOOD

# (name, what it does: its spec and doc, its initiation, its body). Each body reads `inv` (the inventory)
# and `g` (the view as a grid) as the routine does, and returns True when the call did its job.
PARTS: list[tuple[str, str, dict, str]] = [
    ("fight", "Fight a zombie or skeleton: one next to the player first, else walk to the nearest in view and "
     "hit it until it dies (5 hits bare-handed for a zombie, 3 for a skeleton; a sword hits harder).",
     {"in_view_any": ["zombie", "skeleton"]},
     "return fight_adjacent(api, g) or fight_near(api, g, inv)"),
    ("rest_in_shelter", "When tired, with a wood pickaxe: inside a walled-in pocket sleep until energy is full, "
     "then rest while hurt; outside, dig a two-cell pocket into stone and wall up its mouth with a stone, or "
     "fetch a stone for the wall; with no pocket in reach, sleep in the open only when exhausted (energy below "
     "2) and no zombie is in view.",
     {"inventory": {"wood_pickaxe": 1}, "inventory_below": {"energy": 4}},
     "if shelter_and_sleep(api, g, inv):\n        return True\n"
     "    if inv['wood_pickaxe'] > 0 and near(g, 'stone') and get_to(api, ['stone'], inv):\n"
     "        api.do()\n        return True\n    return False"),
    ("drink_until_full", "Walk to the nearest water in view and drink until drink is full (9).",
     {"inventory_below": {"drink": 6}, "in_view": ["water"]}, "return drink(api)"),
    ("hunt_cow", "Walk to the nearest cow in view and hit it until it is eaten (3 hits; +6 food).",
     {"inventory_below": {"food": 6}, "in_view": ["cow"]}, "return hunt(api, 'cow')"),
    ("eat_ripe_plant", "Walk to a ripe plant in view and eat it.", {"in_view": ["ripe_plant"]},
     "return get_to(api, ['ripe_plant'], inv) and api.do()"),
    ("nap_early", "Sleep off the first point of energy lost, in the open, only with no zombie, skeleton or arrow in "
     "view: early in the game (no wood pickaxe yet) it is day and a nap is a dozen steps (wake_up).",
     {"inventory": {"health": 9}, "inventory_below": {"energy": 9, "wood_pickaxe": 1},
      "not_in_view": ["zombie", "skeleton", "arrow"]}, "return nap(api, g)"),
    ("get_and_plant_sapling", "Walk next to grass if none is beside the player; then with no sapling held, hit the "
     "grass until a sapling drops (probability 0.1 a hit), and with one, plant it there (it ripens later, to "
     "be eaten); early in the game (no wood pickaxe yet) while no plant is in view.",
     {"in_view": ["grass"], "inventory_below": {"wood_pickaxe": 1}, "not_in_view": ["plant"]},
     "if not next_to(g, 'grass') and not get_to(api, ['grass'], inv):\n        return False\n"
     "    if inv['sapling'] < 1:\n        return sapling(api, grid(api))\n"
     "    return place(api, 'plant', ['grass'])"),
    ("make_next_tool", "Make the next tool (wood, then stone, then iron pickaxe and sword) whose materials are "
     "held, walking next to the table (and the furnace the iron tools also need) in view.",
     {"inventory": {"wood": 1}, "inventory_below": {"iron_sword": 1}, "in_view": ["table"]},
     "return make_next(api, g, inv)"),
    ("place_table_here", f"Place a table (uses {TABLE_WOOD} wood) on a free neighbouring cell while none is in view "
     f"and a tool still to be made needs one, keeping a wood to make it.",
     {"inventory": {"wood": TABLE_WOOD + 1}, "inventory_below": {"iron_sword": 1}, "not_in_view": ["table"]},
     "return place(api, 'table', walkable())"),
    ("place_furnace_here", f"Beside the table in view, place a furnace (uses {FURNACE_STONE} stone), which the iron "
     "tools need, while none is in view.",
     {"inventory": {"stone_pickaxe": 1, "stone": FURNACE_STONE}, "inventory_below": {"iron_sword": 1},
      "in_view": ["table"], "not_in_view": ["furnace"]},
     "get_to(api, ['table'], inv)\n    return place(api, 'furnace', walkable())"),
    ("dig_to_diamond", "With an iron pickaxe: walk (digging) to the nearest diamond in view and mine it.",
     {"inventory": {"iron_pickaxe": 1}, "in_view": ["diamond"]}, "return collect_first(api, inv, ['diamond'])"),
    ("dig_to_iron", "With a stone pickaxe: walk (digging) to the nearest iron in view and mine it.",
     {"inventory": {"stone_pickaxe": 1}, "inventory_below": {"iron": 2}, "in_view": ["iron"]},
     "return collect_first(api, inv, ['iron'])"),
    ("mine_stone_and_coal", "With a wood pickaxe: walk (digging) to the nearest coal in view and mine it while "
     "coal is below 2, else stone while stone is below 9 (once 5 are held, only stone within two cells).",
     {"inventory": {"wood_pickaxe": 1}, "in_view_any": ["stone", "coal"]},
     "return collect_first(api, inv, ['coal', 'stone'])"),
    ("gather_wood", "Walk to the nearest tree in view and collect one wood, while wood is short (below 9 before "
     "the iron sword is made, below 2 after).", {"in_view": ["tree"], "inventory_below": {"wood": 9}},
     "return collect_first(api, inv, ['tree'])"),
    ("explore_ahead", "Keep going the way the player faces, digging through stone with a pickaxe; turn when blocked "
     "or lava is two cells ahead; stop once something worth a call is in view.", {}, "return explore(api, inv)"),
]

COLLECT_FIRST = '''

def next_to(g, name):
    """A `name` cell beside the player (left, right, up or down)."""
    return any(g[d] == name for d in dirs().values())

def make_next(api, g, inv):
    """The first tool of the routine's order not yet held whose materials are held, made at its stations."""
    for tool, uses, stations in RECIPES:
        if inv[tool] < 1 and all(inv[k] >= n for k, n in uses.items()) and all(near(g, s) for s in stations):
            return craft(api, tool, stations)
    return False

def collect_first(api, inv, names):
    """The routine's collect_step over `names` only: the first of them in view that the tools still to be
    made need, walked (and dug) to and collected."""
    wants = {"tree": inv["wood"] < (9 if inv["iron_sword"] < 1 else 2),
             "stone": inv["wood_pickaxe"] > 0 and inv["stone"] < 9, "coal": inv["wood_pickaxe"] > 0 and inv["coal"] < 2,
             "iron": inv["stone_pickaxe"] > 0 and inv["iron"] < 2, "diamond": inv["iron_pickaxe"] > 0}
    for name in names:
        if not wants[name] or not near(grid(api), name):
            continue
        if name == "stone" and inv["stone"] >= 5 and not near_cell(grid(api), "stone", 2):
            continue
        if get_to(api, [name], inv):
            api.do()
            return True
    return False
'''


def _helpers() -> str:
    """The routine's source without `solve_task`: only the helpers every part calls."""
    source = crafter_program.SOURCE + "\n" + crafter_progress.source()
    return re.sub(r"\ndef solve_task\(api\):.*?(?=\n\n\ndef )", "", source, count=1, flags=re.S).strip("\n")


def source(name: str) -> str:
    """One part's source: its entry function, then the routine's helpers (skills.CRAFTER_PARTS makes the code
    actions); KeyError for a name that is no part."""
    doc, body = next((p[1], p[3]) for p in PARTS if p[0] == name)
    return (f'def {name}(api):\n    """{doc}"""\n    inv = api.inventory()\n    g = grid(api)\n    {body}\n\n\n'
            + _helpers() + COLLECT_FIRST.replace("RECIPES", repr(crafter_progress.RECIPES)))


def main() -> int:
    for name, doc, initiation, _ in PARTS:
        print(f"{name}: {doc}\n    starts only when: {initiation_text(initiation)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
