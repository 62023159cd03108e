"""The ablation: plain PPO vs PPO with the plan's config vs one program vs RL-GPT, per task at fixed env-step
budgets, from the runs' logs.

    python bench/ablation.py --quick                  # 1 seed, small budgets, all four tasks (< 15 min here)
    python bench/ablation.py                          # 3 seeds at the issue's budgets (days on 2 cores)
    python bench/ablation.py --crafter                # ... and the whole Crafter benchmark (1M steps, 1 seed)
    python bench/ablation.py --tasks crafter          # only that (e.g. in a second terminal)
    python bench/ablation.py --report-only            # rewrite results.md and the plots from existing runs
    python bench/ablation.py --quick -- --num-envs 4  # anything after -- goes to every train.py run

Each run is `train.py` in a subprocess, one at a time, into <out>/<task>__<mode>__<seed>/ (its output
in train.log there). Resumable: a run with summary.md is finished and skipped, one with only
config.json is continued with --resume. Every number in results.md is read from the runs' own files
(metrics.jsonl, stats.jsonl, config.json, iter_k/*.json); only the published Crafter scoreboard is
quoted, and it is labelled as such. RL-GPT, rl+config and code runs use `--llm library`: the
hand-written reference skills and plans, not an LLM.

The modes separate the two things RL-GPT adds to PPO: `rl+config` is plain PPO with the plan's action
mask and reward shaping but no code action, so rl -> rl+config measures the plan's RL config alone and
rl+config -> rlgpt the code actions alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import report  # noqa: E402

MODES = ("rl", "rl+config", "code", "rlgpt")
BUDGETS = {"collect_wood": 50_000, "place_table": 100_000, "make_wood_pickaxe": 200_000,
           "collect_stone": 300_000}
# --quick is a smoke test of the pipeline (RL barely starts), sized to take under 15 minutes on 2 busy cores.
QUICK_BUDGETS = {"collect_wood": 2_000, "place_table": 2_000, "make_wood_pickaxe": 2_500,
                 "collect_stone": 2_500}
# --quick also shrinks what is not training: a failing policy's evaluation episode runs to the task's
# step limit (up to 1000 steps, one forward pass each), and one PPO rollout is num_envs * num_steps.
QUICK_TRAIN_ARGS = ["--iterations", "2", "--eval-episodes", "1", "--num-envs", "4", "--num-steps", "64",
                    "--no-capture-video"]
CRAFTER_BUDGET, QUICK_CRAFTER_BUDGET = 1_000_000, 5_000  # --quick --crafter: not in the 15 minutes
# Quoted, not measured: ../shared/paper-notes.md (Crafter's scoreboard): (agent, env steps, score).
PUBLISHED = [("random", "-", 1.6), ("SB3 PPO", "1M", 4.6), ("DreamerV3", "1M", 14.5),
             ("PPO-ResNet", "1M", 15.6), ("Achievement Distillation", "1M", 21.8),
             ("SPRING (GPT-4, no training)", "-", 27.3), ("human experts", "-", 50.5)]
FINAL_SHARE = 0.1  # "final" training success: the updates in the last 10% of a run's env steps


@dataclass(frozen=True)
class Run:
    """One cell of the ablation; its directory name is how a later invocation finds it again."""

    task: str
    mode: str
    seed: int
    budget: int

    @property
    def name(self) -> str:
        return f"{self.task}__{self.mode}__{self.seed}"


def plan_runs(tasks: list[str], seeds: list[int], modes: list[str], quick: bool) -> list[Run]:
    """Cheap tasks first, so a long ablation has a complete small table early; crafter (1 seed) last."""
    budgets = dict(QUICK_BUDGETS if quick else BUDGETS, crafter=QUICK_CRAFTER_BUDGET if quick else CRAFTER_BUDGET)
    tasks = sorted(tasks, key=list(budgets).index)
    return [Run(t, m, s, budgets[t]) for t in tasks for s in (seeds[:1] if t == "crafter" else seeds)
            for m in modes]


def command_for(run: Run, out: Path, extra: list[str]) -> list[str] | None:
    """The train.py command that finishes `run` (None: finished already). A directory holding a run
    with another budget is an error, never silently mixed into this table."""
    run_dir = out / run.name
    if (run_dir / "config.json").is_file():
        budget = json.loads((run_dir / "config.json").read_text())["args"]["total_steps"]
        if budget != run.budget:
            raise SystemExit(f"{run_dir} holds a run of {budget} env steps, not {run.budget}: "
                             "move it away or pick another --out")
        if (run_dir / "summary.md").is_file():
            return None
        return [sys.executable, str(ROOT / "train.py"), "--resume", str(run_dir)]
    llm = [] if run.mode == "rl" else ["--llm", "library"]
    return [sys.executable, str(ROOT / "train.py"), "--task", run.task, "--mode", run.mode, *llm,
            "--seed", str(run.seed), "--total-steps", str(run.budget), "--runs-dir", str(out),
            "--run-name", run.name, *extra]


def execute(runs: list[Run], out: Path, extra: list[str]) -> None:
    """One run at a time (two cores here); a failed run is reported and the rest still go."""
    start, commands = time.time(), [command_for(run, out, extra) for run in runs]  # checks every dir first
    for i, (run, cmd) in enumerate(zip(runs, commands, strict=True), 1):
        head = f"[{i}/{len(runs)}] {run.name} ({run.budget} env steps)"
        if cmd is None:
            print(f"{head}: finished before, skipped", flush=True)
            continue
        (out / run.name).mkdir(parents=True, exist_ok=True)
        print(f"{head}: {'resuming' if '--resume' in cmd else 'running'} (log: {run.name}/train.log) ...",
              end=" ", flush=True)
        t0 = time.time()
        with open(out / run.name / "train.log", "a") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            try:
                rc = proc.wait()
            except KeyboardInterrupt:  # train.py got the Ctrl-C too: let it write its checkpoint
                proc.wait()
                raise SystemExit(f"\ninterrupted: the same command resumes {run.name}") from None
        status = "done" if rc == 0 else f"FAILED (exit {rc}, see {out / run.name / 'train.log'})"
        elapsed = (time.time() - start) / 60
        print(f"{status} in {time.time() - t0:.0f}s; elapsed {elapsed:.1f} min", flush=True)


# ----------------------------------------------------------------------------------------------
# Reading the runs back.


def run_numbers(run_dir: Path) -> dict:
    """What one run's logs say: budget, env steps done, final training success, last eval success."""
    config = json.loads((run_dir / "config.json").read_text())
    rows = report.read_jsonl(run_dir / "metrics.jsonl")
    x, y = report.success_curve(run_dir)
    final = y[x >= (1 - FINAL_SHARE) * x[-1]] if len(x) else np.array([])
    evals = [r["eval/success_rate"] for r in rows if "eval/success_rate" in r]
    return {"budget": config["args"]["total_steps"], "finished": (run_dir / "summary.md").is_file(),
            "env_steps": max((r["global_step"] for r in rows), default=0), "curve": (x, y),
            "train": float(final.mean()) if len(final) else float("nan"),
            "eval": evals[-1] if evals else float("nan")}


