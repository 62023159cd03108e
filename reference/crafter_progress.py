"""The crafter program's progress routines (crafter_program.py holds its top, solve_task, and its
staying alive): craft the next tool at a table and furnace, placing either where it is needed; collect what
the next tools need and a sapling to plant; explore, digging through stone with a pickaxe. They are the
second part of the program's one source text, so they call the first part's helpers (grid, near, get_to,
...) as their own. Written by hand by the project's engineers; never LLM output.

The recipe costs are read from Crafter's own tables and filled into the text (a code action cannot import
them), so the program follows the installed version.
"""

from crafter import constants

SOURCE = '''
def station_near(g, name):
    return any(g.get((dx, dy)) == name for dx in [-1, 0, 1] for dy in [-1, 0, 1])


def craft_step(api, g, inv):
    """Make the next tool whose materials are in the inventory; place a table, or a furnace beside the
    table, where one is needed and none is in view (iron is usually found far from the first table)."""
    wants = [(tool, uses, stations) for tool, uses, stations in RECIPES if inv[tool] < 1]
    for tool, uses, stations in wants:
        if all(inv[k] >= n for k, n in uses.items()) and all(near(g, s) for s in stations):
            if craft(api, tool, stations):
                return True
    table_needed = any(all(inv[k] >= n for k, n in uses.items() if k != "wood") for tool, uses, s in wants)
    if table_needed and not near(g, "table") and inv["wood"] >= TABLE_WOOD + 1:
        return place(api, "table", walkable())
    iron_tools = inv["iron_pickaxe"] < 1 or inv["iron_sword"] < 1
    if iron_tools and inv["stone_pickaxe"] > 0 and near(g, "table") and not near(g, "furnace") \\
            and inv["stone"] >= FURNACE_STONE + (0 if inv["iron"] > 0 else 2):
        return place_furnace(api, inv)
    return False


def place_furnace(api, inv):
    """Walk to the table and place a furnace beside it: iron tools need a cell with both among its 8
    neighbours. `place` steps before it places, so never step away from the table (the furnace would land 3
    cells from it); a step to the side leaves the player next to both."""
    if not get_to(api, ["table"], inv):
        return False
    fx, fy = api.facing()
    return place(api, "furnace", walkable(), avoid=(-fx, -fy))


def craft(api, tool, stations):
    """Walk to a cell with every station among its 8 neighbours, then make the tool."""
    for attempt in range(3):
        g = grid(api)
        if all(station_near(g, s) for s in stations):
            return api.make(tool)
        routes = {(0, 0): []}
        queue = [(0, 0)]
        goal = None
        for x, y in queue:
            if all(s in [g.get((x + dx, y + dy)) for dy in [-1, 0, 1] for dx in [-1, 0, 1]] for s in stations):
                goal = routes[(x, y)]
                break
            for m, (ux, uy) in dirs().items():
                c = (x + ux, y + uy)
                if c in g and c not in routes and g[c] in walkable():
                    routes[c] = routes[(x, y)] + [m]
                    queue.append(c)
        if goal is None:
            return False
        for m in goal:
            if not api.move(m):
                break
    return False


def place(api, item, on, avoid=None):
    """Place `item` on a neighbouring cell that is one of `on`. A walkable cell can only be faced by
    stepping towards it, so prefer one with another free cell behind it to step back from; never step in
    the direction `avoid` (a (dx, dy))."""
    if api.in_front() in on:
        return api.place(item)
    g = grid(api)
    for behind_free in [True, False]:
        for m, (dx, dy) in dirs().items():
            if (dx, dy) == avoid:
                continue
            if g[(dx, dy)] in on and (not behind_free or g[(2 * dx, 2 * dy)] in walkable()):
                api.move(m)
                if api.in_front() in on:
                    return api.place(item)
    return False


def collect_step(api, g, inv):
    """Collect what the tools still to be made need, most valuable first; stone only while it is close
    once there is enough for a furnace and a pocket's wall."""
    wants = []
    if inv["wood"] < (9 if inv["iron_sword"] < 1 else 2):
        wants.append("tree")
    if inv["wood_pickaxe"] > 0 and inv["stone"] < 9:
        wants.append("stone")
    if inv["wood_pickaxe"] > 0 and inv["coal"] < 2:
        wants.append("coal")
    if inv["stone_pickaxe"] > 0 and inv["iron"] < 2:
        wants.append("iron")
    if inv["iron_pickaxe"] > 0:
        wants.append("diamond")
    for name in ["diamond", "iron", "coal", "tree", "stone"]:
        if name not in wants or not near(g, name):
            continue
        if name == "stone" and inv["stone"] >= 5 and not near_cell(g, "stone", 2):
            continue
        if get_to(api, [name], inv):
            api.do()
            return True
    return False


def sapling(api, g):
    """Hit a neighbouring grass cell until a sapling drops (each hit: probability 0.1)."""
    for m, d in dirs().items():
        if g[d] == "grass":
            api.move(m)
            if api.in_front() != "grass":
                continue
            before = api.inventory()["sapling"]
            for i in range(20):
                if threat(api) or api.steps_left() < 2:
                    return True
                api.do()
                if api.inventory()["sapling"] > before:
                    return True
            return True
    return False


def explore(api, inv):
    """Keep going the way the player faces, digging through stone with a pickaxe; turn when the way is
    blocked or lava is two cells ahead, and stop once something worth a call comes into view."""
    passable = walkable() + diggable(inv)
    order = ["up", "right", "down", "left"]
    way = [m for m, d in dirs().items() if d == api.facing()][0]
    moved = False
    for step in range(12):
        g = grid(api)
        if step > 0 and (interesting(g, inv) or threat(api)):
            return True
        ux, uy = dirs()[way]
        if g[(ux, uy)] not in passable or g.get((2 * ux, 2 * uy)) == "lava":
            turns = [order[(order.index(way) + i) % 4] for i in [1, 3, 2]]
            free = [m for m in turns if g[dirs()[m]] in passable and
                    g.get((2 * dirs()[m][0], 2 * dirs()[m][1])) != "lava"]
            if not free:
                api.noop()
                return moved
            way = free[0] if step % 2 == 0 else free[-1]
            ux, uy = dirs()[way]
        if api.steps_left() < 2:
            return moved
        if g[(ux, uy)] in diggable(inv):
            api.move(way)
            api.do()
        moved = api.move(way) or moved
    return moved


def interesting(g, inv):
    names = set(g.values())
    return ("water" in names and inv["drink"] < 6 or "cow" in names and inv["food"] < 6
            or "zombie" in names or "ripe_plant" in names or "tree" in names and inv["wood"] < 5
            or "coal" in names and inv["wood_pickaxe"] > 0 and inv["coal"] < 2
            or "iron" in names and inv["stone_pickaxe"] > 0 and inv["iron"] < 2
            or "diamond" in names and inv["iron_pickaxe"] > 0)
'''

TABLE_WOOD = constants.place["table"]["uses"]["wood"]
FURNACE_STONE = constants.place["furnace"]["uses"]["stone"]
# (tool, what it uses, the stations it needs nearby) in the order the program makes them, from Crafter's tables
RECIPES = [(tool, constants.make[tool]["uses"], constants.make[tool]["nearby"]) for tool in
           ("wood_pickaxe", "wood_sword", "stone_pickaxe", "stone_sword", "iron_pickaxe", "iron_sword")]


def source() -> str:
    """These routines' source with Crafter's recipe costs filled in."""
    return (SOURCE.replace("TABLE_WOOD", str(TABLE_WOOD)).replace("FURNACE_STONE", str(FURNACE_STONE))
            .replace("RECIPES", repr(RECIPES)))
