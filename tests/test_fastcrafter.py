"""fastcrafter.Env against crafter.Env: the same obs (bit for bit), reward, done and info, step by step.

The reference is built here, independently of fastcrafter: crafter.Env with each chunk's creatures in
an insertion-ordered set (patched for the duration of a test only), which is the one difference
fastcrafter documents. Two policies drive both envs with the same actions: random, and a scripted
gatherer that makes tables, tools, furnaces and plants happen, sleeps, fights, and lives through
nights; the tests check that those events did happen, so a policy that drifted into doing nothing
cannot make the comparison vacuous. Staged scenes, set up alike in both envs, reach what neither
policy does: a ripe plant, lava, arrows, a full inventory, a whole night awake.
"""

import collections
import concurrent.futures
import hashlib
import multiprocessing
import os

import crafter
import numpy as np
import pytest
from crafter import constants

from env import CRAFTER_IMPLS, make_env
from envs import crafter_api, fastcrafter

SEEDS = range(10)
STEPS = 1000
A = {name: i for i, name in enumerate(constants.actions)}


class _InsertionOrdered(dict):
    def add(self, item) -> None:
        self[item] = None

    def remove(self, item) -> None:
        del self[item]


def _order_chunks(patch) -> None:
    """Make crafter.Env's chunks insertion-ordered through `patch(obj, name, value)`."""
    crafter_reset = crafter.engine.World.reset

    def ordered_reset(world, seed=None):
        crafter_reset(world, seed)
        world._chunks = collections.defaultdict(_InsertionOrdered)

    patch(crafter.engine.World, "reset", ordered_reset)


@pytest.fixture
def reference(monkeypatch):
    """crafter.Env with insertion-ordered chunks, for this test only."""
    _order_chunks(monkeypatch.setattr)
    return crafter.Env


def assert_same(want: tuple, got: tuple, where: str) -> None:
    (obs1, rew1, done1, info1), (obs2, rew2, done2, info2) = want, got
    assert obs1.dtype == obs2.dtype and np.array_equal(obs1, obs2), f"obs differ {where}"
    assert (rew1, done1) == (rew2, done2), f"reward/done differ {where}"
    assert info1.keys() == info2.keys(), where
    for key, value in info1.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == info2[key].dtype and np.array_equal(value, info2[key]), f"{key} differs {where}"
        else:
            assert value == info2[key], f"{key} differs {where}"


def _move(env, rng: np.random.Generator, dx: int = 0, dy: int = 0) -> int:
    """A move towards (dx, dy), or a random one; never into lava (deaths would only cost resets)."""
    options = [(1, 0) if dx > 0 else (-1, 0)] if abs(dx) > abs(dy) else [(0, 1) if dy > 0 else (0, -1)]
    if dx == dy == 0:
        options = [((-1, 0), (1, 0), (0, -1), (0, 1))[i] for i in rng.permutation(4)]
    names = {(-1, 0): "move_left", (1, 0): "move_right", (0, -1): "move_up", (0, 1): "move_down"}
    for step in options:
        if env._world[env._player.pos + step][0] != "lava":
            return A[names[step]]
    return A["noop"]


def gatherer(env, rng: np.random.Generator) -> int:
    """Scripted: chop trees, place a table, make tools, mine stone, place a furnace and saplings,
    drink, fight whatever it faces, sleep when tired; walk towards what it needs, else wander."""
    player, world = env._player, env._world
    inv = player.inventory
    material, obj = world[player.pos + player.facing]
    nearby, _ = world.nearby(player.pos, 1)
    if rng.random() < 0.15:
        return _move(env, rng)  # wander a little so that it does not get stuck
    if inv["energy"] < 3 or (player.sleeping and inv["energy"] < 9):
        return A["sleep"]
    if isinstance(obj, (crafter.objects.Zombie, crafter.objects.Cow, crafter.objects.Skeleton)):
        return A["do"]
    if "table" in nearby:
        for tool in ("wood_pickaxe", "wood_sword", "stone_pickaxe", "stone_sword"):
            if not inv[tool] and all(inv[k] >= n for k, n in constants.make[tool]["uses"].items()):
                return A["make_" + tool]
    place = {"table": "table" not in nearby, "furnace": "table" in nearby and "furnace" not in nearby,
             "plant": True, "stone": inv["stone"] > 6}
    for item, wanted in place.items():
        info = constants.place[item]
        if wanted and material in info["where"] and all(inv[k] >= n for k, n in info["uses"].items()):
            return A["place_" + item]
    wants = {"tree": inv["wood"] < 6, "stone": inv["wood_pickaxe"] > 0 and inv["stone"] < 8,
             "coal": inv["wood_pickaxe"] > 0, "water": inv["drink"] < 7, "grass": rng.random() < 0.2}
    if wants.get(material):
        return A["do"]
    targets = [m for m, wanted in wants.items() if wanted and m != "grass"]
    cells = [(abs(dx) + abs(dy), dx, dy) for dx in range(-4, 5) for dy in range(-3, 4)
             if (dx, dy) != (0, 0) and world[player.pos + (dx, dy)][0] in targets]
    return _move(env, rng, *min(cells)[1:]) if cells else _move(env, rng)


