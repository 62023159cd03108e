"""The grid run with your own model: an LLM backend's cells, what each keeps to be reproduced, and its replay.

    python -m bench.ablation --llm http --llm-url http://localhost:8000/v1 --llm-model Qwen/Qwen2.5-7B-Instruct
    python -m bench.ablation --llm replay:bench/results/llm/http__Qwen-Qwen2.5-7B-Instruct-0311af   # no server

A reference cell (`--llm reference`, the hand-written skills and plans) writes bench/results/<cell>.json.
An LLM backend's cell writes bench/results/llm/<backend>__<model slug>/<cell>.json instead, never touching
the reference's, and keeps beside it, in <cell>/, what reproduces it: the run's transcript
(transcript.jsonl.gz: every request and reply, the server's URL left out) and each iteration's plan, critic
feedback and accepted code (iter_k/). Its result file holds the reference's fields plus `llm`: the backend,
the model as asked for and as the server named itself, the calls (failed ones too) and tokens the cell used
(as the server reported them; characters too, since some servers report none) and the train.py arguments
that, with the transcript, re-run it. `--llm replay:` re-runs kept cells from their transcripts (answered in
order: llm_replay.ReplayClient) under bench/out/, and compares each new result with the kept one, all but RUN_FIELDS.
`rl` (plain PPO) asks no LLM: its cells are the reference's for every backend.
Read by bench/ablation.py (running) and bench/results_table.py (the tables: each backend's rows are made here,
`backend_lines` and `backend_rows`); reads neither.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.grid import Cell, cell_of, fail, is_current, read_result, results_version, shown
from bench.targets import mean_sd
from llm import LLMClient, LLMError, configured_endpoint

LLM_DIR = "llm"  # under the results directory: one folder per backend and model
TRANSCRIPT = "transcript.jsonl.gz"  # in a kept cell's folder
# What a replay may change: when, where and at which commit it ran, and how long it took.
RUN_FIELDS = ("commit", "resumed_at_commits", "dirty", "date", "machine", "attempts", "wall_s", "sps")


def slug(model: str) -> str:
    """A folder-safe name for a model ('Qwen/Qwen2.5-7B-Instruct', 'llama3:8b'): unsafe characters become '-'
    and, when any did, a short hash of the real name follows, so 'a/b' and 'a:b' never share a folder."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.") or "model"
    return safe if safe == model else f"{safe}-{hashlib.sha256(model.encode()).hexdigest()[:6]}"


def scrub(text: str) -> str:
    """`text` without the API key, whatever wrote it (a model can echo what it was sent): kept files are committed."""
    key = os.environ.get("OPENAI_API_KEY")
    return text.replace(key, "***") if key else text


def usage(transcript: Path) -> dict:
    """Calls and tokens of a run, from its llm_transcript.jsonl: every call (failed ones too) is a line. Tokens
    are the server's own counts, summed over the calls that reported any (`reported`); characters sent (the
    messages, as JSON) and received (the replies) are counted for every call."""
    records = [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()] \
        if transcript.is_file() else []
    told = [r["usage"] for r in records if any((r.get("usage") or {}).values())]
    return {"calls": len(records), "failed_calls": sum("error" in r for r in records),
            "answered_by": sorted({r["model"] for r in records if r.get("model")}),
            "tokens": {"prompt": sum(u.get("prompt_tokens", 0) for u in told),
                       "completion": sum(u.get("completion_tokens", 0) for u in told), "reported": len(told)},
            "chars": {"sent": sum(len(json.dumps(r.get("messages", []))) for r in records),
                      "received": sum(len(r.get("reply") or "") for r in records)}}


