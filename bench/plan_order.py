"""Crafter's reference `rlgpt` plan played by its own order, with no learning, against the whole-game routine
(`--mode code`'s program) on the same worlds: is what RL starts from (and is taught, follow_order) as good as
the code it was taken apart from?

    python -m bench.plan_order                        # 200 episodes each, seed 1
    python -m bench.plan_order --episodes 1000 --noise 0.01

Both sides play the training worlds of `--seed` (the same world per episode index), from fresh envs, with the
step counting of training: the routine is called on every decision (a call without a step is charged a noop,
as in --mode code); the order calls, at each decision, the first part whose initiation holds that has not just
returned without True (a refusal without a step costs none and is masked until a step, as wherever RL chooses;
a failure after steps is masked for the next decision: follow_order's rule), which
is what PPO's teacher names. `--noise p` makes the order pick, with probability p per
decision, any allowed action instead (base actions included), as a policy that samples off the order would.
Prints each side's Crafter score (bootstrap standard error, n episodes), mean episode length and how its
episodes ended (shares of its n; evidence.episode_ends), and the achievements whose unlock shares differ most.
"""

import argparse
import sys

import numpy as np
from tqdm import tqdm

from code_actions import CodeAction
from core import Plan
from env import make_env
from evidence import crafter_score, episode_ends
from reference import plans, skills
from reference.whole_task import whole_task_program


def play(code_actions: list[CodeAction], order: list[int] | None, episodes: int, seed: int, noise: float,
         label: str) -> list[dict]:
    """Crafter rows of `episodes` episodes: code action 0 on every decision (order None), else the order's
    first allowed part, or with probability `noise` a uniformly drawn allowed action."""
    env = make_env("crafter", seed, code_actions=code_actions, free_refusals=order is not None)
    env.set_follow_order(order)
    rng, n_base, rows = np.random.default_rng(seed), env.n_base, []
    for _ in tqdm(range(episodes), desc=label, file=sys.stderr):
        _, info = env.reset()
        done = False
        while not done:
            if order is None:
                action = n_base
            else:
                allowed = info["action_mask"]
                if noise and rng.random() < noise:
                    action = int(rng.choice(np.flatnonzero(allowed)))
                else:  # no part allowed (each refused since the last step): the noop, as the teacher names none
                    action = next((n_base + i for i in order if allowed[n_base + i]), 0)
            _, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        rows.append(env.unwrapped.stats_row())
    env.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=200, help="episodes per side")
    parser.add_argument("--seed", type=int, default=1, help="the training world stream both sides play")
    parser.add_argument("--noise", type=float, default=0.0, help="per-decision chance the order picks at random")
    args = parser.parse_args(argv)
    if args.episodes < 1 or not 0.0 <= args.noise <= 1.0:
        parser.error("--episodes must be >= 1 and --noise in [0, 1]")
    plan = Plan.from_dict(plans.reference_plan("crafter"))
    parts = [skills.skill_for(s.name) for s in plan.code_subactions]
    sides = {"routine (--mode code)": play([whole_task_program("crafter")], None, args.episodes, args.seed, 0.0,
                                          "routine"),
             f"plan's order{f', noise {args.noise:g}' if args.noise else ''}":
                 play(parts, list(range(len(parts))), args.episodes, args.seed, args.noise, "order")}
    scores = {}
    for name, rows in sides.items():
        scores[name] = s = crafter_score(rows)
        print(f"{name}: Crafter score {s['score']:.2f} +- {s['se']:.2f} (n={s['episodes']} episodes), mean length "
              f"{np.mean([r['length'] for r in rows]):.1f} env steps")
        ends = episode_ends("crafter", rows)["ends"]
        print("  ends: " + ", ".join(f"{end} {count / len(rows):.3f}" for end, count in ends.items()))
    sa, sb = scores.values()  # the routine's, the order's
    diffs = sorted(sa["achievements"], key=lambda k: -abs(sa["achievements"][k] - sb["achievements"][k]))[:6]
    print(f"difference (order - routine): {sb['score'] - sa['score']:+.2f} Crafter points; largest unlock-share "
          "differences (order vs routine): " + ", ".join(
              f"{k} {sb['achievements'][k]:.3f} vs {sa['achievements'][k]:.3f}" for k in diffs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