def random_policy(env, rng: np.random.Generator) -> int:
    return int(rng.integers(len(constants.actions)))


POLICIES = {"random": random_policy, "gatherer": gatherer}
SIZES = [(100, 100), (37, 53)]  # extra render(size) calls, every 97 steps (they draw night noise too)


def _digest(out: tuple) -> dict:
    """Everything a step returns, in a form that pickles small: arrays as hashes of dtype and bytes."""
    obs, reward, done, info = out
    row = {key: (value.dtype.str, value.shape, hashlib.sha1(value.tobytes()).hexdigest())
           if isinstance(value, np.ndarray) else value for key, value in info.items()}
    return dict(row, obs=(obs.dtype.str, obs.shape, hashlib.sha1(obs.tobytes()).hexdigest()),
                step_reward=reward, done=done)


def trajectory(env, seed: int, policy: str, steps: int = STEPS) -> tuple[list[dict], collections.Counter]:
    """One digest per reset and step of `env` under the policy (actions drawn from the env's own
    state), resetting when an episode ends; also counts what happened."""
    rng, seen = np.random.default_rng(seed), collections.Counter()
    rows = [{"reset": hashlib.sha1(env.reset().tobytes()).hexdigest()}]
    for t in range(steps):
        action = POLICIES[policy](env, rng)
        out = env.step(action)
        rows.append(dict(_digest(out), t=t, action=constants.actions[action]))
        seen["night"] += env._world.daylight < 0.5
        seen["asleep"] += env._player.sleeping
        if t % 97 == 0:
            rows.append({f"render{size}": hashlib.sha1(env.render(size).tobytes()).hexdigest() for size in SIZES})
        if out[2]:
            seen.update({name: count for name, count in out[3]["achievements"].items()}, episodes=1)
            rows.append({"reset": hashlib.sha1(env.reset().tobytes()).hexdigest()})
    seen.update(env._player.achievements)
    return rows, seen


def _reference_trajectory(seed: int, policy: str) -> tuple[list[dict], collections.Counter]:
    """In a worker process (which runs nothing else): crafter.Env with insertion-ordered chunks."""
    _order_chunks(setattr)
    return trajectory(crafter.Env(seed=seed), seed, policy)


def compare_policy(policy: str) -> collections.Counter:
    """The reference runs in worker processes while this one runs fastcrafter: the same work, in
    about half the wall-clock time on two cores."""
    seen = collections.Counter()
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(len(SEEDS), os.cpu_count() or 1), context) as pool:
        futures = {seed: pool.submit(_reference_trajectory, seed, policy) for seed in SEEDS}
        for seed in SEEDS:
            got, got_seen = trajectory(fastcrafter.Env(seed=seed), seed, policy)
            want, _ = futures[seed].result()
            for w, g in zip(want, got, strict=True):
                assert w == g, f"seed {seed}, {policy}: {[k for k in w if w[k] != g.get(k)]} differ in {w} vs {g}"
            seen += got_seen
    return seen


def test_random_policy_matches_crafter():
    seen = compare_policy("random")
    assert seen["night"] > 0 and seen["episodes"] > 0, seen


def test_gatherer_policy_matches_crafter():
    seen = compare_policy("gatherer")
    happened = ["night", "asleep", "wake_up", "collect_wood", "place_table", "make_wood_pickaxe",
                "make_wood_sword", "collect_stone", "place_furnace", "collect_sapling", "place_plant",
                "collect_drink"]
    assert all(seen[name] > 0 for name in happened), {name: seen[name] for name in happened}
    assert seen["defeat_zombie"] + seen["eat_cow"] + seen["defeat_skeleton"] > 0, seen


def test_time_limit_reset_mid_episode_and_options(reference):
    kwargs = dict(length=40, size=(90, 70), view=(7, 9), reward=False)
    ref, fast = reference(seed=3, **kwargs), fastcrafter.Env(seed=3, **kwargs)
    rng = np.random.default_rng(3)
    for episode in range(3):
        assert np.array_equal(ref.reset(), fast.reset())
        for t in range(40 if episode != 1 else 17):  # episode 1 is cut short by a reset
            action = int(rng.integers(len(constants.actions)))
            want, got = ref.step(action), fast.step(action)
            assert_same(want, got, f"at step {t} of episode {episode}")
            assert bool(want[2]) == (t == 39 or want[3]["discount"] == 0)
    assert want[2], "the time limit must end the episode"


