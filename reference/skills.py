"""Hand-written reference skills for Crafter, and their variants: RL-GPT's code actions with no LLM at all.

Everything here was written by hand by the project's engineers. It is NOT model output and is never
presented as such: with the reference plans (plans.py) it is the reference backend of the slow and fast
agents (`--llm reference`), so a user without an LLM endpoint still sees the whole method run, and it is
the yardstick that LLM-written code is compared with. The skills use only the primitive API
(`env.api_doc()`) and go through the same sandbox check and dry-run as LLM code.

    python -m reference.skills --list                # every skill and its doc
    python -m reference.skills --skill mine_stone    # a skill's source, exactly as the sandbox receives it

Read top to bottom: the skills (their shared helpers are in skill_helpers.py) -> which achievement each
does and where it can start -> their variants (a second version where the choice matters, for the critic
to swap in). The reference plans built on them are in plans.py; the whole-task programs of `--mode code`,
built from the same skills, in whole_task.py.
Crafter rules the skills rely on (this Crafter version, see crafter/data.yaml): a tree gives 1 wood and
turns into grass; a table costs 2 wood, a furnace 4 stone; crafting needs the station in one of the
8 cells around the player; mined stone/coal/iron/diamond leave a walkable `path`.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses

from crafter import constants

from core import CodeAction
from envs.crafter_tasks import source_of
from reference import crafter_parts
from reference.skill_helpers import CRAFT, FACE_FREE, FACE_FREE_BESIDE, HUNT, MINE, SEARCH

LABEL = "[hand-written reference skill, not LLM output] "

# ----------------------------------------------------------------------------------------------
# The helpers (skill_helpers.py) are pasted into the source of each skill that calls them.

PARTS: dict[str, tuple[str, tuple[str, ...]]] = {}  # skill -> (its own function, its helpers)


def _skill(source: str, *helpers: str) -> CodeAction:
    """A skill's source is its own function followed by the helpers it calls; its doc is the docstring."""
    fn = ast.parse(source).body[0]
    PARTS[fn.name] = ("\n" + source.strip() + "\n", helpers)  # each part opens with a blank line
    return CodeAction(fn.name, source.strip() + "\n" + "".join(helpers), LABEL + ast.get_docstring(fn), fn.name)


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
    """Place a furnace (4 stone); with a table in view, where one free cell has both within reach (iron tools)."""
    if api.inventory()["stone"] < 4:
        return False
    if api.nearest("table") is not None and face_free_beside(api, ["grass", "sand", "path"], "table"):
        return api.place("furnace")
    if not face_free(api, ["grass", "sand", "path"]):
        return False
    return api.place("furnace")
