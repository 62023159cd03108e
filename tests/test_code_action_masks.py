"""env.CodeActionWrapper on real Crafter: where a code action may start (info["action_mask"] from its initiation,
and under a plan's "follow_order" the calls that refused or failed), and how each call ended (info["code_end"]).
The rest of env.py: tests/test_env.py."""

import crafter.objects
import numpy as np
import pytest

from env import ACTIONS, CodeAction, make_env
from tests.env_helpers import code, sand_world


def test_a_code_actions_initiation_masks_it_where_it_cannot_start():
    """info["action_mask"] after reset and every step: base actions always, a code action only where its
    initiation holds (make_wood_pickaxe: 1 wood held and a table in view), one without an initiation always."""
    from reference import skills

    make = CodeAction("make_wood_pickaxe", skills.SKILLS["make_wood_pickaxe"].source, entry="make_wood_pickaxe",
                      initiation={"inventory": {"wood": 1}, "in_view": ["table"]})
    env = make_env("make_wood_pickaxe", 0, code_actions=[make, code("wait", "    api.noop()\n    return True")])
    _, info = env.reset(seed=0)
    n = len(ACTIONS)
    assert info["action_mask"].tolist() == [True] * n + [False, True]  # no wood, no table
    world, player = env.unwrapped._crafter._world, env.unwrapped._crafter._player
    player.inventory["wood"] = 1
    _, _, _, _, info = env.step(0)
    assert info["action_mask"][n] == False  # noqa: E712 (wood, but no table in view)
    world[player.pos + np.array([2, 0])] = "table"
    _, _, _, _, info = env.step(0)
    assert info["action_mask"][n] == True  # noqa: E712
    player.inventory["wood"] = 0
    _, _, _, _, info = env.step(n + 1)  # a code action's step reports the mask too
    assert info["action_mask"].tolist() == [True] * n + [False, True]
    plain = make_env("make_wood_pickaxe", 0, code_actions=[skills.SKILLS["chop_tree"]])
    assert plain.reset(seed=0)[1]["action_mask"].all()  # no initiation: masked only once it refuses
    charged = make_env("make_wood_pickaxe", 0, code_actions=[skills.SKILLS["chop_tree"]], free_refusals=False)
    assert "action_mask" not in charged.reset(seed=0)[1]  # --mode code's program: nothing is ever masked
    base = make_env("make_wood_pickaxe", 0)
    assert "action_mask" not in base.reset(seed=0)[1]  # no code action: no mask
    for e in (env, plain, charged, base):
        e.close()


def test_inventory_below_and_in_view_any_mask_a_code_action_on_a_real_world():
    """"inventory_below": held fewer than n (a tool not yet made, a low meter); "in_view_any": at least one of
    the names in view; with "inventory", every part must hold (core.can_start over the env's own state)."""
    wait = "    api.noop()\n    return True"
    actions = [code("make_tool", wait), code("rest", wait), code("fight", wait)]
    actions[0] = CodeAction("make_tool", actions[0].source, initiation={"inventory": {"wood": 1},
                                                                          "inventory_below": {"wood_pickaxe": 1}})
    actions[1] = CodeAction("rest", actions[1].source, initiation={"inventory_below": {"energy": 6}})
    actions[2] = CodeAction("fight", actions[2].source, initiation={"in_view_any": ["zombie", "skeleton"]})
    env, world, player, _ = sand_world(code_actions=actions)
    n = len(ACTIONS)

    def allowed() -> list[bool]:
        return env.step(0)[4]["action_mask"][n:].tolist()

    player.inventory.update(wood=1, wood_pickaxe=0, energy=9)
    assert allowed() == [True, False, False]
    player.inventory["wood_pickaxe"] = 1  # the tool is held: no more making it
    player.inventory["energy"] = 5  # below 6: resting may start
    assert allowed() == [False, True, False]
    player.inventory["energy"] = 6
    world[player.pos + np.array([2, 0])] = "table"  # neither a zombie nor a skeleton
    assert allowed() == [False, False, False]
    world.add(crafter.objects.Zombie(world, player.pos + np.array([3, 1]), player))
    assert allowed() == [False, False, True]
    env.close()


