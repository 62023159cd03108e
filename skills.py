"""Hand-written reference skills and plans for Crafter: RL-GPT's method with no LLM at all.

Everything here was written by hand by the project's engineers. It is NOT model output and is never
presented as such: it is the `library` backend of the slow and fast agents (`--llm library`), so a
user without an LLM endpoint still sees the whole method run, and it is the yardstick that
LLM-written code is compared with. The skills use only the primitive API (`env.api_doc()`) and go
through the same sandbox check and dry-run as LLM code.

    python skills.py --list                      # every skill and its doc
    python skills.py --task collect_diamond      # the reference plan of a task, as the slow agent's JSON
    python skills.py --skill mine_stone          # a skill's source, exactly as the sandbox receives it

Read top to bottom: helpers shared by several skills -> the skills -> the reference plans.
Crafter rules the skills rely on (this Crafter version, see crafter/data.yaml): a tree gives 1 wood and
turns into grass; a table costs 2 wood, a furnace 4 stone; crafting needs the station in one of the
8 cells around the player; mined stone/coal/iron/diamond leave a walkable `path`.
"""

from __future__ import annotations

import argparse
import ast
import json

from env import TASKS, CodeAction, get_task

LABEL = "[hand-written reference skill, not LLM output] "

# ----------------------------------------------------------------------------------------------
# Helpers: plain functions that are pasted into the source of each skill that calls them, because a
# code action is one self-contained source text (that is what the sandbox checks and compiles).

NEAR = '''
def near(api, name):
    """True if `name` is in one of the 8 cells around the player: close enough to craft with."""
    view = api.view()
    return any(view[3 + dy][4 + dx] == name for dy in [-1, 0, 1] for dx in [-1, 0, 1])
'''

FACE_FREE = '''
def face_free(api, free):
    """Face a cell whose name is in `free` (to place something on it), taking at most one step.
    A walkable cell cannot be faced without stepping onto it, so step towards a free cell two away."""
    if api.in_front() in free:
        return True
    view = api.view()
    fx, fy = api.facing()
    moves = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    order = [d for d in moves if moves[d] != (-fx, -fy)] + [d for d in moves if moves[d] == (-fx, -fy)]
    for d in order:  # stepping backwards last keeps the player next to what it just walked to
        dx, dy = moves[d]
        if view[3 + dy][4 + dx] in ["grass", "sand", "path"] and view[3 + 2 * dy][4 + 2 * dx] in free:
            api.move(d)
            return api.in_front() in free
    return False
'''

DIG = '''
def dig_toward(api, name):
    """One step straight towards the nearest visible `name`, mining whatever blocks the way.
    Only ever steps onto grass, sand or path, so lava and water are never entered."""
    target = api.nearest(name)
    if target is None:
        return False
    dx, dy = target
    sx = 1 if dx > 0 else -1
    sy = 1 if dy > 0 else -1
    moves = {(-1, 0): "left", (1, 0): "right", (0, -1): "up", (0, 1): "down"}
    for dist, (ux, uy) in sorted([(abs(dx), (sx, 0)), (abs(dy), (0, sy))], reverse=True):
        if dist == 0:
            continue
        cell = api.view()[3 + uy][4 + ux]
        if cell in ["grass", "sand", "path"]:
            return api.move(moves[(ux, uy)])
        if cell in ["stone", "coal", "iron", "diamond", "tree"]:
            api.move(moves[(ux, uy)])  # blocked, so this only turns the player to face it
            api.do()
            if api.in_front() == "path" or api.in_front() == "grass":
                return True
    return False
'''

MINE = '''
def mine(api, name):
    """Reach the nearest visible `name` (digging through stone if it is walled in) and collect it."""
    if api.nearest(name) is None:
        return False
    while api.steps_left() > 2:
        if api.go_to(name, api.steps_left() - 1):
            api.do()
            return api.in_front() != name  # collected: the cell changed (also when the inventory is full)
        if not dig_toward(api, name):
            return False
    return False
''' + DIG

CRAFT = '''
def craft(api, item, uses, stations):
    """Make `item` standing next to every station it needs, walking to a visible one first."""
    inventory = api.inventory()
    if any(inventory[k] < n for k, n in uses.items()):
        return False
    for station in stations:
        if not all(near(api, s) for s in stations) and api.nearest(station) is not None:
            api.go_to(station, 30)
    if not all(near(api, s) for s in stations):
        return False
    return api.make(item)
''' + NEAR

