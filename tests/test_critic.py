"""Tests for critic.py (the critic that acts, the rollback rule, applying feedback to a plan) and the
skill variants it swaps in (reference/skills.py). An LLM critic's side (its feedback over HTTP, what it is
shown, `--show-prompt`): tests/test_critic_llm.py.

    python -m pytest -q tests/test_critic.py
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import report
from core import CodeAction
from critic import Feedback, apply_feedback, keep_change
from env import ACHIEVEMENTS, ACTIONS, get_task, make_env
from evidence import crafter_score, episode_ends, episode_measures, gathered, stall_shares
from reference import plans, skills
from reference.critic_rules import (
    ERROR_SHARE,
    LOW_SUCCESS,
    METER_SHAPING,
    MIN_CALLS,
    MIN_FAILED_EPISODES,
    STALL_SHARE,
    rule_based_critique,
)
from sandbox import checker
from slow_agent import SlowAgent
from tests.critic_helpers import reference, row, stats_with

# ----------------------------------------------------------------------------------------------
# The rule-based critic acts.


def test_a_failing_hand_written_action_gets_its_next_variant_then_goes_to_rl():
    plan = reference("collect_wood")
    chop = skills.variants("chop_tree")
    fb = rule_based_critique(plan, [chop["reference"]], stats_with({"chop_tree": row(200, LOW_SUCCESS / 4)}))
    assert fb.variants == {"chop_tree": "search"} and fb.to_rl == [] and fb.fixes == {}
    assert any(r.startswith("chop_tree:") and "0.125 of 200 calls" in r and "try variant search" in r
               for r in fb.reasons), fb.reasons
    assert fb.summary.startswith("[hand-written rule-based critic")
    # the last variant raising in a quarter of its calls: every version was tried, RL takes over
    versioned = [dataclasses.replace(chop["search"], name="chop_tree_v2", entry="chop_tree")]
    fb = rule_based_critique(plan, versioned, stats_with({"chop_tree_v2": row(200, 0.6, errors=50)}))
    assert fb.to_rl == ["chop_tree"] and fb.variants == {}
    assert any("every hand-written variant (reference, search) was tried" in r for r in fb.reasons)


def test_failing_code_that_is_not_hand_written_gets_a_fix_for_the_code_writer():
    llm_code = CodeAction("chop_tree", "def chop_tree(api):\n    return 1 / 0\n")
    fb = rule_based_critique(reference("collect_wood"), [llm_code], stats_with({"chop_tree": row(50, 0.2, 20)}))
    assert "20 of 50 calls" in fb.fixes["chop_tree"] and fb.variants == {} and fb.to_rl == []
    assert fb.reasons == ["chop_tree: failed with an error in 20 of 50 calls (reward 0.25 per call) and it is "
                          "not hand-written: ask the code writer to fix it"]


def test_a_healthy_or_rarely_called_action_is_left_alone():
    plan = reference("collect_wood")
    chop = skills.variants("chop_tree")["reference"]
    for r in (row(200, LOW_SUCCESS + 0.1, errors=int(200 * ERROR_SHARE) - 1), row(MIN_CALLS - 1, 0.0)):
        fb = rule_based_critique(plan, [chop], stats_with({"chop_tree": r}))
        assert (fb.variants, fb.to_rl, fb.to_code, fb.rl_config, fb.reasons) == ({}, [], [], None, [])


def test_failed_episodes_stalling_at_a_sub_task_left_to_rl_move_it_to_code():
    plan = reference("make_wood_pickaxe")
    for s in plan.subactions:
        s.how = "rl" if s.name == "place_table" else s.how
    plan.rl_config["mask_actions"].append("place_table")
    code = [skills.SKILLS["chop_tree"], skills.SKILLS["make_wood_pickaxe"]]
    stalls = {"failed_episodes": 30, "never_reached": {"collect_wood": 0.1, "place_table": 0.8}}
    fb = rule_based_critique(plan, code, stats_with({}, stalls))
    assert fb.to_code == ["place_table"] and fb.to_rl == []
    assert any(r.startswith("place_table: 80% of the 30 failed episodes never reached place_table") for r in fb.reasons)
    assert "place_table" not in fb.rl_config["mask_actions"]  # the base action of the stuck step unmasked
    new = apply_feedback(plan, fb)
    assert next(s for s in new.subactions if s.name == "place_table").how == "code"
    # too few failed episodes, or no prerequisite that most of them missed: no decision
    for few in ({**stalls, "failed_episodes": MIN_FAILED_EPISODES - 1},
                {**stalls, "never_reached": {"collect_wood": 0.1, "place_table": STALL_SHARE - 0.01}}):
        assert rule_based_critique(plan, code, stats_with({}, few)).to_code == []


def test_a_stall_at_a_code_sub_task_tries_its_variant_and_adds_missing_shaping():
    plan = reference("make_wood_pickaxe")
    plan.rl_config["shaping"] = {}
    stalls = {"failed_episodes": 12, "never_reached": {"collect_wood": 0.75, "place_table": 1.0}}
    fb = rule_based_critique(plan, [skills.SKILLS["chop_tree"]], stats_with({}, stalls))
    assert fb.variants == {"chop_tree": "search"}
    assert fb.rl_config["shaping"] == {"wood": plans.SHAPING["collect_wood"][1]}
    assert any(r.startswith("rl_config:") and "shape wood" in r for r in fb.reasons)


def test_a_stall_with_no_remedy_left_is_said_and_changes_nothing():
    plan = reference("make_wood_pickaxe")  # shapes wood already; chop_tree at its last variant: nothing left
    search = skills.VARIANTS["chop_tree"]["search"]
    stalls = {"failed_episodes": 12, "never_reached": {"collect_wood": 0.75, "place_table": 1.0}}
    code = [search if s.name == "chop_tree" else skills.SKILLS[s.name] for s in plan.code_subactions]
    fb = rule_based_critique(plan, code, stats_with({}, stalls))
    assert (fb.variants, fb.to_code, fb.to_rl, fb.rl_config, fb.reasons) == ({}, [], [], None, [])
    assert "75% of the 12 failed episodes never reached collect_wood, but the rules have no remedy left" in fb.summary


def test_stall_shares_reads_where_failed_episodes_stopped():
    rows = [{"achievement_collect_wood": 1, "achievement_place_table": 1, "achievement_make_wood_pickaxe": 1},
            {"achievement_collect_wood": 2, "achievement_place_table": 0, "achievement_make_wood_pickaxe": 0},
            {"achievement_collect_wood": 0, "achievement_place_table": 0, "achievement_make_wood_pickaxe": 0}]
    assert stall_shares("make_wood_pickaxe", rows) == {
        "failed_episodes": 2, "never_reached": {"collect_wood": 0.5, "place_table": 1.0}}
    assert stall_shares("crafter", rows) == {"failed_episodes": 0, "never_reached": {}}  # no goal, no failure


# ----------------------------------------------------------------------------------------------
# The rollback rule and applying feedback.


def side(rate, n, lengths: tuple | None = None, score: tuple | None = None) -> dict:
    """One iteration's history row as keep_change reads it: success (rate, n), the mean length and its
    standard error over the successful episodes, and the Crafter score with its standard error."""
    row = {"train_success": rate, "train_episodes": n}
    if lengths:
        row["episode_lengths"] = {"successes": round(rate * n), "success_mean_length": lengths[0],
                                  "success_length_se": lengths[1]}
    if score:
        row["score"] = {"score": score[0], "se": score[1], "episodes": n}
    return row


def test_a_worse_iteration_is_rolled_back_and_noise_is_not():
    keep, why = keep_change(side(0.30, 200), side(0.20, 200))  # a drop of 0.1, margin ~0.043
    assert not keep and why.startswith("rolled back by the success rule") and "n=200" in why
    assert keep_change(side(0.30, 20), side(0.25, 20))[0]  # a drop well inside the noise of 20 episodes
    assert keep_change(side(0.30, 200), side(0.35, 200))[0]
    assert keep_change(side(0.30, 200), side(None, 0)) == (True, "kept: too few finished episodes to tell (n=200 "
                                                                  "and n=0; a rollback needs 20 on each side)")
    assert keep_change(side(1.0, 6), side(0.0, 19))[0]  # all to nothing, but 19 episodes are too few to act on
    assert not keep_change(side(1.0, 20), side(0.0, 20))[0]


def test_with_success_saturated_a_change_that_makes_success_slower_is_rolled_back_by_the_efficiency_rule():
    fast, slow = (15.1, 0.4), (57.5, 1.5)  # mean env steps of the successful episodes, standard error
    keep, why = keep_change(side(0.98, 800, fast), side(0.975, 800, slow))
    assert not keep and why.startswith("rolled back by the efficiency rule") and "57.5" in why and "15.1" in why
    keep, why = keep_change(side(0.98, 800, slow), side(0.975, 800, (56.0, 1.5)))  # 1.5 steps faster: noise
    assert keep and why.startswith("kept by the efficiency rule")
    keep, why = keep_change(side(0.6, 800, fast), side(0.6, 800, slow))  # not saturated: success decides
    assert keep and why.startswith("kept by the success rule")
    keep, why = keep_change(side(0.5, 800, slow), side(0.95, 800, fast))  # better success always keeps
    assert keep and "better" in why


def test_on_crafter_the_score_of_the_iterations_episodes_decides_with_its_noise_margin():
    keep, why = keep_change(side(0.0, 300, score=(22.4, 0.8)), side(0.0, 300, score=(20.5, 0.7)))
    assert not keep and why.startswith("rolled back by the Crafter-score rule") and "noise margin 1.063" in why
    assert keep_change(side(0.0, 300, score=(22.4, 0.8)), side(0.0, 300, score=(21.8, 0.7)))[0]  # inside the noise


def test_applied_feedback_changes_the_plan_as_decided_and_leaves_the_old_one():
    plan = reference("make_wood_pickaxe")
    before = plan.to_dict()
    fb = Feedback("s", ["find_tree"], ["place_table"], {}, rl_config={"shaping": {"wood": 0.3}},
                  reasons=["find_tree: failed episodes never saw a tree"])
    new = apply_feedback(plan, fb)
    how = {s.name: (s.how, s.reason) for s in new.subactions}
    assert how["find_tree"] == ("code", "find_tree: failed episodes never saw a tree")
    assert how["place_table"] == ("rl", "place_table: moved to rl by the critic")
    assert new.rl_config == {"shaping": {"wood": 0.3}, "mask_actions": before["rl_config"]["mask_actions"]}
    assert plan.to_dict() == before
    with pytest.raises(ValueError, match="'gold' is not an inventory item"):
        apply_feedback(plan, Feedback("s", [], [], {}, rl_config={"shaping": {"gold": 0.1}}))




# ----------------------------------------------------------------------------------------------
# The variants themselves.


def test_every_variant_passes_the_sandbox_and_is_told_apart_by_its_source():
    for name in skills.VARIANTS:
        for v, action in skills.variants(name).items():
            checker.check(action.source, action.function)
            assert action.name == name and action.doc.startswith(skills.LABEL)
            assert skills.variant_of(name, action.source) == v
    assert skills.variant_of("chop_tree", "def chop_tree(api):\n    return True\n") is None
    assert skills.variants("fly") == {}


def test_the_search_variant_finds_a_tree_out_of_view_where_the_reference_gives_up():
    """Real Crafter, trees cleared from the view: the reference returns False at once (finding the tree
    is RL's part), the search variant walks until one is in view and chops it."""
    chop = skills.variants("chop_tree")
    env = make_env("crafter", 0, code_actions=[chop["reference"], chop["search"]], max_macro_steps=64)
    wins = 0
    for seed in range(6):
        env.reset(seed=seed)
        world, player = env.unwrapped._crafter._world, env.unwrapped._crafter._player
        x, y = player.pos
        for dx in range(-4, 5):
            for dy in range(-3, 4):
                if world[x + dx, y + dy][0] == "tree":
                    world[x + dx, y + dy] = "grass"
        _, _, _, _, info = env.step(len(ACTIONS))  # the reference
        assert info["code_ok"] is False and info["prim_steps"] == 0  # refused: free, no step
        _, _, _, _, info = env.step(len(ACTIONS) + 1)  # the search variant
        wins += bool(info["code_ok"]) and player.achievements["collect_wood"] > 0
    env.close()
    assert wins >= 5, wins  # 19 of seeds 0-19 when measured; a wall of water may stop a search


# ----------------------------------------------------------------------------------------------
# What the iteration's episodes say (evidence.py), and the rules acting on it for `crafter`.


def crafter_rows(n: int, rates: dict, ends: dict | None = None) -> list[dict]:
    """n Crafter episode rows: the first round(p * n) unlock each achievement; ends given by count."""
    ends = [e for e, c in (ends or {"time limit": n}).items() for _ in range(c)]
    return [{"length": 100, "end": ends[i], **{f"achievement_{a}": int(i < round(p * n)) for a, p in rates.items()}}
            for i in range(n)]


def test_the_crafter_score_of_an_iteration_matches_crafters_and_has_a_bootstrap_standard_error(tmp_path):
    rows = crafter_rows(200, {**dict.fromkeys(ACHIEVEMENTS, 0.5), "collect_wood": 0.9, "collect_diamond": 0.0})
    (tmp_path / "stats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = crafter_score(rows)
    # 20 achievements in 50% of episodes, wood in 90%, diamond in none: exp((20 ln 51 + ln 91 + ln 1) / 22) - 1
    assert got["score"] == 42.79 == round(report.crafter_score(tmp_path / "stats.jsonl")[0], 2)
    assert got["episodes"] == 200
    assert got["achievements"]["place_table"] == 0.5
    small = crafter_score(rows[::4])  # a quarter of the episodes (same rates): about twice the noise
    assert 0 < got["se"] < small["se"] and 1.5 < small["se"] / got["se"] < 2.7


def test_episode_ends_and_lengths_are_counted_over_the_failed_and_the_successful_episodes():
    rows = crafter_rows(10, {"collect_wood": 0.3}, {"success": 3, "died: zombie": 5, "time limit": 2})
    assert episode_ends("collect_wood", rows) == {"failed_episodes": 7, "ends": {"died: zombie": 5, "time limit": 2}}
    assert episode_ends("crafter", rows)["failed_episodes"] == 10  # no goal: every episode counts
    m = episode_measures([(10, True), (30, True), (100, False), (100, False)])
    assert (m["episodes"], m["mean_length"], m["successes"], m["success_mean_length"]) == (4, 60.0, 2, 20.0)
    assert m["success_length_se"] == 10.0  # sd 14.14 over 2


def test_on_crafter_the_rule_based_critic_acts_on_the_achievements_and_the_deaths():
    plan = reference("crafter")
    code = [skills.skill_for(s.name) for s in plan.code_subactions]
    rows = crafter_rows(100, {"collect_wood": 0.95, "place_table": 0.9, "make_wood_pickaxe": 0.8,
                              "collect_stone": 0.7, "make_stone_pickaxe": 0.2}, {"died: thirst": 60, "time limit": 40})
    stats = {**stats_with({}), "task": "crafter", "success_rate": 0.0, "score": crafter_score(rows),
             "ends": episode_ends("crafter", rows)}
    fb = rule_based_critique(plan, code, stats)
    # no goal: the tech tree's stall is seen but not shaped (measured worse on crafter); the empty meter is
    assert fb.rl_config["shaping"] == {"drink": METER_SHAPING}
    assert "80% of the 100 episodes never reached make_stone_pickaxe" in fb.summary  # no goal: not "failed" ones
    assert not any("stone_pickaxe" in r for r in fb.reasons)
    assert any("60 of 100 episodes ended as 'died: thirst'" in r and "shape drink" in r for r in fb.reasons)
    assert "never unlocked: collect_coal" in fb.summary  # what is never or rarely unlocked is said
    # no goal: the summary opens with the score, not a success rate that is always 0
    assert fb.summary.startswith("[hand-written rule-based critic, not an LLM] Crafter score ")
    assert "success rate" not in fb.summary
    # under the plan's follow_order a part's calls that return at once cost nothing: said so, with their count
    assert plan.rl_config.get("follow_order") is True
    first = plan.code_subactions[0].name
    tried = {**stats, "code_actions": {first: {**row(400, 0.1), "ends": {"false_at_once": 350}}}}
    assert (f"{first} returned True in only 0.1 of its 400 calls, without errors; 350 of them returned at once "
            "without a step, at no cost in steps: the plan's follow_order tries this part") in \
        rule_based_critique(plan, code, tried).summary
    stepped = {**stats, "code_actions": {first: {**row(400, 0.1), "ends": {"false_after_steps": 360}}}}
    said = rule_based_critique(plan, code, stepped).summary  # no call returned at once: nothing said to be free
    assert f"{first} returned True in only 0.1 of its 400 calls, without errors (the RL agent" in said
    assert "follow_order" not in said


def test_a_code_action_that_rarely_acts_is_counted_with_what_its_refusals_cost():
    """Where the RL agent chooses, a call that returns at once costs no step; --mode code charges it a noop."""
    llm_code = CodeAction("chop_tree", "def chop_tree(api):\n    return api.do()\n")
    rows = {"chop_tree": {**row(200, 0.1), "ends": {"false_at_once": 150}}}
    fb = rule_based_critique(reference("collect_wood"), [llm_code], stats_with(rows))
    said = "chop_tree returned True in only 0.1 of its 200 calls, without errors; 150 of them returned at once "
    assert said + "without a step, at no cost in steps (the RL agent often calls it where it cannot act)" in fb.summary
    assert fb.summary.startswith("[hand-written rule-based critic, not an LLM] success rate 0.05 (n=40")
    code_mode = rule_based_critique(reference("collect_wood"), [llm_code], {**stats_with(rows), "mode": "code"})
    assert said + "without a step, each charged one noop step." in code_mode.summary


def test_when_failed_episodes_die_of_zombies_the_rule_based_critic_codes_fighting_them():
    plan = reference("make_wood_pickaxe")
    assert next(s for s in plan.subactions if s.name == "fight_zombie").how == "rl"
    code = [skills.skill_for(s.name) for s in plan.code_subactions]
    rows = crafter_rows(100, {"collect_wood": 0.9, "place_table": 0.9, "make_wood_pickaxe": 0.6},
                        {"success": 60, "died: zombie": 30, "time limit": 10})
    stats = {**stats_with({}), "task": "make_wood_pickaxe", "success_rate": 0.6,
             "ends": episode_ends("make_wood_pickaxe", rows)}
    fb = rule_based_critique(plan, code, stats)
    assert fb.to_code == ["fight_zombie"]
    assert any("30 of 40 failed episodes ended as 'died: zombie'" in r for r in fb.reasons)
    replanned = SlowAgent(None).plan(get_task("make_wood_pickaxe"), "", feedback=fb, previous=plan)
    moved = next(s for s in replanned.subactions if s.name == "fight_zombie")
    assert moved.how == "code" and moved.initiation == {"in_view": ["zombie"]}  # masked while none is in view


def test_a_shaped_item_that_code_gathers_far_beyond_the_chains_need_is_no_longer_shaped():
    """Shaping pays per unit gained: with chop_tree in use, the RL agent can earn more by calling it again
    than by finishing (measured: 8-13 wood per successful make_wood_pickaxe episode where 3 are needed)."""
    plan = reference("collect_stone")  # shapes wood and wood_pickaxe; code chops, crafts and mines
    assert set(plan.rl_config["shaping"]) == {"wood", "wood_pickaxe"}
    code = [skills.skill_for(s.name) for s in plan.code_subactions]
    rows = [{"length": 80, "end": "success", "achievement_collect_wood": wood, "achievement_make_wood_pickaxe": picks,
             "achievement_collect_stone": 1} for wood, picks in [(11, 7), (10, 6)] * 15]
    got = gathered("collect_stone", rows)
    assert got["successes"] == 30 and got["items"]["wood"] == {"mean": 10.5, "uses": 3, "by": "collect_wood"}
    assert got["items"]["wood_pickaxe"]["mean"] == 6.5 and got["items"]["stone"]["uses"] == 1
    stats = {**stats_with({}), "task": "collect_stone", "success_rate": 0.8, "gathered": got}
    fb = rule_based_critique(plan, code, stats)
    assert fb.rl_config["shaping"] == {}
    assert any(r.startswith("rl_config: stop shaping wood: 30 successful episodes gathered 10.5 on average "
                            "where the task needs 3") and "calling chop_tree again" in r for r in fb.reasons)
    # gathering about what the chain needs, no code action gathering it (rl+config), or too few successes: kept
    lean = {**stats, "gathered": gathered("collect_stone", [{**r, "achievement_collect_wood": 4,
                                                              "achievement_make_wood_pickaxe": 1} for r in rows])}
    assert rule_based_critique(plan, code, lean).rl_config is None
    assert rule_based_critique(plan, [], {**stats, "mode": "rl+config"}).rl_config is None
    few = {**stats, "gathered": gathered("collect_stone", rows[:10])}
    assert rule_based_critique(plan, code, few).rl_config is None
    assert gathered("crafter", rows) == {}  # no goal, no chain: nothing to compare with
    # once dropped, a stall at the step that gathers it does not shape it again
    unshaped = dataclasses.replace(plan, rl_config={"shaping": {}, "mask_actions": plan.rl_config["mask_actions"]})
    stalled = {**stats, "stalls": {"failed_episodes": 50, "never_reached": {"make_wood_pickaxe": 0.8}}}
    fb = rule_based_critique(unshaped, code, stalled)
    assert fb.rl_config is None and not any("shape" in r for r in fb.reasons), fb.reasons


def test_a_crafter_episode_row_says_how_the_episode_ended():
    env = make_env("crafter", 0, max_steps=3)
    env.reset(seed=1)
    for _ in range(3):
        env.step(0)
    assert env.unwrapped.stats_row()["end"] == "time limit"
    env.reset(seed=1)
    world, player = env.unwrapped._crafter._world, env.unwrapped._crafter._player
    world[player.pos + np.array([1, 0])] = "lava"
    _, _, terminated, _, _ = env.step(ACTIONS.index("move_right"))
    assert terminated and env.unwrapped.stats_row()["end"] == "died: lava"
    env.close()
    env = make_env("crafter", 0, max_steps=40)
    env.reset(seed=1)
    player = env.unwrapped._crafter._player
    player.inventory["drink"], player.health = 0, 1  # the drink meter empty: health drains within 16 steps
    for _ in range(20):
        if env.step(0)[2]:
            break
    assert env.unwrapped.stats_row()["end"] == "died: thirst"
    env.close()
