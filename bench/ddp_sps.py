"""Training throughput of one run over 1 vs N torchrun ranks with the same total env count, in one run.

    python -m bench.ddp_sps                                  # 8 envs, 1 vs 2 ranks, 8192 steps, --mode rl
    python -m bench.ddp_sps --ranks 4 --steps 16384          # a bigger machine

Both sides run the real train.py under `torch.distributed.run --standalone` (gloo on CPU) with the same
global settings: --num-envs envs in total (each rank steps num_envs / ranks of them), the same rollout
(num_steps x num_envs global decisions per update) and budget. SPS is what train.py logged itself
(charts/SPS of the last update in metrics.jsonl: global primitive env steps per second of training, so
process start, evaluation and checkpoints are not in it). Ratio = SPS(N ranks) / SPS(1 rank); N ranks
can only beat 1 when the machine has N idle cores, since every rank steps Crafter in its own process.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(ranks: int, args, runs_dir: Path) -> tuple[float, float]:
    """(SPS train.py logged, wall seconds of the whole command)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks),
           "train.py", "--task", args.task, "--mode", "rl", "--num-envs", str(args.num_envs),
           "--total-steps", str(args.steps), "--iterations", "1", "--checkpoint-every", str(args.steps),
           "--eval-episodes", "1", "--no-capture-video", "--seed", str(args.seed),
           "--runs-dir", str(runs_dir), "--run-name", f"ranks{ranks}"]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    rows = [json.loads(line) for line in (runs_dir / f"ranks{ranks}" / "metrics.jsonl").read_text().splitlines()]
    return float([r for r in rows if "charts/SPS" in r][-1]["charts/SPS"]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="collect_wood")
    parser.add_argument("--num-envs", type=int, default=8, help="total envs, the same for both sides")
    parser.add_argument("--ranks", type=int, default=2, help="compared against 1 rank")
    parser.add_argument("--steps", type=int, default=8192, help="primitive env steps per side")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.task}, --mode rl, {args.num_envs} envs in total, {args.steps} env steps, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        results = {n: run(n, args, Path(tmp)) for n in (1, args.ranks)}
    for n, (sps, wall) in results.items():
        print(f"{n} rank(s) x {args.num_envs // n} envs: {sps:8.0f} SPS   (whole command {wall:.0f} s)")
    print(f"scaling ratio SPS({args.ranks} ranks) / SPS(1 rank): {results[args.ranks][0] / results[1][0]:.2f}")


if __name__ == "__main__":
    main()