HUNT = '''
def hunt(api, name):
    """Hit the nearest visible creature `name` until it is gone; True when it was defeated."""
    food = api.inventory()["food"]
    while api.steps_left() > 1:
        if not api.go_to(name, api.steps_left() - 1):
            return False
        fx, fy = api.facing()
        api.do()
        if api.inventory()["food"] > food:
            return True
        view = api.view()
        nearby = [view[3 + fy + dy][4 + fx + dx] for dx, dy in [(-1, 0), (1, 0), (0, -1), (0, 1)]]
        if api.in_front() != name and name not in nearby:  # gone, not stepped aside: it was defeated
            return True
    return False
'''


def _skill(source: str, *helpers: str) -> CodeAction:
    """A skill's source is its own function followed by the helpers it calls; its doc is the docstring."""
    fn = ast.parse(source).body[0]
    doc = LABEL + ast.get_docstring(fn)
    return CodeAction(fn.name, source.strip() + "\n" + "".join(helpers), doc, fn.name)


# ----------------------------------------------------------------------------------------------
# The skills. Each runs for at most max_macro_steps (64) env steps, returns True when it did its job,
# and returns False at once (no wasted steps) when its target is not in view or materials are missing.

_ALL = [
    _skill('''
def chop_tree(api):
    """Walk to the nearest visible tree and chop it once (+1 wood)."""
    return mine(api, "tree")
''', MINE),
    _skill('''
def place_table(api):
    """Place a crafting table (2 wood) on a free cell in front."""
    if api.inventory()["wood"] < 2 or not face_free(api, ["grass", "sand", "path"]):
        return False
    return api.place("table")
''', FACE_FREE),
    _skill('''
def make_wood_pickaxe(api):
    """Make a wood pickaxe (1 wood) next to a visible table."""
    return craft(api, "wood_pickaxe", {"wood": 1}, ["table"])
''', CRAFT),
    _skill('''
def make_wood_sword(api):
    """Make a wood sword (1 wood) next to a visible table."""
    return craft(api, "wood_sword", {"wood": 1}, ["table"])
''', CRAFT),
    _skill('''
def mine_stone(api):
    """Walk (or dig) to the nearest visible stone and mine it; needs a wood pickaxe."""
    if api.inventory()["wood_pickaxe"] < 1:
        return False
    return mine(api, "stone")
''', MINE),
    _skill('''
def place_stone(api):
    """Place a stone block (1 stone) in front: on grass, sand, path, water or lava."""
    if api.inventory()["stone"] < 1 or not face_free(api, ["grass", "sand", "path", "water", "lava"]):
        return False
    return api.place("stone")
''', FACE_FREE),
    _skill('''
def make_stone_pickaxe(api):
    """Make a stone pickaxe (1 wood, 1 stone) next to a visible table."""
    return craft(api, "stone_pickaxe", {"wood": 1, "stone": 1}, ["table"])
''', CRAFT),
    _skill('''
def make_stone_sword(api):
    """Make a stone sword (1 wood, 1 stone) next to a visible table."""
    return craft(api, "stone_sword", {"wood": 1, "stone": 1}, ["table"])
''', CRAFT),
    _skill('''
def place_furnace(api):
    """Place a furnace (4 stone), beside the table when one is in view."""
    if api.inventory()["stone"] < 4:
        return False
    if api.nearest("table") is not None and not near(api, "table"):
        api.go_to("table", 30)
    if not face_free(api, ["grass", "sand", "path"]):
        return False
    return api.place("furnace")
''', NEAR, FACE_FREE),
    _skill('''
def mine_coal(api):
    """Walk (or dig) to the nearest visible coal and mine it; needs a wood pickaxe."""
    if api.inventory()["wood_pickaxe"] < 1:
        return False
    return mine(api, "coal")
''', MINE),
    _skill('''
def mine_iron(api):
    """Walk (or dig) to the nearest visible iron and mine it; needs a stone pickaxe."""
    if api.inventory()["stone_pickaxe"] < 1:
        return False
    return mine(api, "iron")
''', MINE),
    _skill('''
def make_iron_pickaxe(api):
    """Make an iron pickaxe (1 wood, 1 coal, 1 iron) next to a visible table and furnace."""
    return craft(api, "iron_pickaxe", {"wood": 1, "coal": 1, "iron": 1}, ["table", "furnace"])
''', CRAFT),
    _skill('''
def make_iron_sword(api):
    """Make an iron sword (1 wood, 1 coal, 1 iron) next to a visible table and furnace."""
    return craft(api, "iron_sword", {"wood": 1, "coal": 1, "iron": 1}, ["table", "furnace"])
''', CRAFT),
    _skill('''
def mine_diamond(api):
    """Walk (or dig) to the nearest visible diamond and mine it; needs an iron pickaxe."""
    if api.inventory()["iron_pickaxe"] < 1:
        return False
    return mine(api, "diamond")
''', MINE),
    _skill('''
def drink_water(api):
    """Walk to the nearest visible water and drink until the drink meter is full."""
    if api.nearest("water") is None or not api.go_to("water", api.steps_left() - 1):
        return False
    api.do(max(1, min(9 - api.inventory()["drink"], api.steps_left())))
    return True
'''),
    _skill('''
def eat_cow(api):
    """Chase the nearest visible cow and hit it until it is eaten."""
    return hunt(api, "cow")
''', HUNT),
    _skill('''
def sleep_when_tired(api):
    """Sleep while energy is below full; True if energy went up."""
    start = api.inventory()["energy"]
    if start >= 9:
        return False
    while api.inventory()["energy"] < 9 and api.steps_left() > 1:
        api.sleep()
    api.noop()  # the first step with full energy wakes the player up
    return api.inventory()["energy"] > start
'''),
    _skill('''
def collect_sapling(api):
    """Hit grass until a sapling drops (each try succeeds with probability 0.1)."""
    start = api.inventory()["sapling"]
    while api.steps_left() > 1:
        if api.in_front() != "grass" and not api.go_to("grass", 4):
            return False
        api.do()
        if api.inventory()["sapling"] > start:
            return True
    return False
'''),
    _skill('''
def place_plant(api):
    """Plant a sapling (1 sapling) on the grass in front."""
    if api.inventory()["sapling"] < 1 or not face_free(api, ["grass"]):
        return False
    return api.place("plant")
''', FACE_FREE),
]

