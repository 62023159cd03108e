"""fastcrafter: the same Crafter game, several times faster per step, as a drop-in `crafter.Env`.

    from envs import fastcrafter
    env = fastcrafter.Env(seed=0)      # same constructor, defaults and old-gym API as crafter.Env
    obs = env.reset()
    obs, reward, done, info = env.step(5)

For the same seed and actions it gives the same obs (bit for bit, at any render size), reward, done and
info as `crafter.Env`, with ONE difference from upstream Crafter: each chunk's creatures are kept in
an insertion-ordered set instead of a `set`. Upstream iterates that `set` in memory-address order when
it picks a creature to despawn, so two upstream runs with the same seed can differ; insertion order
makes a seed and an action sequence give one trajectory (the game's rules and statistics are
unchanged). The reference the tests compare against is upstream with that one change.

Crafter's game rules (objects.py, the World bookkeeping) are reused; what a profile of
`crafter.Env.step` shows as hot (~70% of a step is rendering) is replaced, line for line where it
is game logic:
- the local view: per-tile Python loops become a texture atlas holding every (material, creature)
  tile already alpha-blended with Crafter's own `_draw`/`_draw_alpha`, indexed by the view's cells,
  and one compiled (numba) pass that applies daylight, night noise and sleep with the same float64
  and float32 operations in the same order as Crafter's numpy code and Pillow's `ImageEnhance.Color`
  (whose exact integer/float32 form it uses); every night-time render still draws one uniform per
  view pixel from `world.random`, so the random stream, and with it the future of the game, is
  unchanged;
- the inventory strip is composed from cached per-slot tiles drawn by Crafter's own ItemView code;
- the semantic view is written from the object map in one numpy operation;
- the per-step distance check is one vectorised computation; World.move and World.__getitem__ (the
  game rules' most frequent calls) work on Python ints; chunk balancing counts each chunk's grass and
  path cells once per round instead of building a mask per chunk and creature kind.
- world generation is fastcrafter_worldgen.generate_world: compiled, consuming `world.random` in exactly
  Crafter's order (its own module: the noise tables and the compiled pass are a concern of their own).
"""

from __future__ import annotations

import collections
import functools

import crafter
import numba
import numpy as np
from crafter import constants, engine, objects

from envs.fastcrafter_worldgen import generate_world as _generate_world

# ----------------------------------------------------------------------------------------------
# The world: Crafter's, with insertion-ordered chunks and a per-object kind table for the semantic view.

_SEM_TYPES = (objects.Player, objects.Cow, objects.Zombie, objects.Skeleton, objects.Arrow, objects.Plant)
_SEM_IDS = {cls: len(constants.materials) + 1 + i for i, cls in enumerate(_SEM_TYPES)}


class OrderedChunk(dict):
    """A set that iterates in insertion order (the one difference from upstream Crafter)."""

    def add(self, item) -> None:
        self[item] = None

    def remove(self, item) -> None:
        del self[item]