''', FACE_FREE, FACE_FREE_BESIDE),
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
def fight_zombie(api):
    """Face the nearest visible zombie and hit it until it is defeated (5 hits bare-handed, fewer with a
    sword); it hits back for 2 every few steps."""
    return hunt(api, "zombie")
''', HUNT),
    _skill('''
def sleep_when_tired(api):
    """Sleep until energy is full and the player wakes up; True if energy went up. A zombie deals 7
    damage to a sleeper, so it does not start with one in view unless walled in, and stops when hurt.
    It builds no shelter itself: finding a safe spot is left to RL."""
    start, health = api.inventory()["energy"], api.inventory()["health"]
    view = api.view()
    sides = [view[2][4], view[4][4], view[3][3], view[3][5]]
    walled_in = all(side in ["stone", "tree", "water", "lava", "table", "furnace"] for side in sides)
    if start >= 9 or (api.nearest("zombie") is not None and not walled_in):
        return False
    while api.inventory()["energy"] < 9 and api.steps_left() > 1:
        api.sleep(1)  # a step at a time: the loop checks after each
        if api.inventory()["health"] < health:  # attacked, and so woken up: let the RL agent react
            return False
    api.noop()  # the first step with full energy wakes the player up
    return api.inventory()["energy"] > start
'''),
    _skill('''
def collect_sapling(api):
    """Hit grass until a sapling drops (each try succeeds with probability 0.1), fighting off zombies."""
    start = api.inventory()["sapling"]
    sides = {(-1, 0): "left", (1, 0): "right", (0, -1): "up", (0, 1): "down"}
    while api.steps_left() > 1:
        zombie = api.nearest("zombie")
        if zombie in sides:  # a zombie next to the player hits it every few steps: hit back first
            api.move(sides[zombie])
            api.do()
            continue
        if api.in_front() != "grass" and not api.go_to("grass", 10):
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


# The whole-benchmark routine (crafter_program.py) taken apart, one code action per behaviour, each with its
# initiation: the reference crafter plan's code actions. Kept apart from SKILLS, which are the steps of a
# chain, each tested on its own achievement (tests/test_skills.py).
CRAFTER_PARTS: dict[str, CodeAction] = {
    name: CodeAction(name, crafter_parts.source(name), LABEL + doc, name, initiation=initiation)
    for name, doc, initiation, _ in crafter_parts.PARTS}


def skill_for(name: str) -> CodeAction | None:
    """The hand-written skill of this name, or None (the sub-action then stays with RL)."""
    return SKILLS.get(name) or CRAFTER_PARTS.get(name)


# ----------------------------------------------------------------------------------------------
# What each skill does, and where it can start.

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
    "defeat_zombie": ("zombie", "fight_zombie"),
    "collect_sapling": (None, "collect_sapling"), "place_plant": (None, "place_plant"),
    "wake_up": (None, "sleep_when_tired"),
}


def initiation_of(skill: str, in_view: bool = True) -> dict:
    """Where a skill can start, from Crafter's rules (data.yaml): what its recipe uses and the stations it
    needs in view, or the tool its target needs and the target in view ({} for sleeping: "energy below
    full" is not a condition the menu has). Each skill returns False at once outside these states."""
    achievement = next(a for a, (_, name) in STEPS.items() if name == skill)
    verb, _, thing = achievement.partition("_")
    if verb == "make":
        need, cells = dict(constants.make[thing]["uses"]), list(constants.make[thing]["nearby"])
    elif verb == "place":
        need, cells = dict(constants.place[thing]["uses"]), []
    elif verb == "collect":
        source = source_of(thing)  # wood: tree, drink: water
        need, cells = dict(constants.collect[source]["require"]), [source]
    else:
        need, cells = {}, [STEPS[achievement][0]] if STEPS[achievement][0] else []  # fight_zombie: a zombie
    initiation = {"inventory": need} if need else {}
    return initiation | ({"in_view": cells} if cells and in_view else {})


# ----------------------------------------------------------------------------------------------
# Variants: a second hand-written version of a skill where the choice matters, for the critic
# (critic.py) to swap in when the version in use keeps failing. The reference version above is always
# variant "reference"; an alternative keeps the skill's name, so the plan's sub-action stays the same.

# mining skills -> (target, tool it needs): the "search" variant looks for a target out of view first
# instead of returning False at once (the reference leaves searching to RL, which may not learn it)
_SEARCH_FIRST = {"chop_tree": ("tree", None), "mine_stone": ("stone", "wood_pickaxe"),
                 "mine_coal": ("coal", "wood_pickaxe"), "mine_iron": ("iron", "stone_pickaxe"),
                 "mine_diamond": ("diamond", "iron_pickaxe")}
SEARCH_FIRST = '''
def {name}(api):
    """{doc} When none is in view, it first walks to look for one."""
{guard}    return search(api, "{target}") and mine(api, "{target}")
'''

# placing skills: the "once" variant places only when none is in view. A second table or furnace
# wastes the wood or stone the next step needs, and an RL agent that learned to choose place_table
# may well choose it again next to the first one.
PLACE_ONCE = '''
def {name}(api):
    """{doc} Only when no {thing} is in view already: a second one wastes its materials."""
    if api.nearest("{thing}") is not None:
        return False
    return {name}_anywhere(api)
'''


def _variant(skill: str, variant: str, source: str, *helpers: str) -> CodeAction:
    """An alternative version of `skill`: the skill's name, its own source, the variant named in its doc."""
    fn = ast.parse(source).body[0]
    doc = LABEL + f"(variant {variant}) " + ast.get_docstring(fn)
    return CodeAction(skill, source.strip() + "\n" + "".join(helpers), doc, fn.name)


def _search_first(skill: str, target: str, tool: str | None) -> CodeAction:
    guard = f'    if api.inventory()["{tool}"] < 1:\n        return False\n' if tool else ""
    doc = SKILLS[skill].doc.removeprefix(LABEL)
    source = SEARCH_FIRST.format(name=skill, doc=doc, guard=guard, target=target)
    return _variant(skill, "search", source, SEARCH, MINE)


def _place_once(skill: str) -> CodeAction:
    """The reference placing skill renamed `<skill>_anywhere`, behind a guard against placing a second."""
    own, helpers = PARTS[skill]
    doc = SKILLS[skill].doc.removeprefix(LABEL)
    source = PLACE_ONCE.format(name=skill, doc=doc, thing=skill.removeprefix("place_"))
    return _variant(skill, "once", source, own.replace(f"def {skill}(", f"def {skill}_anywhere("), *helpers)


VARIANTS: dict[str, dict[str, CodeAction]] = {
    **{skill: {"search": _search_first(skill, *how)} for skill, how in _SEARCH_FIRST.items()},
    "place_table": {"once": _place_once("place_table")}, "place_furnace": {"once": _place_once("place_furnace")},
}


def variants(name: str) -> dict[str, CodeAction]:
    """Every hand-written version of skill `name` by variant name, "reference" first, each with where it can
    start (a search variant looks for its target itself, so it does not wait for it to be in view); {} if no
    such skill."""
    found = {"reference": SKILLS[name], **VARIANTS.get(name, {})} if name in SKILLS else {}
    return {v: dataclasses.replace(a, initiation=initiation_of(name, in_view=v != "search")) for v, a in found.items()}


def variant_of(name: str, source: str) -> str | None:
    """Which hand-written version of skill `name` this source is, or None (other code, e.g. an LLM's)."""
    return next((v for v, action in variants(name).items() if action.source == source), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print every skill with its doc")
    parser.add_argument("--skill", help="print this skill's source")
    args = parser.parse_args(argv)
    if args.list:
        for skill in SKILLS.values():
            print(f"{skill.name:20s} {skill.doc.removeprefix(LABEL)}")
    elif args.skill in SKILLS:
        print(f"# {SKILLS[args.skill].doc}\n{SKILLS[args.skill].source}")
    else:
        parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
