"""Helpers of the hand-written reference skills (skills.py): plain functions whose SOURCE is pasted into
each skill that calls them, because a code action is one self-contained source text (that is what the
sandbox checks and compiles). They live apart from skills.py so that file holds the skills and their
variants; nothing here is imported by the sandbox, only these strings travel.

Written by hand by the project's engineers, like everything in skills.py; never LLM output.
"""


FACE_FREE = '''
def face_free(api, free):
    """Face a cell whose name is in `free` (to place something on it), in one step if it can.
    A walkable cell cannot be faced without stepping onto it, so step towards a free cell two away."""
    if api.in_front() in free:
        return True
    view = api.view()
    fx, fy = api.facing()
    moves = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    order = [d for d in moves if moves[d] != (-fx, -fy)] + [d for d in moves if moves[d] == (-fx, -fy)]
    for d in order:  # stepping backwards last keeps the player next to what it just walked to
        dx, dy = moves[d]
        if view[3 + dy][4 + dx] in ["grass", "sand", "path"] and view[3 + 2 * dy][4 + 2 * dx] in free:
            api.move(d)
            return api.in_front() in free
    return any(api.go_to(name, 10) for name in free)  # none close by: walk until facing one
'''

FACE_FREE_BESIDE = '''
def face_free_beside(api, free, station):
    """Face a cell whose name is in `free` and that has, among its 8 neighbours, a walkable cell next to a
    visible `station`: what is placed there and the station are then both within reach of that cell (iron
    tools need a table and a furnace so). A step turns the player its way, so the walk ends with a step
    towards the cell. False if no such walk is in view."""
    for attempt in range(3):  # a creature in the way: look again
        route = route_to_face_beside(api, free, station)
        if route is None:
            return False
        if all(api.move(move) for move in route):
            return api.in_front() in free
    return False


def route_to_face_beside(api, free, station):
    """The moves of the shortest walk in view that ends facing such a cell ([] if the player faces one)."""
    view = api.view()
    names = {(x, y): view[3 + y][4 + x] for y in range(-3, 4) for x in range(-4, 5)}
    moves = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    around = [(i, j) for i in [-1, 0, 1] for j in [-1, 0, 1] if (i, j) != (0, 0)]
    stands = [c for c, name in names.items() if name in ["grass", "sand", "path", "player"]
              and any(names.get((c[0] + i, c[1] + j)) == station for i, j in around)]
    good = [c for c, name in names.items() if name in free
            and any((c[0] + i, c[1] + j) in stands for i, j in around)]
    fx, fy = api.facing()
    if (fx, fy) in good:
        return []
    routes = {(0, 0): []}  # cell -> the moves that reach it
    queue = [(0, 0)]
    for x, y in queue:  # breadth-first: the list grows while it is read
        for move, (ux, uy) in moves.items():
            cell = (x + ux, y + uy)
            if names.get(cell) not in ["grass", "sand", "path"]:
                continue
            if (cell[0] + ux, cell[1] + uy) in good:
                return routes[(x, y)] + [move]
            if cell not in routes:
                routes[cell] = routes[(x, y)] + [move]
                queue.append(cell)
    return None
'''

MINE = '''
def mine(api, name):
    """Follow the shortest route in view to the nearest visible `name`, mining the stone or ore in
    the way, then collect it. A creature in the way makes it plan again."""
    for attempt in range(3):
        route = route_to(api, name)
        if route is None:
            return False
        for move in route:
            if api.move(move) or api.in_front() == name:
                continue
            api.do()  # stone or ore in the way: mine it, then step in
            if not api.move(move):
                break
        if api.in_front() == name:
            api.do()
            return api.in_front() != name  # collected: the cell changed (also when the inventory is full)
    return False


def route_to(api, name):
    """The moves of the shortest route in view to a cell next to `name`, the last one facing it, over
    walkable cells and the stone and ores our pickaxes can break; None if there is none. Only grass,
    sand and path are ever stepped on, so lava and water are never entered."""
    inventory = api.inventory()
    passable = ["grass", "sand", "path", "tree"]
    if inventory["wood_pickaxe"] > 0:
        passable += ["stone", "coal"]
    if inventory["stone_pickaxe"] > 0:
        passable += ["iron"]
    view = api.view()
    moves = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    routes = {(0, 0): []}  # cell -> the moves that reach it
    queue = [(0, 0)]
    for x, y in queue:  # breadth-first: the list grows while it is read
        for move, (ux, uy) in moves.items():
            cell = (x + ux, y + uy)
            if cell in routes or abs(cell[0]) > 4 or abs(cell[1]) > 3:
                continue
            what = view[3 + cell[1]][4 + cell[0]]
            if what == name:
                return routes[(x, y)] + [move]
            if what in passable:
                routes[cell] = routes[(x, y)] + [move]
                queue.append(cell)
    return None
'''

