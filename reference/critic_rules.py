"""The reference backend's critic: hand-written rules over the statistics an LLM critic sees (not an LLM).

`rule_based_critique` reads what an LLM critic reads (prompts/critic.py): each code action's calls, where
failed episodes stall, how they end, what successful ones gather; and decides the same kinds of change, as a
critic.Feedback that goes through the same checks (critic.check_feedback) and rollback (critic.keep_change).
Each threshold below says why it is where it is.

    python -m pytest -q tests/test_critic.py    # the rules, each broken once and watched fail
"""

from __future__ import annotations

import copy

from core import CodeAction, Mode, Plan
from critic import Feedback, active_code, num, success_text
from env import get_task
from reference import plans, skills

MIN_CALLS = 10  # fewer calls than this say too little about a code action
ERROR_SHARE = 0.1  # code failing (raising, running out of budget) this often is broken: fix, swap or drop it
LOW_SUCCESS = 0.5  # returning True less often than this: try another version, if there is one
# Fewer failed episodes than this say too little about where they stop (a share of 3 is 0, 33, 67 or 100%)
MIN_FAILED_EPISODES = 5
# The first prerequisite that at least this share of failed episodes never reached is where they stall:
# earlier ones most of them got past, so the problem is this step.
STALL_SHARE = 0.5
# An achievement unlocked in fewer than this share of an iteration's episodes is named as rare (crafter)
RARE = 0.1
# A cause that ends at least this share of the failed episodes is acted on, when it is a meter running
# empty: such a death is avoidable (drink, eat, sleep), so a quarter of the episodes lost to it is worth
# one change, while the rarer causes are left to RL. Survival achievement that refills each meter -> the
# meter (an inventory item the plan may shape).
DEATH_SHARE = 0.25
METERS = {"thirst": ("collect_drink", "drink"), "hunger": ("eat_cow", "food"), "fatigue": ("wake_up", "energy")}
METER_SHAPING = 0.1  # reward per unit of the meter regained, as the plan's shaping of an item gained
# Successful episodes that gather a shaped item at more than this many times what the task needs (evidence.gathered),
# with a code action that gathers it in use, were spent collecting reward instead of finishing: the shaping
# (meant to guide RL's search) pays for each call of the code action, and longer episodes die more often.
OVER_GATHER = 1.5
MIN_SUCCESSES = 20  # fewer successful episodes than this say too little about what they gathered


