"""What an iteration's training episodes say, for the critic and for the rollback rule.

Every number here is over the training episodes that finished in one iteration, and carries its n: the
critic reads these (not the handful of evaluation episodes) and the rollback rule compares them between
two iterations. From the episodes' (length, success) pairs (code_actions.CodeStats collects them, for
every backend): how long episodes were, and how long the successful ones took. From Crafter's episode
rows (stats.jsonl: achievements and how each episode ended): where failed episodes stalled in the
task's chain, how they ended (died of what, ran out of time), how much of each item the chain needs the
successful ones gathered, and, for `crafter` (no single goal, so success is always 0), the Crafter score
with its bootstrap standard error and each achievement's rate (RunningScore: the same score, no standard
error, over the iteration's episodes finished so far, for the progress bar).

    python evidence.py runs/<run_dir>              # these numbers for each iteration of a finished Crafter run
    python evidence.py runs/<run_dir> --parts 3    # the score (or success) over each third of its env steps
    python evidence.py runs/<a> --parts 5 --against runs/<b>   # ... and b's on the same worlds, paired
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np

import report
from env import ACHIEVEMENTS, get_task, is_crafter, row_success
from envs.crafter_tasks import gained, task_uses

# The Crafter score's standard error comes from this many bootstrap resamples of the iteration's
# episodes (drawn with replacement, the score recomputed each time). The score is a geometric mean of
# per-achievement rates, so no closed form gives its spread; 200 resamples pin a standard error to
# about 5% of itself, which is all a noise margin needs. The generator is seeded: a rerun decides alike.
SCORE_BOOTSTRAP = 200


def episode_measures(episodes: list[tuple[int, bool]]) -> dict:
    """The lengths of the iteration's training episodes (env steps each, code actions' steps included):
    the mean over all n of them, and the mean, standard deviation and standard error over those that
    succeeded (an episode ends when the task is done, so this is how long success took)."""
    lengths = np.array([n for n, _ in episodes], dtype=float)
    won = np.array([n for n, ok in episodes if ok], dtype=float)
    sd = float(won.std(ddof=1)) if len(won) > 1 else None
    return {"episodes": len(lengths), "mean_length": round(float(lengths.mean()), 1) if len(lengths) else None,
            "successes": len(won), "success_mean_length": round(float(won.mean()), 1) if len(won) else None,
            "success_length_sd": None if sd is None else round(sd, 1),
            "success_length_se": None if sd is None else round(sd / math.sqrt(len(won)), 2)}


def stall_shares(task_name: str, rows: list[dict]) -> dict:
    """From Crafter episode rows (env.stats_row: achievement_* counts), which prerequisite the failed
    episodes (the task's success test never held) stopped at: {"failed_episodes": n, "never_reached":
    {achievement: share of the n that never unlocked it}}, prerequisites in chain order."""
    task = get_task(task_name)
    failed = [r for r in rows if task.success and not row_success(task, r)]
    shares = {a: round(sum(not r.get(f"achievement_{a}", 0) for r in failed) / len(failed), 3)
              for a in task.prerequisites} if failed else {}
    return {"failed_episodes": len(failed), "never_reached": shares}


def episode_ends(task_name: str, rows: list[dict]) -> dict:
    """How the iteration's failed training episodes ended, counted: {"failed_episodes": n, "ends": {"died:
    zombie": 12, "time limit": 30, ...}}, most common first. For `crafter` (no goal) every episode counts.
    An end is what crafter_env wrote into the row ("died: <cause>", "time limit"); "unknown" for rows
    written before it did."""
    task = get_task(task_name)
    failed = [r for r in rows if not row_success(task, r)]
    ends = Counter(r.get("end") or "unknown" for r in failed)
    return {"failed_episodes": len(failed), "ends": dict(ends.most_common())}


def gathered(task_name: str, rows: list[dict]) -> dict:
    """How much of each item the task needs (crafter_tasks.task_uses: its chain's recipes and its success test)
    its successful training episodes gathered: {"successes": how many, "items": {item: {"mean": units gathered
    per successful episode, "uses": units the task needs, "by": the achievement that gathers it}}}. Far more
    than the task needs means the episodes were spent gathering instead of finishing (a shaped item pays for
    each unit)."""
    task = get_task(task_name)
    if not task.success:
        return {}
    won = [r for r in rows if row_success(task, r)]
    by = {gained(a): a for a in ACHIEVEMENTS if gained(a)}
    items = {item: {"mean": round(sum(r.get(f"achievement_{by[item]}", 0) for r in won) / len(won), 2),
                    "uses": uses, "by": by[item]}
             for item, uses in task_uses(task).items() if item in by} if won else {}
    return {"successes": len(won), "items": items}


class RunningScore:
    """The Crafter score of one iteration's training episodes finished so far, for the progress bar: each
    update() reads only the rows stats.jsonl gained since the last (no bootstrap, so it is cheap to ask often);
    the rows of other iterations are skipped. Reading from the file's start, it counts the rows a resumed
    iteration wrote before its checkpoint too."""

    def __init__(self, stats_path: Path, iteration: int):
        self.path, self.iteration, self.offset = Path(stats_path), iteration, 0
        self.unlocked, self.episodes = np.zeros(len(ACHIEVEMENTS)), 0

    def update(self) -> str:
        """'<score> (n=<episodes>)', or '-' before any episode of the iteration has finished."""
        if self.path.is_file():
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                new = f.read()
            lines = new[:new.rfind(b"\n") + 1]  # a row still being written waits for the next update
            self.offset += len(lines)
            for line in lines.splitlines():
                row = json.loads(line)
                if row.get("iteration") == self.iteration:
                    self.unlocked += [row.get(f"achievement_{a}", 0) > 0 for a in ACHIEVEMENTS]
                    self.episodes += 1
        if not self.episodes:
            return "-"
        return f"{float(report.score_of(self.unlocked / self.episodes)):.1f} (n={self.episodes})"


def crafter_score(rows: list[dict]) -> dict | None:
    """The Crafter score of these episodes (as report.crafter_score, over these rows only), its bootstrap
    standard error (SCORE_BOOTSTRAP resamples), n, and each achievement's unlock share; None without rows."""
    if not rows:
        return None
    unlocked = np.array([[r.get(f"achievement_{a}", 0) > 0 for a in ACHIEVEMENTS] for r in rows], dtype=float)
    n = len(rows)
    draws = np.random.default_rng(0).integers(0, n, size=(SCORE_BOOTSTRAP, n))
    resampled = np.stack([np.bincount(d, minlength=n) for d in draws]) @ unlocked / n
    rates = unlocked.mean(0)
    return {"score": round(float(report.score_of(rates)), 2),
            "se": round(float(report.score_of(resampled).std(ddof=1)), 2),
            "episodes": n, "achievements": {a: round(float(p), 3) for a, p in zip(ACHIEVEMENTS, rates, strict=True)}}


def placed(rows: list[dict]) -> list[int]:
    """Where each finished training episode lies in the run: the env steps of all episodes finished so far, its
    own included. stats.jsonl (one row per episode, in the order they finished) has no step counter, so this
    trails the trainer's counter by the steps of the episodes still running then."""
    return np.cumsum([r["length"] for r in rows]).astype(int).tolist()


def shares(rows: list[dict], parts: int) -> list[list[dict]]:
    """The rows split into `parts` stretches of equal env steps: stretch k holds the episodes placed in
    (k / parts, (k + 1) / parts] of the steps all of them took (the steps of episodes unfinished at the end
    are in none). Where an iteration's episodes cannot tell a trend inside it (one plan, `--iterations 1`),
    these can: how the score rose while the same plan trained."""
    positions = placed(rows)
    total = positions[-1] if positions else 0
    return [[r for p, r in zip(positions, rows, strict=True) if total * k / parts < p <= total * (k + 1) / parts]
            for k in range(parts)]


def no_goal(task_name: str) -> bool:
    """`crafter`: no single goal, so success is always 0 and the Crafter score measures the episodes."""
    return is_crafter(task_name) and not get_task(task_name).success


def score_row(score: dict | None) -> dict | None:
    """crafter_score's numbers as the history keeps them: score, standard error, episodes (None without)."""
    return {key: score[key] for key in ("score", "se", "episodes")} if score else None


def iteration_evidence(task_name: str, episodes: list[tuple[int, bool]], rows: list[dict]) -> dict:
    """Everything above for one iteration: `episodes` as CodeStats collects them, `rows` the Crafter rows of
    the same episodes (empty for another backend)."""
    crafter = is_crafter(task_name)
    return {"episode_lengths": episode_measures(episodes),
            "stalls": stall_shares(task_name, rows) if crafter else {},
            "ends": episode_ends(task_name, rows) if crafter else {},
            "gathered": gathered(task_name, rows) if crafter else {},
            "score": crafter_score(rows) if no_goal(task_name) else None}


def critic_stats(args, num_steps: int, iteration: int, steps: tuple[int, int], tally, ev: dict,
                 rows: list[dict]) -> dict:
    """What the critic reads after iteration `iteration` (1-based), written to iter_k/stats.json: the training
    episodes that finished in it (`tally`, iteration_record.IterationTally, and their Crafter `rows`), between env
    steps `steps` (first, last), and the evaluation episodes `ev` apart, each with its n."""
    success, n = tally.train_success()
    return {"task": args.task, "mode": args.mode, "iteration": iteration, "env_steps": steps[1],
            "iteration_steps": list(steps), "success_rate": success, "success_episodes": n,
            "success_trend": tally.trend[-10:], "rollout": {"num_envs": args.num_envs, "num_steps": num_steps},
            "decisions": tally.stats.decisions, "code_actions": tally.stats.summary(), "order": tally.order(),
            "eval_success_rate": ev["success_rate"], "eval_episodes": args.eval_episodes,
            "eval_mean_length": ev["mean_length"], "max_macro_steps": args.max_macro_steps,
            "eval_score": score_row(crafter_score(ev["rows"])) if no_goal(args.task) else None,
            **iteration_evidence(args.task, tally.stats.episodes, rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--parts", type=int, default=0, help="instead of each iteration's numbers: the Crafter "
                        "score (on crafter) or the training success over each of this many equal stretches of the "
                        "env steps the finished training episodes took")
    parser.add_argument("--against", type=Path, help="with --parts: another run of the same task and seed; each "
                        "stretch also scores both runs on the worlds both played (paired: a difference is the "
                        "players')")
    args = parser.parse_args(argv)
    for run in [args.run_dir] + ([args.against] if args.against else []):
        if not (run / "config.json").is_file():
            parser.error(f"{run}: no config.json there (not a run directory?)")
    if args.parts < 0 or (args.against and not args.parts):
        parser.error(f"--parts must be >= 1 (0: per iteration; --against needs it), not {args.parts}")
    task = json.loads((args.run_dir / "config.json").read_text())["args"]["task"]
    rows = report.read_jsonl(args.run_dir / "stats.jsonl")
    if args.parts:
        unfinished = sum(r["length"] for r in report.read_jsonl(args.run_dir / "unfinished.jsonl"))
        against = report.read_jsonl(args.against / "stats.jsonl") if args.against else None
        print_shares(task, rows, args.parts, unfinished, against)
        return 0
    for iteration in sorted({r["iteration"] for r in rows}):
        its = [r for r in rows if r["iteration"] == iteration]
        episodes = [(r["length"], row_success(get_task(task), r)) for r in its]
        print(f"iteration {iteration}:", iteration_evidence(task, episodes, its))
    return 0


def matched(rows: list[dict], other: list[dict]) -> list[tuple[dict, dict]]:
    """Each of `rows` whose world (the row's world `seed`) an episode of `other` also played, with that episode (the
    last, where two share a world): two runs of one seed play largely the same worlds (crafter_env.world_seed), so
    a difference over these pairs is the players', not the worlds'."""
    by_world = {r.get("seed"): r for r in other}
    return [(r, by_world[r["seed"]]) for r in rows if r.get("seed") is not None and r["seed"] in by_world]


def print_shares(task_name: str, rows: list[dict], parts: int, unfinished: int = 0,
                 against: list[dict] | None = None) -> None:
    """One line per stretch of `shares`: its env steps, its score or success, its n (and the whole run's);
    `unfinished`: the env steps of the episodes the run left unfinished, in no stretch; `against`: another run's
    rows, scored with this one's over the worlds both played (`matched`)."""
    total = placed(rows)[-1] if rows else 0
    print(f"{len(rows)} finished training episodes, {total} env steps (of the run's {total + unfinished}; the "
          f"other {unfinished} are in episodes unfinished at its end), in {parts} stretches of equal env steps:")

    task = get_task(task_name)

    def measure(its: list[dict]) -> tuple[str, float | None]:
        if no_goal(task_name):
            s = crafter_score(its)
            return (f"Crafter score {s['score']:.2f} +- {s['se']:.2f}", s["score"]) if s else ("Crafter score: none",
                                                                                                 None)
        ok = [row_success(task, r) for r in its]
        return (f"training success {np.mean(ok):.3f}", float(np.mean(ok))) if ok else ("training success: none",
                                                                                         None)

    for k, its in enumerate(shares(rows, parts) + [rows]):
        where = "whole run" if k == parts else f"env steps {total * k // parts}-{total * (k + 1) // parts}"
        line = f"  {where}: {measure(its)[0]} (n={len(its)} episodes)"
        if against is not None:
            pairs = matched(its, against)
            (mine, a), (theirs, b) = measure([x for x, _ in pairs]), measure([y for _, y in pairs])
            line += (f"; on the {len(pairs)} worlds both runs played: {mine} against {theirs}"
                     + (f", difference {a - b:+.2f}" if a is not None and b is not None else ""))
        print(line)


if __name__ == "__main__":
    raise SystemExit(main())
