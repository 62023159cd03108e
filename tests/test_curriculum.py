"""The task planner's chain as a curriculum: sub-task success tests, the bonus, switching, per-sub-task
RL configs. Run: python -m pytest -q tests/test_curriculum.py
"""

import pytest

import curriculum
from core import Plan
from env import CHOP_TREE, crafter_env, get_task, make_env


def test_the_current_subtask_pays_a_bonus_once_and_never_ends_the_episode():
    env = make_env("place_table", code_actions=[CHOP_TREE])
    env.reset(seed=0)
    env.unwrapped.set_subtask("collect_wood")
    _, reward, terminated, _, info = env.step(env.unwrapped.action_space.n)  # chop_tree: seed 0 yields a wood
    assert info["code_ok"] and reward == pytest.approx(crafter_env.SUBTASK_REWARD)
    assert not terminated and not info["success"]
    _, reward, _, _, _ = env.step(env.unwrapped.action_space.n)  # a second wood: no second bonus
    assert reward == 0.0
    env.unwrapped.set_subtask("place_table")  # switched mid-episode: nothing reached yet, nothing paid
    env.unwrapped.set_subtask("collect_wood")  # reached before the switch: no bonus for the past
    _, reward, _, _, _ = env.step(env.unwrapped.action_space.n)
    assert reward == 0.0
    with pytest.raises(ValueError, match="achievement"):
        env.unwrapped.set_subtask("wood")


def test_episode_info_says_whether_the_subtask_was_reached():
    env = make_env("collect_wood", max_steps=3)
    env.reset(seed=0)
    env.unwrapped.set_subtask("collect_sapling")
    info = [env.step(0)[4] for _ in range(3)][-1]
    assert info["episode"]["subtask"] == "collect_sapling" and info["episode"]["subtask_success"] is False


def test_moves_on_at_the_threshold_but_not_on_too_few_episodes():
    cu = curriculum.Curriculum(["collect_wood", "place_table", "make_wood_pickaxe"], budget=300_000)
    cu.record([True] * (curriculum.MIN_EPISODES - 1))
    assert cu.advance(1000) is None and cu.current == "collect_wood"  # all reached, but too few episodes
    cu.record([True])
    why = cu.advance(2000)
    assert cu.current == "place_table" and "collect_wood -> place_table" in why and "threshold" in why
    assert cu.recent == [] and cu.stage_start == 2000 and cu.stages[0]["end"] == 2000
    cu.record([False] * 50 + [True] * 20)  # 0.29 < threshold
    assert cu.advance(50_000) is None


def test_moves_on_when_its_share_of_the_budget_is_spent_and_stays_on_the_last():
    cu = curriculum.Curriculum(["collect_wood", "place_table"], budget=100_000)
    cu.record([False] * 40)
    assert cu.advance(49_999) is None
    assert "share of the budget" in cu.advance(50_000) and cu.current == "place_table"
    assert cu.advance(10**9) is None and cu.current == "place_table"  # the last sub-task stays
    assert curriculum.Curriculum.from_dict(cu.to_dict()) == cu


def test_rl_subactions_bring_their_own_rl_config_while_their_subtask_is_trained():
    task = get_task("collect_stone")
    plan = Plan.from_dict({"task": task.name, "subtasks": ["collect_wood", "place_table", "collect_stone"],
                           "rl_config": {"shaping": {"wood": 0.1}, "mask_actions": ["sleep"]}, "subactions": [
        {"name": "find_tree", "how": "rl", "spec": "s", "subtask": "collect_wood",
         "rl_config": {"shaping": {"sapling": 0.2}, "mask_actions": ["place_stone"]}},
        {"name": "find_stone", "how": "rl", "spec": "s", "subtask": "collect_stone",
         "rl_config": {"shaping": {"stone": 0.3}}},
        {"name": "chop_tree", "how": "code", "spec": "s", "subtask": "collect_wood"}]}, task)
    assert curriculum.rl_config_for(plan, "collect_wood") == {"shaping": {"wood": 0.1, "sapling": 0.2},
                                                              "mask_actions": ["sleep", "place_stone"]}
    assert curriculum.rl_config_for(plan, "collect_stone") == {"shaping": {"wood": 0.1, "stone": 0.3},
                                                               "mask_actions": ["sleep"]}
    assert curriculum.rl_config_for(plan, None) == plan.rl_config


@pytest.mark.parametrize("change, problem", [
    ({"subtasks": ["collect_wood", "get_rich"]}, "'get_rich' has no success test"),
    ({"subactions": [{"name": "a", "how": "rl", "spec": "s", "subtask": "collect_coal"}]}, "not in \"subtasks\""),
    ({"subactions": [{"name": "a", "how": "code", "spec": "s", "rl_config": {"mask_actions": ["sleep"]}}]},
     "only an \"rl\" sub-action"),
    ({"subactions": [{"name": "a", "how": "rl", "spec": "s", "rl_config": {"shaping": {"gold": 0.1}}}]},
     "a.rl_config.shaping: 'gold' is not an inventory item"),
    ({"subactions": [{"name": "a", "how": "rl", "spec": "s", "rl_config": {"lr": 0.1}}]}, "a.rl_config.lr"),
])
def test_plans_with_bad_subtasks_or_subaction_configs_are_refused(change, problem):
    d = {"task": "collect_stone", "subtasks": ["collect_wood"], "rl_config": {},
         "subactions": [{"name": "a", "how": "rl", "spec": "s"}], **change}
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(".", r"\.")):
        Plan.from_dict(d, get_task("collect_stone"))


def test_summary_rows_give_each_subtask_per_iteration_with_counts():
    rows = [{"iteration": 1, "achievement_collect_wood": 1, "achievement_place_table": 0},
            {"iteration": 1, "achievement_collect_wood": 0, "achievement_place_table": 0},
            {"iteration": 2, "achievement_collect_wood": 2, "achievement_place_table": 1}]
    lines = curriculum.subtask_rows(rows, ["collect_wood", "place_table"])
    assert lines[2:] == ["| 1 | 2 | 0.50 | 0.00 |", "| 2 | 1 | 1.00 | 1.00 |"]
