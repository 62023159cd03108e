"""Hand-written reference skills and plans for MineDojo's first Plan4MC tasks: RL-GPT with no LLM.

Everything here was written by hand by the project's engineers, like skills.py and plans.py for Crafter. It is NOT
model output and is labelled so: it is what the reference backend of the slow and fast agents
(`--llm reference`) uses on a `minedojo:` task of envs.minedojo_env.TASKS (harvest_log, craft_planks,
craft_stick, craft_crafting_table, craft_wooden_pickaxe). The skills use only the MineDojo primitive
API (minedojo_env.MineDojoAPI) and go through the same sandbox check and dry run as LLM code.

    python -m reference.minedojo_skills --list                          # every skill and its doc
    python -m reference.minedojo_skills --task minedojo:craft_stick     # the reference plan, as the slow agent's JSON
    python -m reference.minedojo_skills --program minedojo:craft_stick  # the whole-task program of --mode code

NOT RUN AGAINST A REAL MINEDOJO: MineDojo cannot be installed where this was written. What was
verified is that every skill and program passes the sandbox and solves its task on the stand-in of
tests/minedojo_stand_in.py (MineDojo's documented observation and action spaces, a log every 3rd attack,
the vanilla recipes). The split follows the RL-GPT paper's MineDojo example: finding and facing a
tree from pixels is RL; holding attack until the log drops, and crafting, are code.
Minecraft facts relied on: 1 log -> 4 planks, 2 planks -> 4 sticks, 4 planks -> 1 crafting table (no
table needed for these); 3 planks + 2 sticks -> 1 wooden pickaxe, only with a crafting table nearby.
"""

from __future__ import annotations

import argparse
import ast
import json

from core import CodeAction
from envs.minedojo_env import TASKS, get_task, target
from reference.plans import LONG_CHAIN
from reference.skills import LABEL
from reference.whole_task import program

# ----------------------------------------------------------------------------------------------
# The skills. Each returns True when it did its job and returns False at once (no wasted step) when
# materials are missing; none runs longer than one call's step budget (api.steps_left()).

CHOP_LOG = '''
def chop_log(api):
    """Hold attack on the block in the crosshair until something drops, for at most 80 steps and no more than
    the call's steps left (a log takes dozens bare-handed); True if it was a log. Facing a tree trunk first is
    the caller's part."""
    before = api.inventory().get("log", 0)
    for step in range(min(80, api.steps_left())):
        if api.attack():
            return api.inventory().get("log", 0) > before
    return False
'''

CRAFT_PLANKS = '''
def craft_planks(api):
    """Craft planks from one log (+4 planks)."""
    if api.inventory().get("log", 0) < 1:
        return False
    return api.craft("planks")
'''

CRAFT_STICKS = '''
def craft_sticks(api):
    """Craft sticks from 2 planks (+4 sticks)."""
    if api.inventory().get("planks", 0) < 2:
        return False
    return api.craft("stick")
'''

CRAFT_TABLE = '''
def craft_table(api):
    """Craft a crafting table from 4 planks (+1 crafting_table in the inventory)."""
    if api.inventory().get("planks", 0) < 4:
        return False
    return api.craft("crafting_table")
'''

CRAFT_WOODEN_PICKAXE = '''
def craft_wooden_pickaxe(api):
    """Craft a wooden pickaxe from 3 planks and 2 sticks at a crafting table; with none near, place one
    from the inventory on the ground in front first."""
    inventory = api.inventory()
    if inventory.get("planks", 0) < 3 or inventory.get("stick", 0) < 2:
        return False
    if api.craft("wooden_pickaxe"):
        return True
    if inventory.get("crafting_table", 0) < 1:
        return False
    api.look(45)
    placed = api.place("crafting_table")
    api.look(-45)
    return placed and api.craft("wooden_pickaxe")
'''


def _skill(source: str) -> CodeAction:
    fn = ast.parse(source).body[0]
    doc = " ".join(ast.get_docstring(fn).split())  # one line: plan specs and the critic's plan lines are built of it
    return CodeAction(fn.name, source.strip() + "\n", LABEL + doc, fn.name)


SKILLS: dict[str, CodeAction] = {a.name: a for a in map(_skill, [CHOP_LOG, CRAFT_PLANKS, CRAFT_STICKS, CRAFT_TABLE,
                                                                CRAFT_WOODEN_PICKAXE])}
