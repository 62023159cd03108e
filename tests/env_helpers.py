"""Helpers the env tests share (tests/test_env.py, tests/test_code_action_masks.py, tests/test_crafter_api.py):
not a test module."""

from env import CodeAction, make_env


def code(name: str, body: str) -> CodeAction:
    return CodeAction(name, f"def {name}(api):\n" + body)


def sand_world(budget: int = 64, **make):
    """A fresh world whose visible 9x7 cells are all sand (no creatures spawn on it) but the player's;
    returns (env, world, player, api). Cells are then set by (dx, dy) from the player. `make`: make_env's options."""
    env = make_env("collect_wood", 0, **make)
    env.reset(seed=0)
    game = env.unwrapped._crafter
    world, player = game._world, game._player
    x, y = player.pos
    for dx in range(-4, 5):
        for dy in range(-3, 4):
            if (dx, dy) != (0, 0):
                if world[x + dx, y + dy][1] is not None:
                    world.remove(world[x + dx, y + dy][1])
                world[x + dx, y + dy] = "sand"
    return env, world, player, env.unwrapped.make_api(budget)
