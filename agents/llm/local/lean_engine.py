"""The lean engine: the GPU's engine for Llama-family models (agents.llm.local.lean), with the same four
methods as the transformers engine (agents.llm.local.hf_engine) and the same answers up to rounding.

A bucket's KV cache is allocated at its prefill with room for every token it may still take (its decoding steps,
or its Choice's options), left-padded rows marked by their first real column; a decoding step writes one column.
On CUDA a bucket that may decode `graph_min_steps` steps or more captures its step as a CUDA graph at the second
step and replays it after (one launch instead of ~300), and a shared prefix's forward is captured per bucketed length
(`PrefixRunner`: a multiple of `PREFIX_BUCKET` tokens) the second time a prefix of that length comes, replayed after;
a capture that fails turns graphs off for the engine, and `notes` says why. On a CPU nothing changes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch

from agents.llm.local.layout import left_padded
from agents.llm.local.lean import LeanDecoder, cache_views

#: a shared prefix's forward is captured for lengths rounded up to a multiple of this (tokens)
PREFIX_BUCKET = 64
#: at most this many prefix lengths are captured per engine (the rest run eagerly)
PREFIX_GRAPHS = 16


class StepRunner:
    """A bucket's one-token decoding step over static input buffers: run eagerly, or captured once as a CUDA graph
    (after one eager call has compiled the kernels and loaded the libraries) and replayed."""

    def __init__(self, engine: "LeanEngine", cache, start: torch.Tensor, prefix, graph: bool) -> None:
        n, dev = start.shape[0], start.device
        self.engine, self.cache, self.start, self.prefix = engine, cache, start, prefix
        self.tok = torch.zeros((n, 1), dtype=torch.long, device=dev)
        self.pos = torch.zeros((n, 1), dtype=torch.long, device=dev)
        self.col = torch.zeros(1, dtype=torch.int32, device=dev)
        self.graph_wanted, self.graph, self.out, self.calls = graph, None, None, 0

    def _body(self) -> torch.Tensor:
        dec = self.engine.dec
        hidden = dec.forward(self.tok, self.pos, self.cache, self.col, self.start, None, self.prefix)
        return dec.logits(hidden[:, -1], self.engine.lm.fdtype)

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, col: int) -> torch.Tensor:
        """Logits [B, V] after feeding `tokens` [B] at `positions` [B] into cache column `col` (a graph's output
        buffer: read it before the next call)."""
        self.tok.copy_(tokens.view(-1, 1))
        self.pos.copy_(positions.view(-1, 1))
        self.col.fill_(col)
        self.calls += 1
        if self.graph is not None:
            self.graph.replay()
            return self.out
        if self.graph_wanted and self.calls >= 2 and self.engine.graphs:
            try:
                self.graph, self.out = self._capture()
                self.graph.replay()
                self.engine.counters["graphs_captured"] += 1
                return self.out
            except Exception as exc:  # noqa: BLE001 - a capture the driver or a kernel refuses: eager from here on
                self.engine.disable_graphs(first_line(exc))
                self.graph_wanted, self.graph = False, None
                if torch.cuda.is_available():  # let what the failed capture queued finish
                    torch.cuda.synchronize()
        return self._body()

    def _capture(self) -> tuple[Any, torch.Tensor]:
        """The step captured as a CUDA graph (`capture`: the step rewrites the same column, so running it twice is
        harmless) and its output buffer."""
        out: list[torch.Tensor] = []
        graph = capture(self.engine, lambda: out.append(self._body()))
        return graph, out[-1]


class PrefixRunner:
    """A shared prefix's forward for prefixes of up to `length` tokens over static buffers: the tokens right-padded
    to `length` (attention is causal, so the padding after them changes none of their keys and values), run
    eagerly or replayed as a CUDA graph, then the real columns copied out of the static cache in one launch."""

    def __init__(self, engine: "LeanEngine", length: int, graph: bool) -> None:
        dev = engine.lm.device
        self.engine, self.length, self.graph_wanted, self.graph = engine, length, graph, None
        self.ids = torch.zeros((1, length), dtype=torch.long, device=dev)
        self.positions = torch.arange(length, device=dev)[None]
        self.zero = torch.zeros(1, dtype=torch.int32, device=dev)
        self.buf = engine.dec.cache_buffer(1, length)
        self.cache = cache_views(self.buf)

    def _body(self) -> None:
        self.engine.dec.forward(self.ids, self.positions, self.cache, self.zero, self.zero, None, None)

    def __call__(self, tokens: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The prefix's KV ([1, Hk, len(tokens), D] per layer, its own copy)."""
        n = len(tokens)
        padded = np.zeros(self.length, dtype=np.int64)
        padded[:n] = tokens
        self.ids.copy_(self.engine._device(padded[None]))
        if self.graph is None and self.graph_wanted and self.engine.graphs:
            try:
                self.graph = capture(self.engine, self._body)
                self.engine.counters["prefix_graphs_captured"] += 1
            except Exception as exc:  # noqa: BLE001 - a capture the driver or a kernel refuses: eager from here on
                self.engine.disable_graphs(first_line(exc))
                self.graph_wanted = False
                if torch.cuda.is_available():  # let what the failed capture queued finish
                    torch.cuda.synchronize()
        if self.graph is not None:
            self.graph.replay()
            self.engine.counters["prefix_graph_replays"] += 1
        else:
            self._body()
        return cache_views(self.buf[:, :, :, :, :n].clone())