STEP_OF = {"log": "chop_log", "planks": "craft_planks", "stick": "craft_sticks", "crafting_table": "craft_table",
           "wooden_pickaxe": "craft_wooden_pickaxe"}  # item -> the skill that gets it

# The fast agent's example in prompts for MineDojo tasks: a skill of none of the tasks above, so the
# prompt never hands the model the answer it is asked for.
EXAMPLE = _skill('''
def milk_cow(api):
    """Hold an empty bucket and use it on the cow in the crosshair (+1 milk_bucket)."""
    if not api.equip("bucket"):
        return False
    return api.use()
''')


def skill_for(name: str) -> CodeAction | None:
    """The hand-written skill of this name, or None (the sub-action then stays with RL)."""
    return SKILLS.get(name)


# ----------------------------------------------------------------------------------------------
# Reference plans, in the slow agent's JSON shape.

CODE_REASON = ("A fixed procedure over the API (hold attack until the drop, or craft from what the inventory "
               "holds): code does it exactly, while RL would need many samples to hold one action for dozens "
               "of steps or to find the craft calls, which the reduced action space does not have.")
RL_REASON = ("Where trees are differs in every world and only shows in the image as the agent turns and "
             "walks: that is trial and error, which RL learns and code could only guess.")
FIND_TREE = ("Turn and walk until a tree trunk fills the crosshair, close enough to hit it (about 2 blocks), "
             "without falling into water or off cliffs; chop_log then does the rest.")


def _known(task_name: str):
    task = get_task(task_name)
    if task.name not in TASKS:
        raise ValueError(f"no hand-written reference for {task.name!r}; tasks with one: {', '.join(TASKS)}")
    return task


def reference_plan(task_name: str) -> dict:
    """The hand-written plan of a task of minedojo_env.TASKS, exactly as the slow agent's JSON."""
    task = _known(task_name)
    chain = list(task.prerequisites) + [target(task)]
    subactions = [{"name": "find_tree", "how": "rl", "spec": FIND_TREE, "reason": RL_REASON}]
    for item in chain:
        skill = SKILLS[STEP_OF[item]]
        subactions.append({"name": skill.name, "how": "code", "reason": CODE_REASON,
                           "spec": f"{skill.doc.removeprefix(LABEL)} Return True when it has done so; return "
                                   "False at once, without wasting steps, when materials are missing."})
    use = [a for a in task.actions if a.endswith("/use")]  # right-click: buckets and food, never wood
    return {"task": task.name, "subtasks": chain if len(task.prerequisites) >= LONG_CHAIN else [],
            "subactions": subactions,
            "rl_config": {"shaping": dict.fromkeys(task.prerequisites, 0.1), "mask_actions": use}}


# ----------------------------------------------------------------------------------------------
# --mode code with no LLM: one program for the whole task, called again and again. Each call does the
# most advanced step whose materials are there and chops a log when none is (it keeps no memory).

GUARDS = {  # item -> when its skill is worth a call, beyond the skill's own material check
    "crafting_table": 'inventory.get("crafting_table", 0) < 1', "stick": 'inventory.get("stick", 0) < 2',
}


def whole_task_program(task_name: str, max_macro_steps: int = 64) -> CodeAction:
    """The task's skills behind one entry, `solve_task(api)`, most advanced first, chop_log last."""
    task = _known(task_name)
    chain = list(task.prerequisites) + [target(task)]
    calls = [(GUARDS.get(item), f"{STEP_OF[item]}(api)") for item in reversed(chain) if item != "log"]
    return program(task.name, max_macro_steps, calls, "chop_log(api)",
                   "".join("\n" + SKILLS[STEP_OF[item]].source for item in chain))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print every skill with its doc")
    parser.add_argument("--task", help="print this task's reference plan as JSON")
    parser.add_argument("--program", help="print this task's whole-task program")
    args = parser.parse_args(argv)
    try:
        if args.list:
            for skill in SKILLS.values():
                print(f"{skill.name:22s} {skill.doc.removeprefix(LABEL)}")
            print(f"plans for: {', '.join(TASKS)}")
        elif args.task:
            print(json.dumps(reference_plan(args.task), indent=2))
        elif args.program:
            action = whole_task_program(args.program)
            print(f"# {action.doc}\n{action.source}")
        else:
            parser.print_help()
    except ValueError as e:
        parser.error(str(e))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