def mean_spread(values: list[float]) -> str:
    """Mean ± std over seeds; runs that finished no episode (nan) are left out, not counted as 0."""
    vals = [v for v in values if not np.isnan(v)]
    if not vals:
        return "-"
    return f"{np.mean(vals):.2f} ± {np.std(vals):.2f}" if len(vals) > 1 else f"{vals[0]:.2f}"


def lessons(run_dir: Path) -> list[str]:
    """Per iteration of an RL-GPT run: the code action that failed most often, its commonest error,
    and the critic's summary (iter_k/stats.json and iter_k/feedback.json)."""
    lines = []
    for stats_path in sorted(run_dir.glob("iter_*/stats.json"), key=lambda p: int(p.parent.name[5:])):
        stats, k = json.loads(stats_path.read_text()), stats_path.parent.name
        actions = stats.get("code_actions", {})
        if actions:
            name, row = max(actions.items(), key=lambda kv: kv[1]["chosen"] * (1 - kv[1]["success_rate"]))
            error = f"; commonest error: `{row['errors'][0][0]}`" if row.get("errors") else ""
            lines.append(f"- {run_dir.name} {k}: `{name}` fails most: success {row['success_rate']:.2f} over "
                         f"{row['chosen']} calls ({row['share']:.1%} of decisions){error}")
        else:
            lines.append(f"- {run_dir.name} {k}: no code action was called")
        feedback = stats_path.parent / "feedback.json"
        if feedback.is_file():
            lines.append(f"  - critic: {json.loads(feedback.read_text()).get('summary', '').strip()}")
    return lines


def crafter_section(out: Path, runs: list[Run]) -> list[str]:
    """Our Crafter scores beside the published scoreboard, then our per-achievement success rates."""
    ours = {}
    for run in runs:
        if (out / run.name / "config.json").is_file():
            n = run_numbers(out / run.name)
            score, rates = report.crafter_score(out / run.name / "stats.jsonl", n["budget"])
            ours[run.mode] = (n, score, rates)
    lines = ["## Crafter (the whole benchmark)", "",
             "| agent | env steps | Crafter score | source |", "|---|---|---|---|"]
    lines += [f"| {name} | {steps} | {score} | published (paper-notes.md) |"
              for name, steps, score in PUBLISHED]
    for mode, (n, score, _) in ours.items():
        done = "" if n["finished"] else " (unfinished)"
        lines.append(f"| ours: {mode} | {n['env_steps']}{done} | {score:.1f} | measured here, stats.jsonl |")
    if ours:
        lines += ["", "Per-achievement success (% of training episodes within the budget, ours):", "",
                  "| achievement | " + " | ".join(ours) + " |", "|---|" + "---|" * len(ours)]
        for a in dict.fromkeys(a for r in ours.values() for a in r[2]):
            cells = [f"{rates.get(a, float('nan')):.1f}" for _, _, rates in ours.values()]
            lines.append(f"| {a} | {' | '.join(cells)} |")
    return lines + [""]