def rule_based_critique(plan: Plan, code_actions: list[CodeAction], stats: dict) -> Feedback:
    """Decide concrete changes from the per-code-action statistics (stats["code_actions"], as
    code_actions.CodeStats.summary gives them) and the iteration's episodes (evidence.iteration_evidence):
    where failed episodes stalled (stats["stalls"]; for `crafter`, which has no goal, the first step of the
    tech tree that most episodes never unlocked, from stats["score"]) and how they ended (stats["ends"]). A
    failing hand-written code action is swapped for its next variant; after the last variant, one that still
    raises goes to RL; a stall moves its rl sub-action to code when a hand-written skill exists, else tries
    that skill's next variant, and unmasks and shapes that step; episodes dying of an empty meter get its
    survival step coded and the meter shaped; a shaped item that successful episodes gather far beyond the
    chain's need, through a code action, is no longer shaped. Every decision gets one line in `reasons`."""
    active, per_action = active_code(plan, code_actions), stats.get("code_actions", {})
    notes, reasons, to_code, to_rl, fixes, variants = [], [], [], [], {}, {}
    for s in plan.code_subactions if stats.get("mode") != Mode.RL_CONFIG else []:  # rl+config writes no code
        if s.name not in active:
            to_rl.append(s.name)
            reasons.append(f"{s.name}: no code was accepted for it, so it already ran as RL")
            continue
        st = per_action.get(active[s.name].name) or {}
        n, errors, rate = st.get("chosen", 0), st.get("errors") or [], st.get("success_rate", 0.0)
        n_errors = sum(c for _, c in errors)
        if not n:
            notes.append(f"{s.name} was never chosen by the RL agent")
        if n < MIN_CALLS or (n_errors < ERROR_SHARE * n and rate >= LOW_SUCCESS):
            continue
        why = (f"failed with an error in {n_errors} of {n} calls" if n_errors >= ERROR_SHARE * n
               else f"returned True in only {num(rate)} of {n} calls") + \
            f" (reward {num(st.get('mean_reward', 0.0))} per call)"
        versions = list(skills.variants(s.name))
        current = skills.variant_of(s.name, active[s.name].source)
        if current is None:  # not hand-written code: only a code writer can fix it
            if n_errors >= ERROR_SHARE * n:
                fixes[s.name] = (f"{why}; most common: {errors[0][0]} (x{errors[0][1]}). Act only when the "
                                 "target is visible and return before the step budget is spent.")
                reasons.append(f"{s.name}: {why} and it is not hand-written: ask the code writer to fix it")
            else:  # code fine, timing is RL's job
                notes.append(_timing_note(s.name, rate, st, stats.get("mode") != Mode.CODE,
                                          plan.rl_config.get("follow_order") is True))
        elif current != versions[-1]:
            variants[s.name] = versions[versions.index(current) + 1]
            reasons.append(f"{s.name}: {why} as variant {current}; try variant {variants[s.name]}")
        elif n_errors >= ERROR_SHARE * n:
            to_rl.append(s.name)
            reasons.append(f"{s.name}: {why} and every hand-written variant ({', '.join(versions)}) was "
                           "tried: leave it to RL")
        else:
            notes.append(f"{s.name} {why} with its last variant, without errors: when to call it is RL's job")
    config = copy.deepcopy(plan.rl_config)
    over = _over_gathered(stats.get("gathered") or {}, active)  # found first: no rule shapes these again
    lists = (active, to_code, to_rl, variants, reasons, config, over)
    stalls, chain = stats.get("stalls") or {}, get_task(plan.task).prerequisites
    if stats.get("score"):  # no goal: every episode counts, and the tech tree is the chain
        notes.insert(0, _rare_text(stats["score"]))
        stalls, chain = {"failed_episodes": stats["score"]["episodes"], "never_reached": {
            a: round(1 - p, 3) for a, p in stats["score"]["achievements"].items()}}, plans.TECH_TREE
    # no goal: shaping an item pays per unit on a benchmark scored by unlocks (iron, crafter seed 1: worse in
    # results v6 and in the first v7 run, docs/results.md), so the tech tree's stall is not shaped there
    episodes = "episodes" if stats.get("score") else "failed episodes"  # no goal: every episode is one to learn from
    _act_on_stall(plan, stalls, chain, lists, notes, episodes, shape=not stats.get("score"))
    _act_on_deaths(plan, stats.get("ends") or {}, lists, notes, episodes)
    _act_on_over_gathering(lists)
    trend = stats.get("success_trend") or []
    direction = "not measured"
    if len(trend) >= 2:
        direction = "rising" if trend[-1] > trend[0] else "falling" if trend[-1] < trend[0] else "flat"
    said = notes + reasons
    # no goal (crafter): success is always 0, so the summary opens with the score (its note, first in `said`)
    opening = "" if stats.get("score") else f" success rate {success_text(stats)}, trend {direction}."
    summary = (f"[hand-written rule-based critic, not an LLM]{opening} " +
               ("; ".join(said) + "." if said else "No code action stood out."))
    rl_config = config if config != plan.rl_config else None
    return Feedback(summary, to_code, to_rl, fixes, variants, rl_config, reasons)


def _timing_note(name: str, rate: float, st: dict, free: bool, follow_order: bool) -> str:
    """A code action that succeeds rarely without errors: how many of its calls returned at once without a
    step, and what those cost (nothing where the RL agent chooses, `free`: it decides again in the same state;
    a noop under --mode code); the count only where there are some."""
    n, at_once = st.get("chosen", 0), (st.get("ends") or {}).get("false_at_once", 0)
    cost = ", at no cost in steps" if free else ", each charged one noop step"
    why = f"; {at_once} of them returned at once without a step{cost}" if at_once else ""
    if follow_order and at_once:
        why += ": the plan's follow_order tries this part before the ones after it"
    elif free:  # when to call it is RL's choice
        why += " (the RL agent often calls it where it cannot act)"
    return f"{name} returned True in only {num(rate)} of its {n} calls, without errors{why}"


def _rare_text(score: dict) -> str:
    rates = score["achievements"]
    never = [a for a, p in rates.items() if p == 0]
    rare = [f"{a} {num(p)}" for a, p in rates.items() if 0 < p < RARE]
    return (f"Crafter score {num(score['score'])} (+- {num(score['se'])}, n={score['episodes']} episodes); never "
            f"unlocked: {', '.join(never) or 'none'}; rarely (share of episodes): {', '.join(rare) or 'none'}")