SKILLS: dict[str, CodeAction] = {a.name: a for a in _ALL}


def skill_for(name: str) -> CodeAction | None:
    """The hand-written skill of this name, or None (the sub-action then stays with RL)."""
    return SKILLS.get(name)


# ----------------------------------------------------------------------------------------------
# Reference plans, in the slow agent's JSON shape. The split follows the paper: searching for
# something from pixels is left to RL, the fixed procedure once it is in view is code.

LONG_CHAIN = 3  # tasks with at least this many prerequisites get the task planner's chain of sub-tasks
TECH_TREE = ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "make_stone_pickaxe",
             "collect_coal", "place_furnace", "collect_iron", "make_iron_pickaxe", "collect_diamond"]

# achievement -> (what must be in view first, found by RL; the code skill that does it)
STEPS: dict[str, tuple[str | None, str]] = {
    "collect_wood": ("tree", "chop_tree"), "place_table": (None, "place_table"),
    "make_wood_pickaxe": (None, "make_wood_pickaxe"), "make_wood_sword": (None, "make_wood_sword"),
    "collect_stone": ("stone", "mine_stone"), "place_stone": (None, "place_stone"),
    "collect_coal": ("coal", "mine_coal"), "make_stone_pickaxe": (None, "make_stone_pickaxe"),
    "make_stone_sword": (None, "make_stone_sword"), "place_furnace": (None, "place_furnace"),
    "collect_iron": ("iron", "mine_iron"), "make_iron_pickaxe": (None, "make_iron_pickaxe"),
    "make_iron_sword": (None, "make_iron_sword"), "collect_diamond": ("diamond", "mine_diamond"),
    "collect_drink": ("water", "drink_water"), "eat_cow": ("cow", "eat_cow"),
    "collect_sapling": (None, "collect_sapling"), "place_plant": (None, "place_plant"),
    "wake_up": (None, "sleep_when_tired"),
}

