"""Read a run directory's own logs back into numbers, tables and plots (train.py and bench/ use it).

    python report.py runs/<run_dir>            # print the run's summary and its Crafter score

Every number here is read from files the run wrote (metrics.jsonl, stats.jsonl, config.json,
checkpoint history): nothing is typed in by hand.
"""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path

import numpy as np

import curriculum
import env
from prompts.common import CALL_ENDS


def read_jsonl(path: Path) -> list[dict]:
    """Every complete line; a line cut short by a crash mid-write is skipped, not fatal."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def success_curve(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(env steps, training success rate) at every PPO update that finished episodes."""
    rows = [r for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if "charts/success_rate" in r]
    return (np.array([r["global_step"] for r in rows], dtype=float),
            np.array([r["charts/success_rate"] for r in rows], dtype=float))


def crafter_score(stats_path: Path, budget: int | None = None) -> tuple[float, dict[str, float]]:
    """Crafter's score of the training episodes in `stats_path` (within `budget` env steps): score_of_rows."""
    episodes, steps = [], 0
    for row in read_jsonl(Path(stats_path)):
        steps += row["length"]
        if budget is not None and steps > budget:
            break
        episodes.append(row)
    return score_of_rows(episodes)


def score_of(shares: np.ndarray) -> np.ndarray:
    """Crafter's score from per-achievement unlock shares (last axis, 0..1): exp(mean(ln(1 + 100 p))) - 1, the
    rates in percent (Hafner 2021); evidence.crafter_score bootstraps it over resampled episodes."""
    return np.exp(np.log1p(100.0 * shares).mean(-1)) - 1.0


def score_of_rows(rows: list[dict]) -> tuple[float, dict[str, float]]:
    """Crafter's score of these episodes (score_of) and each achievement's success rate in percent (the share of
    these episodes that unlocked it); nan and no rates without episodes."""
    if not rows:
        return float("nan"), {}
    shares = np.array([[r.get(f"achievement_{a}", 0) > 0 for a in env.ACHIEVEMENTS] for r in rows]).mean(0)
    return float(score_of(shares)), {a: 100.0 * float(p) for a, p in zip(env.ACHIEVEMENTS, shares, strict=True)}


def whole_run_text(score: float, n: int) -> str:
    """The Crafter score of every training episode the run finished, with their n; a run too short to finish
    one says so instead of showing a score of nothing."""
    if not n:
        return "Crafter score over the training episodes: none has finished yet (n=0)."
    return f"Crafter score over all training episodes: {score:.1f} (n={n})"


def rate_text(rate: float | None, n: int) -> str:
    """A success rate with its n, as the log and summary.md show it: '0.88 (n=8)', '- (n=0)' with no episode."""
    return f"- (n={n})" if rate is None or not n or np.isnan(rate) else f"{rate:.2f} (n={n})"


def score_text(score: dict | None) -> str:
    """A Crafter score as the log and summary.md show it: '12.3 ± 1.1 (n=45)' (the bootstrap standard error,
    the episodes), '- (n=0)' with none."""
    return f"{score['score']:.1f} ± {score['se']:.1f} (n={score['episodes']})" if score else "- (n=0)"


def png_frames(frames: list[np.ndarray], count: int = 3) -> list[bytes]:
    """A few evenly spaced frames of an episode as PNG bytes, upscaled so a vision model can see them."""
    import imageio

    if not frames:
        return []
    picks = np.linspace(0, len(frames) - 1, min(count, len(frames))).astype(int)
    out = []
    for i in picks:
        buf = io.BytesIO()
        imageio.imwrite(buf, _upscale(frames[i]), format="png")
        out.append(buf.getvalue())
    return out


def _upscale(frame: np.ndarray, factor: int = 4) -> np.ndarray:
    return frame.repeat(factor, axis=0).repeat(factor, axis=1)  # (H, W, 3) -> (4H, 4W, 3)


def write_gif(path: Path, frames: list[np.ndarray]) -> None:
    import imageio

    imageio.mimsave(path, [_upscale(f) for f in frames], duration=0.1, loop=0)