class World(engine.World):
    """Crafter's World; also records each object's semantic id by object index as it is added."""

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._chunks = collections.defaultdict(OrderedChunk)
        self._kinds = np.zeros(256, np.uint8)

    def add(self, obj) -> None:
        index = len(self._objects)
        super().add(obj)
        if index >= len(self._kinds):
            self._kinds = np.concatenate([self._kinds, np.zeros_like(self._kinds)])
        self._kinds[index] = _SEM_IDS[type(obj)]  # Crafter's SemanticView raises on other kinds too

    def move(self, obj, pos) -> None:
        """World.move (every creature's step) with Python ints; chunk keys only when the chunk changes."""
        if obj.removed:
            return
        pos = np.array(pos)
        (x, y), (ox, oy), (csx, csy) = pos.tolist(), obj.pos.tolist(), self._chunk_size
        assert self._obj_map[x, y] == 0
        self._obj_map[x, y], self._obj_map[ox, oy] = self._obj_map[ox, oy], 0
        if (x // csx, y // csy) != (ox // csx, oy // csy):
            self._chunks[self.chunk_key(obj.pos)].remove(obj)
            self._chunks[self.chunk_key(pos)].add(obj)
        obj.pos = pos

    def __getitem__(self, pos):
        """World.__getitem__ (the game rules' most frequent call) without building tuples and arrays."""
        x, y = pos
        if not (0 <= x < self.area[0] and 0 <= y < self.area[1]):
            return None, None
        return self._mat_names[self._mat_map[x, y]], self._objects[self._obj_map[x, y]]

    def cell_names(self, x0: int, x1: int, y0: int, y1: int, name) -> list[list[str]]:
        """name(material, object) of each cell of [x0, x1) x [y0, y1), one row per y: what calling `name` on
        __getitem__ of each cell gives ((None, None) off the world), from two slices of the maps instead
        of one lookup per cell (crafter_api.view_names, several times per step of a code action)."""
        (w, h), mats, objs = self.area, self._mat_names, self._objects
        cx0, cx1, cy0, cy1 = max(x0, 0), min(x1, w), max(y0, 0), min(y1, h)
        off = name(None, None)
        if cx0 >= cx1 or cy0 >= cy1:
            return [[off] * (x1 - x0) for _ in range(y0, y1)]
        mat, obj = self._mat_map[cx0:cx1, cy0:cy1].T.tolist(), self._obj_map[cx0:cx1, cy0:cy1].T.tolist()
        left, right = [off] * (cx0 - x0), [off] * (x1 - cx1)
        return [left + [name(mats[m], objs[o]) for m, o in zip(mat[y - cy0], obj[y - cy0], strict=True)] + right
                if cy0 <= y < cy1 else [off] * (x1 - x0) for y in range(y0, y1)]

    def names_in(self, x0: int, x1: int, y0: int, y1: int, name) -> set[str]:
        """The set of the names cell_names gives for the same cells, from the ids in the slices (a cell
        with an object shows the object, so the materials under objects are left out)."""
        (w, h), mats, objs = self.area, self._mat_names, self._objects
        cx0, cx1, cy0, cy1 = max(x0, 0), min(x1, w), max(y0, 0), min(y1, h)
        names = set() if (cx0, cx1, cy0, cy1) == (x0, x1, y0, y1) else {name(None, None)}
        if cx0 < cx1 and cy0 < cy1:
            mat, obj = self._mat_map[cx0:cx1, cy0:cy1], self._obj_map[cx0:cx1, cy0:cy1]
            names.update(name(mats[m], None) for m in set(mat[obj == 0].tolist()))
            names.update(name(None, objs[o]) for o in set(obj[obj != 0].tolist()))
        return names

    def semantic(self) -> np.ndarray:
        """SemanticView's output: material ids with every object's cell overwritten by its kind id."""
        canvas, obj_map = self._mat_map.copy(), self._obj_map.ravel()
        cells = np.flatnonzero(obj_map)
        canvas.ravel()[cells] = self._kinds[obj_map[cells]]
        return canvas


# ----------------------------------------------------------------------------------------------
# Rendering. Shared, read-only tables (built lazily per tile size), so an env carries no textures.

_TEXTURES = engine.Textures(constants.root / "assets")
_MATERIALS = [None] + list(constants.materials)  # World's material ids; None is drawn as 'unknown'
_OBJ_TEXTURES = [None, "player-left", "player-right", "player-up", "player-down", "player-sleep", "cow",
                 "zombie", "skeleton", "arrow-left", "arrow-right", "arrow-up", "arrow-down", "plant",
                 "plant-ripe", "fence"]
_OBJ_TEXTURE_IDS = {name: i for i, name in enumerate(_OBJ_TEXTURES)}
_NO_NOISE = np.zeros((0, 0))
_OUTSIDE = len(_MATERIALS)  # the tile id of cells outside the world: Crafter leaves them grey (127)


@functools.lru_cache(maxsize=16)
def _atlas(ux: int, uy: int) -> np.ndarray:
    """Every (material or outside) x (object texture or none) tile at this unit size, drawn exactly as
    LocalView draws one cell: the material with `_draw`, the creature on top with `_draw_alpha`."""
    atlas = np.zeros((_OUTSIDE + 1, len(_OBJ_TEXTURES), ux, uy, 3), np.uint8)
    for m, material in enumerate(_MATERIALS + ["outside"]):
        for o, name in enumerate(_OBJ_TEXTURES):
            tile = np.zeros((ux, uy, 3), np.uint8) + 127
            if material != "outside":
                engine._draw(tile, (0, 0), _TEXTURES.get(material, (ux, uy)))
            if name is not None:
                engine._draw_alpha(tile, (0, 0), _TEXTURES.get(name, (ux, uy)))
            atlas[m, o] = tile
    return atlas.reshape(-1, ux, uy, 3)


@functools.lru_cache(maxsize=16)
def _vignette(shape: tuple, stddev: float) -> np.ndarray:
    """LocalView._vignette, verbatim."""
    xs, ys = np.meshgrid(np.linspace(-1, 1, shape[0]), np.linspace(-1, 1, shape[1]))
    return 1 - np.exp(-0.5 * (xs ** 2 + ys ** 2) / (stddev ** 2)).T


@numba.njit(cache=True, inline="always")
def _grey(r, g, b):  # noqa: ANN001, ANN202
    """Pillow's RGB -> L: (19595 R + 38470 G + 7471 B + 2^15) >> 16."""
    return np.float32((np.int64(r) * 19595 + np.int64(g) * 38470 + np.int64(b) * 7471 + 32768) >> 16)


@numba.njit(cache=True, inline="always")
def _enhance(grey, value, factor):  # noqa: ANN001, ANN202
    """Pillow's ImageEnhance.Color for one channel: Image.blend in float32, truncated to uint8."""
    return np.float64(np.uint8(grey + factor * (np.float32(value) - grey)))


@numba.njit(cache=True)
def _shade(atlas, ids, ux, uy, daylight, amount, noise, vignette, sleeping):  # noqa: ANN001, ANN202
    """The local view's pixels: tile `ids[x, y]` of the atlas at cell (x, y), then LocalView._light
    (with _noise when `noise` is not empty) and _sleep, one pixel at a time with the same float64 and
    float32 operations in the same order as Crafter's numpy and Pillow code (checked against them in
    the tests). numba fuses no multiply-add into an FMA without fastmath: outputs are bit-identical."""
    out = np.empty((ids.shape[0] * ux, ids.shape[1] * uy, 3), np.float64)
    dark, f04, f00 = 1 - daylight, np.float32(0.4), np.float32(0.0)
    for x in range(ids.shape[0]):
        for y in range(ids.shape[1]):
            tile = atlas[ids[x, y]]
            for a in range(ux):
                for b in range(uy):
                    i, j = x * ux + a, y * uy + b
                    r, g, bl = np.float64(tile[a, b, 0]), np.float64(tile[a, b, 1]), np.float64(tile[a, b, 2])
                    nr, ng, nb = tile[a, b, 0], tile[a, b, 1], tile[a, b, 2]
                    if noise.shape[0]:
                        mask = amount * vignette[i, j]
                        keep, add = 1 - mask, mask * noise[i, j]
                        nr, ng, nb = np.uint8(keep * r + add), np.uint8(keep * g + add), np.uint8(keep * bl + add)
                    grey = _grey(nr, ng, nb)
                    lr = daylight * r + dark * ((1 - 0.5) * _enhance(grey, nr, f04) + 0.5 * 0.0)
                    lg = daylight * g + dark * ((1 - 0.5) * _enhance(grey, ng, f04) + 0.5 * 16.0)
                    lb = daylight * bl + dark * ((1 - 0.5) * _enhance(grey, nb, f04) + 0.5 * 64.0)
                    if sleeping:
                        sr, sg, sb = np.uint8(lr), np.uint8(lg), np.uint8(lb)
                        grey = _grey(sr, sg, sb)
                        lr = (1 - 0.5) * _enhance(grey, sr, f00) + 0.5 * 0.0
                        lg = (1 - 0.5) * _enhance(grey, sg, f00) + 0.5 * 0.0
                        lb = (1 - 0.5) * _enhance(grey, sb, f00) + 0.5 * 16.0
                    out[i, j, 0], out[i, j, 1], out[i, j, 2] = lr, lg, lb
    return out


@functools.lru_cache(maxsize=4096)
def _item_slot(ux: int, uy: int, index: int, cols: int, item: str, amount: int) -> np.ndarray:
    """One inventory cell as ItemView draws it (item icon, then its count), at the same pixel offsets:
    positions are computed absolutely, as Crafter does, then made relative to the cell."""
    unit = np.array((ux, uy))
    cell = np.array((index % cols, index // cols)) * unit
    tile = np.zeros((ux, uy, 3), np.uint8)
    for frac, size, name in ((0.1, 0.8, item), (0.4, 0.6, str(amount) if amount in range(10) else "unknown")):
        pos = (cell + frac * unit).astype(np.int32) - cell
        texture = _TEXTURES.get(name, size * unit)
        assert (pos + texture.shape[:2] <= unit).all(), "an inventory icon would spill out of its cell"
        engine._draw_alpha(tile, pos, texture)
    return tile


# ----------------------------------------------------------------------------------------------
# The env.


class Env(crafter.Env):
    """`crafter.Env` with the hot paths replaced; see the module docstring for what is identical."""

    def __init__(self, area=(64, 64), view=(9, 9), size=(64, 64), reward=True, length=10000, seed=None,
                 semantic=True):
        """crafter.Env's arguments; `semantic=False` leaves the whole-world map out of each step's info
        (~14 us a step, 6% of one: rlgpt's CrafterEnv never passes it on)."""
        self._semantic = semantic
        view = np.array(view if hasattr(view, "__len__") else (view, view))
        size = np.array(size if hasattr(size, "__len__") else (size, size))
        seed = np.random.randint(0, 2**31 - 1) if seed is None else seed
        self._area, self._view, self._size = area, view, size
        self._reward, self._length, self._seed, self._episode = reward, length, seed, 0
        self._world = World(area, constants.materials, (12, 12))
        self._textures = _TEXTURES
        item_rows = int(np.ceil(len(constants.items) / view[0]))
        self._grid = np.array([view[0], view[1] - item_rows])  # the local view, in cells
        self._item_grid = np.array([view[0], item_rows])
        self._step = self._player = self._last_health = self._unlocked = None
        self.reward_range = None
        self.metadata = None

    def reset(self) -> np.ndarray:
        center = (self._world.area[0] // 2, self._world.area[1] // 2)
        self._episode += 1
        self._step = 0
        self._world.reset(seed=hash((self._seed, self._episode)) % (2 ** 31 - 1))
        self._update_time()
        self._player = objects.Player(self._world, center)
        self._last_health = self._player.health
        self._world.add(self._player)
        self._unlocked = set()
        _generate_world(self._world, self._player)
        return self._obs()

    def step(self, action: int):
        self._step += 1
        self._update_time()
        player = self._player
        player.action = constants.actions[action]
        self._update_objects(2 * max(self._view))
        if self._step % 10 == 0:
            self._space = {}  # balancing moves no material, so cell counts hold for the whole round
            for chunk, objs in self._world.chunks.items():
                self._balance_chunk(chunk, objs)
        obs = self._obs()
        reward = (player.health - self._last_health) / 10
        self._last_health = player.health
        unlocked = {name for name, count in player.achievements.items()
                    if count > 0 and name not in self._unlocked}
        if unlocked:
            self._unlocked |= unlocked
            reward += 1.0
        dead = player.health <= 0
        over = self._length and self._step >= self._length
        done = dead or over
        info = {
            "inventory": player.inventory.copy(),
            "achievements": player.achievements.copy(),
            "discount": 1 - float(dead),
            "semantic": self._world.semantic() if self._semantic else None,
            "player_pos": player.pos,
            "reward": reward,
        }
        if not self._reward:
            reward = 0.0
        return obs, reward, done, info

    def _update_objects(self, limit: int) -> None:
        """Crafter's `for obj in world.objects: if player.distance(obj) < limit: obj.update()`.

        The list is a snapshot taken before any update, and the distance is measured when an object's
        turn comes. The player comes first (it is added first), and no update moves another object,
        so after the player's update one vectorised distance per object gives the same answers.
        """
        world, player = self._world, self._player
        objs = world.objects
        if objs[0] is not player:  # not a world this env reset: check each object in its turn
            for obj in objs:
                if player.distance(obj) < limit:
                    obj.update()
            return
        obj_map = world._obj_map.ravel()
        cells = np.flatnonzero(obj_map)
        cells = cells[np.argsort(obj_map[cells])]  # in object order, the order of `objs`
        xs, ys = np.divmod(cells, world._obj_map.shape[1])
        player.update()
        px, py = player.pos.tolist()
        near = (np.abs(xs - px) + np.abs(ys - py) < limit).tolist()
        for obj, is_near in zip(objs[1:], near[1:], strict=True):
            if is_near:
                obj.update()

    def _balance_object(self, chunk, objs, cls, material, span_dist, despan_dist, spawn_prob, despawn_prob,
                        ctor, target_fn) -> None:
        """crafter.Env._balance_object, with each chunk's count of `material` cells taken from one
        per-round table instead of a mask per call; the mask is built only when a creature spawns."""
        xmin, xmax, ymin, ymax = chunk
        random = self._world.random
        creatures = [obj for obj in objs if isinstance(obj, cls)]
        if material not in self._space:
            csx, csy = self._world._chunk_size
            is_material = self._world._mat_map == self._world._mat_ids[material]
            rows = np.add.reduceat(is_material, np.arange(0, self._world.area[0], csx), 0)
            self._space[material] = np.add.reduceat(rows, np.arange(0, self._world.area[1], csy), 1)
        space = self._space[material][xmin // self._world._chunk_size[0], ymin // self._world._chunk_size[1]]
        target_min, target_max = target_fn(len(creatures), space)
        if len(creatures) < int(target_min) and random.uniform() < spawn_prob:
            mask = self._world.mask(*chunk, material)
            xs = np.tile(np.arange(xmin, xmax)[:, None], [1, ymax - ymin])
            ys = np.tile(np.arange(ymin, ymax)[None, :], [xmax - xmin, 1])
            xs, ys = xs[mask], ys[mask]
            i = random.randint(0, len(xs))
            pos = np.array((xs[i], ys[i]))
            empty = self._world[pos][1] is None
            away = self._player.distance(pos) >= span_dist
            if empty and away:
                self._world.add(ctor(pos))
        elif len(creatures) > int(target_max) and random.uniform() < despawn_prob:
            obj = creatures[random.randint(0, len(creatures))]
            away = self._player.distance(obj.pos) >= despan_dist
            if away:
                self._world.remove(obj)

    def render(self, size=None) -> np.ndarray:
        size = size or self._size
        unit = size // self._view
        canvas = np.zeros((size[1], size[0], 3), np.uint8)  # rows are y: Crafter's image, laid out contiguously
        view = np.concatenate([self._local_view(unit), self._item_view(unit)], 1)
        border = (size - (size // self._view) * self._view) // 2
        (x, y), (w, h) = border, view.shape[:2]
        canvas[y: y + h, x: x + w] = view.transpose((1, 0, 2))
        return canvas

    def _local_view(self, unit: np.ndarray) -> np.ndarray:
        """LocalView.__call__: the 9x7 cells' tile ids (material x creature), then one compiled pass."""
        world, player = self._world, self._player
        (gw, gh), (ux, uy) = self._grid.tolist(), (int(unit[0]), int(unit[1]))
        x0, y0 = (player.pos - self._grid // 2).tolist()
        ids = np.full((gw, gh), _OUTSIDE * len(_OBJ_TEXTURES), np.intp)
        ax0, ay0 = max(x0, 0), max(y0, 0)
        ax1, ay1 = min(x0 + gw, world.area[0]), min(y0 + gh, world.area[1])
        if ax0 < ax1 and ay0 < ay1:
            inside = (slice(ax0 - x0, ax1 - x0), slice(ay0 - y0, ay1 - y0))
            ids[inside] = world._mat_map[ax0:ax1, ay0:ay1].astype(np.intp) * len(_OBJ_TEXTURES)
            obj_map = world._obj_map[ax0:ax1, ay0:ay1]
            for i, j in zip(*obj_map.nonzero(), strict=True):
                name = world._objects[obj_map[i, j]].texture
                ids[i + ax0 - x0, j + ay0 - y0] += _OBJ_TEXTURE_IDS[name]
        daylight, shape = world.daylight, (gw * ux, gh * uy, 3)
        # LocalView._noise: at night, one uniform per view pixel from the game's own random stream.
        noise = world.random.uniform(32, 127, shape[:2]) if daylight < 0.5 else _NO_NOISE
        return _shade(_atlas(ux, uy), ids, ux, uy, daylight, 2 * (0.5 - daylight), noise,
                      _vignette(shape, 0.5), player.sleeping)

    def _item_view(self, unit: np.ndarray) -> np.ndarray:
        """ItemView.__call__ from cached cells: each cell is drawn inside its own unit x unit square."""
        (cols, rows), (ux, uy) = self._item_grid.tolist(), (int(unit[0]), int(unit[1]))
        canvas = np.zeros((cols * ux, rows * uy, 3), np.uint8)
        for index, (item, amount) in enumerate(self._player.inventory.items()):
            if amount < 1:
                continue
            x, y = (index % cols) * ux, (index // cols) * uy
            canvas[x: x + ux, y: y + uy] = _item_slot(ux, uy, index, cols, item, amount)
        return canvas