def write_report(out: Path, runs: list[Run]) -> str:
    """results.md and one PNG per task; returns the Markdown it wrote."""
    tasks = list(dict.fromkeys(r.task for r in runs if r.task != "crafter"))
    lines = ["# Ablation: RL vs RL + the plan's config vs code vs RL-GPT", "",
             "Read from the runs' logs by `bench/ablation.py`. Training success = mean of "
             f"`charts/success_rate` over the updates in the last {FINAL_SHARE:.0%} of each run's env "
             "steps; eval success = the last evaluation of each run; env steps done can pass the budget, as "
             "PPO ends its last rollout. Mean ± std over the finished seeds. rl+config: plain PPO with the "
             "plan's action mask and reward shaping, no code action. "
             "The rl+config, code and RL-GPT rows use hand-written reference skills and plans (`--llm library`), "
             "not an LLM.", "",
             "| task | budget | mode | seeds finished | env steps done | train success | eval success "
             "| train, per seed |", "|---|---|---|---|---|---|---|---|"]
    learned, plots = [], []
    for task in tasks:
        curves = {}
        for mode in dict.fromkeys(r.mode for r in runs if r.task == task):
            planned = [r for r in runs if r.task == task and r.mode == mode]
            found = [run_numbers(out / r.name) for r in planned if (out / r.name / "config.json").is_file()]
            done = [n for n in found if n["finished"]]
            curves[mode] = [n["curve"] for n in found]
            train, evals = [n["train"] for n in done], [n["eval"] for n in done]
            steps = f"{np.mean([n['env_steps'] for n in done]):.0f}" if done else "-"
            budget = ", ".join(map(str, sorted({n["budget"] for n in found}) or [planned[0].budget]))  # logs'
            lines.append(f"| {task} | {budget} | {mode} | {len(done)}/{len(planned)} | {steps} "
                         f"| {mean_spread(train)} | {mean_spread(evals)} "
                         f"| {', '.join(f'{v:.2f}' for v in train) or '-'} |")
            if mode == "rlgpt":
                learned += [line for r in planned for line in lessons(out / r.name)]
        if any(len(x) for runs_ in curves.values() for x, _ in runs_):
            report.plot(curves, out / f"{task}.png", f"{task}: success vs env steps")
            plots.append(f"![{task}]({task}.png)")
    lines += [""] + plots + [""]
    crafter_runs = [r for r in runs if r.task == "crafter"]
    if crafter_runs:
        lines += crafter_section(out, crafter_runs)
        learned += [line for r in crafter_runs if r.mode == "rlgpt" for line in lessons(out / r.name)]
    lines += ["## What we learned (RL-GPT runs: code actions and the critic)", ""]
    lines += learned or ["- no RL-GPT iteration statistics yet"]
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 seed, small budgets, into ablation-quick/")
    parser.add_argument("--crafter", action="store_true", help="add the whole Crafter benchmark, 1 seed")
    parser.add_argument("--report-only", action="store_true", help="no training: rewrite the report")
    parser.add_argument("--tasks", nargs="+", default=list(BUDGETS), choices=[*BUDGETS, "crafter"])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="default: 1 2 3 (--quick: 1)")
    parser.add_argument("--out", type=Path, default=None, help="default: bench/out/ablation[-quick]")
    args = parser.parse_args(argv)
    seeds = args.seeds or ([1] if args.quick else [1, 2, 3])
    out = args.out or ROOT / "bench" / "out" / ("ablation-quick" if args.quick else "ablation")
    out.mkdir(parents=True, exist_ok=True)
    runs = plan_runs(args.tasks + ["crafter"] * args.crafter, seeds, args.modes, args.quick)
    extra = (QUICK_TRAIN_ARGS if args.quick else []) + extra
    start = time.time()
    if not args.report_only:
        execute(runs, out, extra)
    # The report also shows every other run of the grid found in `out` (e.g. a crafter run going on in
    # another process), so whichever invocation writes results.md last loses nothing.
    grid = plan_runs([*BUDGETS, "crafter"], seeds, list(MODES), args.quick)
    print(write_report(out, [r for r in grid if r in runs or (out / r.name / "config.json").is_file()]))
    print(f"results: {out / 'results.md'}; wall time {(time.time() - start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
