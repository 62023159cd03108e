"""Crafter's world generation, compiled: the same worlds as `crafter.worldgen.generate_world`, ~20x faster.

Crafter spends a reset calling per-tile Python (`_set_material`, `_set_object`, `functools.partial`) 64x64
times. Here one numba pass walks the tiles in Crafter's order (x outer, y inner; all materials, then all
objects) and makes the same decisions from the same numbers, which is why the world is identical:
- noise: opensimplex's own compiled `_noise3` on the same arguments (`x / size` etc.), octaves combined
  in Crafter's order (`n15 + 0.15 * n5`, `(n15 + 0.3 * n5) / (1 + 0.3)`), no fastmath, so each value is
  the same double Crafter gets through `_simplex`;
- `start = 1 / (1 + np.exp(-start))` is computed with numpy, as Crafter does: numpy's exp differs from
  libm's (which numba would call) in the last bit for ~5% of inputs, and vectorised numpy exp gives the
  same per element as numpy's scalar exp (checked in tests/test_fastcrafter_worldgen.py);
- randomness: Crafter draws `world.random.uniform()` only when an `and` chain reaches it, so how many it
  draws depends on the noise. `uniform()` is `0 + 1 * random_sample()`, so we save the RandomState,
  draw an upper bound of doubles (at most 3 per tile for materials and 2 for objects), let the pass
  consume them in Crafter's order and count them, then restore the state and advance it by that count:
  `world.random` ends exactly where Crafter leaves it;
- objects are created in Python in Crafter's order with `world.add`, so the object list, the chunks and
  every object's own state match. Materials are written as one array through World's name->id table;
  Crafter's World always holds all ten names here (a World lacking one makes Crafter's `_set_object`
  fail too, so a KeyError is the same outcome).
"""

import numba
import numpy as np
from crafter import objects
from opensimplex.constants import GRADIENTS3
from opensimplex.internals import _noise3

_NAMES = ("water", "grass", "stone", "path", "sand", "tree", "lava", "coal", "iron", "diamond")
_WATER, _GRASS, _STONE, _PATH, _SAND, _TREE, _LAVA, _COAL, _IRON, _DIAMOND = range(10)
_COW, _ZOMBIE, _SKELETON = range(3)
_DRAWS_PER_TILE = 5  # the most uniforms one tile can draw: 3 (coal, iron, diamond) + 2 (cow or path, zombie)


@numba.njit(cache=True)
def _simplex_tables(seed):
    """`opensimplex.internals._init(seed)` compiled (its Python loop over ctypes ints is 1 ms a reset): int64
    arithmetic wraps like its `c_int64`, and `(seed + 31) % n`, unbounded in Python, is taken modulo first."""
    perm, grad, source = np.zeros(256, np.int64), np.zeros(256, np.int64), np.arange(256)
    for _ in range(3):
        seed = seed * 6364136223846793005 + 1442695040888963407
    for i in range(255, -1, -1):
        seed = seed * 6364136223846793005 + 1442695040888963407
        r = (seed % (i + 1) + 31) % (i + 1)
        perm[i] = source[r]
        grad[i] = int((perm[i] % (len(GRADIENTS3) / 3)) * 3)
        source[r] = source[i]
    return perm, grad


@numba.njit("float64(int64[::1], int64[::1], float64, float64, int64, int64)", cache=True)
def _noise(perm, grad, x, y, z, size):
    """Crafter's `simplex.noise3(x / size, y / size, z)`; one signature keeps numba's compile time down."""
    return _noise3(x / size, y / size, z, perm, grad)


@numba.njit(cache=True)
def _start_logits(w, h, px, py, perm, grad):
    """Crafter's `start` before its sigmoid: 4 - distance to the player + 2 * noise."""
    out = np.empty((w, h))
    for x in range(w):
        for y in range(h):
            out[x, y] = 4 - np.sqrt((x - px) ** 2 + (y - py) ** 2) + 2 * _noise(perm, grad, x, y, 8, 3)
    return out


