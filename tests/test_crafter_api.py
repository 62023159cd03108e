"""envs/crafter_api.py's CrafterAPI on real Crafter: its primitives (view, in_front, nearest, go_to, sleep), the API
doc and its recipe table, each claim checked in the game itself. Run: python -m pytest -q tests/test_crafter_api.py"""

import crafter
import pytest

from core import api_doc
from env import ACTIONS, ITEMS, CrafterAPI, make_env
from sandbox.limits import StepBudgetExceeded
from tests.env_helpers import code, sand_world


def test_primitive_api_view_and_doc():
    env = make_env("collect_wood", 0)
    env.reset(seed=0)
    api = env.unwrapped.make_api(5)
    view = api.view()
    assert len(view) == 7 and all(len(row) == 9 for row in view) and view[3][4] == "player"
    assert api.steps_left() == 5 and api.inventory()["health"] == 9
    doc = api_doc(CrafterAPI)
    for name in ("view", "nearest", "move", "do", "place", "make", "go_to", "steps_left"):
        assert f"api.{name}(" in doc


# ----------------------------------------------------------------------------------------------
# The API doc says what the game does: each claim is checked in the game itself.


def test_nearby_in_the_doc_is_the_3x3_square_as_in_the_game():
    doc = api_doc(CrafterAPI)
    assert '"nearby" is the 3x3 square around the player, diagonals included' in doc
    env, world, player, api = sand_world()
    x, y = player.pos
    world[x + 1, y + 1] = "table"  # diagonal: inside the square
    player.inventory["wood"] = 1
    assert api.make("wood_pickaxe")
    world[x + 1, y + 1], world[x + 2, y] = "sand", "table"  # two cells away: outside it
    player.inventory["wood"] = 1
    assert not api.make("wood_sword")
    env.close()


def test_the_recipe_table_holds_every_rule_and_its_costs_are_the_games():
    doc = api_doc(CrafterAPI)
    for kind, verb in (("collect", "`do` facing"), ("place", "place"), ("make", "make")):
        for name in getattr(crafter.constants, kind):
            assert f"- {verb} {name}: " in doc, (kind, name)
    for item in ("table", "furnace"):
        line = next(line for line in doc.splitlines() if line.startswith(f"- place {item}: uses "))
        n, material = line.split("uses ")[1].split(";")[0].split()
        env, world, player, api = sand_world()
        player.inventory[material] = int(n) - 1
        assert not api.place(item)  # one short of what the doc says: nothing placed
        player.inventory[material] = int(n)
        assert api.place(item) and player.inventory[material] == 0
        env.close()


def test_view_and_in_front_name_the_creature_standing_on_a_cell():
    doc = " ".join(api_doc(CrafterAPI).split())
    assert "each named instead of the material under it" in doc and "a creature or plant there is named" in doc
    env, world, player, api = sand_world()
    x, y = player.pos
    dx, dy = api.facing()
    world.add(crafter.objects.Cow(world, (x + dx, y + dy)))
    assert api.in_front() == "cow" and api.view()[3 + dy][4 + dx] == "cow"
    env.close()


def test_go_to_heads_for_the_nearest_target_by_path_and_passes_over_an_unreachable_one():
    doc = api_doc(CrafterAPI)
    assert "nearest by walking path" in doc and "passed over for the next nearest" in doc
    assert "at once, with no step, if none can" in doc
    env, world, player, api = sand_world()
    x, y = player.pos
    world[x + 2, y] = "tree"  # the nearest tree in a straight line, walled in by water
    for cx, cy in ((1, 0), (3, 0), (2, -1), (2, 1)):
        world[x + cx, y + cy] = "water"
    left = api.steps_left()
    assert not api.go_to("tree", 20) and api.steps_left() == left  # none reachable: no step taken
    world[x - 3, y] = "tree"  # farther, but reachable
    assert api.nearest("tree") == (2, 0)
    assert api.go_to("tree", 20) and api.facing() == (-1, 0) and tuple(player.pos) == (x - 2, y)
    env.close()


def test_the_doc_names_every_inventory_key_and_says_what_a_call_costs():
    doc = api_doc(CrafterAPI, budget=100)
    line = next(line for line in doc.splitlines() if line.startswith("api.inventory()"))
    env, _, _, api = sand_world()
    assert set(api.inventory()) == set(ITEMS) and all(k in line for k in api.inventory())
    env.close()
    assert "when it has taken 100 environment steps" in doc and "charged one noop step" in doc
    assert "each call is one of the agent's decisions" in doc and "Nothing is kept from one call to the next" in doc


@pytest.mark.parametrize("impl", ["fast", "original"])
def test_sleep_sleeps_until_the_player_wakes_or_the_steps_run_out_and_never_stops_the_call(impl):
    assert "Sleeping never stops the call" in api_doc(CrafterAPI)
    actions = [code("nap", "    return api.sleep()\n"),
               code("long_nap", "    return api.sleep() is False and api.steps_left() == 0\n")]
    env, world, player, api = sand_world(code_actions=actions, max_macro_steps=64, crafter_impl=impl)

    def call(name: str, energy: int | None = None) -> dict:
        if energy is not None:
            player.inventory["energy"], player._fatigue, player.sleeping = energy, 0, False
        return env.step(len(ACTIONS) + [a.name for a in actions].index(name))[4]

    info = call("nap", energy=8)  # 11 steps asleep give the point of energy, the 12th wakes the player
    assert (info["prim_steps"], info["code_ok"], info["code_error"]) == (12, True, "")
    assert not player.sleeping and player.inventory["energy"] == 9 and player.achievements["wake_up"] == 1
    info = call("nap")  # energy 9: the player cannot fall asleep; one step
    assert (info["prim_steps"], info["code_ok"], player.sleeping) == (1, True, False)
    info = call("long_nap", energy=3)  # more sleep than the call's 64 steps: it returns False, not stopped
    assert (info["prim_steps"], info["code_ok"], info["code_error"]) == (64, True, "")
    assert player.sleeping and player.inventory["energy"] == 3 + 64 // 11
    pos = tuple(player.pos)
    env.step(ACTIONS.index("move_left"))  # the player sleeps on: the RL agent's move is sleep too
    assert player.sleeping and tuple(player.pos) == pos
    short, player.inventory["energy"], player._fatigue = env.unwrapped.make_api(7), 3, 0
    assert short.sleep(5) is False and short.steps_left() == 2  # at most max_steps
    assert short.sleep() is False and short.steps_left() == 0
    with pytest.raises(StepBudgetExceeded):  # with no step left it stops the call, as every acting call does
        short.sleep()
    env.close()
