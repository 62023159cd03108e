"""env.py on real Crafter: the Gymnasium contract, determinism, code actions and the stats files. Where a code
action may start (its initiation, the plan's order) and how each call ended: tests/test_code_action_masks.py; the
primitive API and its doc: tests/test_crafter_api.py."""

import json
from collections import Counter

import crafter
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from env import (
    ACHIEVEMENTS,
    ACTIONS,
    CHOP_TREE,
    EVAL,
    ITEMS,
    TRAIN,
    CodeActionVectorEnv,
    CrafterAPI,
    CrafterEnv,
    get_task,
    make_env,
    make_vec_env,
    set_vec_code_actions,
    world_seed,
)
from tests.env_helpers import code, sand_world

WOOD = ITEMS.index("wood")


@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")  # the wrapper is what is checked
def test_check_env_passes_for_a_crafter_task():
    check_env(CrafterEnv("collect_wood", seed=0), skip_render_check=True)
    check_env(make_env("place_table", 1, code_actions=[CHOP_TREE]), skip_render_check=True)


def test_observation_matches_space_and_carries_no_world_map():
    env = make_env("collect_wood", 0)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert obs["inventory"][ITEMS.index("health")] == 9
    _, _, _, _, info = env.step(0)
    assert "semantic" not in info and "player_pos" not in info
    assert info["prim_steps"] == 1 and info["code_action"] == -1


def test_same_seed_same_trajectory():
    def rollout(seed, garbage=()):
        env = make_env("crafter", seed)
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(0)
        frames = [obs["image"]]
        for _ in range(400):  # long enough for creatures to spawn and despawn (every 10 steps)
            obs, _, term, trunc, _ = env.step(int(rng.integers(17)))
            frames.append(obs["image"])
            if term or trunc:
                break
        return np.stack(frames)

    a = rollout(3)
    junk = [object() for _ in range(1000)]  # shift memory addresses: set order must not matter
    b = rollout(3, junk)
    c = rollout(4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a[0], c[0])


def test_scripted_code_action_gets_wood_within_60_steps():
    env = make_env("collect_wood", 0, code_actions=[CHOP_TREE], max_macro_steps=60)
    visible, got_wood, seed = 0, 0, 0
    while visible < 20:
        obs, _ = env.reset(seed=seed)
        seed += 1
        if env.unwrapped.make_api(0).nearest("tree") is None:
            continue
        visible += 1
        obs, reward, terminated, _, info = env.step(len(ACTIONS))
        assert info["prim_steps"] <= 60
        if obs["inventory"][WOOD] > 0:
            got_wood += 1
            assert terminated and info["success"] and reward == 1.0 and info["code_ok"]
    assert got_wood >= 18, f"wood in {got_wood}/20 seeds with a visible tree"


def test_code_action_errors_are_reported_and_env_keeps_working():
    actions = [
        code("boom", "    api.noop()\n    x = 1\n    return x / 0\n"),
        code("forever", "    while True:\n        api.noop()\n"),
        code("lazy", "    return True\n"),
    ]
    env = make_env("collect_wood", 0, code_actions=actions, max_macro_steps=10)
    env.reset(seed=0)
    _, _, _, _, info = env.step(17)
    assert "line 4" in info["code_error"] and "ZeroDivisionError" in info["code_error"]
    assert info["prim_steps"] == 1 and not info["code_ok"]
    _, _, _, _, info = env.step(18)
    assert "step_budget" in info["code_error"] and info["prim_steps"] == 10
    _, _, _, _, info = env.step(19)  # does nothing: still charged one step
    assert info["code_ok"] and info["code_error"] == "" and info["prim_steps"] == 1
    _, _, _, _, info = env.step(0)
    assert info["prim_steps"] == 1


def test_episode_ending_inside_a_code_action_and_lengths_count_primitive_steps():
    actions = [code("wait", "    api.noop(8)\n    return True\n")]
    env = make_env("collect_wood", 0, code_actions=actions, max_steps=20)
    env.reset(seed=0)
    total, done = 0, False
    while not done:
        _, _, terminated, truncated, info = env.step(17)
        total += info["prim_steps"]
        done = terminated or truncated
    assert truncated and info["code_error"] == ""  # stopped by the episode's end: not an error
    assert info["prim_steps"] == 4  # 8 + 8 + 4: the third call is cut at the step limit
    assert info["episode"]["l"] == total == 20


def test_stats_jsonl_in_crafters_recorder_format(tmp_path):
    path = tmp_path / "stats.jsonl"
    env = make_env("collect_wood", 0, max_steps=5, stats_path=path)
    for _ in range(2):
        env.reset()
        while True:
            *_, terminated, truncated, _ = env.step(0)
            if terminated or truncated:
                break
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["length"] == 5
    assert {f"achievement_{a}" for a in ACHIEVEMENTS} <= set(lines[0])


