"""Replay of a run's LLM side from its transcript (llm.LLMClient's JSONL), without a server.

`--llm replay:<transcript>` answers each call with a recorded reply, so a run made against a real model can be
re-run offline, exactly, while the code around the model changes (docs/llm.md; the ablation grid keeps each LLM
cell's transcript for this). Recorded errors are raised again, so agents see the same feedback they saw live.

    python -m pytest -q tests/test_llm.py -k replay
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

from llm import LLMError, LLMReplyError, Reply, parse_json, request_hash


class ReplayClient:
    """Answer chat() calls from a transcript, so a run's LLM side replays exactly without a server.

    mode "order": the n-th call gets the n-th record, whatever it asks (robust to prompt edits).
    mode "hash": a call gets the next unused record with the same request hash (robust to reordering).
    Recorded errors are raised again, so agents see the same feedback they saw live. A transcript may be
    gzipped (.gz: bench/ablation keeps LLM cells' transcripts so). Given `record`, each answered call is
    written there as the recorded reply under the request this run made (its own request_hash, the
    recorded one as `answered_from`): the replay's calls and tokens count like the original's, and a call
    that asked something else than the transcript answered shows."""

    def __init__(self, transcript: str | Path, mode: str = "order", record: str | Path | None = None,
                 log: Callable[[str], None] | None = None):
        if mode not in ("order", "hash"):
            raise ValueError(f"mode must be 'order' or 'hash', not {mode!r}")
        self.path, self.mode, self.calls, self.log = Path(transcript), mode, 0, log
        self.done = 0  # calls a resumed run made before its checkpoint (skip): answered already
        self.differed = 0  # calls answered in order whose request was not the recorded one
        self.record = Path(record) if record else None
        text = gzip.decompress(self.path.read_bytes()).decode() if self.path.suffix == ".gz" else self.path.read_text()
        self.records = [json.loads(line) for line in text.splitlines() if line.strip()]
        self._by_hash: dict[str, list[dict]] = {}
        for rec in self.records:
            self._by_hash.setdefault(rec["request_hash"], []).append(rec)

    def skip(self, n: int) -> None:
        """--resume: the run made n calls before its checkpoint, answered by the first n records (mode "order"),
        or by those its own transcript (`record`) names as answered_from in its first n lines ("hash"); the next
        call gets what a run without the interruption would have got, not the transcript's first answer."""
        self.done = n
        if self.mode == "hash" and self.record is not None and self.record.is_file():
            for line in self.record.read_text().splitlines()[:n]:
                queue = self._by_hash.get(json.loads(line).get("answered_from"), [])
                if queue:
                    queue.pop(0)

    def chat(self, messages: list[dict], *, json_schema: dict | None = None,
             images: list[bytes] | None = None, temperature: float = 0.2, max_tokens: int = 1024) -> Reply:
        """Same contract as LLMClient.chat; a call the transcript cannot answer raises LLMError."""
        self.calls += 1
        h = request_hash(messages, json_schema, images, temperature, max_tokens)
        if self.mode == "order":
            call = self.done + self.calls  # counted over the whole run, a resumed one included
            if call > len(self.records):
                raise LLMError(f"replay miss: call {call} but {self.path} holds only {len(self.records)} records")
            rec = self.records[call - 1]
            if rec["request_hash"] != h and not self.differed and self.log:  # said once: it is often meant
                self.log(f"replay: call {call} does not ask what the transcript's call {call} asked "
                         "(an edited prompt, or another task, seed or setting than the recorded run's); it is "
                         "answered in order anyway, and every such call is marked answered_from in this run's "
                         "llm_transcript.jsonl")
            self.differed += rec["request_hash"] != h
        else:
            queue = self._by_hash.get(h)
            if not queue:
                first = str(messages[-1].get("content", ""))[:80] if messages else ""
                raise LLMError(f"replay miss: no unused record with request hash {h} in {self.path} "
                               f"(call {self.calls}, last message starts {first!r})")
            rec = queue.pop(0)
        if self.record is not None:
            with self.record.open("a") as f:
                f.write(json.dumps({**rec, "request_hash": h, "messages": messages,
                                    "answered_from": rec["request_hash"]}, default=str) + "\n")
        if "error" in rec:
            if rec["error"]["type"] != "LLMReplyError":
                raise LLMError(rec["error"]["message"])
            raise LLMReplyError(rec["error"]["message"], rec["error"].get("problem"), rec.get("reply"))
        data = parse_json(rec["reply"], json_schema) if json_schema else None
        return Reply(rec["reply"], data, rec.get("usage", {}), rec.get("model", ""), 0.0,
                     rec.get("attempts", 1))
