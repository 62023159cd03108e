"""The hand-written whole-benchmark program for Crafter: `--mode code --task crafter` with no LLM (its parts,
taken apart in crafter_parts.py, are the code actions of the reference crafter plan).

Written by hand by the project's engineers; never LLM output (whole_task.whole_task_program labels it so).
It is one code action, `solve_task(api)`, called again and again until the episode ends; each call
looks at the inventory and the 9x7 view and does the most urgent thing it can in at most one code
action's step budget, so it keeps no memory between calls (the player's facing is the one thing that
carries over: `explore` keeps going the way it faces). What it does, most urgent first:

    fight a zombie or skeleton that is next to the player (it hits every few steps)
    when tired or hurt: dig a two-cell pocket into stone, wall up its mouth, sleep or rest inside
    drink, eat a cow (when low, or topping up when one is close by), eat a ripe plant
    early on (no wood pickaxe yet), once energy drops below full: nap in the open if unhurt and no foe is in view
    early on: collect a sapling and plant it
    craft the next tool at a table (and furnace), placing either where it is needed
    collect what the next tools need: wood, stone, coal, iron, and diamonds once it can
    fight zombies and skeletons in view when healthy
    explore: keep going the way it faces, digging through stone with a pickaxe

What it scores is measured, not claimed here: `python -m bench.ablation --tasks crafter --modes code`
writes bench/results/crafter__code__s1__1000000.json.

Its source is one text in two files: here solve_task, the helpers every part uses (the view as a grid,
routes, get_to) and staying alive (fighting, drinking and eating, shelter and sleep); crafting, collecting
and exploring are in crafter_progress.py, whose recipe costs are read from Crafter's own tables, so the
program follows the installed version.
"""

from reference import crafter_progress