@dataclass(frozen=True)
class Backend:
    """An LLM endpoint the grid runs with (`--llm http`). The URL is how to reach it, never written anywhere."""

    model: str
    url: str
    kind: str = "http"

    @property
    def folder(self) -> str:
        return f"{self.kind}__{slug(self.model)}"

    def train_args(self, cell: Cell) -> list[str]:
        return ["--llm", self.kind, "--llm-url", self.url, "--llm-model", self.model]

    def record(self, result: dict, run_dir: Path, path: Path, extra: list[str]) -> dict:
        """`result` with its `llm` block; keeps the run's transcript, plans, feedback and code in path's <cell>/."""
        kept = path.with_suffix("")
        shutil.rmtree(kept, ignore_errors=True)  # a stale cell's re-run: none of the old run's files stay
        lines = [json.loads(line) for line in (run_dir / "llm_transcript.jsonl").read_text().splitlines()
                 if line.strip()] if (run_dir / "llm_transcript.jsonl").is_file() else []
        text = "".join(json.dumps({k: v for k, v in r.items() if k != "url"}) + "\n" for r in lines)
        write(kept / TRANSCRIPT, gzip.compress(scrub(text).encode(), mtime=0))
        for src in sorted(run_dir.glob("iter_*/plan.json")) + sorted(run_dir.glob("iter_*/feedback.json")) \
                + sorted(run_dir.glob("iter_*/skills/*.py")):
            write(kept / src.relative_to(run_dir), scrub(src.read_text()).encode())
        return with_llm(result, self.kind, self.model, run_dir, extra, kept.name)


@dataclass(frozen=True)
class Replay:
    """Kept cells re-run from their transcripts (`--llm replay:`): `kept` is their backend's folder."""

    kept: Path

    @property
    def folder(self) -> str:
        return self.kept.name

    def source(self, cell: Cell) -> dict:
        return read_result(self.kept / f"{cell.name}.json")

    def train_args(self, cell: Cell) -> list[str]:
        return ["--llm", f"replay:{self.kept / cell.name / TRANSCRIPT}", *self.source(cell)["llm"]["train_args"]]

    def record(self, result: dict, run_dir: Path, path: Path, extra: list[str]) -> dict:
        llm = self.source(cell_of(result))["llm"]
        return with_llm(result, llm["backend"], llm["model"], run_dir, llm["train_args"] + extra, llm["kept"])

    def afresh(self, cells: list[Cell], where: Path) -> list[Cell]:
        """`cells`, their earlier replay (result and run directory under `where`) deleted: a replay always runs."""
        for c in cells:
            (where / "results" / f"{c.name}.json").unlink(missing_ok=True)
            shutil.rmtree(run_dir_of(where, c), ignore_errors=True)
        print(f"replaying {len(cells)} kept cell(s) of {self.kept} without a server, into {where}", flush=True)
        return cells

    def check(self, cells: list[Cell], where: Path) -> int:
        """A line per replayed cell: its result the kept one (all but RUN_FIELDS) or not, and whether every call
        asked what the transcript answered; 1 if any is not reproduced."""
        failed = 0
        for c in cells:
            new, log = where / "results" / f"{c.name}.json", run_dir_of(where, c) / "llm_transcript.jsonl"
            records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] \
                if log.is_file() else []
            asked = [i for i, r in enumerate(records, 1) if r["request_hash"] != r.get("answered_from")]
            other = (f"; {len(asked)} of {len(records)} calls asked something other than the transcript answered "
                     f"(first: call {asked[0]}): the prompts or the code changed since") if asked else ""
            diff = differences(self.source(c), read_result(new)) if new.is_file() else ["(no result: see train.log)"]
            failed += bool(diff)
            print(f"{c.name}: " + (f"NOT reproduced, differs in {', '.join(diff[:8])}" if diff else
                                   f"reproduced (all fields but {', '.join(RUN_FIELDS)})") + other, flush=True)
        return int(bool(failed))


def run_dir_of(out: Path, cell: Cell) -> Path:
    """Where bench/ablation runs `cell` under `out`: a directory per results version (a stale run never resumes)."""
    return out / f"v{results_version(cell.mode, cell.task)}" / cell.name