def first_line(exc: Exception) -> str:
    """An exception's type and the first line of its text (a note, a warning)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"


def capture(engine: "LeanEngine", body) -> Any:
    """`body` captured as a CUDA graph on the engine's side stream, after one run there (its writes are idempotent)
    so that kernels are compiled and library workspaces exist before capture. Unlike `torch.cuda.graph` this
    neither synchronises nor empties the allocator's cache: the next buckets reuse its blocks. A model off CUDA is
    refused here: on a machine with CUDA, a capture of CPU work would succeed empty and replay nothing."""
    if not str(engine.lm.device).startswith("cuda"):
        raise RuntimeError(f"a CUDA graph needs the model on a CUDA device; it is on {engine.lm.device}")
    stream = engine.capture_stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        body()
        graph.capture_begin()
        try:
            body()
        finally:
            graph.capture_end()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


@dataclass
class LeanState:
    """A bucket's decoding state: its KV cache, each row's first real column, the next free column, each row's
    next position, and its step runner."""

    cache: list
    start: torch.Tensor
    col: int
    next_pos: torch.Tensor
    runner: Optional[StepRunner] = None
    extra: dict = field(default_factory=dict)


class LeanEngine:
    """Forwards through a `LeanDecoder` over the weights of `lm` (a LocalLM) on its device."""

    name = "lean"

    def __init__(self, lm: Any, kernels: Optional[str] = None) -> None:
        self.lm = lm
        self.dec = LeanDecoder(lm.model, lm.device, lm.dtype, kernels)
        self.graphs = lm.device.startswith("cuda")
        self.graph_min_steps = 8
        self.counters = {"graphs_captured": 0, "prefix_graphs_captured": 0, "prefix_graph_replays": 0}
        self._stream: Any = None
        self._notes: list[str] = []
        self._prefix_seen: dict[int, int] = {}  # bucketed prefix length -> prefixes of it forwarded
        self._prefix_runners: dict[tuple[int, int], PrefixRunner] = {}  # (length, rotary table address) -> runner

    @property
    def kernels(self) -> str:
        """"triton" or "torch": the kernels this engine's forward runs (see `notes` for why not Triton)."""
        return self.dec.kernels.name

    @property
    def notes(self) -> list[str]:
        """What this engine does not do that it would on a GPU, and why (kernels, graphs)."""
        return ([self.dec.kernels.note] if self.dec.kernels.note else []) + self._notes

    def capture_stream(self) -> Any:
        """The side stream decoding steps are captured on (one per engine)."""
        if self._stream is None:
            self._stream = torch.cuda.Stream()
        return self._stream

    def disable_graphs(self, why: str) -> None:
        """Decode eagerly from now on (a capture failed): said once on stderr and kept in `notes`."""
        if self.graphs:
            self.graphs = False
            self._notes.append(f"CUDA graphs off: {why}")
            print(f"societas: CUDA graphs off ({why}); decoding steps run eagerly", file=sys.stderr)

    def _device(self, array) -> torch.Tensor:
        """A NumPy array on the engine's device."""
        return torch.from_numpy(array).to(self.lm.device, non_blocking=True)

    def prefix_kv(self, tokens: list[int], parent=None, start: int = 0):
        """The KV of a shared prefix, one copy ([1, Hk, P, D] per layer); with `parent` (the KV of tokens[:start])
        only tokens[start:] are forwarded, attending to it."""
        dev, n = self.lm.device, len(tokens) - start
        self.dec.ensure_positions(len(tokens))
        runner = self._prefix_runner(len(tokens)) if parent is None and start == 0 else None
        if runner is not None:
            return runner(tokens)
        cache = self.dec.new_cache(1, n)
        zero = torch.zeros(1, dtype=torch.int32, device=dev)
        positions = torch.arange(start, len(tokens), device=dev)[None]
        self.dec.forward(self._device(left_padded([tokens[start:]], 0)), positions, cache, zero, zero, None, parent)
        if parent is None:
            return cache
        return [(torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)) for (pk, pv), (k, v) in zip(parent, cache)]

    def _prefix_runner(self, n: int) -> Optional[PrefixRunner]:
        """The runner that replays a prefix of `n` tokens as a CUDA graph: from the second prefix of its bucketed
        length on (the first runs eagerly, as on a CPU), while graphs are on and fewer than `PREFIX_GRAPHS` exist."""
        if not self.graphs:
            return None
        length = -(-n // PREFIX_BUCKET) * PREFIX_BUCKET
        self._prefix_seen[length] = seen = self._prefix_seen.get(length, 0) + 1
        if seen < 2:
            return None
        self.dec.ensure_positions(length)
        key = (length, self.dec._tables[0].data_ptr())  # a grown rotary table moves: capture anew
        if key not in self._prefix_runners:
            if len(self._prefix_runners) >= PREFIX_GRAPHS:
                return None
            self._prefix_runners[key] = PrefixRunner(self, length, graph=True)
        return self._prefix_runners[key]

    def prefill(self, rows: list[list[int]], shared: int, prefix_kv, room: int) -> tuple[torch.Tensor, LeanState]:
        """Forward the rows' own tokens (after `shared` prefix tokens) left-padded into a cache with `room` more
        columns: the last logits and the state."""
        lm, dev = self.lm, self.lm.device
        own = [r[shared:] for r in rows]
        width = max(len(r) for r in own)
        ids = self._device(left_padded(own, lm.pad_id))
        start = self._device(np.fromiter((width - len(r) for r in own), dtype=np.int32, count=len(own)))
        real = torch.arange(width, device=dev)[None, :] >= start[:, None]
        positions = shared + (real.long().cumsum(-1) - 1).clamp(min=0)  # padding at the first position, as transformers
        self.dec.ensure_positions(shared + width + room + 1)
        cache = self.dec.new_cache(len(rows), width + max(room, 0))
        prefix = prefix_kv if shared else None
        hidden = self.dec.forward(ids, positions, cache, torch.zeros(1, dtype=torch.int32, device=dev), start, None, prefix)
        state = LeanState(cache, start, width, positions[:, -1] + 1)
        state.runner = StepRunner(self, cache, start, prefix, graph=self.graphs and room >= self.graph_min_steps)
        return self.dec.logits(hidden[:, -1], lm.fdtype), state

    def replays(self, state: LeanState) -> bool:
        """Whether the bucket's next step replays a captured CUDA graph (one launch: cheap to queue ahead)."""
        return state.runner is not None and state.runner.graph is not None

    def step(self, tokens: torch.Tensor, state: LeanState, prefix_kv) -> torch.Tensor:
        """Feed one token per row at its next position into the next column; the new logits (the state advances)."""
        if state.col >= state.cache[0][0].shape[2]:
            raise RuntimeError(f"the bucket's KV cache is full ({state.col} columns): its prefill gave too little room")
        logits = state.runner(tokens, state.next_pos, state.col)
        state.col += 1
        state.next_pos = state.next_pos + 1
        return logits

    def option_logits(self, opt_ids: torch.Tensor, seg: torch.Tensor, off: torch.Tensor, kmax: int, state: LeanState,
                      prefix_kv) -> torch.Tensor:
        """Logits [B, W - 1, V] after each option token but the row's last (see HFEngine.option_logits): the options
        go after the prompt in the cache, segment k + 1 for option k (the padding's segment kmax + 1), so the
        attention's segment rule gives each option the prompt and its own earlier tokens."""
        n, width = opt_ids.shape
        columns = state.cache[0][0].shape[2]
        if state.col + width > columns:
            raise RuntimeError(f"the bucket's KV cache has {columns - state.col} free columns, the options need {width}")
        segments = torch.zeros((n, columns), dtype=torch.int32, device=opt_ids.device)
        segments[:, state.col:state.col + width] = seg.to(torch.int32) + 1
        col0 = torch.full((1,), state.col, dtype=torch.int32, device=opt_ids.device)
        hidden = self.dec.forward(opt_ids, state.next_pos[:, None] + off, state.cache, col0, state.start, segments,
                                  prefix_kv)
        return self.dec.logits(hidden[:, :-1], self.lm.fdtype)
