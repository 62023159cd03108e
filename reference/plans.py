"""Hand-written reference plans for Crafter, in the slow agent's JSON shape: RL-GPT's planner with no LLM.

Written by hand by the project's engineers, like the skills they use (skills.py); never LLM output. With
those skills they are the reference backend of the slow agent (`--llm reference`). The split follows the
paper: searching for something from pixels is left to RL, the fixed procedure once it is in view is code.

    python -m reference.plans collect_diamond    # the reference plan of a task, as the slow agent's JSON
"""

from __future__ import annotations

import argparse
import json

from core import CodeAction
from env import get_task
from reference.crafter_parts import PARTS
from reference.skills import CRAFTER_PARTS, LABEL, SKILLS, STEPS, initiation_of

LONG_CHAIN = 3  # tasks with at least this many prerequisites get the task planner's chain of sub-tasks
TECH_TREE = ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "make_stone_pickaxe",
             "collect_coal", "place_furnace", "collect_iron", "make_iron_pickaxe", "collect_diamond"]

# achievements with no code at all: reacting to what moves is trial and error, RL's job
RL_ONLY: dict[str, tuple[str, str]] = {
    "eat_plant": ("guard_and_eat_plant", "Stay near the planted sapling and keep zombies and cows away from "
                  "it until it is ripe (it looks different), then face it and `do` to eat it."),
    "defeat_skeleton": ("fight_skeleton", "Find a skeleton in the dark cave tunnels, get next to it while "
                        "dodging its arrows, and hit it until it dies."),
    "wake_up": ("wait_until_tired", "Keep the player safe (away from zombies and lava) until energy drops "
                "below full, then choose the sleep_when_tired code action."),
    "survive_500": ("stay_alive", "Keep food, drink and energy up (eat a cow, drink water, sleep when energy is "
                    "low) and keep away from zombies, skeletons' arrows and lava, so the player lives 500 steps."),
    "crafter": ("choose_and_survive", "Choose which code action runs when (it is not fixed in any code: e.g. "
                "drink or eat before the meter runs out, shelter before night, the next tool once its materials are "
                "held), and react from what the image shows where no code action fits: flee or fight zombies and "
                "skeletons, dodge arrows, keep away from lava."),
}

FEND_OFF = ("When a zombie comes near, face it and hit it until it dies (5 hits bare-handed; it hits for 2 every "
            "few steps) or walk away from it, then go on with the task.")
CODE_REASON = ("Once its target or station is in view this is a fixed procedure over the API (walk, face, "
               "act, check the inventory): code does it reliably in a few steps, while RL would need many "
               "samples to learn the same exact action sequence.")
PART_REASON = ("Once what it needs is in view this is a fixed procedure over the API (walk, dig, face, act, "
               "check the inventory), the behaviour of a routine written by people who know the game: code does it "
               "reliably, while RL would need many samples to learn the same exact action sequence. Its "
               "initiation keeps it to the states where it can act, and it returns at once (no step under "
               "follow_order) where the routine would not run it.")
CHOICE_REASON = ("Which behaviour pays most now depends on the world, the meters and the enemies around, seen in "
                 "the image: a trade-off learned from Crafter's reward, which no fixed order of priorities gets "
                 "right everywhere; so RL chooses. The code sub-actions are listed most urgent first and the plan "
                 "asks RL to follow that order (follow_order: taught fully while it is learnt, then lightly), so it "
                 "begins from a sensible order and learns where to leave it. No curriculum and no shaping: "
                 "Crafter's own reward counts every achievement.")
RL_REASON = ("Where things are differs in every world and only shows in the image as the agent moves, and "
             "enemies react: that is trial and error, which RL learns and code could only guess.")
SHAPING = {"collect_wood": ("wood", 0.1), "collect_stone": ("stone", 0.1), "collect_coal": ("coal", 0.1),
           "collect_iron": ("iron", 0.2), "collect_sapling": ("sapling", 0.1),
           "make_wood_pickaxe": ("wood_pickaxe", 0.2), "make_stone_pickaxe": ("stone_pickaxe", 0.2),
           "make_iron_pickaxe": ("iron_pickaxe", 0.3)}
FOUND = {"tree": "wood", "stone": "stone", "coal": "coal", "iron": "iron", "diamond": "diamond"}  # target -> item
STAGE_SHAPING = 0.2  # a search sub-action's pull towards its item while its sub-task is trained (plan's: 0.1)


def _code_spec(skill: CodeAction) -> str:
    return (f"{skill.doc.removeprefix(LABEL)} Return True when it has done so; return False at once, "
            "without wasting steps, when the target is not in view or materials are missing.")


def reference_plan(task_name: str) -> dict:
    """The hand-written plan of a task, exactly as the slow agent's JSON (validated by its schema)."""
    task = get_task(task_name)
    if not task.success:  # the whole benchmark: the routine's behaviours as code, choosing among them RL's
        name, spec = RL_ONLY[task.name]
        return {"task": task.name, "subtasks": [], "subactions": [
            *({"name": part, "how": "code", "reason": PART_REASON, "initiation": CRAFTER_PARTS[part].initiation,
               "spec": doc + " Return True when the call did its job, False at once when it cannot."}
              for part, doc, _, _ in PARTS),
            {"name": name, "how": "rl", "spec": spec, "reason": CHOICE_REASON}],
            "rl_config": {"shaping": {}, "mask_actions": [], "follow_order": True}}
    chain = list(task.chain)  # a task with a test of its own: its milestones, every one the test needs
    subtasks = chain if len(task.prerequisites) >= LONG_CHAIN else []
    targets = [STEPS[a][0] for a in chain if a in STEPS and STEPS[a][0]]
    subactions = []
    if targets and subtasks:  # a curriculum: one search per sub-task, with its own pull
        for a in [a for a in chain if a in STEPS and STEPS[a][0]]:
            target = STEPS[a][0]
            subactions.append({"name": f"find_{target}", "how": "rl", "subtask": a, "reason": RL_REASON,
                               "spec": f"While {a} is being learned: explore until {target} is in view, "
                                       "without walking into lava or water; the code action does the rest.",
                               "rl_config": {"shaping": {FOUND[target]: STAGE_SHAPING}}})
    elif targets:
        name = f"find_{targets[0]}" if len(targets) == 1 else "explore"
        spec = (f"Explore until what the next step needs is in view ({', '.join(targets)}), without walking "
                "into lava or water; the code actions then do the rest.")
        subactions.append({"name": name, "how": "rl", "spec": spec, "reason": RL_REASON})
    for a in chain:
        if a in STEPS:
            skill = SKILLS[STEPS[a][1]]
            subactions.append({"name": skill.name, "how": "code", "spec": _code_spec(skill),
                               "reason": CODE_REASON, "initiation": initiation_of(skill.name)})
    if task.name in RL_ONLY:
        name, spec = RL_ONLY[task.name]
        subactions.append({"name": name, "how": "rl", "spec": spec, "reason": RL_REASON})
    if "defeat_zombie" not in chain:  # zombies roam the grass in every task: fending them off starts as RL's
        subactions.append({"name": "fight_zombie", "how": "rl", "spec": FEND_OFF, "reason": RL_REASON})
    shaping = dict(SHAPING[a] for a in (chain[:-1] if task.achievement else chain) if a in SHAPING)
    mask = [
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
    parser.add_argument("task", help="print this task's reference plan as JSON (python env.py --list: the tasks)")
    args = parser.parse_args(argv)
    try:
        plan = reference_plan(args.task)
    except ValueError as e:
        parser.error(str(e))
    print(json.dumps(plan, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
