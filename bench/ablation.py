"""The ablation grid (plain PPO, PPO with the plan's config, one program, RL-GPT) and the slow loop's, as data.

    python -m bench.ablation                 # run every grid cell that has no current result (days on 2 cores)
    python -m bench.ablation --tasks collect_wood --modes rl rlgpt --seeds 1    # only a slice of the grid
    python -m bench.ablation --grid slowloop     # the slow-loop grid instead (--quick, slices: the same)
    python -m bench.ablation --table         # rebuild docs/results.md (both grids), README.md's table, docs/*.png
    python -m bench.ablation --check         # exit 1 if docs/results.md or README.md's table differs from the data
    python -m bench.ablation --quick         # smoke test: 1 seed, tiny budgets, all of it under bench/out/
    python -m bench.ablation --jobs 4        # 4 cells at a time (a machine with cores to spare)
    python -m bench.ablation -- --num-envs 16                # anything after -- goes to every train.py run
    python -m bench.ablation --llm http --llm-url URL --llm-model NAME   # the grid with your model (not rl)
    python -m bench.ablation --llm replay:bench/results/llm/<backend>    # its kept cells again, no server

Run it from the repo root as a module (as above). A cell is (task, mode, seed, env-step budget). Its run
is `train.py` in a subprocess (`--jobs` at a time, default 1), in bench/out/ablation/v<its results
version>/<cell>/ (git-ignored; an interrupted run is continued with --resume). Its result, a few kB read
from the run's logs, is written atomically to bench/results/<cell>.json the moment it finishes, to be
committed with the code. A cell with a current result never runs again; a cell whose run directory holds
another live process's lock (ablation.lock) is skipped, so commands started side by side share the grid.
With `--llm http` a cell runs with that model instead of the hand-written reference, into
bench/out/ablation/llm/<backend>/ and bench/results/llm/<backend>/, keeping what reproduces it:
bench/backends.py.

What the grids are (cells, budgets, seeds, each mode's results version and when a result is stale):
bench/grid.py. How docs/results.md and the README's table are made from the result files: bench/results_table.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

import env
import evidence
import report
from bench.backends import LLM_DIR, Backend, Replay, backend_of, replay_of, run_dir_of
from bench.grid import (
    BUDGETS,
    RESULTS_VERSION,
    SEEDS,
    SLOWLOOP,
    SLOWLOOP_MODES,
    Cell,
    curve_key,
    grid,
    is_current,
    read_result,
    results_version,
    slowloop_grid,
)
from bench.results_table import table

ROOT = Path(__file__).resolve().parent.parent
QUICK_TRAIN_ARGS = ["--iterations", "2", "--eval-episodes", "1", "--num-envs", "4", "--num-steps", "64",
                    "--no-capture-video"]
POINTS = 10  # the success curve: at budget * k / POINTS, k = 1..POINTS


# ----------------------------------------------------------------------------------------------
# One run's logs -> one result.


def episodes(run_dir: Path) -> list[tuple[int, dict]]:
    """(position, row) of every finished training episode in stats.jsonl (one row per episode, in the order
    they finished). Position = env steps of all episodes finished so far, this one's included: stats.jsonl
    has no step counter. It trails the trainer's counter by the steps of the episodes still running then
    (< num_envs x the task's step limit; they end up in unfinished.jsonl, and the result's `finished`
    shows how much of the run the finished episodes cover)."""
    rows = report.read_jsonl(run_dir / "stats.jsonl")
    return list(zip(evidence.placed(rows), rows, strict=True))


def curve(eps: list[tuple[int, dict]], cell: Cell) -> list[dict]:
    """At each point s = budget * k / POINTS: the episodes whose position lies in (s - budget / POINTS, s],
    their count n and their success rate (crafter: mean achievements unlocked per episode); None if n = 0.
    Episodes past the budget count nowhere."""
    points = []
    for k in range(1, POINTS + 1):
        lo, hi = cell.budget * (k - 1) // POINTS, cell.budget * k // POINTS
        window = [row for pos, row in eps if lo < pos <= hi]
        key = curve_key(cell.task)
        if key == "achievements":
            value = [sum(v > 0 for a, v in row.items() if a.startswith("achievement_")) for row in window]
            points.append({"step": hi, "n": len(window), key: round(float(np.mean(value)), 3) if window else None})
        else:
            ok = [env.row_success(env.get_task(cell.task), row) for row in window]
            points.append({"step": hi, "n": len(window), key: round(float(np.mean(ok)), 4) if ok else None})
    return points


def episode_length(rows: list[dict], iteration: int) -> dict:
    """The mean length (primitive env steps) of the training episodes that finished in `iteration` and
    their count n, from their own stats.jsonl rows (each names the iteration it ended in), not from
    iter_k/stats.json's rounded summary; None with n = 0. On crafter an episode ends at death or the time
    limit, so the mean is how long the agent survives; on a single-goal task, success ends it too."""
    lengths = [r["length"] for r in rows if r.get("iteration") == iteration]
    return {"mean": round(float(np.mean(lengths)), 1) if lengths else None, "n": len(lengths)}


def iterations(run_dir: Path) -> list[dict]:
    """Per iteration: its training success (on crafter, its Crafter score) and mean episode length, what its
    code actions did (calls, success, commonest error), under follow_order how closely the RL agent kept to the
    plan's order (stats.json's `order`), the critic's summary and decisions after it, and
    whether the previous decisions were kept or rolled back (train.log's "[iter k] the critic's change"
    line), from iter_k/stats.json, stats.jsonl, iter_k/feedback.json and train.log, so the results' "why"
    and the slow loop's effect can be written from this file."""
    log = (run_dir / "train.log").read_text(errors="replace") if (run_dir / "train.log").is_file() else ""
    rows = report.read_jsonl(run_dir / "stats.jsonl")
    changes = {int(k): why[:200] for k, why in re.findall(r"^\[iter (\d+)\] the critic's change: (.*)$", log, re.M)}
    out = []
    # iteration: iter_<iteration>'s number, 1-based as the stats rows name the iteration they ended in
    for iteration, path in sorted((int(p.parent.name.split("_")[1]), p) for p in run_dir.glob("iter_*/stats.json")):
        stats, feedback = json.loads(path.read_text()), path.parent / "feedback.json"
        actions = {name: {"chosen": row["chosen"], "success_rate": row["success_rate"],
                          "error": str(row["errors"][0][0])[:120] if row.get("errors") else None,
                          **({"ends": row["ends"]} if row.get("ends") else {}),  # how its calls ended
                          **({"hand_written": True} if row.get("hand_written") else {})}  # reference/'s, not an LLM's
                   for name, row in stats.get("code_actions", {}).items()}
        fb = json.loads(feedback.read_text()) if feedback.is_file() else None
        out.append({"iteration": stats.get("iteration"), "env_steps": stats.get("env_steps"),
                    "train": {"success": stats.get("success_rate"), "n": stats.get("success_episodes")},
                    "episode_length": episode_length(rows, iteration),
                    # no single goal (crafter): the Crafter score of the episodes that finished in it (evidence's)
                    **({"score": {k: stats["score"][k] for k in ("score", "se", "episodes")}}
                       if stats.get("score") else {}),
                    "change": changes.get(stats.get("iteration")), "code_actions": actions,
                    **({"order": stats["order"]} if stats.get("order") else {}),  # follow_order: kept to it how often
                    "critic": fb.get("summary", "")[:300] if fb else None,
                    "decided": [str(r)[:160] for r in fb.get("reasons", [])[:6]] if fb else []})
    return out