def test_vector_env_reports_episode_stats_per_env():
    envs = make_vec_env("collect_wood", 2, code_actions=[CHOP_TREE], seed=0, max_steps=3)
    envs.reset(seed=0)
    for _ in range(3):
        obs, _, terminated, truncated, infos = envs.step(np.zeros(2, dtype=np.int64))
    assert truncated.all() and not terminated.any()
    assert infos["_final_info"].all()
    assert list(infos["final_info"]["episode"]["l"]) == [3, 3]
    assert obs["image"].shape == (2, 64, 64, 3)
    assert envs.single_action_space.n == 18
    envs.close()


def _same(a, b) -> bool:
    """Equal values, arrays and nested dicts (a vector env's infos)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list) or isinstance(a, np.ndarray) and a.dtype == object:  # final_obs: dicts
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(np.array_equal(a, b)) if isinstance(a, np.ndarray) else a == b


def test_code_actions_running_at_once_give_what_stepping_the_envs_one_by_one_gives(tmp_path):
    """CodeActionVectorEnv (the default) against gymnasium's SyncVectorEnv on the same envs and actions:
    the same observations, rewards, ends and infos at every step, and the same stats file, row for row.
    At step 6 env 0's code action works a while before its one step and env 1's base action ends its
    episode meanwhile: the rows must still come in env order."""
    actions = [CHOP_TREE, code("busy", "    n = 0\n    for i in range(40000):\n        n += i\n    api.noop()\n")]
    made = {kind: make_vec_env("collect_wood", 3, code_actions=actions, seed=4, max_steps=6,
                               stats_path=tmp_path / f"{kind}.jsonl") for kind in ("together", "one_by_one")}
    together, one_by_one = made["together"], gym.vector.SyncVectorEnv(
        made["one_by_one"].env_fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    assert type(together) is CodeActionVectorEnv
    rng = np.random.default_rng(0)
    schedule = [[0, 0, 17]] * 5 + [[18, 0, 18]] + rng.choice([0, 1, 2, 17, 18], size=(30, 3)).tolist()
    assert _same(together.reset(seed=4), one_by_one.reset(seed=4))
    for step, a in enumerate(schedule):
        got, want = together.step(np.array(a)), one_by_one.step(np.array(a))
        assert all(_same(x, y) for x, y in zip(got, want, strict=True)), f"step {step}: {a}"
    rows = (tmp_path / "together.jsonl").read_text()
    assert rows == (tmp_path / "one_by_one.jsonl").read_text() and rows.count("\n") >= 6
    for envs in (together, one_by_one, made["one_by_one"]):
        envs.close()


def test_an_interrupt_while_code_actions_run_at_once_leaves_no_worker_running(monkeypatch, tmp_path):
    """Ctrl-C inside an api call of one env's code action (here: noop raises it), or in another env's base
    step, reaches the trainer; every worker of that step is ended, no stats row stays held, and the next
    step starts fresh workers."""
    envs = make_vec_env("collect_wood", 3, code_actions=[code("wait", "    api.noop()\n")], seed=1,
                        stats_path=tmp_path / "stats.jsonl")
    envs.reset(seed=1)
    noop = CrafterAPI.noop

    def ctrl_c(api, times=1):
        raise KeyboardInterrupt

    monkeypatch.setattr(CrafterAPI, "noop", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        envs.step(np.array([17, 0, 17]))
    assert all(env.sandbox._proc is None for env in envs.envs)
    assert all(env.unwrapped.held_rows is None for env in envs.envs)
    monkeypatch.setattr(CrafterAPI, "noop", noop)
    monkeypatch.setattr(envs.envs[1], "step", ctrl_c)  # and while another env takes a base step
    with pytest.raises(KeyboardInterrupt):
        envs.step(np.array([17, 0, 17]))
    assert all(env.sandbox._proc is None for env in envs.envs)
    info = envs.step(np.array([17, 17, 17]))[4]
    assert list(info["prim_steps"]) == [1, 1, 1] and not any(info["code_error"])
    envs.close()


def test_shaping_rewards_inventory_gains():
    env = make_env("place_table", 0, code_actions=[CHOP_TREE], shaping={"wood": 0.25})
    env.reset(seed=0)
    _, reward, _, _, _ = env.step(17)
    assert reward == pytest.approx(0.25)


def test_unknown_task_names_close_matches():
    with pytest.raises(ValueError, match="collect_wood"):
        make_env("colect_wood")
    assert get_task("harvest_log").name == "collect_wood"


def test_code_actions_grow_in_place_without_cutting_episodes():
    envs = make_vec_env("collect_wood", 2, seed=0, max_steps=50)
    envs.reset()
    for _ in range(5):
        envs.step(np.zeros(2, dtype=np.int64))
    seeds = [r["seed"] for r in envs.call("stats_row")]
    set_vec_code_actions(envs, [code("wait", "    api.noop(3)\n    return True\n")])
    assert envs.single_action_space.n == 18 and envs.action_space.shape == (2,)
    assert [r["length"] for r in envs.call("stats_row")] == [5, 5]  # the episodes go on
    _, _, _, _, infos = envs.step(np.full(2, 17))
    assert list(infos["code_action"]) == [0, 0] and list(infos["prim_steps"]) == [3, 3]
    assert [r["length"] for r in envs.call("stats_row")] == [8, 8]
    assert [r["seed"] for r in envs.call("stats_row")] == seeds  # the same worlds
    with pytest.raises(ValueError, match="appended"):
        set_vec_code_actions(envs, [code("other", "    return True\n")])
    envs.close()


def test_world_seeds_are_distinct_and_the_recorded_seed_made_the_world(monkeypatch):
    keys = [(s, stream, rank, i, ep) for s in (1, 2) for stream in (TRAIN, EVAL) for rank in (0, 1)
            for i in range(4) for ep in range(50)]
    seeds = [world_seed(*k) for k in keys]
    assert len(set(seeds)) == len(keys)
    assert all(0 <= s < 2**31 - 1 and s % 2 == k[1] for s, k in zip(seeds, keys, strict=True))  # stream = parity
    made, world_reset = [], crafter.engine.World.reset  # the seed Crafter's own World.reset gets

    def spy(world, seed=None):
        made.append(seed)
        world_reset(world, seed)

    monkeypatch.setattr(crafter.engine.World, "reset", spy)
    env = CrafterEnv("collect_wood", seed=7, rank=1, index=2, max_steps=3)
    for episode in range(3):
        env.reset()
        for _ in range(3):
            env.step(0)
        assert env.stats_row()["seed"] == made[-1] == world_seed(7, TRAIN, 1, 2, episode)
    env.reset(seed=3)  # an explicit seed plays the world crafter.Env(seed=3) plays first
    assert made[-1] == env.stats_row()["seed"] == hash((3, 1)) % (2**31 - 1)


def test_macro_reward_is_discounted_and_the_logged_return_is_not():
    actions = [code("chop", "    api.go_to('tree', 30)\n    api.do()\n    api.noop(3)\n    return True\n")]
    for gamma, want in ((1.0, 1.0), (0.5, 0.25)):  # the wood comes at the 3rd step (2 moves, do): gamma^2
        env, world, player, _ = sand_world(code_actions=actions, gamma=gamma, max_macro_steps=60)
        x, y = player.pos
        world[x + 3, y] = "tree"
        _, reward, terminated, _, info = env.step(17)
        assert terminated and info["success"] and info["prim_steps"] == 3 and reward == want
        assert info["episode"]["r"] == 1.0  # logged: undiscounted
        assert info["code_reward"] == 1.0  # what the critic reads: undiscounted too
        env.close()


def test_code_stats_count_the_reward_earned_inside_each_call():
    from types import SimpleNamespace

    from code_actions import CodeStats
    stats = CodeStats(SimpleNamespace(actions=[code("chop", "    return True\n")]))
    # a vector step of 3 envs: env 0 ran the code action (earned 1.5), env 1 a base action, env 2 it again (0.5)
    mask = np.ones(3, bool)
    stats(np.array([17, 0, 17]), {"code_action": np.array([0, -1, 0]), "_code_action": mask,
                                  "code_ok": np.array([True, False, False]), "_code_ok": mask,
                                  "prim_steps": np.array([4, 1, 2]), "_prim_steps": mask,
                                  "code_reward": np.array([1.5, 7.0, 0.5]), "_code_reward": mask,
                                  "code_end": np.array(["true", "", "false_at_once"], dtype=object), "_code_end": mask})
    row = stats.summary()["chop"]
    assert row["chosen"] == 2 and row["mean_reward"] == 1.0 and row["mean_steps"] == 3.0
    assert row["ends"] == {"true": 1, "false_at_once": 1, "false_after_steps": 0, "step_budget": 0,
                           "episode_end": 0, "error": 0}
    # a checkpoint from before this count existed resumes: the missing count starts at zero
    stats.restore(5, {"chop": {"chosen": 4, "ok": 1, "steps": 8, "errors": Counter()}})
    assert stats.summary()["chop"]["mean_reward"] == 0.0 and stats.totals()[1]["chop"]["steps"] == 8
    assert sum(stats.summary()["chop"]["ends"].values()) == 0  # how calls ended: not counted then