def with_llm(result: dict, kind: str, model: str, run_dir: Path, extra: list[str], kept: str) -> dict:
    """The result of an LLM cell: its backend named without the URL, and its `llm` block."""
    used = usage(run_dir / "llm_transcript.jsonl")
    return {**result, "backend": f"{kind}: model {model}",
            "llm": {"backend": kind, "model": model, **used, "train_args": extra, "kept": kept}}


def write(path: Path, data: bytes) -> None:
    """Atomically, as ablation.write_json: a crash never leaves half a kept file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def replay_of(spec: str) -> tuple[Replay, list[Cell]]:
    """`--llm replay:X`: X is a kept cell's transcript (that cell) or a backend's folder (its kept cells)."""
    path = Path(spec)
    if path.is_dir():
        cells = [cell_of(read_result(p)) for p in sorted(path.glob("*.json"))]
        if not cells:
            fail(f"{path} holds no kept result files (<cell>.json): give a backend's folder under bench/results/llm/")
        if lost := [c.name for c in cells if not (path / c.name / TRANSCRIPT).is_file()]:
            fail(f"{path}: no {TRANSCRIPT} kept for {', '.join(lost)}: those cells cannot be replayed")
        return Replay(path), cells
    result = path.parent.parent / f"{path.parent.name}.json"
    if path.name != TRANSCRIPT or not path.is_file() or not result.is_file():
        fail(f"{spec} is not a kept cell's {TRANSCRIPT} (bench/results/llm/<backend>/<cell>/{TRANSCRIPT}) "
             "or a backend's folder")
    return Replay(path.parent.parent), [cell_of(read_result(result))]


def differences(kept: dict, new: dict) -> list[str]:
    """The fields (dotted paths) in which a replayed result differs from the kept one, RUN_FIELDS left out."""
    def diff(a, b, where: str) -> list[str]:
        if isinstance(a, dict) and isinstance(b, dict):
            return [d for k in dict.fromkeys([*a, *b]) if not (where == "" and k in RUN_FIELDS)
                    for d in diff(a.get(k), b.get(k), f"{where}.{k}" if where else k)]
        return [] if a == b else [where]
    return diff(kept, new, "")


def backend_results(results: Path) -> dict[str, list[dict]]:
    """Every backend's result files, by folder (results/llm/<folder>/*.json); none: {}."""
    return {d.name: [read_result(p) for p in sorted(d.glob("*.json"))]
            for d in sorted((results / LLM_DIR).glob("*")) if d.is_dir()}


def backend_of(llm: str, url: str | None, model: str | None) -> Backend | None:
    """`--llm reference` (None: the hand-written skills and plans) or `http` with its URL and model, checked
    (and the server reached) before any cell runs: a typo costs a sentence, not a night of failed cells."""
    if llm not in ("reference", "http"):
        fail(f"--llm is reference, http or replay:PATH, not {llm!r}")
    if llm == "reference":
        if url or model:
            fail("--llm-url and --llm-model go with --llm http (the reference backend asks no LLM)")
        return None
    url, model = url or configured_endpoint(), model or os.environ.get("RLGPT_LLM_MODEL")
    if not url or not model:
        fail("--llm http needs --llm-url URL (the server's OpenAI-style /v1 base) and --llm-model NAME (it names "
             "the cells' folder), or RLGPT_LLM_URL and RLGPT_LLM_MODEL")
    try:
        client = LLMClient(url, model)
        client.check_reachable()
    except LLMError as e:
        fail(str(e))
    return Backend(model, client.url)


# ----------------------------------------------------------------------------------------------
# Their rows in the results page and the README (bench/results_table.py places them).