def result_of(cell: Cell, run_dir: Path) -> dict:
    """Everything the table needs about a finished run, read from its own files."""
    config = json.loads((run_dir / "config.json").read_text())
    metrics = report.read_jsonl(run_dir / "metrics.jsonl")
    attempts = report.read_jsonl(run_dir / "attempts.jsonl")
    eps = episodes(run_dir)
    points = curve(eps, cell)
    evals = [r["eval/success_rate"] for r in metrics if "eval/success_rate" in r]
    env_steps = max((r["global_step"] for r in metrics), default=0)
    wall = round(sum(a["wall_s"] for a in attempts), 1)
    commits = list(dict.fromkeys(a["commit"] for a in attempts))
    result = {"results_version": results_version(cell.mode, cell.task), "task": cell.task, "mode": cell.mode,
              "seed": cell.seed, "budget": cell.budget, "env_steps": env_steps,
              "commit": commits[0] if commits else "unknown", "resumed_at_commits": commits[1:],
              "dirty": any(a["dirty"] for a in attempts), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
              "machine": attempts[0]["machine"] if attempts else None, "attempts": len(attempts),
              "wall_s": wall, "sps": round(env_steps / wall, 1) if wall else None,
              "device": config.get("device"), "bf16_update": config.get("bf16_update"),
              "backend": config.get("backend"), "curve": points,
              # how much of env_steps the finished episodes cover (the rest: episodes cut off or still going)
              "finished": {"episodes": len(eps), "env_steps": eps[-1][0] if eps else 0},
              "train": {"window": [cell.budget * (POINTS - 1) // POINTS, cell.budget], "n": points[-1]["n"],
                        "success": points[-1].get("success")},
              "eval": {"success": evals[-1] if evals else None,
                       "n": config["args"]["eval_episodes"] if evals else 0},
              "iterations": iterations(run_dir)}
    if cell.task == "crafter":
        score, rates = report.crafter_score(run_dir / "stats.jsonl", cell.budget)
        result["crafter"] = {"episodes": sum(pos <= cell.budget for pos, _ in eps),
                             "score": round(score, 2), "achievements": {a: round(p, 2) for a, p in rates.items()}}
    return result


def write_json(path: Path, data: dict) -> None:
    """Atomically: a reader (or a crash) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------
# Running the cells that have no current result.


def git_state() -> tuple[str, bool]:
    """(HEAD, dirty): dirty = a tracked .py file differs from HEAD (the code that ran is not the commit)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "*.py")
    return git("rev-parse", "HEAD") or "unknown", bool(dirty)


