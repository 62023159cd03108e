"""The grid with your own model (bench/backends.py through `python -m bench.ablation --llm http|replay:`): cells
apart from the reference's, what each keeps, the tables' rows per model, replay, bad input, and the API key
never written. End to end with the project's test server (tests/fake_llm.py) as the model."""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from bench import ablation, backends, grid
from tests.fake_llm import FakeLLMServer
from tests.test_ablation import fake_result, pages, row_of
from tests.test_train import KEY, scripted

MODEL = "fake/Qwen2.5:7b"  # a name with '/' and ':', as vLLM's and Ollama's are
QUICK = grid.QUICK_BUDGETS["collect_wood"]


def every_byte(root: Path) -> dict[Path, bytes]:
    """Every file under `root`, gzipped ones decompressed (a key inside a .gz would not show in its bytes)."""
    return {p: gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
            for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_a_slice_with_the_test_server_runs_apart_shows_its_row_and_its_replay_reproduces(tmp_path, monkeypatch,
                                                                                         capsys):
    """rl+config and rlgpt on collect_wood (--quick) with the scripted test server as the model: the cells'
    results sit in results/llm/<backend>__<model>/ beside an untouched reference result, with their transcript,
    plans and code; the tables get the model's row with its calls and tokens; a kept transcript re-runs its
    cell without the server into the same result; the key is nowhere."""
    (tmp_path / "train.py").symlink_to(ablation.ROOT / "train.py")  # the real trainer, everything else under tmp_path
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    md = pages(tmp_path)
    results = tmp_path / "bench" / "out" / "ablation-quick" / "results"
    reference = results / f"collect_wood__rlgpt__s1__{QUICK}.json"
    fake_result(results, grid.Cell("collect_wood", "rlgpt", 1, QUICK), 0.5, 10)
    before = reference.read_bytes()
    with FakeLLMServer(scripted) as srv:
        assert ablation.main(["--quick", "--llm", "http", "--llm-url", srv.url, "--llm-model", MODEL, "--tasks",
                       "collect_wood", "--modes", "rl", "rl+config", "rlgpt"]) == 0
        asked = len(srv.requests)
    out = capsys.readouterr().out
    assert "rl cells ask no LLM" in out and "[2/2] collect_wood__rlgpt__s1__2000: result" in out
    assert reference.read_bytes() == before  # the reference cell of the same (task, mode, seed, budget)
    kept = results / "llm" / f"http__{backends.slug(MODEL)}"
    assert sorted(p.name for p in kept.glob("*.json")) == [f"collect_wood__{m}__s1__{QUICK}.json"
                                                           for m in ("rl+config", "rlgpt")]
    r = json.loads((kept / f"collect_wood__rlgpt__s1__{QUICK}.json").read_text())
    cell = kept / f"collect_wood__rlgpt__s1__{QUICK}"
    transcript = [json.loads(x) for x in gzip.decompress((cell / backends.TRANSCRIPT).read_bytes()).splitlines()]
    # the scripted run: a plan, chop_tree written twice (the first fails), a critique, a plan, grab_sapling
    assert r["llm"]["model"] == MODEL and r["llm"]["answered_by"] == [MODEL] and r["backend"] == f"http: model {MODEL}"
    assert r["llm"]["calls"] == len(transcript) == 6 and r["llm"]["failed_calls"] == 0
    assert r["llm"]["tokens"]["prompt"] == sum(t["usage"]["prompt_tokens"] for t in transcript) > 0
    assert r["llm"]["tokens"]["reported"] == 6 and r["llm"]["train_args"] == ablation.QUICK_TRAIN_ARGS
    rl_config = json.loads((kept / f"collect_wood__rl+config__s1__{QUICK}.json").read_text())["llm"]["calls"]
    assert asked == 6 + rl_config and all("url" not in t for t in transcript)
    assert (cell / "iter_1" / "plan.json").is_file() and (cell / "iter_1" / "feedback.json").is_file()
    assert "api.go_to('tree', 20)" in (cell / "iter_1" / "skills" / "chop_tree.py").read_text()
    assert (cell / "iter_2" / "skills" / "grab_sapling.py").is_file()

    readme = tmp_path / "README.md"
    args = (results, md, tmp_path, grid.grid(True), grid.slowloop_grid(True))
    assert ablation.table(*args, check=False, readme=readme) == 0
    tokens = f"{(r['llm']['tokens']['prompt'] + r['llm']['tokens']['completion']) / 1000:.1f}k"  # thousands
    row = row_of(readme.read_text(), f"collect_wood, model `{MODEL}`")[0]
    train = f"{r['train']['success']:.2f} (n=1, {r['train']['n']} ep)"  # the run's own, as the page shows it
    assert row[2] == "(no LLM)" and row[5] == f"{train}; 6 calls, {tokens} tokens"
    assert row_of(readme.read_text(), "collect_wood", str(QUICK))[0][5] == "0.50 (n=1, 10 ep)"  # the reference's
    assert row_of(md.read_text(), "collect_wood", str(QUICK), "rlgpt")[-1][5] == f"s1: 6 calls, {tokens} tokens"
    assert ablation.table(*args, check=True, readme=readme) == 0
    r["llm"]["calls"] = 7  # the check covers the model's rows
    ablation.write_json(kept / f"collect_wood__rlgpt__s1__{QUICK}.json", r)
    assert ablation.table(*args, check=True, readme=readme) == 1
    r["llm"]["calls"] = 6
    ablation.write_json(kept / f"collect_wood__rlgpt__s1__{QUICK}.json", r)

    capsys.readouterr()
    assert ablation.main(["--llm", f"replay:{cell / backends.TRANSCRIPT}"]) == 0  # no server
    assert "collect_wood__rlgpt__s1__2000: reproduced" in capsys.readouterr().out
    replayed = tmp_path / "bench" / "out" / "ablation-replay" / kept.name / "results" / f"{cell.name}.json"
    new = json.loads(replayed.read_text())
    assert {k: v for k, v in new.items() if k not in backends.RUN_FIELDS} == {k: v for k, v in r.items()
                                                                       if k not in backends.RUN_FIELDS}
    for path, data in every_byte(tmp_path / "bench").items():
        assert KEY.encode() not in data, path


def fake_llm_result(results: Path, cell: grid.Cell, success: float, model: str = MODEL, version: int | None = None,
                    **llm) -> dict:
    """A backend's result file as Backend.record writes it (the fields the tables read)."""
    folder = results / "llm" / f"http__{backends.slug(model)}"
    r = fake_result(folder, cell, success, 10, version=version) | {"llm": {
        "backend": "http", "model": model, "calls": 4, "failed_calls": 0, "answered_by": [model],
        "tokens": {"prompt": 1500, "completion": 500, "reported": 4}, "chars": {"sent": 9000, "received": 1000},
        "train_args": [], "kept": cell.name} | llm}
    ablation.write_json(folder / f"{cell.name}.json", r)
    return r


def test_a_backend_without_current_cells_shows_nothing_and_unreported_tokens_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    fake_result(results, grid.Cell("collect_wood", "rlgpt", 1, 50_000), 0.9, 10)
    assert ablation.main(["--table"]) == 0
    plain = md.read_text(), (tmp_path / "README.md").read_text()
    fake_llm_result(results, grid.Cell("collect_wood", "rlgpt", 1, 50_000), 0.7, version=0)  # stale
    assert ablation.main(["--table"]) == 0 and (md.read_text(), (tmp_path / "README.md").read_text()) == plain
    fake_llm_result(results, grid.Cell("collect_wood", "rlgpt", 3, 50_000), 0.1, "llama3:8b", version=0)
    for seed, calls in ((1, 4), (2, 6)):
        fake_llm_result(results, grid.Cell("collect_wood", "rlgpt", seed, 50_000), 0.7, "llama3:8b", calls=calls,
                        failed_calls=1, tokens={"prompt": 0, "completion": 0, "reported": 0})
    assert ablation.main(["--table"]) == 0
    readme = (tmp_path / "README.md").read_text()
    assert row_of(readme, "collect_wood, model `llama3:8b`")[0][2:] == [
        "(no LLM)", "—", "—", "0.70 ± 0.00 (n=2, 20 ep); 5 calls (2 failed), tokens not reported by the server "
        "(10.0k characters)"]
    assert f"model `{MODEL}`" not in readme and f"Model `{MODEL}`" not in md.read_text()
    assert "Stale, not shown: collect_wood__rlgpt__s3__50000." in md.read_text()


def test_slug_keeps_names_apart_and_folder_safe():
    assert backends.slug("gpt-4o") == "gpt-4o"
    names = ["Qwen/Qwen2.5-7B-Instruct", "llama3:8b", "llama3/8b", "../../etc", "a b"]
    slugs = [backends.slug(n) for n in names]
    assert len(set(slugs)) == len(names) and all("/" not in s and ":" not in s and s[0] != "." for s in slugs)
    assert slugs[0].startswith("Qwen-Qwen2.5-7B-Instruct-")


@pytest.mark.parametrize("argv, says", [
    (["--llm", "http", "--llm-model", "m"], "--llm http needs --llm-url"),
    (["--llm", "http", "--llm-url", "http://127.0.0.1:9/v1"], "--llm http needs --llm-url"),
    (["--llm", "http", "--llm-url", "127.0.0.1:9/v1", "--llm-model", "m"], "is not an http:// or https:// URL"),
    (["--llm", "http", "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m"], "cannot reach an LLM server"),
    (["--llm", "gpt-4o"], "--llm is reference, http or replay:PATH"),
    (["--llm-model", "m"], "--llm-url and --llm-model go with --llm http"),
    (["--llm", "replay:nowhere.jsonl"], "is not a kept cell's transcript.jsonl.gz"),
])
def test_bad_llm_input_is_a_sentence_and_exit_2(argv, says, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    for var in ("RLGPT_LLM_URL", "OPENAI_BASE_URL", "RLGPT_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit) as e:
        ablation.main(argv)
    assert e.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "bench").exists()  # nothing ran


def test_replay_says_which_fields_differ_and_when_the_run_asked_otherwise(tmp_path, capsys):
    cell = grid.Cell("collect_wood", "rlgpt", 1, 50_000)
    kept = fake_llm_result(tmp_path / "results", cell, 0.7)
    source, where = backends.Replay(tmp_path / "results" / "llm" / f"http__{backends.slug(MODEL)}"), tmp_path / "replay"
    new = dict(kept, date="2099-01-01", wall_s=1.0)
    ablation.write_json(where / "results" / f"{cell.name}.json", new)
    assert source.check([cell], where) == 0 and "reproduced (all fields but" in capsys.readouterr().out
    new["train"] = {"n": 10, "success": 0.6}
    ablation.write_json(where / "results" / f"{cell.name}.json", new)
    run = backends.run_dir_of(where, cell)
    run.mkdir(parents=True)
    (run / "llm_transcript.jsonl").write_text(json.dumps({"request_hash": "a", "answered_from": "a"}) + "\n"
                                              + json.dumps({"request_hash": "b", "answered_from": "c"}) + "\n")
    assert source.check([cell], where) == 1
    assert ("NOT reproduced, differs in train.success; 1 of 2 calls asked something other than the transcript "
            "answered (first: call 2)") in capsys.readouterr().out
    shutil.rmtree(where / "results")
    assert source.check([cell], where) == 1 and "no result" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # a kept cell without its transcript cannot be replayed: said before any run
        backends.replay_of(str(source.kept))
    assert f"no {backends.TRANSCRIPT} kept for {cell.name}" in capsys.readouterr().err


def test_kept_files_never_hold_the_key_even_where_the_run_wrote_it(tmp_path, monkeypatch):
    """A model can echo what it was sent, and a server can put anything in its replies: whatever the run
    directory holds, the kept transcript, plan, feedback and code (committed to git) hold no key."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run, cell = tmp_path / "run", grid.Cell("collect_wood", "rlgpt", 1, 50_000)
    (run / "iter_1" / "skills").mkdir(parents=True)
    (run / "llm_transcript.jsonl").write_text(json.dumps({"url": "http://10.0.0.7:8000/v1", "request_hash": "a",
                                                          "reply": f"my key is {KEY}", "usage": {}}) + "\n")
    for name in ("plan.json", "feedback.json", "skills/chop_tree.py"):
        (run / "iter_1" / name).write_text(f"# {KEY}\n")
    path = tmp_path / "results" / f"{cell.name}.json"
    (path.with_suffix("") / "iter_3").mkdir(parents=True)  # kept by an earlier run of the cell (now stale)
    (path.with_suffix("") / "iter_3" / "plan.json").write_text("{}")
    r = backends.Backend(MODEL, "http://10.0.0.7:8000/v1").record({"task": cell.task}, run, path, [])
    kept = every_byte(path.with_suffix(""))
    assert sorted(p.relative_to(path.with_suffix("")).as_posix() for p in kept) == [
        "iter_1/feedback.json", "iter_1/plan.json", "iter_1/skills/chop_tree.py", backends.TRANSCRIPT]
    assert all(KEY.encode() not in data and b"10.0.0.7" not in data for data in kept.values())
    assert r["llm"]["calls"] == 1 and "10.0.0.7" not in json.dumps(r)