def test_each_call_of_a_code_action_says_how_it_ended():
    """info["code_end"]: returned True; returned without True before any step or after steps; stopped by the
    step budget or the episode's end; raised an error. Base actions say "" (CodeStats counts these)."""
    actions = [code("yes", "    return True"), code("no_step", "    return False"),
               code("some_steps", "    api.noop(2)\n    return False"), code("forever", "    api.noop(100)"),
               code("broken", "    return 1 / 0"), code("nothing", "    api.noop()")]
    env = make_env("collect_wood", 0, code_actions=actions, max_macro_steps=10, max_steps=40)
    env.reset(seed=0)
    n = len(ACTIONS)
    ends = [env.step(n + i)[4]["code_end"] for i in range(len(actions))]
    assert ends == ["true", "false_at_once", "false_after_steps", "step_budget", "error", "false_after_steps"]
    assert env.step(0)[4]["code_end"] == ""
    info = {}
    while "episode" not in info:
        *_, info = env.step(n + 3)  # 10 steps a call; the episode's 40-step limit ends one call midway
    assert info["code_end"] == "episode_end"


@pytest.mark.parametrize("order", [None, [0, 1, 2]])
def test_a_refused_call_costs_no_step_and_is_masked_until_the_next_step(order):
    """Under any plan (follow_order or not): a call that returns False before any step takes no time (the same
    observation, no step in the episode's length) and may not start again until a step is taken; one that errs,
    or returns True, is charged its noop as always. With free_refusals=False (--mode code's program, which
    ignores the mask) the refusal is charged one noop and nothing is masked."""
    actions = [code("refuse", "    return False\n"), code("boom", "    return 1 / 0\n"),
               code("lazy", "    return True\n")]
    charged = make_env("collect_wood", 0, code_actions=actions, max_steps=50, free_refusals=False)
    charged.reset(seed=0)
    assert charged.action_mask() is None  # no initiation, no order, refusals charged: no mask
    _, _, _, _, info = charged.step(17)
    assert info["prim_steps"] == 1 and info["code_end"] == "false_at_once" and "action_mask" not in info
    charged.close()
    env = make_env("collect_wood", 0, code_actions=actions, max_steps=50)
    env.set_follow_order(order)
    obs, info = env.reset(seed=0)
    assert list(info["action_mask"]) == [True] * 20  # the mask is always there
    before = env.unwrapped.make_api(0).inventory()
    obs2, reward, terminated, truncated, info = env.step(17)
    assert info["prim_steps"] == 0 and info["code_end"] == "false_at_once" and reward == 0.0
    assert not (terminated or truncated) and all((obs2[k] == obs[k]).all() for k in obs)
    assert list(info["action_mask"][17:]) == [False, True, True]  # refused: masked until a step
    assert env.unwrapped.make_api(0).inventory() == before
    _, _, _, _, info = env.step(18)  # an error is charged its noop, and the step lifts the mask
    assert info["prim_steps"] == 1 and info["code_end"] == "error" and list(info["action_mask"][17:]) == [True] * 3
    env.step(17)
    _, _, _, _, info = env.step(0)  # a base action's step lifts it too
    assert list(info["action_mask"][17:]) == [True] * 3
    _, _, _, _, info = env.step(19)
    assert info["prim_steps"] == 1 and info["code_ok"]
    length = 0
    while True:  # the episode's length counts only real steps: 3 so far, then 47 more noops to its limit
        _, _, terminated, truncated, info = env.step(0)
        length += 1
        if terminated or truncated:
            break
    assert info["episode"]["l"] == 50 and length == 47
    env.close()


def test_under_follow_order_a_call_that_fails_after_steps_is_masked_for_the_next_decision_only():
    """A plan with "follow_order": a call that took steps and returned without True may not start at the very next
    decision (the order goes on to its next part, as the routine it was taken from goes on to its next behaviour);
    any step after that lifts the mask. A call that returns True, or errs, is never masked."""
    actions = [code("wander", "    api.noop()\n    return False\n"), code("lazy", "    api.noop()\n    return True\n"),
               code("boom", "    api.noop()\n    return 1 / 0\n")]
    env = make_env("collect_wood", 0, code_actions=actions, max_steps=50)
    env.set_follow_order([0, 1, 2])
    env.reset(seed=0)
    _, _, _, _, info = env.step(17)
    assert info["prim_steps"] == 1 and info["code_end"] == "false_after_steps"
    assert list(info["action_mask"][17:]) == [False, True, True]  # the next decision only
    _, _, _, _, info = env.step(18)
    assert info["code_ok"] and list(info["action_mask"][17:]) == [True] * 3
    for action in (17, 0):  # a base action's step lifts the mask too
        _, _, _, _, info = env.step(action)
    assert list(info["action_mask"][17:]) == [True] * 3
    _, _, _, _, info = env.step(19)
    assert info["code_end"] == "error" and list(info["action_mask"][17:]) == [True] * 3
    env.set_follow_order(None)  # without an order a failure after steps is not masked
    env.reset(seed=0)
    _, _, _, _, info = env.step(17)
    assert info["code_end"] == "false_after_steps" and info["action_mask"].all()
    env.close()
