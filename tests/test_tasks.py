"""Tasks with a success test of their own (core.SUCCESS_KEYS): the env, the stats rows, the critic's statistics,
the results and the prompts all judge an episode by the one test of the task's entry (envs/crafter_tasks.py)."""

import json

import pytest

import env
import evidence
from bench import ablation
from core import succeeded, success_in_words
from envs.crafter_tasks import TASKS, task_uses
from slow_agent import critic_messages, plan_messages
from train import main as train_main


def play_one_step(task: str, tmp_path, inventory: dict[str, int] = (), length: int = 0, health: int | None = None):
    """One noop step of `task` from a world where the player holds `inventory` (on top of the start), has
    already played `length` steps and has `health`; returns (success, terminated, the stats row if it ended)."""
    e = env.CrafterEnv(task, seed=0, stats_path=tmp_path / "stats.jsonl")
    e.reset()
    player = e._crafter._player
    player.inventory.update(dict(inventory))
    if health is not None:
        player.health = health
    e._length = length
    _, _, terminated, _, info = e.step(env.ACTIONS.index("noop"))
    rows = [json.loads(line) for line in (tmp_path / "stats.jsonl").read_text().splitlines()] if terminated else []
    return info["success"], terminated, rows[-1] if rows else None


@pytest.mark.parametrize("held, expected", [({"stone": 2}, False), ({"stone": 3}, True), ({"stone": 9}, True)])
def test_collect_3_stone_succeeds_with_3_stone_held(tmp_path, held, expected):
    assert env.CrafterEnv("collect_3_stone").stats_row()["inventory"] == {}  # asked before any reset: the trainer does
    success, terminated, row = play_one_step("collect_3_stone", tmp_path, held)
    assert success is expected and terminated is expected
    if expected:  # the row carries what its test reads, and every table judges it by the same test
        assert row["inventory"]["stone"] == held["stone"] and row["end"] == "success"
        assert env.row_success(env.get_task("collect_3_stone"), row)


@pytest.mark.parametrize("held, expected", [({"stone_pickaxe": 1}, False), ({"stone_sword": 1}, False),
                                            ({"stone_pickaxe": 1, "stone_sword": 1}, True)])
def test_stone_tools_needs_both_the_pickaxe_and_the_sword(tmp_path, held, expected):
    success, terminated, row = play_one_step("stone_tools", tmp_path, held)
    assert success is expected and terminated is expected
    assert row is None or env.row_success(env.get_task("stone_tools"), row) is expected


@pytest.mark.parametrize("played, health, expected", [(498, None, False), (499, None, True), (499, 0, False)])
def test_survive_500_succeeds_alive_at_step_500(tmp_path, played, health, expected):
    success, terminated, row = play_one_step("survive_500", tmp_path, length=played, health=health)
    assert success is expected
    if row is not None:  # ended: by success at step 500, or by death (health 0)
        assert env.row_success(env.get_task("survive_500"), row) is expected
        assert row["length"] == played + 1 and "inventory" not in row  # its test reads no inventory


def test_a_typo_in_a_test_fails_at_once_not_as_a_task_that_never_succeeds():
    from envs.crafter_tasks import _task
    for bad in ({"inventory": {"stones": 3}}, {"achievement": "collect_stones"}, {"survive": 0}, {"reach": 3}):
        with pytest.raises(ValueError, match="success"):
            _task("mine", bad, 100, (), "x")


def test_the_test_in_words_says_every_part():
    assert success_in_words(TASKS["stone_tools"].success).startswith(
        "the inventory holds at least 1 stone_pickaxe and 1 stone_sword")
    assert "alive after 500 env steps" in success_in_words(TASKS["survive_500"].success)
    assert "no single goal" in success_in_words(TASKS["crafter"].success)
    assert not succeeded({}, {"collect_wood": 1}, {}, 10, True)


def row(length=100, end="time limit", inventory=None, **achievements):
    r = {"length": length, **{f"achievement_{a}": achievements.get(a, 0) for a in env.ACHIEVEMENTS}, "end": end}
    return r | ({"inventory": inventory} if inventory is not None else {})


def test_the_critics_statistics_and_the_results_use_the_tasks_own_test():
    won = row(end="success", inventory={"stone": 3}, collect_wood=2, place_table=1, make_wood_pickaxe=1,
              collect_stone=3)
    one = row(end="time limit", inventory={"stone": 1}, collect_wood=2, place_table=1, make_wood_pickaxe=1,
              collect_stone=1)  # unlocked collect_stone, yet failed: 1 stone is not 3
    ev = evidence.iteration_evidence("collect_3_stone", [(100, True), (100, False)], [won, one])
    assert ev["ends"] == {"failed_episodes": 1, "ends": {"time limit": 1}}
    assert ev["stalls"]["failed_episodes"] == 1
    # the task needs 3 stone (its test), not the chain's 1: 3 gathered is no over-gathering
    assert ev["gathered"]["items"]["stone"] == {"mean": 3.0, "uses": 3, "by": "collect_stone"}
    assert task_uses(TASKS["stone_tools"])["stone"] == 2
    ok = [env.row_success(env.get_task("collect_3_stone"), r) for r in (won, one)]
    assert ok == [True, False]
    cell = ablation.Cell("collect_3_stone", "rl", 1, 200)
    assert [p["success"] for p in ablation.curve([(100, won), (200, one)], cell) if p["n"]] == [1.0, 0.0]


def test_the_planner_and_the_critic_read_the_test_in_words():
    task = env.get_task("collect_3_stone")
    text = plan_messages(task, "(the API doc)")[-1]["content"]
    assert "Success test (what every success rate counts): the inventory holds at least 3 stone" in text
    assert "ending with the last milestone the test needs" in text
    from core import Plan
    from reference.plans import reference_plan
    plan = Plan.from_dict(reference_plan("collect_3_stone"), task)
    critic = critic_messages(plan, [], {"iteration": 1}, hand_written=False)[-1]["content"]
    assert "Success test (what every success rate counts): the inventory holds at least 3 stone" in critic


def test_list_tasks_lists_them_with_their_tests(capsys):
    assert train_main(["--list-tasks"]) == 0
    out = capsys.readouterr().out
    for name in ("collect_3_stone", "stone_tools", "survive_500"):
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert f"Success: {success_in_words(TASKS[name].success)}." in line