def plot(curves: dict[str, list[tuple[np.ndarray, np.ndarray]]], path: Path, title: str,
         ylabel: str = "training success rate", rate: bool = True) -> None:
    """A training measure against env steps, one line per label: the mean over its runs and the spread.
    `rate`: the measure is a rate in [0, 1] (else, e.g. achievements per episode, the axis fits the data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, runs in curves.items():
        runs = [(x, y) for x, y in runs if len(x)]
        if not runs:
            continue
        grid = np.linspace(min(x.min() for x, _ in runs), max(x.max() for x, _ in runs), 50)  # none before the first
        ys = np.stack([np.interp(grid, x, y) for x, y in runs])
        ax.plot(grid, ys.mean(0), label=f"{label} (n={len(runs)})")
        if len(runs) > 1:
            ax.fill_between(grid, ys.min(0), ys.max(0), alpha=0.2)
    ax.set_xlabel("env steps (every primitive step, code actions' included)")
    ax.set_ylabel(ylabel)
    if rate:
        ax.set_ylim(-0.02, 1.02)
    ax.set_title("\n".join(textwrap.wrap(title, 64)), fontsize=10)  # long titles wrap instead of running off
    if ax.get_legend_handles_labels()[0]:  # nothing plotted (no episode finished yet): no empty legend
        ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_summary(run_dir: Path, history: list[dict], args) -> None:
    """summary.md: what was run, a row per iteration, the success plot (on `crafter` the score's) and the artefacts."""
    run_dir = Path(run_dir)
    no_goal = args.task == "crafter"  # the task with no single goal: success is always 0, the score measures it
    what, plotted = ("score", "score.png") if no_goal else ("success", "success.png")
    if no_goal:  # each iteration's training episodes, as the table's column
        scored = [h for h in history if h.get("score")]
        x, y = (np.array(v, dtype=float) for v in ([h["env_steps"] for h in scored],
                                                    [h["score"]["score"] for h in scored]))
        plot({args.mode: [(x, y)]}, run_dir / plotted, f"{args.task} ({args.mode})", rate=False,
             ylabel="Crafter score of the training episodes\nthat finished in each iteration")
    else:
        plot({args.mode: [success_curve(run_dir)]}, run_dir / plotted, f"{args.task} ({args.mode})")
    lines = [f"# {args.task}, mode {args.mode}, seed {args.seed}", "",
             f"Command: `python train.py --resume {run_dir}` continues it; config in `config.json`.", "",
             f"| iteration | env steps | train {what} (n) | eval {what} | eval length | code actions | LLM calls |",
             "|---|---|---|---|---|---|---|"]
    for h in history:
        train = "-" if h["train_success"] is None else f"{h['train_success']:.2f}"
        train += f" (n={h['train_episodes']})" if "train_episodes" in h else ""
        evaluated = rate_text(h["eval_success"], args.eval_episodes)  # every evaluation plays --eval-episodes
        if no_goal:  # the Crafter score, its bootstrap standard error and n (evidence.crafter_score)
            train, evaluated = score_text(h.get("score")), score_text(h.get("eval_score"))
        code = ", ".join(n + (" (hand-written)" if n in h.get("hand_written", []) else "") for n in h["code_actions"])
        lines.append(f"| {h['iteration']} | {h['env_steps']} | {train} | {evaluated} "
                     f"| {'-' if np.isnan(h['eval_length']) else round(h['eval_length'])} | {code or '-'} "
                     f"| {h['llm_calls']} |")
    if history:
        reused = ", ".join(dict.fromkeys(history[-1].get("reused", []))) or "none"
        lines += ["", f"LLM calls made by this run: {history[-1]['llm_calls']} (plans, code and critiques; HTTP "
                  f"retries not counted). Skills reused from the skill library, with no call to write them: {reused}."]
    chain = next((h["curriculum"] for h in reversed(history) if h.get("curriculum")), None)
    if chain and (run_dir / "stats.jsonl").is_file():  # the planner's chain, trained as a curriculum
        stages = "; ".join(f"{s['subtask']} until step {s['end']} ({s['why']})" for s in chain["stages"]) or "none"
        lines += ["", "Success per sub-task (share of the training episodes that ended in each iteration and "
                  f"reached it). Curriculum stages done: {stages}; now training: {chain['current']}.", ""]
        lines += curriculum.subtask_rows(read_jsonl(run_dir / "stats.jsonl"), chain["subtasks"])
    if no_goal:
        rows = read_jsonl(run_dir / "stats.jsonl")  # read once: the score, its n and the table
        score, rates = score_of_rows(rows)
        lines += ["", whole_run_text(score, len(rows))]
        if rates:
            lines += ["", "| achievement | success % |", "|---|---|"] + [f"| {a} | {p:.1f} |" for a, p in rates.items()]
    lines += code_action_rows(run_dir)
    lines += ["", f"![{what}]({plotted})", "",
              "Artefacts: `iter_k/plan.json`, `iter_k/skills/*.py`, `iter_k/attempts/` (every code tried), "
              "`iter_k/stats.json`, `iter_k/feedback.json`, "
              "`iter_k/eval.gif`, `llm_transcript.jsonl`, `metrics.jsonl` and TensorBoard events, "
              "`stats.jsonl` (Crafter's format, one row per finished training episode), `unfinished.jsonl` "
              "(episodes the run did not finish), `eval.jsonl` (evaluation episodes), `checkpoint.pt`.", ""]
    (run_dir / "summary.md").write_text("\n".join(lines))


def code_action_rows(run_dir: Path) -> list[str]:
    """summary.md's table of every code action the RL agent (or --mode code's loop) called, per iteration: its
    calls, their success and cost, and how they ended (iter_k/stats.json, code_actions.CodeStats.summary)."""
    found = sorted((int(p.parent.name.split("_")[1]), p) for p in Path(run_dir).glob("iter_*/stats.json"))
    rows = [(k, name, r) for k, p in found for name, r in json.loads(p.read_text()).get("code_actions", {}).items()]
    if not rows:
        return []
    ends = list(CALL_ENDS)
    lines = ["", "Code actions' calls in training, per iteration (success: returned True or the task got done; the "
             "last columns count how each call ended: " + "; ".join(f"{k}: {w}" for k, w in CALL_ENDS.items()) + ").",
             "", "| iteration | code action | calls | success | env steps per call | " + " | ".join(ends) + " |",
             "|---" * (5 + len(ends)) + "|"]
    for k, name, r in rows:
        counts = " | ".join(str(r.get("ends", {}).get(e, "-")) for e in ends)
        lines.append(f"| {k} | {name} | {r['chosen']} | {r['success_rate']:.2f} | {r['mean_steps']:.1f} | {counts} |")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    run_dir = Path(argv[0])
    if not (run_dir / "config.json").is_file():
        print(f"error: {run_dir}: no config.json there (not a run directory?)", file=sys.stderr)
        return 2
    print((run_dir / "summary.md").read_text() if (run_dir / "summary.md").is_file() else "no summary.md yet")
    rows = read_jsonl(run_dir / "stats.jsonl")
    print(whole_run_text(score_of_rows(rows)[0], len(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
