"""The primitive API for Crafter: what code actions are written against, its docstrings the API doc every
prompt shows (core.api_doc). The step accounting is core.PrimitiveAPI's; the env it acts in is crafter_env's.

Read top to bottom: the API -> the 9x7 view as names (also what initiation conditions read) -> small helpers.
"""

from __future__ import annotations

from collections import deque

from crafter import constants

from core import PrimitiveAPI
from envs.crafter_tasks import ACTIONS, recipe_table

DIRECTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


class CrafterAPI(PrimitiveAPI):
    """Crafter for code actions. Positions are (dx, dy) relative to the player: dx > 0 is right, dy > 0 is
    down; the api sees dx in -4..4 and dy in -3..3 (night's darkness hides nothing from it). Cell names:
    materials water, grass, stone, path, sand, tree, lava, coal, iron, diamond, table, furnace; creatures
    cow, zombie, skeleton and arrow, and plant (a growing sapling) and ripe_plant, each named instead of
    the material under it; "player" at (0, 0); "unknown" outside the world. Walkable: grass, sand, path;
    walking into lava is death; everything else, creatures included, blocks. Inventory health, food,
    drink and energy (0..9): food falls by 1 about every 25 steps, drink every 20, energy every 30 (slower
    asleep); health recovers while none of them is 0, falls while one is, and the episode ends at 0.
    Zombies hit for 2 (7 on a sleeping player), arrows for 2. A cow takes 3 hits, a zombie 5, a skeleton
    3 (a sword hits for 2, 3 or 5: the best one held counts). Every acting call takes real environment
    steps, one per action."""

    RECIPES = recipe_table()
    _QUERIES = ("view", "inventory", "facing", "in_front", "steps_left")  # read the state only: sandbox/host.py

    def _cell(self, dx: int, dy: int) -> str:
        x, y = self._env._crafter._player.pos.tolist()
        return _name(*self._env._crafter._world[x + dx, y + dy])

    def view(self) -> list[list[str]]:
        """The visible 9x7 cells as names (a creature or plant hides the material under it):
        view()[dy + 3][dx + 4]; the player is view()[3][4]."""
        return view_names(self._env._crafter)

    def nearest(self, name: str) -> tuple[int, int] | None:
        """(dx, dy) of the visible cell holding `name` with the least |dx| + |dy| (ties: smaller dx, then
        smaller dy; what blocks the way is ignored), or None."""
        view = self.view()
        return next(((dx, dy) for _, dx, dy in _BY_DISTANCE if view[dy + 3][dx + 4] == name), None)

    def inventory(self) -> dict[str, int]:
        """Counts (0..9) by these keys: health, food, drink, energy, sapling, wood, stone, coal, iron, diamond,
        wood_pickaxe, stone_pickaxe, iron_pickaxe, wood_sword, stone_sword, iron_sword."""
        return dict(self._env._crafter._player.inventory)

    def facing(self) -> tuple[int, int]:
        """The direction the player faces, as (dx, dy)."""
        return tuple(int(v) for v in self._env._crafter._player.facing)

    def in_front(self) -> str:
        """The name of the cell the player faces (what `do` and `place` act on; a creature or plant there
        is named, not the material under it)."""
        return self._cell(*self.facing())

    def move(self, direction: str, times: int = 1) -> bool:
        """Step left/right/up/down `times` times. A blocked step only turns the player to face that way.
        Returns True if the player ended on a different cell."""
        start = tuple(self._env._crafter._player.pos)
        for _ in range(times):
            self._act(ACTIONS.index("move_" + _direction(direction)))
        return tuple(self._env._crafter._player.pos) != start

    def do(self, times: int = 1) -> bool:
        """Interact with the facing cell `times` times: collect a material (see Recipes), hit a creature,
        drink water, eat a ripe plant. Returns True if the inventory changed (counts stop at 9, and hits
        before the last one change nothing)."""
        before = self.inventory()
        for _ in range(times):
            self._act(ACTIONS.index("do"))
        return self.inventory() != before

    def place(self, item: str) -> bool:
        """Place stone, table, furnace or plant on the facing cell (see Recipes). True if it was placed."""
        if item not in constants.place:
            raise ValueError(f"place() takes one of {sorted(constants.place)}, not {item!r}")
        self._act(ACTIONS.index("place_" + item))
        return self.in_front() == item

    def make(self, item: str) -> bool:
        """Craft wood/stone/iron_pickaxe or _sword (see Recipes: a table nearby, for iron a furnace too).
        True if its count went up."""
        if item not in constants.make:
            raise ValueError(f"make() takes one of {sorted(constants.make)}, not {item!r}")
        before = self.inventory()[item]
        self._act(ACTIONS.index("make_" + item))
        return self.inventory()[item] > before

    def sleep(self, max_steps: int | None = None) -> bool:
        """Sleep until the player is awake again, in at most `max_steps` steps (default and at most: the call's
        steps_left(); at least 1). The player falls asleep only with energy below 9 (with 9 the one step does
        nothing and True is returned). Asleep, energy rises by 1 about every 11 steps (about 100 steps from 0
        to 9); the player wakes on the step after it reaches 9 (the wake_up achievement) or on a step that
        costs health (a zombie hits a sleeper for 7). While it sleeps the game turns every action into sleep:
        move, do, place, make (of this call, of a later call, or the RL agent's own) each take their step and
        do nothing until it wakes. Returns True if the player is awake when it returns, False if the steps ran
        out first (it sleeps on). Sleeping never stops the call: after False with steps_left() at 0, return
        (any acting call with no step left stops the call, "stopped: step_budget")."""
        player, action = self._env._crafter._player, ACTIONS.index("sleep")
        steps = min(self.steps_left(), self.steps_left() if max_steps is None else int(max_steps))
        self._act(action)  # one step at least: with none left this stops the call, as every acting call does
        for _ in range(steps - 1):
            if not player.sleeping:
                break
            self._act(action)
        return not player.sleeping

    def noop(self, times: int = 1) -> None:
        """Wait `times` steps."""
        for _ in range(times):
            self._act(ACTIONS.index("noop"))

    def go_to(self, name: str, max_steps: int = 20) -> bool:
        """Walk to the visible `name` nearest by walking path and face it, in at most `max_steps` steps
        (each also counts against steps_left()). The path is a breadth-first search over the walkable cells
        of the 9x7 view, redone before every step, so moving creatures are followed and a target the view
        gives no path to is passed over for the next nearest. Returns True when facing `name`; False as
        soon as no visible `name` can be reached (at once, with no step, if none can), or when `max_steps`
        run out."""
        for _ in range(max_steps):
            if self.in_front() == name:
                return True
            step = self._first_step(name)
            if step is None:
                return False
            self._act(ACTIONS.index("move_" + step))
        return self.in_front() == name

    def _first_step(self, name: str) -> str | None:
        """Breadth-first search over the visible walkable cells; the first move towards `name`."""
        view = self.view()
        grid = {(dx, dy): view[dy + 3][dx + 4] for dy in range(-3, 4) for dx in range(-4, 5)}
        first: dict[tuple[int, int], str | None] = {(0, 0): None}
        queue = deque([(0, 0)])
        while queue:
            x, y = queue.popleft()
            for word, (ux, uy) in DIRECTIONS.items():
                nxt = (x + ux, y + uy)
                if grid.get(nxt) == name:  # stand here and face it: a blocked move only turns
                    return first[(x, y)] or word
                if nxt not in first and grid.get(nxt) in constants.walkable:
                    first[nxt] = first[(x, y)] or word
                    queue.append(nxt)
        return None


