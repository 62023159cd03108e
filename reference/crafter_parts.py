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

# (name, what it does: its spec and doc, its initiation, its body). Each body reads `inv` (the inventory)
# and `g` (the view as a grid) as the routine does, and returns True when the call did its job.
PARTS: list[tuple[str, str, dict, str]] = [
    ("fight", "Fight a zombie or skeleton: one next to the player first, else walk to the nearest in view and "
     "hit it until it dies (5 hits bare-handed for a zombie, 3 for a skeleton; a sword hits harder).",
     {"in_view_any": ["zombie", "skeleton"]},
     "return fight_adjacent(api, g) or fight_near(api, g, inv)"),
    ("rest_in_shelter", "When tired: inside a walled-in pocket sleep until energy is full, then rest while "
     "hurt; outside, dig a two-cell pocket into stone and wall up its mouth with a stone (needs a wood "
     "pickaxe and a stone), or fetch a stone for the wall; with no pocket in reach, sleep in the open only "
     "when exhausted (energy below 2) and no zombie is in view.",
     {"inventory_below": {"energy": 7}},
     "if shelter_and_sleep(api, g, inv):\n        return True\n"
     "    if inv['wood_pickaxe'] > 0 and near(g, 'stone') and get_to(api, ['stone'], inv):\n"
     "        api.do()\n        return True\n    return False"),
    ("drink_until_full", "Walk to the nearest water in view and drink until drink is full (9).",
     {"inventory_below": {"drink": 9}, "in_view": ["water"]}, "return drink(api)"),
    ("hunt_cow", "Walk to the nearest cow in view and hit it until it is eaten (3 hits; +6 food).",
     {"inventory_below": {"food": 9}, "in_view": ["cow"]}, "return hunt(api, 'cow')"),
    ("eat_ripe_plant", "Walk to a ripe plant in view and eat it.", {"in_view": ["ripe_plant"]},
     "return get_to(api, ['ripe_plant'], inv) and api.do()"),
    ("nap_early", "Sleep off the first point of energy lost, in the open, only with no zombie, skeleton or arrow in "
     "view: early in the game (no wood pickaxe yet) it is day and a nap is a dozen steps (wake_up).",
     {"inventory": {"health": 9}, "inventory_below": {"energy": 9, "wood_pickaxe": 1}}, "return nap(api, g)"),
    ("get_sapling", "Hit a neighbouring grass cell until a sapling drops (probability 0.1 a hit).",
     {"inventory_below": {"sapling": 1}, "in_view": ["grass"]}, "return sapling(api, g)"),
    ("plant_sapling", "Plant the sapling on a neighbouring grass cell (it ripens later, to be eaten).",
     {"inventory": {"sapling": 1}, "in_view": ["grass"]}, "return place(api, 'plant', ['grass'])"),
    ("craft_next_tool", "Make the next tool (wood, then stone, then iron pickaxe and sword) whose materials are "
     "held, at a table (and a furnace for iron) in view; place a table where one is needed and none is in "
     "view, or a furnace beside the table once iron tools are next.",
     {"inventory_below": {"iron_sword": 1}}, "return craft_step(api, g, inv)"),
    ("gather_wood", "Walk to the nearest tree in view and collect one wood, while wood is short (below 9 before "
     "the iron sword is made, below 2 after).", {"in_view": ["tree"], "inventory_below": {"wood": 9}},
     "return collect_first(api, inv, ['tree'])"),
    ("mine_stone_and_coal", "With a wood pickaxe: walk (digging) to the nearest coal in view and mine it while "
     "coal is below 2, else stone while stone is below 9 (once 5 are held, only stone within two cells).",
     {"inventory": {"wood_pickaxe": 1}, "in_view_any": ["stone", "coal"]},
     "return collect_first(api, inv, ['coal', 'stone'])"),
    ("mine_iron_and_diamond", "With an iron pickaxe, walk (digging) to the nearest diamond in view and mine it; "
     "else, with a stone pickaxe, iron while iron is below 2.",
     {"inventory": {"stone_pickaxe": 1}, "in_view_any": ["iron", "diamond"]},
     "return collect_first(api, inv, ['diamond', 'iron'])"),
    ("explore_ahead", "Keep going the way the player faces, digging through stone with a pickaxe; turn when blocked "
     "or lava is two cells ahead; stop once something worth a call is in view.", {}, "return explore(api, inv)"),
]

COLLECT_FIRST = '''

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
            + _helpers() + COLLECT_FIRST)


def main() -> int:
    for name, doc, initiation, _ in PARTS:
        print(f"{name}: {doc}\n    starts only when: {initiation_text(initiation)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