def kilo(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else f"{n:.0f}"


def cost(rs: list[dict]) -> str:
    """The LLM calls (failed ones included) and tokens (prompt + completion, the server's counts) of the cells
    `rs`, a mean per cell when there are several; where the server reported no tokens for every call, the
    characters sent and received instead, said so."""
    llm = [r["llm"] for r in rs]
    calls, failed = np.mean([u["calls"] for u in llm]), sum(u["failed_calls"] for u in llm)
    text = f"{calls:.3g} calls" + (f" ({failed} failed)" if failed else "")
    if all(u["calls"] and u["tokens"]["reported"] == u["calls"] for u in llm):
        return f"{text}, {kilo(np.mean([u['tokens']['prompt'] + u['tokens']['completion'] for u in llm]))} tokens"
    chars = np.mean([u["chars"]["sent"] + u["chars"]["received"] for u in llm])
    return f"{text}, tokens not reported by the server ({kilo(chars)} characters)"


def backend_lines(backends: dict[str, list[dict]], cells: list[Cell]) -> list[str]:
    """Per LLM backend with a current result (`backends`: its results by the folder they are kept in): a row per
    task and mode it ran, success beside the reference's and what each cell cost in calls and tokens."""
    lines = []
    for folder, found in backends.items():
        current = shown(found, cells)
        if not current:
            continue
        llm = next(iter(current.values()))["llm"]
        served = ", ".join(f"`{m}`" for m in sorted({n for r in current.values() for n in r["llm"]["answered_by"]}))
        commits = ", ".join(dict.fromkeys(r["commit"][:10] + " (dirty)" * r["dirty"] for r in current.values()))
        lines += [f"**Model `{llm['model']}`** (`--llm {llm['backend']}`, answered as {served or 'nothing'}): "
                  f"{len(current)} cells, at commits {commits}; kept with each cell's transcript, plans and code in "
                  f"`{folder}/`. Success as above; LLM calls (failed ones included) and tokens (prompt + completion, "
                  "the server's counts) per cell, seed by seed.", "",
                  "| task | budget | mode | training success | evaluation success | LLM calls and tokens per cell |",
                  "|---|---|---|---|---|---|"]
        for task, budget, mode in dict.fromkeys((c.task, c.budget, c.mode) for c in current):
            rs = [(c, r) for c, r in current.items() if (c.task, c.mode) == (task, mode)]
            lines.append(f"| {task} | {budget} | {mode} | "
                         + " | ".join(mean_sd([(r[key]["success"], r[key]["n"]) for _, r in rs]) for key in
                                      ("train", "eval"))
                         + " | " + "; ".join(f"s{c.seed}: {cost([r])}" for c, r in rs) + " |")
        stale = [cell_of(r).name for r in found if not is_current(r)]
        lines += [""] + (["Stale, not shown: " + ", ".join(stale) + ".", ""] if stale else [])
    if not lines:
        return []
    return ["**With your model** (`python -m bench.ablation --llm http --llm-url URL --llm-model NAME`, per model: "
            "its cells apart from the reference's; `--llm replay:<its folder>` re-runs them from their transcripts "
            "without a server). `rl` asks no LLM: its cells are the reference's, above.", "", *lines]


def backend_rows(backends: dict[str, list[dict]], cells: list[Cell], modes: list[str]) -> list[str]:
    """The README table's rows of each LLM backend: per task it ran, each mode's training success (crafter: its
    score) with the mean calls and tokens of its cells; rl asks no LLM."""
    rows = []
    for found in backends.values():
        current = shown(found, cells)
        for task, budget in dict.fromkeys((c.task, c.budget) for c in current):
            measure = "crafter" if task == "crafter" else "train"
            values = []
            for m in modes:
                rs = [r for c, r in current.items() if (c.task, c.mode) == (task, m)]
                got = mean_sd([(r["crafter"]["score"], r["crafter"]["episodes"]) if measure == "crafter" else
                               (r["train"]["success"], r["train"]["n"]) for r in rs])
                values.append("(no LLM)" if m == "rl" else f"{got}; {cost(rs)}" if rs else "—")
            label = f"{task}{': Crafter score' * (task == 'crafter')}, model `{found[0]['llm']['model']}`"
            rows.append(f"| {label} | {budget} | " + " | ".join(values) + " |")
    return rows