def _view_box(crafter) -> tuple[int, int, int, int]:
    """x0, x1, y0, y1 of the 9x7 cells around the player: the api's view."""
    x, y = crafter._player.pos.tolist()
    return x - 4, x + 5, y - 3, y + 4


def view_names(crafter) -> list[list[str]]:
    """The 9x7 cells around the player as names, rows from top: [dy + 3][dx + 4] (CrafterAPI.view)."""
    world, (x0, x1, y0, y1) = crafter._world, _view_box(crafter)
    if hasattr(world, "cell_names"):  # fastcrafter: the same names from two slices of its maps
        return world.cell_names(x0, x1, y0, y1, _name)
    return [[_name(*world[x, y]) for x in range(x0, x1)] for y in range(y0, y1)]


def view_set(crafter) -> set[str]:
    """The names of view_names as a set, for code actions' initiation conditions."""
    world = crafter._world
    if hasattr(world, "names_in"):  # fastcrafter: from the ids in the same two slices
        return world.names_in(*_view_box(crafter), _name)
    return {name for row in view_names(crafter) for name in row}


def _name(material: str | None, obj: object) -> str:
    """A cell's name in the api: its creature or object if any, else its material ("unknown" off the world)."""
    if obj is not None:
        name = type(obj).__name__.lower()
        return "ripe_plant" if name == "plant" and obj.ripe else name
    return material or "unknown"


# the visible cells but the player's, closest first (walking distance ignored), ties by dx, then dy
_BY_DISTANCE = sorted((abs(dx) + abs(dy), dx, dy) for dy in range(-3, 4) for dx in range(-4, 5) if (dx, dy) != (0, 0))


def _direction(word: str) -> str:
    if word not in DIRECTIONS:
        raise ValueError(f"direction must be one of {list(DIRECTIONS)}, not {word!r}")
    return word