def _act_on_stall(plan: Plan, stalls: dict, chain, lists: tuple, notes: list[str], episodes: str,
                  shape: bool = True) -> None:
    """The changes for the step of `chain` the failed episodes stall at (appended to `lists`: active, to_code,
    to_rl, variants, reasons, the new RL config, changed in place, and the over-gathered items). A stall with
    no remedy left is a note."""
    n, shares = stalls.get("failed_episodes", 0), stalls.get("never_reached", {})
    stuck = next((a for a in chain if shares.get(a, 0.0) >= STALL_SHARE), None)
    if n < MIN_FAILED_EPISODES or stuck is None:
        return
    # a percentage, not a count: evidence.stall_shares keeps 3 decimals, one episode too coarse past 1000 of them
    where = f"{round(100 * shares[stuck], 1):g}% of the {n} {episodes} never reached {stuck}"
    _remedy(plan, stuck, where, plans.SHAPING.get(stuck) if shape else None, lists, notes)


def _act_on_deaths(plan: Plan, ends: dict, lists: tuple, notes: list[str], episodes: str) -> None:
    """The changes for the most common way failed episodes end, when it is a meter running empty or a zombie."""
    n, counts = ends.get("failed_episodes", 0), ends.get("ends", {})
    died = {end: c for end, c in counts.items() if end.startswith("died: ")}
    if n < MIN_FAILED_EPISODES or not died:
        return
    end, count = max(died.items(), key=lambda kv: kv[1])
    if count < DEATH_SHARE * n:
        return
    where, meter = f"{count} of {n} {episodes} ended as {end!r}", next((m for m in METERS if m in end), None)
    if end == "died: zombie":  # fighting them off: the plan's fight_zombie sub-action, to code
        _remedy(plan, "defeat_zombie", where, None, lists, notes)
        return
    if meter is None:
        notes.append(f"{where}: the rules have no remedy for that (dodging arrows and lava is RL's)")
        return
    achievement, item = METERS[meter]
    _remedy(plan, achievement, where, (item, METER_SHAPING), lists, notes)


def _over_gathered(gathered: dict, active: dict) -> dict[str, str]:
    """The chain's items that the successful episodes gathered at over OVER_GATHER times what the task needs
    (evidence.gathered) while a code action in use gathers them, each with the evidence in words: shaping
    such an item pays the RL agent for calling that code action again instead of finishing."""
    k, over = gathered.get("successes", 0), {}
    for item, g in (gathered.get("items") or {}).items() if k >= MIN_SUCCESSES else ():
        skill = skills.STEPS.get(g["by"], (None, ""))[1]
        if skill in active and g["mean"] > OVER_GATHER * g["uses"]:
            over[item] = (f"{k} successful episodes gathered {num(g['mean'])} on average where the task "
                          f"needs {g['uses']}; shaping it pays the RL agent for calling {skill} again instead of "
                          "finishing")
    return over


def _act_on_over_gathering(lists: tuple) -> None:
    """Stop shaping each over-gathered item the plan shapes (_over_gathered)."""
    *_, reasons, config, over = lists
    for item, why in over.items():
        if item in config["shaping"]:
            reasons.append(f"rl_config: stop shaping {item}: {why}")
            del config["shaping"][item]


def _remedy(plan: Plan, achievement: str, where: str, shaping: tuple[str, float] | None, lists: tuple,
            notes: list[str]) -> None:
    """What the rules can do for a step that episodes fail at: its skill's sub-action to code (or that code's
    next variant), its base action unmasked, its item shaped. Each change is one line in the reasons."""
    active, to_code, to_rl, variants, reasons, config, over = lists
    before = len(reasons)
    name = skills.STEPS.get(achievement, (None, ""))[1]
    sub = next((s for s in plan.subactions if s.name == name), None)
    decided = {*to_code, *to_rl, *variants}
    if sub is not None and sub.name not in decided:
        if sub.how == "rl" and skills.skill_for(sub.name):
            to_code.append(sub.name)
            reasons.append(f"{sub.name}: {where}; it was left to RL and a hand-written skill exists: code it")
        elif sub.how == "code" and sub.name in active:
            versions = list(skills.variants(sub.name))
            current = skills.variant_of(sub.name, active[sub.name].source)
            if current is not None and current != versions[-1]:
                variants[sub.name] = versions[versions.index(current) + 1]
                reasons.append(f"{sub.name}: {where}; try variant {variants[sub.name]} instead of {current}")
    if achievement in config["mask_actions"]:  # e.g. place_table masked while episodes stall before a table
        config["mask_actions"].remove(achievement)
        reasons.append(f"rl_config: {where}; unmask the base action {achievement}")
    item, weight = shaping or (None, 0.0)
    if item is not None and item not in config["shaping"] and item not in over:  # over-gathered: it would pay per call
        config["shaping"][item] = weight
        reasons.append(f"rl_config: {where}; shape {item} (+{weight} per unit gained)")
    if len(reasons) == before and (sub is None or sub.name not in decided):
        notes.append(f"{where}, but the rules have no remedy left for it (no other skill version, nothing to "
                     "unmask or shape): nothing changes for it")
