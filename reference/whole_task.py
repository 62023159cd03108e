"""The whole-task programs of `--mode code` with no LLM, for Crafter: the pure code-as-policy baseline.

    python -m reference.whole_task collect_iron    # the program `train.py --task collect_iron --mode code` runs

Written by hand by the project's engineers, like skills.py, whose skills they are built from: one entry,
`solve_task(api)`, called again and again; each call tries the task's skills, most advanced first, and
explores when none applies. The whole benchmark (`crafter`) has a program of its own, crafter_program.py.
`program` builds the entry for either backend (minedojo_skills.py uses it too).
"""

from __future__ import annotations

import argparse

from crafter import constants

from core import CodeAction
from env import get_task
from reference import crafter_program
from reference.skill_helpers import HUNT
from reference.skills import LABEL, PARTS, STEPS

EXPLORE = '''
def explore(api):
    """Walk up to 8 cells one way to bring new cells into view, never onto lava or water. The program
    keeps no memory between calls, so the way is picked from what is in view."""
    view = api.view()
    moves = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    cells = [name for row in view for name in row]
    way = list(moves)[sum(len(name) * (i + 1) for i, name in enumerate(cells)) % 4]
    moved = False
    for step in range(8):
        dx, dy = moves[way]
        if api.view()[3 + dy][4 + dx] not in ["grass", "sand", "path"] or api.steps_left() < 1:
            break
        moved = api.move(way) or moved
    return moved
'''
SURVIVAL = {"collect_drink": 'inventory["drink"] < 6', "eat_cow": 'inventory["food"] < 6',
            "wake_up": 'inventory["energy"] < 3'}
EXTRA = {"fight_back": 'api.nearest("zombie") in [(-1, 0), (1, 0), (0, -1), (0, 1)] and hunt(api, "zombie")',
         "defeat_zombie": 'hunt(api, "zombie")', "defeat_skeleton": 'hunt(api, "skeleton")',
         "eat_plant": 'api.go_to("ripe_plant", 20) and api.do()'}  # RL-only achievements, done crudely


def whole_task_program(task_name: str, max_macro_steps: int = 64) -> CodeAction:
    """The task's skills behind one entry, `solve_task(api)`, each guarded so that it never works for
    more than the chain needs (e.g. 5 stone for a stone pickaxe and a furnace, then no more mining)."""
    task = get_task(task_name)
    goal = task.achievement  # None for a test of another kind: every step of its chain is then guarded
    if not task.success:  # the whole benchmark: survival and every achievement, a program of its own
        return CodeAction("solve_task", crafter_program.program_source(),
                          LABEL + "whole-benchmark program for crafter (--mode code, crafter_program.py)",
                          "solve_task")
    chain = list(task.chain)
    needs: dict[str, int] = {}  # materials the whole chain uses up
    for a in chain:
        verb, _, thing = a.partition("_")
        for item, n in getattr(constants, verb, {}).get(thing, {}).get("uses", {}).items():
            needs[item] = needs.get(item, 0) + n
    for item, n in task.success.get("inventory", {}).items():  # and what the test says to hold
        needs[item] = max(needs.get(item, 0), n)
    tools = " or ".join(f'inventory["{a[5:]}"] < 1' for a in chain if a.startswith("make_")) or "True"
    iron_tools = " or ".join(f'inventory["{a[5:]}"] < 1' for a in chain if a.startswith("make_iron")) or "True"
    guards = {"place_table": f'api.nearest("table") is None and ({tools})',
              "place_furnace": f'api.nearest("furnace") is None and ({iron_tools})', **SURVIVAL}
    for a in chain:
        if a.startswith("collect_") and a[8:] in constants.items:
            guards[a] = f'inventory["{a[8:]}"] < {max(1, needs.get(a[8:], 0))}'
        elif a.startswith("make_"):
            guards[a] = f'inventory["{a[5:]}"] < 1'
    alive = task.max_steps > 300  # long tasks: fight off zombies, drink, eat and sleep along the way
    steps = ["fight_back"] * alive + [a for a in SURVIVAL if alive and a not in chain] + list(reversed(chain))
    calls = [(guards.get(a) if a != goal else None, f"{STEPS[a][1]}(api)" if a in STEPS else EXTRA.get(a))
             for a in steps]  # staying alive first, then the most advanced step of the chain first
    used = list(dict.fromkeys(STEPS[a][1] for a in steps if a in STEPS))
    helpers = dict.fromkeys([h for n in used for h in PARTS[n][1]] + [HUNT] * any(a in EXTRA for a in steps))
    return program(task.name, max_macro_steps, [(g, c) for g, c in calls if c], "explore(api)",
                   "".join(PARTS[n][0] for n in used) + "".join(helpers) + EXPLORE)


def program(task_name: str, max_macro_steps: int, calls: list[tuple[str | None, str]], fallback: str,
            parts: str) -> CodeAction:
    """--mode code's one program, for either backend: `solve_task(api)` makes the first (guard, call) in
    `calls` whose guard holds and whose call made progress, else returns `fallback`; `parts` is the source
    of everything it calls."""
    tries = "".join(f"    if {guard + ' and ' if guard else ''}{call}:\n        return True\n" for guard, call in calls)
    source = (f'''def solve_task(api):
    """Whole-task program for {task_name}: one step of progress per call (at most {max_macro_steps} steps)."""
    inventory = api.inventory()
''' + tries + f"    return {fallback}\n" + parts)
    return CodeAction("solve_task", source, LABEL + f"whole-task program for {task_name} (--mode code)",
                      "solve_task")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", help="print this task's whole-task program")
    args = parser.parse_args(argv)
    try:
        action = whole_task_program(args.task)
    except ValueError as e:
        parser.error(str(e))
    print(f"# {action.doc}\n{action.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
