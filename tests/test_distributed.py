"""One RL-GPT run over 2 torchrun ranks (gloo, CPU): one run directory, bit-identical weights, the same
code actions on every rank, a global env-step budget, and --resume of a distributed run."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import distributed
import train
from tests.test_train import TINY, history, run_dir

ROOT = Path(train.__file__).parent
ARGS = TINY + ["--task", "place_table", "--llm", "reference"]  # place_table: the plan has 2 code actions
MAX_OVERSHOOT = 2 * 24  # one vector step of all ranks: --num-envs 2 (global) x --max-macro-steps 24


def torchrun(*argv: str) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "train.py", *argv]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def weights_sha256(ckpt: dict) -> str:
    """The same hash run_dir.check_ranks_agree writes, here of the weights rank 0 checkpointed."""
    return hashlib.sha256(b"".join(t.numpy().tobytes() for t in ckpt["ppo"]["agent"].values())).hexdigest()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Iteration 1 of 2 as its own run, then --resume for iteration 2 (config.json is edited to ask for
    2 iterations: the checkpoint is then exactly one left by a run stopped between iterations)."""
    root = tmp_path_factory.mktemp("ddp")
    torchrun(*ARGS, "--iterations", "1", "--total-steps", "300", "--runs-dir", str(root))
    d = run_dir(root)
    first = json.loads((d / "ranks.json").read_text())
    config = json.loads((d / "config.json").read_text())
    config["args"].update(iterations=2, total_steps=600)
    (d / "config.json").write_text(json.dumps(config))
    torchrun("--resume", str(d))
    return root, first, json.loads((d / "ranks.json").read_text())


def test_two_ranks_make_one_run_with_identical_weights(runs):
    root, first, final = runs
    d = run_dir(root)  # fails unless exactly one run directory was written
    ckpt = torch.load(d / "checkpoint.pt", weights_only=False)
    for ranks, budget in [(first, 300), (final, 600)]:
        assert [r["rank"] for r in ranks] == [0, 1]
        assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"]
        assert ranks[0]["global_step"] == ranks[1]["global_step"]
        assert budget <= ranks[0]["global_step"] < budget + MAX_OVERSHOOT
        assert ranks[0]["code_actions"] == ranks[1]["code_actions"]
    assert len(final[0]["code_actions"]) >= 2  # so their order is checked too
    assert final[0]["weights_sha256"] == weights_sha256(ckpt)  # ranks.json hashes the real weights
    assert [a["name"] for a in ckpt["code_actions"]] == [name for name, _ in final[0]["code_actions"]]
    assert ckpt["ppo"]["global_step"] == final[0]["global_step"]
    assert [r["iteration"] for r in history(d)] == [1, 2]
    # both ranks' episodes, finished (stats.jsonl) or not (unfinished.jsonl), hold every step of the run
    rows = [json.loads(x) for name in ("stats.jsonl", "unfinished.jsonl") for x in (d / name).read_text().splitlines()]
    assert sum(r["length"] for r in rows) == ckpt["ppo"]["global_step"]
    assert len({r["seed"] for r in rows}) == len(rows)  # the ranks play different worlds
    # the weights were updated after the last broadcast (start of iteration 2), so equality above shows
    # the gradient averaging, not just the broadcast
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    assert sum("losses/policy_loss" in r and r["global_step"] > 300 for r in rows) >= 2
    assert first[0]["weights_sha256"] != final[0]["weights_sha256"]


def test_one_process_never_touches_torch_distributed(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert distributed.init_distributed("cpu") == (0, 1, "cpu")
    assert not torch.distributed.is_initialized()
    obj = {"plan": [1, 2]}
    assert distributed.broadcast(obj) is obj and distributed.all_gather([3, 4]) == [3, 4]


@pytest.mark.parametrize("world", ["1", "2"])
def test_a_rank_ends_with_its_code_and_its_output_flushed(world):
    """Under torchrun a rank leaves by os._exit (gloo's threads can abort the interpreter's teardown): its
    exit code and its buffered output must still come out; a plain process exits as usual."""
    code = "import distributed\nprint('done', end='')\ndistributed.end_process(3)\n"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "PYTHONUNBUFFERED")}
    env["WORLD_SIZE"] = world  # and stdout a pipe, so block-buffered: lost to os._exit unless flushed
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout) == (3, "done"), out.stderr