def test_shading_is_crafters_light_noise_and_sleep():
    """fastcrafter's compiled lighting against Crafter's own LocalView._light/_noise/_sleep (numpy and
    Pillow) on random tiles of every colour range, day and night, awake and asleep, odd sizes."""
    rng = np.random.default_rng(0)
    view = crafter.engine.LocalView.__new__(crafter.engine.LocalView)  # its lighting needs only a world
    for trial in range(300):
        ux, uy, gw, gh = (int(v) for v in rng.integers(1, 12, 4))
        atlas = rng.integers(0, 256, (5, ux, uy, 3)).astype(np.uint8)
        ids = rng.integers(0, 5, (gw, gh))
        canvas = atlas[ids].transpose(0, 2, 1, 3, 4).reshape(gw * ux, gh * uy, 3)
        daylight = 1 - np.abs(np.cos(np.pi * ((int(rng.integers(300)) / 300) % 1 + 0.3))) ** 3
        sleeping, seed = bool(trial % 2), int(rng.integers(2**31))
        view._world = type("World", (), {"random": np.random.RandomState(seed)})()
        want = view._light(canvas, daylight)
        want = view._sleep(want) if sleeping else want
        noise = (np.random.RandomState(seed).uniform(32, 127, canvas.shape[:2]) if daylight < 0.5
                 else fastcrafter._NO_NOISE)
        got = fastcrafter._shade(atlas, ids, ux, uy, daylight, 2 * (0.5 - daylight), noise,
                                 fastcrafter._vignette(canvas.shape, 0.5), sleeping)
        assert np.array_equal(want, got), (trial, daylight, sleeping)


def test_env_py_runs_either_implementation_alike():
    envs = [make_env("collect_wood", 5, crafter_impl=impl) for impl in CRAFTER_IMPLS]
    assert type(envs[0].unwrapped._crafter) is fastcrafter.Env
    assert type(envs[1].unwrapped._crafter) is crafter.Env
    obs = [env.reset(seed=5)[0] for env in envs]
    for t in range(300):
        out = [env.step(t % 6) for env in envs]
        obs = [o[0] for o in out]
        assert np.array_equal(obs[0]["image"], obs[1]["image"]) and out[0][1:4] == out[1][1:4], t
    assert crafter.engine.World.reset.__module__ == "crafter.engine", "crafter must not be patched globally"
    with pytest.raises(ValueError, match="crafter_impl"):
        make_env("collect_wood", 0, crafter_impl="nope")
    # the api's view on each: fastcrafter names the cells from slices of its maps, crafter one lookup per cell
    views = [crafter_api.view_names(env.unwrapped._crafter) for env in envs]
    assert views[0] == views[1] and views[0][3][4] == "player"
    sets = [crafter_api.view_set(env.unwrapped._crafter) for env in envs]  # what initiation conditions read
    assert sets[0] == sets[1] == set(sum(views[0], []))


def test_the_views_names_from_slices_are_the_cell_by_cell_names_everywhere_the_edges_included():
    env = make_env("collect_wood", 0)
    env.reset(seed=3)
    world = env.unwrapped._crafter._world
    world.add(crafter.objects.Cow(world, (10, 1)))
    w, h = world.area
    for x, y in [(0, 0), (w - 1, h - 1), (2, 1), (w - 3, 5), (10, 3), (5, h - 2), (-20, 3), (w + 9, h + 9)]:
        want = [[crafter_api._name(*world[x + dx, y + dy]) for dx in range(-4, 5)] for dy in range(-3, 4)]
        assert world.cell_names(x - 4, x + 5, y - 3, y + 4, crafter_api._name) == want, (x, y)
        assert world.names_in(x - 4, x + 5, y - 3, y + 4, crafter_api._name) == set(sum(want, [])), (x, y)
    assert "cow" in sum(world.cell_names(6, 15, -2, 5, crafter_api._name), []) and "unknown" in want[0]
    world[(10, 1)] = "sand"  # the only sand in view, under the cow: not in view
    assert "sand" not in world.names_in(6, 15, -2, 5, crafter_api._name)
    env.close()


# ----------------------------------------------------------------------------------------------
# Staged scenes: states the policies above never reach (a ripe plant, lava, arrows, a full inventory,
# a night awake), set up in both envs alike through the world's own API, then played with the same
# scripted actions and compared step by step. Each scene asserts that its state did come into view.


