"""`inference.log`: vLLM's start-up, uvicorn access lines, and vLLM's 10-second stats.

This is the bulk of a real run's bytes (one access line per model call), so it is generated
from a pre-built ring of fixed-width request lines: a chunk of k requests is one bytes slice,
not k formatted strings. That keeps a 1 GB run to seconds of Python.
"""

from __future__ import annotations

from functools import cache

from .events import Event, Sim
from .rng import stream
from .timeline import METRICS_POLL_INTERVAL_S, VLLM_STATS_INTERVAL_S, ticks

RING_LINES = 4096
VLLM_VERSION = "0.26.1"


@cache
def request_ring(seed: int) -> tuple[bytes, int]:
    """RING_LINES access lines of identical width (ports are always 5 digits), and that width."""
    r = stream(seed, "ports")
    ports = [r.randrange(32768, 61000) for _ in range(256)]
    lines = [
        f'INFO:     127.0.0.1:{ports[r.randrange(256)]} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        for _ in range(RING_LINES)
    ]
    return "".join(lines).encode(), len(lines[0])


def requests_chunk(seed: int, start: int, count: int) -> bytes:
    ring, width = request_ring(seed)
    out = []
    pos = start % RING_LINES
    while count > 0:
        take = min(count, RING_LINES - pos)
        out.append(ring[pos * width : (pos + take) * width])
        count -= take
        pos = 0
    return b"".join(out)


def startup(sim: Sim) -> list[Event]:
    sc, tl = sim.sc, sim.tl
    ready = tl.inference_ready
    port = 8100 if sim.h else 8000
    args = (
        f"{{'model': '{sc.model}', 'host': '0.0.0.0', 'port': {port}, 'max_model_len': {sc.seq_len}, "
        f"'enable_prefix_caching': True, 'data_parallel_size': {sc.inference_gpus}, 'gpu_memory_utilization': 0.9}}"
    )
    lines = [
        (0.9, "[__init__.py:216] Automatically detected platform cuda."),
        (6.2, f"[api_server.py:1839] vLLM API server version {VLLM_VERSION}"),
        (6.3, f"[utils.py:233] non-default args: {args}"),
        (12.8, f"[model.py:547] Resolved architecture: {sc.model.rsplit('/', 1)[-1].split('-')[0]}ForCausalLM"),
        (12.9, f"[model.py:1510] Using max model len {sc.seq_len}"),
        (18.4, f"[gpu_model_runner.py:2602] Starting to load model {sc.model}..."),
        (21.0, "[default_loader.py:267] Loading weights took 1.42 seconds"),
        (21.6, "[gpu_model_runner.py:2653] Model loading took 1.1217 GiB and 2.113254 seconds"),
        (27.5, "[kv_cache_utils.py:1087] GPU KV cache size: 602,624 tokens"),
        (ready - 4.0, "[gpu_model_runner.py:3480] Graph capturing finished in 9 secs, took 0.52 GiB"),
        (ready - 0.6, f"[api_server.py:1634] Starting vLLM API server 0 on http://0.0.0.0:{port}"),
    ]
    out = [Event(t, "inference", f"INFO {sim.clock.vllm(t)} {msg}\n") for t, msg in lines]
    pid = sim.pid["inference"]
    out.append(
        Event(
            ready - 0.3,
            "inference",
            f"INFO:     Started server process [{pid}]\nINFO:     Waiting for application startup.\n"
            "INFO:     Application startup complete.\n",
        )
    )
    out.append(Event(ready + 0.4, "inference", 'INFO:     127.0.0.1:52114 - "GET /health HTTP/1.1" 200 OK\n'))
    out.append(Event(ready + 0.5, "inference", 'INFO:     127.0.0.1:52114 - "GET /v1/models HTTP/1.1" 200 OK\n'))
    return out


def _stats_line(sim: Sim, t: float, reqs: int, inp: float, out_tokens: float, running: int) -> str:
    r = stream(sim.sc.seed, "vllmstat", round(t))
    prompt_tps = reqs * inp / VLLM_STATS_INTERVAL_S
    gen_tps = reqs * out_tokens / VLLM_STATS_INTERVAL_S
    kv = min(99.9, running * (inp + out_tokens) / 602624 * 100 * (1 + 0.2 * r.random()))
    hit = 40 + 30 * r.random()
    lines = []
    for engine in range(sim.sc.inference_gpus):
        lines.append(
            f"INFO {sim.clock.vllm(t)} [loggers.py:123] Engine {engine:03d}: Avg prompt throughput: "
            f"{prompt_tps / sim.sc.inference_gpus:.1f} tokens/s, Avg generation throughput: "
            f"{gen_tps / sim.sc.inference_gpus:.1f} tokens/s, Running: {running // sim.sc.inference_gpus} reqs, "
            f"Waiting: 0 reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {hit:.1f}%\n"
        )
    return "".join(lines)


def step(sim: Sim, n: int) -> list[Event]:
    """Requests of orchestrator step n (and of the evals running in its window)."""
    sc, tl = sim.sc, sim.tl
    st = sim.dyn.at(n)
    a, b = tl.ship[n - 1], tl.ship[n]
    g = tl.gen_start[n]
    total = round(st.generated * st.turns)
    if n > 1:
        total += sum(sc.eval_examples * sc.eval_k for _ in tl.evals(n - 1))
    cursor = stream(sc.seed, "cursor", n).randrange(RING_LINES)
    end = min(b, sim.horizon)
    points = ticks(a, end, 0.8, VLLM_STATS_INTERVAL_S)
    polls = ticks(a, end, tl.orch_start, METRICS_POLL_INTERVAL_S) if sim.h else []
    out: list[Event] = []
    done = 0
    prev = a
    for t in [*points, b] if b <= end else points:
        frac = 0.0 if t <= g else min(1.0, (t - g) / (b - g))
        upto = round(total * frac) if t < b else total
        chunk = requests_chunk(sc.seed, cursor + done, upto - done)
        polls_here = sum(prev < p <= t for p in polls)
        head = 'INFO:     127.0.0.1:52114 - "GET /metrics HTTP/1.1" 200 OK\n' * polls_here
        text = head.encode() + chunk
        if t < b:
            running = 0 if t <= g else min(sc.batch_size, max(1, total - upto))
            text += _stats_line(sim, t, upto - done, st.input_tokens, st.output_tokens, running).encode()
        done, prev = upto, t
        if text:
            out.append(Event(t, "inference", text))
    return out


def engine_died(sim: Sim, t: float) -> list[Event]:
    """vLLM's engine core dies (inference-unreachable); the API server answers nothing after."""
    stamp = sim.clock.vllm(t)
    return [
        Event(
            t,
            "inference",
            f"ERROR {stamp} [core.py:710] EngineCore encountered a fatal error.\n"
            f"ERROR {stamp} [core.py:710] RuntimeError: CUDA error: an illegal memory access was encountered\n"
            f"ERROR {stamp} [async_llm.py:480] AsyncLLM output_handler failed.\n"
            f"ERROR {stamp} [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
            "issue. See stack trace (above) for the root cause.\n",
        )
    ]


def finish(sim: Sim, t: float) -> list[Event]:
    pid = sim.pid["inference"]
    return [
        Event(
            t,
            "inference",
            "INFO:     Shutting down\nINFO:     Waiting for application shutdown.\n"
            f"INFO:     Application shutdown complete.\nINFO:     Finished server process [{pid}]\n",
        )
    ]
