"""The game backends: each game's Gymnasium env, the primitive API code actions are written against, and
its tasks and rules as the prompts show them. env.py (at the top) finds a task of either backend, turns
code actions into actions and builds vector envs; nothing here knows about code actions or agents.

    crafter_tasks.py         Crafter's tasks (one per achievement, plus the whole benchmark) and rules,
                             read from Crafter's own data.yaml
    crafter_env.py           the Crafter backend (the default): CrafterEnv, world seeds
    crafter_api.py           CrafterAPI, what Crafter's code actions are written against (the prompts' API doc)
    fastcrafter.py           the same Crafter game bit for bit, several times faster per step
    fastcrafter_worldgen.py  Crafter's world generation, compiled (fastcrafter's resets)
    minedojo_env.py          the optional MineDojo backend: its tasks, MineDojoEnv and MineDojoAPI
"""