SOURCE = '''
def solve_task(api):
    """Whole-benchmark program for crafter: the most urgent useful thing, one call at a time."""
    inv = api.inventory()
    g = grid(api)
    if fight_adjacent(api, g):
        return True
    tired = inv["energy"] < 4 or (inv["health"] < 4 and inv["energy"] < 8)
    if tired or (inv["health"] < 7 and near(g, "zombie")) or (inv["energy"] < 7 and sealed(g)):
        if shelter_and_sleep(api, g, inv):
            return True
        if inv["wood_pickaxe"] > 0 and near(g, "stone") and get_to(api, ["stone"], inv):
            api.do()  # a stone for walling up the next pocket
            return True
    if (inv["drink"] < 6 and near(g, "water") or inv["drink"] < 8 and near_cell(g, "water", 3)) and drink(api):
        return True
    if (inv["food"] < 6 and near(g, "cow") or inv["food"] < 8 and near_cell(g, "cow", 3)) and hunt(api, "cow"):
        return True
    if near(g, "ripe_plant") and get_to(api, ["ripe_plant"], inv):
        return api.do()
    if inv["energy"] < 9 and inv["health"] == 9 and inv["wood_pickaxe"] < 1 and nap(api, g):
        return True
    early = inv["wood_pickaxe"] < 1 and not near(g, "plant")
    if early and inv["sapling"] < 1 and sapling(api, g):
        return True
    if early and inv["sapling"] > 0 and near(g, "grass") and place(api, "plant", ["grass"]):
        return True
    if craft_step(api, g, inv) or collect_step(api, g, inv):
        return True
    if inv["health"] >= 6 and fight_near(api, g, inv):
        return True
    return explore(api, inv)


def dirs():
    return {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


def walkable():
    return ["grass", "sand", "path"]


def grid(api):
    """The view keyed by (dx, dy) relative to the player."""
    view = api.view()
    return {(dx, dy): view[dy + 3][dx + 4] for dy in range(-3, 4) for dx in range(-4, 5)}


def near(g, name):
    return any(v == name for v in g.values())


def near_cell(g, name, dist):
    return any(v == name and abs(d[0]) + abs(d[1]) <= dist for d, v in g.items())


def threat(api):
    """A zombie or skeleton right next to the player: stop what this call does, the next call fights."""
    g = grid(api)
    return any(g[d] in ["zombie", "skeleton"] for d in dirs().values())


def diggable(inv):
    """What the pickaxes in the inventory can mine (mined cells become walkable path)."""
    out = []
    if inv["wood_pickaxe"] > 0:
        out += ["stone", "coal"]
    if inv["stone_pickaxe"] > 0:
        out += ["iron"]
    if inv["iron_pickaxe"] > 0:
        out += ["diamond"]
    return out


def route(g, goal, passable):
    """The moves of the shortest route in view to a cell next to a `goal` cell, the last one facing it."""
    routes = {(0, 0): []}
    queue = [(0, 0)]
    for x, y in queue:
        for m, (ux, uy) in dirs().items():
            c = (x + ux, y + uy)
            if c in routes or c not in g:
                continue
            if g[c] in goal:
                return routes[(x, y)] + [m]
            if g[c] in passable:
                routes[c] = routes[(x, y)] + [m]
                queue.append(c)
    return None


def get_to(api, goal, inv):
    """Walk, mining what the pickaxes allow, until facing a `goal` cell (True) or no route is left."""
    creatures = ["cow", "zombie", "skeleton", "arrow", "plant"]
    for attempt in range(4):
        if api.in_front() in goal:
            return True
        g = grid(api)
        moves = route(g, goal, walkable() + diggable(inv)) or route(g, goal, walkable() + diggable(inv) + creatures)
        if moves is None:
            return False
        for m in moves:
            if api.steps_left() < 2 or (goal[0] not in ["zombie", "skeleton"] and threat(api)):
                return False
            if api.move(m):
                continue
            front = api.in_front()
            if front in goal or front not in diggable(inv):
                break
            api.do()  # stone or ore in the way: mine it, then step in
            if not api.move(m):
                break
    return api.in_front() in goal


def strike(api, names):
    """Hit what the player faces while it is one of `names` (a zombie has 5 health, a skeleton 3)."""
    hits = 0
    while api.in_front() in names and hits < 12 and api.steps_left() > 1:
        api.do()
        hits += 1
    return True


def fight_adjacent(api, g):
    for m, d in dirs().items():
        if g[d] in ["zombie", "skeleton"]:
            api.move(m)  # blocked by the creature: only turns to face it
            return strike(api, ["zombie", "skeleton"])
    return False


def fight_near(api, g, inv):
    for name in ["zombie", "skeleton"]:
        if near(g, name) and get_to(api, [name], inv):
            return strike(api, [name])
    return False


def hunt(api, name):
    inv = api.inventory()
    for attempt in range(8):
        if api.steps_left() < 3 or threat(api) or not get_to(api, [name], inv):
            return attempt > 0
        api.do()
    return True


def drink(api):
    if not get_to(api, ["water"], api.inventory()):
        return False
    while api.inventory()["drink"] < 9 and api.steps_left() > 1 and not threat(api):
        api.do()
    if api.inventory()["stone"] > 2 and api.steps_left() > 1:
        api.place("stone")  # a spare stone into the water: the one place it costs nothing
    return True


def sealed(g):
    """The walkable cells connected to the player are at most three and all in view: nothing can walk in."""
    seen = [(0, 0)]
    for x, y in seen:
        for ux, uy in dirs().values():
            c = (x + ux, y + uy)
            if c not in g:
                return False
            if c not in seen and g[c] in walkable() + ["zombie", "skeleton", "cow", "arrow"]:
                seen.append(c)
    return len(seen) <= 3


def solid(name):
    """Nothing walks into this cell."""
    return name not in walkable() + ["zombie", "skeleton", "cow", "arrow", "plant", "ripe_plant", "unknown"]


def find_pocket(g, inv):
    """A cell E reachable over walkable cells and a way d such that E+d and E+2d can be mined and every
    other neighbour of those two cells is solid: the route to E and d, or None."""
    dig = diggable(inv)
    routes = {(0, 0): []}
    queue = [(0, 0)]
    for x, y in queue:
        for m, (ux, uy) in dirs().items():
            a = (x + ux, y + uy)
            b = (x + 2 * ux, y + 2 * uy)
            if g.get(a) in dig and g.get(b) in dig:
                around = [(a[0] + uy, a[1] + ux), (a[0] - uy, a[1] - ux), (b[0] + uy, b[1] + ux),
                          (b[0] - uy, b[1] - ux), (b[0] + ux, b[1] + uy)]
                if all(c in g and solid(g[c]) for c in around):
                    return routes[(x, y)], m
        for m, (ux, uy) in dirs().items():
            c = (x + ux, y + uy)
            if c in g and c not in routes and g[c] in walkable():
                routes[c] = routes[(x, y)] + [m]
                queue.append(c)
    return None


def shelter_and_sleep(api, g, inv):
    """Inside a sealed pocket: sleep until energy is full (a zombie hits a sleeper for 7), then rest while
    hurt. Outside: dig two cells into stone, step back into the first and wall up its mouth with stone,
    the only way to face the cell behind the player. With no pocket in reach, sleep in the open only
    when exhausted and no zombie is in view."""
    if sealed(g):
        while api.steps_left() > 1 and api.inventory()["energy"] < 9:
            health = api.inventory()["health"]
            api.sleep(1)  # a step at a time: the loop checks after each
            if api.inventory()["health"] < health:
                return True
        if api.steps_left() > 1 and api.inventory()["health"] < 6:
            api.noop(min(api.steps_left() - 1, 26))  # health comes back one point in about 26 steps
        api.noop()  # the first step with full energy wakes the player
        return True
    found = find_pocket(g, inv) if inv["wood_pickaxe"] > 0 and inv["stone"] > 0 else None
    if found is not None:
        moves, d = found
        for m in moves:
            if not api.move(m):
                return True
        back = {"left": "right", "right": "left", "up": "down", "down": "up"}[d]
        for step in range(2):
            api.move(d)  # faces the stone (a blocked step only turns), mines it, steps in
            api.do()
            api.move(d)
        api.move(back)
        api.place("stone")
        return True
    if inv["energy"] < 2 and not near(g, "zombie"):
        return sleep_in_open(api)
    return False


def sleep_in_open(api):
    """Sleep until energy is full (the next step wakes the player: wake_up); stop when hurt (damage wakes a
    sleeper) or once a zombie or skeleton is next to the player."""
    while api.steps_left() > 1 and api.inventory()["energy"] < 9 and not threat(api):
        health = api.inventory()["health"]
        api.sleep(1)  # a step at a time: the loop checks after each
        if api.inventory()["health"] < health:
            return True
    return True


def nap(api, g):
    """Sleep off the first point of energy lost, for wake_up (many episodes end before a pocket's sleep).
    Before the wood pickaxe it is day (zombies spawn only when it gets dark and the ones left despawn), and
    a nap from energy 8 is a dozen steps; so only with no zombie, skeleton or arrow in view, and (the caller)
    at full health, which a zombie's hit on a sleeper (7) cannot take."""
    if any(near(g, name) for name in ["zombie", "skeleton", "arrow"]):
        return False
    return sleep_in_open(api)
'''


def program_source() -> str:
    """The whole program's source, `solve_task` first (this file's part, then crafter_progress.py's, with
    Crafter's recipe costs filled in)."""
    return (SOURCE + "\n" + crafter_progress.source()).lstrip("\n")
