"""fastcrafter_worldgen.generate_world must build exactly Crafter's world and leave `world.random` where
Crafter leaves it (every later step draws from it)."""

import crafter
import crafter.env
import numpy as np
import pytest
from crafter import constants, engine, objects, worldgen

import env
from envs import fastcrafter, fastcrafter_worldgen
from envs.fastcrafter_worldgen import generate_world

SEEDS = range(32)


def fresh(seed: int, area=(64, 64), player_pos=None) -> tuple[engine.World, objects.Player]:
    """A World and Player as `crafter.Env.reset` has them just before it generates the world."""
    world = fastcrafter.World(area, constants.materials, (12, 12))  # Crafter's, chunks insertion-ordered
    world.reset(seed=seed)
    player = objects.Player(world, player_pos or (area[0] // 2, area[1] // 2))
    world.add(player)
    return world, player


def assert_same_object(a, b, world_a, world_b, player_a, player_b) -> None:
    assert type(a) is type(b)
    state_a, state_b = dict(vars(a)), dict(vars(b))
    links = {"world": (world_a, world_b), "random": (world_a.random, world_b.random), "player": (player_a, player_b)}
    for key, (target_a, target_b) in links.items():
        if key in state_a:
            assert state_a.pop(key) is target_a and state_b.pop(key) is target_b, key
    assert state_a.keys() == state_b.keys()
    for key, value in state_a.items():
        assert np.array_equal(value, state_b[key]) and type(value) is type(state_b[key]), (type(a), key)
    assert a.pos.dtype == b.pos.dtype


def assert_same_world(seed: int, area=(64, 64), player_pos=None) -> None:
    world_a, player_a = fresh(seed, area, player_pos)
    world_b, player_b = fresh(seed, area, player_pos)
    worldgen.generate_world(world_a, player_a)
    generate_world(world_b, player_b)
    assert np.array_equal(world_a._mat_map, world_b._mat_map), f"materials differ for seed {seed}"
    assert world_a._mat_map.dtype == world_b._mat_map.dtype and world_a._mat_ids == world_b._mat_ids
    assert np.array_equal(world_a._obj_map, world_b._obj_map), f"object positions differ for seed {seed}"
    assert len(world_a._objects) == len(world_b._objects), f"object count differs for seed {seed}"
    for a, b in zip(world_a._objects[1:], world_b._objects[1:], strict=True):
        assert_same_object(a, b, world_a, world_b, player_a, player_b)
    index_a = {id(obj): i for i, obj in enumerate(world_a._objects)}
    index_b = {id(obj): i for i, obj in enumerate(world_b._objects)}
    chunks_a = {key: [index_a[id(obj)] for obj in objs] for key, objs in world_a._chunks.items()}
    chunks_b = {key: [index_b[id(obj)] for obj in objs] for key, objs in world_b._chunks.items()}
    assert chunks_a == chunks_b, f"chunk contents differ for seed {seed}"
    state_a, state_b = world_a.random.get_state(), world_b.random.get_state()
    assert np.array_equal(state_a[1], state_b[1]) and state_a[2:] == state_b[2:], f"RandomState differs, seed {seed}"
    assert [world_a.random.uniform() for _ in range(10)] == [world_b.random.uniform() for _ in range(10)]


@pytest.mark.parametrize("seed", SEEDS)
def test_same_world_and_random_state_as_crafter(seed):
    assert_same_world(seed)


def test_same_world_for_other_areas_and_player_positions():
    assert_same_world(7, area=(48, 80), player_pos=(5, 70))
    assert_same_world(8, area=(64, 64), player_pos=(63, 0))


def seed_reaching(state: int, steps: int) -> int:
    """The seed whose LCG state in opensimplex's `_init` is `state` after `steps` updates (the LCG is invertible)."""
    inverse = pow(6364136223846793005, -1, 2**64)
    for _ in range(steps):
        state = (state - 1442695040888963407) * inverse % 2**64
    return state - 2**64 if state >= 2**63 else state


def test_simplex_tables_match_opensimplex():
    from opensimplex.internals import _init

    # 5 updates put the state at the int64 maximum when `(seed + 31) % 255` is taken, where Python's unbounded
    # sum and a wrapping int64 sum disagree.
    edge = [seed_reaching(2**63 - 1, 5), seed_reaching(2**63 - 31, 5), seed_reaching(2**63 - 32, 5)]
    seeds = [0, 1, 2**31 - 2, -5, 2**62, -(2**63), *edge] + list(np.random.default_rng(0).integers(0, 2**31 - 1, 50))
    for seed in seeds:
        for ours, theirs in zip(fastcrafter_worldgen._simplex_tables(int(seed)), _init(int(seed)), strict=True):
            assert np.array_equal(ours, theirs), seed


def test_start_field_bit_for_bit_as_crafter_computes_it_per_tile():
    """Crafter applies np.exp to one float64 at a time; we apply it to the whole array of compiled logits.
    A last-bit difference here rarely flips a tile, so the world comparisons alone would not notice it."""
    import opensimplex

    seed, (px, py) = 12345, (20, 41)
    simplex = opensimplex.OpenSimplex(seed=seed)
    crafters = np.empty((64, 64))
    for x in range(64):
        for y in range(64):  # the first lines of crafter.worldgen._set_material
            start = 4 - np.sqrt((x - np.int64(px)) ** 2 + (y - np.int64(py)) ** 2)
            start += 2 * worldgen._simplex(simplex, x, y, 8, 3)
            crafters[x, y] = 1 / (1 + np.exp(-start))
    perm, grad = fastcrafter_worldgen._simplex_tables(seed)
    assert np.array_equal(fastcrafter_worldgen._start(64, 64, px, py, perm, grad), crafters)


def rollout(seed: int) -> list:
    """Observations, rewards, dones and infos of a reset, 50 random steps, a second reset and 10 more steps."""
    environment = env.make_crafter("original", seed=seed)  # crafter.Env, chunks insertion-ordered
    actions = np.random.default_rng(seed).integers(environment.action_space.n, size=60)
    trace = []
    for i, action in enumerate(actions):
        if i in (0, 50):
            trace.append(environment.reset())
        trace += list(environment.step(int(action)))
    return trace


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crafter_env_unchanged_with_our_worldgen(seed, monkeypatch):
    expected = rollout(seed)
    monkeypatch.setattr(crafter.env.worldgen, "generate_world", generate_world)
    assert crafter.env.worldgen.generate_world is generate_world
    got = rollout(seed)
    for a, b in zip(expected, got, strict=True):
        if isinstance(a, dict):
            assert a.keys() == b.keys()
            assert all(np.array_equal(a[key], b[key]) for key in a), seed
        else:
            assert np.array_equal(a, b), seed