def machine() -> dict:
    """CPU model and cores, and the GPU if nvidia-smi sees one."""
    info = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []
    cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "unknown")
    gpu = None
    if shutil.which("nvidia-smi"):
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip().splitlines()[:1] or None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu[0] if gpu else None}


def command_for(cell: Cell, run_dir: Path, extra: list[str], backend: Backend | Replay | None = None) -> list[str]:
    """The train.py command that starts `cell` (with `backend`'s LLM, else the reference), or continues its
    unfinished run."""
    if (run_dir / "config.json").is_file():
        return [sys.executable, str(ROOT / "train.py"), "--resume", str(run_dir)]
    # rl+config needs the plan, code the program
    llm = [] if cell.mode == "rl" else backend.train_args(cell) if backend else ["--llm", "reference"]
    # rlgpt-1iter's --iterations 1 comes last: nothing in `extra` (--quick's --iterations 2) may undo it
    mode, defining = ("rlgpt", ["--iterations", "1"]) if cell.mode == "rlgpt-1iter" else (cell.mode, [])
    # --skills none: no skill library shared between cells, so no cell (or seed) reuses another's skills
    return [sys.executable, str(ROOT / "train.py"), "--task", cell.task, "--mode", mode, *llm, "--skills", "none",
            "--seed", str(cell.seed), "--total-steps", str(cell.budget), "--runs-dir", str(run_dir.parent),
            "--run-name", run_dir.name, *extra, *defining]