CRAFT = '''
def craft(api, item, uses, stations):
    """Make `item` with the materials `uses`, first walking into reach of every station it needs."""
    inventory = api.inventory()
    if any(inventory[k] < n for k, n in uses.items()):
        return False
    walkable = ["grass", "sand", "path"]
    for attempt in range(6):
        route = route_to_stations(api, stations, walkable)
        if route is None:  # only creatures are in the way: they move, so plan through them
            route = route_to_stations(api, stations, walkable + ["cow", "zombie", "skeleton"])
        if route is None:
            return False
        if all(api.move(move) for move in route):  # stops at a blocked move, then plans again
            return api.make(item)
    return False


def route_to_stations(api, stations, through):
    """The moves of the shortest walk in view, over cells named in `through`, to a cell with every
    station among its 8 neighbours ([] if the player stands on one), or None if there is none."""
    view = api.view()
    moves = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    routes = {(0, 0): []}  # cell -> the moves that reach it
    queue = [(0, 0)]
    for x, y in queue:  # breadth-first: the list grows while it is read
        around = [view[3 + y + dy][4 + x + dx] for dy in [-1, 0, 1] for dx in [-1, 0, 1]
                  if abs(x + dx) <= 4 and abs(y + dy) <= 3]
        if all(s in around for s in stations):
            return routes[(x, y)]
        for move, (ux, uy) in moves.items():
            cell = (x + ux, y + uy)
            if cell in routes or abs(cell[0]) > 4 or abs(cell[1]) > 3:
                continue
            if view[3 + cell[1]][4 + cell[0]] in through:
                routes[cell] = routes[(x, y)] + [move]
                queue.append(cell)
    return None
'''

HUNT = '''
def hunt(api, name):
    """Hit the nearest visible creature `name` until it is gone; True when it was defeated."""
    food = api.inventory()["food"]
    while api.steps_left() > 1:
        if not api.go_to(name, api.steps_left() - 1):
            return False
        fx, fy = api.facing()
        api.do()
        if api.inventory()["food"] > food:
            return True
        view = api.view()
        nearby = [view[3 + fy + dy][4 + fx + dx] for dx, dy in [(-1, 0), (1, 0), (0, -1), (0, 1)]]
        if api.in_front() != name and name not in nearby:  # gone, not stepped aside: it was defeated
            return True
    return False
'''

SEARCH = '''
def search(api, name, max_steps=32):
    """Walk until a `name` is in view: straight on while the way is grass, sand or path, turning to the
    next free way when blocked (never onto lava or water). True once one is in view. At most
    `max_steps` steps, so half of a code action's budget is left to reach and use what it finds."""
    moves = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    order = ["up", "right", "down", "left"]  # clockwise
    way = [d for d in order if moves[d] == tuple(api.facing())][0]
    for step in range(max_steps):
        if api.nearest(name) is not None:
            return True
        view = api.view()
        free = [d for d in moves if view[3 + moves[d][1]][4 + moves[d][0]] in ["grass", "sand", "path"]]
        if not free or api.steps_left() < 2:
            return False
        if way not in free:  # blocked: turn clockwise to the next free way
            turns = [order[(order.index(way) + i) % 4] for i in range(1, 5)]
            way = [d for d in turns if d in free][0]
        api.move(way)
    return api.nearest(name) is not None
'''