# achievements with no code at all: reacting to what moves is trial and error, RL's job
RL_ONLY: dict[str, tuple[str, str]] = {
    "eat_plant": ("guard_and_eat_plant", "Stay near the planted sapling and keep zombies and cows away from "
                  "it until it is ripe (it looks different), then face it and `do` to eat it."),
    "defeat_zombie": ("fight_zombie", "Find a zombie (on grass, mostly at night), face it and hit it until "
                      "it dies (5 hits bare-handed), stepping away to recover when health is low."),
    "defeat_skeleton": ("fight_skeleton", "Find a skeleton in the dark cave tunnels, get next to it while "
                        "dodging its arrows, and hit it until it dies."),
    "wake_up": ("wait_until_tired", "Keep the player safe (away from zombies and lava) until energy drops "
                "below full, then choose the sleep_when_tired code action."),
    "crafter": ("survive", "Keep health up over the whole episode: flee or fight zombies and skeletons, "
                "avoid lava, and choose drink_water, eat_cow and sleep_when_tired when the meters run low."),
}

CODE_REASON = ("Once its target or station is in view this is a fixed procedure over the API (walk, face, "
               "act, check the inventory): code does it reliably in a few steps, while RL would need many "
               "samples to learn the same exact action sequence.")
RL_REASON = ("Where things are differs in every world and only shows in the image as the agent moves, and "
             "enemies react: that is trial and error, which RL learns and code could only guess.")
SHAPING = {"collect_wood": ("wood", 0.1), "collect_stone": ("stone", 0.1), "collect_coal": ("coal", 0.1),
           "collect_iron": ("iron", 0.2), "collect_sapling": ("sapling", 0.1),
           "make_wood_pickaxe": ("wood_pickaxe", 0.2), "make_stone_pickaxe": ("stone_pickaxe", 0.2),
           "make_iron_pickaxe": ("iron_pickaxe", 0.3)}


def _code_spec(skill: CodeAction) -> str:
    return (f"{skill.doc.removeprefix(LABEL)} Return True when it has done so; return False at once, "
            "without wasting steps, when the target is not in view or materials are missing.")


def reference_plan(task_name: str) -> dict:
    """The hand-written plan of a task, exactly as the slow agent's JSON (validated by its schema)."""
    task = get_task(task_name)
    if task.achievement is None:  # the whole benchmark: the tech tree, plus staying alive
        chain = TECH_TREE + ["collect_drink", "eat_cow", "wake_up"]
        subtasks = list(TECH_TREE)
    else:
        chain = list(task.prerequisites) + [task.achievement]
        subtasks = chain if len(task.prerequisites) >= LONG_CHAIN else []
    targets = [STEPS[a][0] for a in chain if a in STEPS and STEPS[a][0]]
    subactions = []
    if targets:
        name = f"find_{targets[0]}" if len(targets) == 1 else "explore"
        spec = (f"Explore until what the next step needs is in view ({', '.join(targets)}), without walking "
                "into lava or water; the code actions then do the rest.")
        subactions.append({"name": name, "how": "rl", "spec": spec, "reason": RL_REASON})
    for a in chain:
        if a in STEPS:
            skill = SKILLS[STEPS[a][1]]
            subactions.append({"name": skill.name, "how": "code", "spec": _code_spec(skill),
                               "reason": CODE_REASON})
    for key in (task.name, task.achievement):
        if key in RL_ONLY:
            name, spec = RL_ONLY[key]
            subactions.append({"name": name, "how": "rl", "spec": spec, "reason": RL_REASON})
    shaping = dict(SHAPING[a] for a in chain[:-1] if a in SHAPING) if task.achievement else {}
    mask = [] if task.achievement is None else [
        f"{verb}_{thing}" for verb, things in (("place", ["stone", "table", "furnace", "plant"]),
                                               ("make", ["wood_pickaxe", "stone_pickaxe", "iron_pickaxe",
                                                         "wood_sword", "stone_sword", "iron_sword"]))
        for thing in things if f"{verb}_{thing}" not in chain]
    if task.max_steps <= 300:  # energy lasts about 300 steps: short tasks never need to sleep
        mask.append("sleep")
    return {"task": task.name, "subtasks": subtasks, "subactions": subactions,
            "rl_config": {"shaping": shaping, "mask_actions": mask}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print every skill with its doc")
    parser.add_argument("--task", help="print this task's reference plan as JSON")
    parser.add_argument("--skill", help="print this skill's source")
    args = parser.parse_args(argv)
    if args.list:
        for skill in SKILLS.values():
            print(f"{skill.name:20s} {skill.doc.removeprefix(LABEL)}")
        print(f"plans for: {', '.join(TASKS)}")
    elif args.task:
        print(json.dumps(reference_plan(args.task), indent=2))
    elif args.skill in SKILLS:
        print(f"# {SKILLS[args.skill].doc}\n{SKILLS[args.skill].source}")
    else:
        parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