def attempt(cmd: list[str], run_dir: Path) -> int:
    """One train.py process, its output in train.log; attempts.jsonl gets its commit, machine and wall time."""
    run_dir.mkdir(parents=True, exist_ok=True)
    commit, dirty = git_state()
    row = {"commit": commit, "dirty": dirty, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": machine(), "resume": "--resume" in cmd}
    t0 = time.time()
    with open(run_dir / "train.log", "a") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait()
        except KeyboardInterrupt:  # train.py got the Ctrl-C too: let it write its checkpoint
            rc = proc.wait()
    with open(run_dir / "attempts.jsonl", "a") as f:
        f.write(json.dumps(dict(row, wall_s=round(time.time() - t0, 1), rc=rc)) + "\n")
    return rc


LOCK = "ablation.lock"  # in a cell's run directory while a process runs it: "<pid> <host>"


@contextmanager
def cell_lock(run_dir: Path) -> Iterator[str | None]:
    """Hold the cell's lock for the block; yields None, or the holder ("<pid> <host>") if another process
    runs the cell. A lock of a process that is gone (same host) is taken over; one of another host is
    trusted (delete it by hand if that run is gone)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path, me = run_dir / LOCK, f"{os.getpid()} {socket.gethostname()}"
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            holder = path.read_text(errors="replace").strip() if path.is_file() else ""
            if holder and not _gone(holder):
                yield holder
                return
            path.unlink(missing_ok=True)  # its process died without cleaning up: take the cell over
            continue
        with os.fdopen(fd, "w") as f:
            f.write(me)
        try:
            yield None
        finally:
            path.unlink(missing_ok=True)
        return
    yield "another process (it took the lock over at the same moment)"


def _gone(holder: str) -> bool:
    """A lock's process no longer exists (only knowable on this host)."""
    pid, _, host = holder.partition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    return False


def execute(cells: list[Cell], out: Path, results: Path, extra: list[str], jobs: int = 1,
            backend: Backend | Replay | None = None) -> None:
    """Each cell without a current result: run (or continue) it with `backend`'s LLM (None: the reference),
    then write its result at once (an LLM cell's with what reproduces it: backend.record); `jobs` cells
    at a time, each its own train.py process. A cell another process holds the lock of is skipped, so two
    commands on one checkout (or a shared disk) never run the same cell. After a Ctrl-C (every train.py
    gets it and writes its checkpoint) no new cell starts; the same command continues."""
    start, stop = time.time(), threading.Event()

    def one(head: str, cell: Cell, path: Path) -> None:
        run_dir = run_dir_of(out, cell)
        with cell_lock(run_dir) as holder:
            if holder is not None:
                print(f"{head}: another process runs it ({holder}), skipped", flush=True)
                return
            if stop.is_set():
                return
            if not (run_dir / "summary.md").is_file():
                cmd = command_for(cell, run_dir, extra, backend)
                print(f"{head}: {'resuming' if '--resume' in cmd else 'running'} in {run_dir}", flush=True)
                t0, rc = time.time(), attempt(cmd, run_dir)
                if rc in (130, -2):
                    stop.set()
                    return
                if rc != 0 or not (run_dir / "summary.md").is_file():
                    print(f"{head}: FAILED (exit {rc}, see {run_dir / 'train.log'})", flush=True)
                    return
                print(f"{head}: finished in {time.time() - t0:.0f}s", flush=True)
            result = result_of(cell, run_dir)
            write_json(path, result if backend is None else backend.record(result, run_dir, path, extra))
            print(f"{head}: result {path} (elapsed {(time.time() - start) / 60:.1f} min)", flush=True)

    todo = []
    for i, cell in enumerate(cells, 1):
        head, path = f"[{i}/{len(cells)}] {cell.name}", results / f"{cell.name}.json"
        if path.is_file() and is_current(read_result(path)):
            print(f"{head}: has a result, skipped", flush=True)
        else:
            todo.append((head, cell, path))
    pool = ThreadPoolExecutor(max(1, jobs))
    try:
        for future in [pool.submit(one, *t) for t in todo]:
            future.result()
    except KeyboardInterrupt:  # the train.py processes got it too: wait for their checkpoints
        stop.set()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if stop.is_set():
        raise SystemExit("interrupted: the same command continues the unfinished cells")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 seed, tiny budgets, under bench/out/")
    parser.add_argument("--table", action="store_true", help="no training: rewrite the results section and plots")
    parser.add_argument("--check", action="store_true", help="no training: exit 1 if the results section is stale")
    parser.add_argument("--grid", choices=("main", "slowloop"), default="main", help="the grid to run (tables: both)")
    parser.add_argument("--tasks", nargs="+", choices=list(dict.fromkeys([*BUDGETS, *SLOWLOOP])),  # crafter: in both
                        help="default: the grid's")
    parser.add_argument("--modes", nargs="+", choices=list(RESULTS_VERSION), help="default: the grid's")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), choices=SEEDS)
    parser.add_argument("--jobs", type=int, default=1, help="cells run at a time, each its own train.py process "
                        "(its SPS then shares the cores: only results, never speed, are compared across cells)")
    parser.add_argument("--llm", default="reference", metavar="reference|http|replay:PATH",
                        help="who plans and writes code: the hand-written reference (default), your model "
                        "(http: its cells apart, in bench/results/llm/), or replay:<a kept cell's transcript or a "
                        "backend's folder> (its kept cells again, without a server, compared with the kept results)")
    parser.add_argument("--llm-url", help="with --llm http: the server's OpenAI-style /v1 base (key: OPENAI_API_KEY)")
    parser.add_argument("--llm-model", help="with --llm http: the model's name, as the server knows it")
    args = parser.parse_args(argv)
    cells, slow = grid(args.quick), slowloop_grid(args.quick)
    out = ROOT / "bench" / "out" / ("ablation-quick" if args.quick else "ablation")  # quick: apart, table too
    results, md, plot_dir, readme = (out / "results", out / "results.md", out, None) if args.quick else \
        (ROOT / "bench" / "results", ROOT / "docs" / "results.md", ROOT / "docs", ROOT / "README.md")
    if args.table or args.check:
        return max(table(results, md, plot_dir, cells, slow, check=False, readme=readme) if args.table else 0,
                   table(results, md, plot_dir, cells, slow, check=True, readme=readme) if args.check else 0)
    if args.llm.startswith("replay:"):
        return replay(*replay_of(args.llm[7:]), args, extra)
    backend = backend_of(args.llm, args.llm_url, args.llm_model)
    chosen = [c for c in (slow if args.grid == "slowloop" else cells) if c.task in (args.tasks or [c.task])
              and c.mode in (args.modes or [c.mode]) and c.seed in args.seeds]
    if backend and any(c.mode == "rl" for c in chosen):  # plain PPO asks no LLM: the reference's cells are its
        print("rl cells ask no LLM: every backend's rl is the reference's (python -m bench.ablation --modes rl)")
        chosen = [c for c in chosen if c.mode != "rl"]
    if not chosen:
        parser.error(f"no cell of the {args.grid} grid has that task, mode and seed (main: crafter runs rl and "
                     f"rlgpt, seed 1; slowloop: {', '.join(SLOWLOOP)} x {', '.join(SLOWLOOP_MODES)})")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    into = (out / LLM_DIR / backend.folder, results / LLM_DIR / backend.folder) if backend else (out, results)
    if backend:
        print(f"model {backend.model} at {backend.url}: results in {into[1]}")
    execute(chosen, *into, (QUICK_TRAIN_ARGS if args.quick else []) + extra, args.jobs, backend)
    if args.quick:
        return table(results, md, plot_dir, cells, slow, check=False)
    print("rebuild docs/results.md and the README's table from bench/results/:  python -m bench.ablation --table")
    return 0


def replay(source: Replay, kept: list[Cell], args: argparse.Namespace, extra: list[str]) -> int:
    """Re-run kept LLM cells (those of --tasks/--modes/--seeds) from their transcripts, afresh, under
    bench/out/ablation-replay/<backend>/; 1 if a result is not the kept one (all but backends.RUN_FIELDS)."""
    where = ROOT / "bench" / "out" / "ablation-replay" / source.folder
    chosen = source.afresh([c for c in kept if c.task in (args.tasks or [c.task])
                            and c.mode in (args.modes or [c.mode]) and c.seed in args.seeds], where)
    execute(chosen, where, where / "results", extra, args.jobs, source)
    return source.check(chosen, where)


if __name__ == "__main__":
    raise SystemExit(main())
