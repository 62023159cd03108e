"""The Crafter routine taken apart: each behaviour of reference/crafter_program.py's `solve_task` as a code
action of its own, for the reference `rlgpt` plan of `crafter`. The RL agent then chooses among them (and
its base actions) where the routine follows one fixed order of priorities.

Written by hand by the project's engineers; never LLM output. Each part is one entry function over the
routine's own helpers (its grid, routes, fighting, shelter, crafting and collecting code, with `solve_task`
itself left out), so a part does exactly what the routine does at that point of its order: it starts with the
routine's own test for that point (a meter below a level, an enemy next to the player) and returns False at once
where that test fails, and it carries an initiation condition wherever one can say that test or a necessary
part of it (an initiation is a conjunction: sheltering's "tired, or hurt with a zombie in view" is not one).
The parts are listed in the routine's order. No part plays the whole game: which part runs when is what the
RL agent learns, starting from that order (the plan's follow_order: the first part that can act, as the
routine would choose it; a part that fails after taking steps gives way to the next one at the next decision, as
the routine goes on to its next behaviour in the same call).

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
    ("fight_beside", "Hit a zombie or skeleton standing right next to the player (left, right, up or down) until "
     "it dies; return False at once when none is next to the player.",
     {"in_view_any": ["zombie", "skeleton"]}, "return fight_adjacent(api, g)"),
    ("shelter_and_rest", "When tired (energy below 4, or health below 4 and energy below 8), hurt with a zombie in "
     "view (health below 7), or in a walled-in pocket with energy below 7: inside a walled-in pocket sleep until "
     "energy is full, then rest while hurt; outside, with a wood pickaxe, dig a two-cell pocket into stone and wall "
     "up its mouth with a stone, or fetch a stone for the wall; with no pocket in reach, sleep in the open only when "
     "exhausted (energy below 2) and no zombie is in view. Return False at once in any other state.",
     {},
     "tired = inv['energy'] < 4 or (inv['health'] < 4 and inv['energy'] < 8)\n"
     "    if not (tired or (inv['health'] < 7 and near(g, 'zombie')) or (inv['energy'] < 7 and sealed(g))):\n"
     "        return False\n"
     "    if shelter_and_sleep(api, g, inv):\n        return True\n"
     "    if inv['wood_pickaxe'] > 0 and near(g, 'stone') and get_to(api, ['stone'], inv):\n"
     "        api.do()\n        return True\n    return False"),
    ("drink_when_thirsty", "Walk to the nearest water and drink until drink is full (9), when drink is below 6 with "
     "water in view or below 8 with water within 3 cells; else return False at once.",
     {"inventory_below": {"drink": 8}, "in_view": ["water"]},
     "if not (inv['drink'] < 6 or near_cell(g, 'water', 3)):\n        return False\n    return drink(api)"),
    ("hunt_cow", "Walk to the nearest cow and hit it until it is eaten (3 hits bare-handed, fewer with a sword; +6 "
     "food), when food is below 6 with a cow in view or below 8 with a cow within 3 cells; else return False at once.",
     {"inventory_below": {"food": 8}, "in_view": ["cow"]},
     "if not (inv['food'] < 6 or near_cell(g, 'cow', 3)):\n        return False\n    return hunt(api, 'cow')"),
    ("eat_ripe_plant", "Walk to a ripe plant in view and eat it.", {"in_view": ["ripe_plant"]},
     "return get_to(api, ['ripe_plant'], inv) and api.do()"),
    ("nap_early", "Sleep off the first point of energy lost, in the open, only with no zombie, skeleton or arrow in "
     "view: early in the game (no wood pickaxe yet) it is day and a nap is a dozen steps (wake_up).",
     {"inventory": {"health": 9}, "inventory_below": {"energy": 9, "wood_pickaxe": 1},
      "not_in_view": ["zombie", "skeleton", "arrow"]}, "return nap(api, g)"),
    ("get_and_plant_sapling", "Early in the game (no wood pickaxe yet) while no plant is in view: with no sapling "
     "held, hit grass until a sapling drops (probability 0.1 a hit); with one, plant it on grass (it ripens later, "
     "to be eaten).", {"in_view": ["grass"], "inventory_below": {"wood_pickaxe": 1}, "not_in_view": ["plant"]},
     "if inv['sapling'] < 1:\n        return sapling(api, g)\n    return place(api, 'plant', ['grass'])"),
    ("make_next_tool", "Make the next tool (wood, then stone, then iron pickaxe and sword) whose materials are "
     "held, walking next to the table (and the furnace the iron tools also need) in view; return False at once "
     "when no tool's materials are held.",
     {"inventory": {"wood": 1}, "inventory_below": {"iron_sword": 1}, "in_view": ["table"]},
     "return make_next(api, g, inv)"),
    ("place_table_here", f"Place a table (uses {TABLE_WOOD} wood) on a free neighbouring cell while none is in view "
     f"and a tool still to be made needs one (its other materials held), keeping a wood to make it.",
     {"inventory": {"wood": TABLE_WOOD + 1}, "inventory_below": {"iron_sword": 1}, "not_in_view": ["table"]},
     "wants = [uses for tool, uses, stations in RECIPES if inv[tool] < 1]\n"
     "    if not any(all(inv[k] >= n for k, n in uses.items() if k != 'wood') for uses in wants):\n"
     "        return False\n    return place(api, 'table', walkable())"),
    ("place_furnace_here", f"Beside the table in view, place a furnace (uses {FURNACE_STONE} stone), which the iron "
     f"tools need, while none is in view, keeping 2 stone for the walls of a shelter until iron is held.",
     {"inventory": {"stone_pickaxe": 1, "stone": FURNACE_STONE}, "inventory_below": {"iron_sword": 1},
      "in_view": ["table"], "not_in_view": ["furnace"]},
     f"if inv['stone'] < {FURNACE_STONE} + (0 if inv['iron'] > 0 else 2):\n        return False\n"
     "    return place_furnace(api, inv)"),
    ("mine_ore", "Walk (digging) to the nearest ore in view that a tool still to be made needs and mine it: "
     "diamond with an iron pickaxe, else iron with a stone pickaxe (below 2 iron), else coal with a wood pickaxe "
     "(below 2 coal).", {"inventory": {"wood_pickaxe": 1}, "in_view_any": ["diamond", "iron", "coal"]},
     "return collect_first(api, inv, ['diamond', 'iron', 'coal'])"),
    ("gather_wood", "Walk to the nearest tree in view and collect one wood, while wood is short (below 9 before "
     "the iron sword is made, below 2 after).", {"in_view": ["tree"], "inventory_below": {"wood": 9}},
     "return collect_first(api, inv, ['tree'])"),
    ("dig_stone", "With a wood pickaxe, walk (digging) to the nearest stone in view and mine it while stone is "
     "below 9 (once 5 are held, only stone within two cells).",
     {"inventory": {"wood_pickaxe": 1}, "inventory_below": {"stone": 9}, "in_view": ["stone"]},
     "return collect_first(api, inv, ['stone'])"),
    ("fight_in_view", "With health at least 6, walk to the nearest zombie or skeleton in view and hit it until it dies "
     "(5 hits bare-handed for a zombie, 3 for a skeleton; a sword hits harder).",
     {"inventory": {"health": 6}, "in_view_any": ["zombie", "skeleton"]}, "return fight_near(api, g, inv)"),
    ("explore_ahead", "Keep going the way the player faces, digging through stone with a pickaxe; turn when blocked "
     "or lava is two cells ahead; stop once something worth a call is in view.", {}, "return explore(api, inv)"),
]

COLLECT_FIRST = '''

def next_to(g, name):
    """A `name` cell beside the player (left, right, up or down)."""
    return any(g[d] == name for d in dirs().values())

def make_next(api, g, inv):
    """The routine's craft_step without its placing: each tool of its order not yet held whose materials are
    held, in turn, made at its stations, until one is made."""
    for tool, uses, stations in RECIPES:
        if inv[tool] < 1 and all(inv[k] >= n for k, n in uses.items()) and all(near(g, s) for s in stations):
            if craft(api, tool, stations):
                return True
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
            + _helpers() + COLLECT_FIRST).replace("RECIPES", repr(crafter_progress.RECIPES))


def main() -> int:
    for name, doc, initiation, _ in PARTS:
        print(f"{name}: {doc}\n    starts only when: {initiation_text(initiation)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