@numba.njit(cache=True)
def _layout(start, px, py, perm, grad, u):
    """Material codes, objects (kind, x, y) in creation order, and how many uniforms of `u` were used."""
    w, h = start.shape
    mat = np.empty((w, h), np.uint8)
    tunnels = np.zeros((w, h), np.bool_)
    k = 0
    for x in range(w):
        for y in range(h):
            s = start[x, y]
            mat[x, y] = _GRASS
            if s > 0.5:  # grass around the player; Crafter's water and mountain noise is unused here
                continue
            water = _noise(perm, grad, x, y, 3, 15) + 0.15 * _noise(perm, grad, x, y, 3, 5) + 0.1
            water -= 2 * s
            mountain = (_noise(perm, grad, x, y, 0, 15) + 0.3 * _noise(perm, grad, x, y, 0, 5)) / (1 + 0.3)
            mountain -= 4 * s + 0.3 * water
            m = _GRASS
            if mountain > 0.15:
                m = _STONE
                if _noise(perm, grad, x, y, 6, 7) > 0.15 and mountain > 0.3:  # cave
                    m = _PATH
                elif _noise(perm, grad, 2 * x, y / 5, 7, 3) > 0.4 or _noise(perm, grad, x / 5, 2 * y, 7, 3) > 0.4:
                    m = _PATH  # horizontal or vertical tunnel
                    tunnels[x, y] = True
                else:  # each `cond and uniform() > p` draws only when cond holds, and falls through on failure
                    if _noise(perm, grad, x, y, 1, 8) > 0:
                        k += 1
                        if u[k - 1] > 0.85:
                            m = _COAL
                    if m == _STONE and _noise(perm, grad, x, y, 2, 6) > 0.4:
                        k += 1
                        if u[k - 1] > 0.75:
                            m = _IRON
                    if m == _STONE and mountain > 0.18:
                        k += 1
                        if u[k - 1] > 0.994:
                            m = _DIAMOND
                    if m == _STONE and mountain > 0.3 and _noise(perm, grad, x, y, 6, 5) > 0.35:
                        m = _LAVA
            elif 0.25 < water <= 0.35 and _noise(perm, grad, x, y, 4, 9) > -0.2:
                m = _SAND
            elif 0.3 < water:
                m = _WATER
            elif _noise(perm, grad, x, y, 5, 7) > 0:  # grassland
                k += 1
                if u[k - 1] > 0.8:
                    m = _TREE
            mat[x, y] = m
    objs = np.empty((w * h, 3), np.int64)
    n = 0
    for x in range(w):
        for y in range(h):
            m = mat[x, y]
            if m != _GRASS and m != _SAND and m != _PATH:  # constants.walkable
                continue
            dist = np.sqrt((x - px) ** 2 + (y - py) ** 2)
            kind = -1
            if dist > 3 and m == _GRASS:
                k += 1
                if u[k - 1] > 0.985:
                    kind = _COW
            if kind < 0 and dist > 10:
                k += 1
                if u[k - 1] > 0.993:
                    kind = _ZOMBIE
            if kind < 0 and m == _PATH and tunnels[x, y]:
                k += 1
                if u[k - 1] > 0.95:
                    kind = _SKELETON
            if kind >= 0:
                objs[n, 0], objs[n, 1], objs[n, 2] = kind, x, y
                n += 1
    return mat, objs[:n], k


def _start(w: int, h: int, px: int, py: int, perm: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Crafter's `start` (how much a tile is the player's grassland): the sigmoid in numpy, as Crafter does."""
    return 1 / (1 + np.exp(-_start_logits(w, h, px, py, perm, grad)))


def generate_world(world, player) -> None:
    """Fill `world` exactly as `crafter.worldgen.generate_world(world, player)` does (see module docstring)."""
    perm, grad = _simplex_tables(world.random.randint(0, 2**31 - 1))  # opensimplex.OpenSimplex(seed)
    w, h = world.area
    px, py = int(player.pos[0]), int(player.pos[1])
    start = _start(w, h, px, py, perm, grad)
    state = world.random.get_state()
    mat, objs, used = _layout(start, px, py, perm, grad, world.random.random_sample(_DRAWS_PER_TILE * w * h))
    world.random.set_state(state)
    world.random.random_sample(used)
    world._mat_map[:] = np.array([world._mat_ids[name] for name in _NAMES], np.uint8)[mat]
    for kind, x, y in objs.tolist():
        if kind == _COW:
            world.add(objects.Cow(world, (x, y)))
        elif kind == _ZOMBIE:
            world.add(objects.Zombie(world, (x, y), player))
        else:
            world.add(objects.Skeleton(world, (x, y), player))