def _clearing(env) -> tuple[int, int]:
    """Grass with no creature on it over the player's view and a margin; the player's position."""
    world, player = env._world, env._player
    px, py = player.pos.tolist()
    for x in range(px - 7, px + 8):
        for y in range(py - 6, py + 7):
            world[(x, y)] = "grass"
            if world[(x, y)][1] not in (None, player):
                world.remove(world[(x, y)][1])
    return px, py


def _in_view(env, cls) -> list:
    """The creatures of class `cls` inside the local view (9 x 7 cells around the player)."""
    px, py = env._player.pos.tolist()
    return [obj for obj in env._world.objects
            if isinstance(obj, cls) and abs(obj.pos[0] - px) <= 4 and abs(obj.pos[1] - py) <= 3]


def ripe_plant(env):
    """A sapling planted in view, left to ripen (its growth counter set 11 updates short of ripe), then eaten."""
    px, py = _clearing(env)
    env._player.inventory.update(sapling=1, food=2)
    yield A["place_plant"]  # the player faces down at the start
    plant = env._world[(px, py + 1)][1]
    assert isinstance(plant, crafter.objects.Plant) and not plant.ripe
    plant.grown = 290
    for _ in range(14):
        yield A["noop"]
    assert plant.ripe and _in_view(env, crafter.objects.Plant) == [plant]
    yield A["do"]
    assert env._player.achievements["eat_plant"] == 1 and env._player.inventory["food"] == 6 and not plant.ripe
    yield A["noop"]


def lava(env):
    """A lava pool in view, walked around and then into."""
    px, py = _clearing(env)
    for x, y in [(px - 1, py), (px - 2, py), (px - 2, py - 1), (px - 3, py + 2), (px + 3, py - 2)]:
        env._world[(x, y)] = "lava"
    for name in ("move_up", "move_right", "move_down", "move_down", "move_left", "move_up", "move_left"):
        yield A[name]
    assert env._world[env._player.pos][0] == "lava" and env._player.health == 0


def arrows(env):
    """Skeletons 4 cells away on each side of the player on a path, shooting at it."""
    px, py = _clearing(env)
    for x in range(px - 6, px + 7):
        env._world[(x, py)] = "path"
    for y in range(py - 5, py + 6):
        env._world[(px, y)] = "path"
    for dx, dy in [(4, 0), (-4, 0), (0, 4), (0, -4)]:
        env._world.add(crafter.objects.Skeleton(env._world, (px + dx, py + dy), env._player))
    facings = set()
    for _ in range(30):
        yield A["noop"]
        facings |= {tuple(arrow.facing) for arrow in _in_view(env, crafter.objects.Arrow)}
    assert facings == {(-1, 0), (1, 0), (0, -1), (0, 1)}, facings
    assert env._player.health < 9


def full_inventory(env):
    """Every item at its cap (9), then actions that would go past it: chopping, making, placing."""
    px, py = _clearing(env)
    env._player.inventory.update({name: info["max"] for name, info in constants.items.items()})
    env._world[(px, py + 1)] = "tree"
    env._world[(px + 1, py)] = "table"
    for name in ("do", "make_wood_pickaxe", "make_stone_sword", "do", "place_stone", "noop"):
        yield A[name]
    assert all(env._player.inventory[k] == 9 for k in ("wood_pickaxe", "stone_sword", "sapling", "coal"))
    assert env._player.inventory["wood"] == 7 and env._player.inventory["stone"] == 7  # 9 - sword - placed


def night_awake(env):
    """The clock set to just before dusk; the player walks about, awake, until after dawn."""
    _clearing(env)
    env._step = 140
    light = []
    for t in range(140):
        yield A[("move_left", "move_up", "move_right", "move_down")[t // 3 % 4]]
        assert not env._player.sleeping
        light.append(env._world.daylight)
    assert light[0] > 0.5 > min(light) and light[-1] > 0.5 and min(light) < 0.01


@pytest.mark.parametrize("scene", [ripe_plant, lava, arrows, full_inventory, night_awake])
def test_staged_scene_matches_crafter(reference, scene):
    ref, fast = reference(seed=1), fastcrafter.Env(seed=1)
    assert np.array_equal(ref.reset(), fast.reset())
    want_actions, got_actions = scene(ref), scene(fast)  # each sets up its own env before each action
    for t, (action, same) in enumerate(zip(want_actions, got_actions, strict=True)):
        assert action == same
        assert_same(ref.step(action), fast.step(action), f"at step {t} of {scene.__name__}")
        for size in SIZES:
            assert np.array_equal(ref.render(size), fast.render(size)), f"render{size} at step {t}"
