"""A reward model served by the verifier (`rm` items, issue 25) against TRL's in-process path, on one checkpoint, the
same texts and the same device:

    python bench/rm_speed.py --device cuda --model-shape qwen0.5b --out "$OUT/rm.json"   # one H100 (expected ~1.5 min)
    python bench/rm_speed.py --sizes 64 256 --rounds 3                                 # CPU, tiny model
    python bench/rm_speed.py --smoke --out /tmp/rm.json                                # seconds (the test's run)
    python bench/rm_speed.py --device cuda --model-shape qwen0.5b --phases long --long-sizes 64 4096 \
        --long-tokens 8000 --out "$OUT/rm-long.json"                                    # one H100 (~5 min)

- **The service**: `python -m verifier_service` with `VERIFIER_MODELS` naming the checkpoint on `--device`; each
  batch is one POST /v1/score of `rm` items (`{"model": NAME}`, template raw), timed from the request to the parsed
  scores. The service tokenizes, sorts by length and cuts the batch into forwards of at most `--batch-tokens` tokens.
- **TRL's path**: what GRPOTrainer does with a reward model given as a PreTrainedModel (trl 1.16,
  trl/trainer/grpo_trainer.py, `_calculate_rewards`, lines 1607-1620): the texts as `prompt + completion`, the
  reward processing class over the whole batch in one call (padding right, no special tokens), the tensors moved to
  the device (`Trainer._prepare_inputs`), one forward under `inference_mode`, `logits[:, 0]`; the pad token set as
  its __init__ sets it (lines 599-603). Timed from the texts to the scores as Python floats.

Both get the same distinct GSM8K- and MATH-shaped completions (bench/workloads.py: reasoning of a few hundred
tokens) at each size; the time is the median of `--rounds` rounds, after one warm-up call each. The two lay the
text out slightly differently (the service as RewardTrainer trained the model: the EOS text appended, the
tokenizer's special tokens; TRL's GRPO path neither), one token per item at most.

With `--device cuda`, peak GPU memory too: TRL's as `torch.cuda.max_memory_allocated` (reset before each size), and
for both processes the memory nvidia-smi shows them holding after the size (the CUDA context and what PyTorch's
caching allocator reserved so far: sizes run in ascending order, so it is the largest size's so far). The service
does not report its own allocator's peak, so nvidia-smi's figure is the one the two share.

The `long` phase is the memory bound: `--long-sizes` batches of completions of about `--long-tokens` tokens each (the
bench's completions strung together), each batch one POST (one round: the point is memory, not a median). The
service's GPU memory is sampled from nvidia-smi every half second while its request runs (its peak held); TRL's path
gets the same batch in its one forward, and an out-of-memory error there is recorded as the result it is
(trl#4419), not raised.

Everything is built here from random weights (`--model-shape tiny`: hidden 32; `qwen0.5b`: Qwen2.5-0.5B's shape and
vocabulary size, drawn on the device); nothing is downloaded. Results print per size as they come and go to `--out`
(JSON) after each size, so a run stopped early keeps what it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from machine import load_average, service_processes, verifier
from workloads import gsm8k_step, math_step

from trainer_client.tiny_model import build_reward_model, build_tokenizer

MODEL = "bench-rm"
QWEN_VOCAB = 151_646  # Qwen2.5's vocabulary: the embedding's rows (bench/gpu.py)
SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2, "kv_heads": 1, "max_positions": 1024},
    # Qwen2.5-0.5B's shape (bench/gpu.py QWEN_05B), its 151,646-row embedding, as a sequence classifier
    "qwen0.5b": {"hidden": 896, "intermediate": 4864, "layers": 24, "heads": 14, "kv_heads": 2, "max_positions": 2048},
}
# The tokenizer is trained here on the bench's own texts (a 151,646-token BPE takes minutes to train): a vocabulary
# of a few thousand gives completions of a few hundred tokens, as a real tokenizer does for this text.
TOKENIZER_VOCAB = {"tiny": 2000, "qwen0.5b": 8000}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--model-shape", choices=tuple(SHAPES), default="tiny")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024], help="items per batch")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per size and side (the median is kept)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), help="default: bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--batch-tokens", type=int, default=65_536, help="the service's token budget per forward")
    parser.add_argument("--phases", nargs="+", choices=("sizes", "long"), default=["sizes"])
    parser.add_argument("--long-sizes", type=int, nargs="+", default=[64, 4096], help="items per long batch")
    parser.add_argument("--long-tokens", type=int, default=8000, help="tokens per long completion, about")
    parser.add_argument("--deadline", type=float, default=600, help="the service's batch deadline (s): past it, null")
    parser.add_argument("--verifier-log", type=Path, help="keep the verifier's log here")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round: whether both sides run")
    parser.add_argument("--out", type=Path, help="a JSON file of the results (written after each size)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.rounds = [4, 8], 1
        args.long_sizes, args.long_tokens = [4], 1200
    args.sizes = sorted(args.sizes)  # ascending: nvidia-smi's reading after a size is that size's high-water mark
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    return args


def texts(size: int, seed: int) -> list[tuple[str, str]]:
    """`size` distinct (prompt, completion) pairs, half GSM8K-shaped and half MATH-shaped, deterministic in `seed`."""
    groups = size // 16 + 1
    samples = [s for pair in zip(gsm8k_step(seed, groups), math_step(seed, groups), strict=True) for s in pair]
    pairs, seen = [], set()
    for sample in samples:
        prompt = f"Problem {sample.prompt} ({sample.gold}): solve it and give the final answer.\n"
        if (prompt, sample.completion) not in seen:
            seen.add((prompt, sample.completion))
            pairs.append((prompt, sample.completion))
    if len(pairs) < size:
        pairs += texts(size - len(pairs), seed + 1000)
    return pairs[:size]


def long_texts(size: int, tokens: int, tokenizer: Any) -> list[tuple[str, str]]:
    """`size` distinct (prompt, completion) pairs of about `tokens` tokens each (at most that many, by the pieces'
    own counts): the bench's completions strung together, each item starting at its own piece."""
    pool = [completion for _, completion in texts(512, seed=7)]
    counts = [len(ids) for ids in tokenizer(pool, add_special_tokens=False)["input_ids"]]
    pairs = []
    for index in range(size):
        prompt = f"Problem set {index}: solve each problem and give the final answers.\n"
        budget, pieces, at = tokens - 32, [], index % len(pool)
        while budget - counts[at] - 2 >= 0:
            pieces.append(pool[at])
            budget -= counts[at] + 2  # the separator's tokens, about
            at = (at + 1) % len(pool)
        pairs.append((prompt, "\n\n".join(pieces)))
    return pairs


def build(path: Path, shape: str, device: str, lines: list[str], max_positions: int) -> None:
    build_tokenizer(path, lines, vocab_size=TOKENIZER_VOCAB[shape])
    vocab = QWEN_VOCAB if shape == "qwen0.5b" else None
    build_reward_model(
        path, seed=0, vocab_size=vocab, device=device, **(SHAPES[shape] | {"max_positions": max_positions})
    )
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


def timed(call: Callable[[], list[float]], rounds: int) -> tuple[float, list[float]]:
    """The median wall time of `rounds` calls, and the last call's scores."""
    times, scores = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        scores = call()
        times.append(time.perf_counter() - started)
    return median(times), scores


def service_call(client: httpx.Client, url: str, pairs: list[tuple[str, str]]) -> Callable[[], list[float]]:
    items = [{"prompt": p, "completion": c, "rm": {"model": MODEL, "template": "raw"}} for p, c in pairs]

    def call() -> list[float]:
        response = client.post(f"{url}/v1/score", json={"items": items})
        response.raise_for_status()
        results = [result["components"]["rm"] for result in response.json()["results"]]
        unscored = [result["verdict"] for result in results if result["score"] is None]
        if unscored:  # a null is not a score: the timing would flatter the service
            raise SystemExit(f"the service left {len(unscored)} of {len(results)} items unscored: {set(unscored)}")
        return [result["score"] for result in results]

    return call


class TrlRewardModel:
    """GRPOTrainer's reward-model path (trl/trainer/grpo_trainer.py, trl 1.16): loaded as `reward_funcs` given as a
    model id are (`AutoModelForSequenceClassification.from_pretrained(..., num_labels=1)`, lines 558-560), the pad
    token set as in __init__ (lines 599-603), and scored as `_calculate_rewards` does (lines 1607-1620)."""

    def __init__(self, path: Path, device: str, dtype: str) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch, self.device = torch, torch.device(device)
        self.model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, dtype=getattr(torch, dtype))
        self.model = self.model.to(self.device).eval()  # accelerator.prepare_model(evaluation_mode=True) in TRL
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.config.get_text_config().pad_token_id = self.tokenizer.pad_token_id

    def call(self, pairs: list[tuple[str, str]]) -> Callable[[], list[float]]:
        torch = self.torch
        prompts, completions = [p for p, _ in pairs], [c for _, c in pairs]

        def call() -> list[float]:
            rewards_per_func = torch.zeros(len(prompts), 1, device=self.device)  # line 1581
            texts = [p + c for p, c in zip(prompts, completions, strict=True)]  # non-conversational, line 1614
            reward_inputs = self.tokenizer(
                text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False
            )
            reward_inputs = {key: value.to(self.device) for key, value in reward_inputs.items()}  # _prepare_inputs
            with torch.inference_mode():
                rewards_per_func[:, 0] = self.model(**reward_inputs).logits[:, 0]
            return [float(value) for value in rewards_per_func[:, 0].tolist()]  # waits for the GPU

        return call


def process_gpu_mib() -> dict[int, int]:
    """Each process's GPU memory as nvidia-smi shows it (MiB), by pid; empty where nvidia-smi cannot say."""
    if shutil.which("nvidia-smi") is None:
        return {}
    query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        lines = subprocess.run(query, capture_output=True, text=True, timeout=20, check=True).stdout.splitlines()
        return {int(pid): int(mib) for pid, mib in (line.split(",") for line in lines if line.strip())}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}


def measure_size(
    size: int, args: argparse.Namespace, service: Callable[..., Callable[[], list[float]]], trl: TrlRewardModel
) -> dict[str, Any]:
    pairs = texts(size, seed=size)
    tokens = [len(ids) for ids in trl.tokenizer([p + c for p, c in pairs], add_special_tokens=False)["input_ids"]]
    cuda = args.device == "cuda"
    if cuda:
        trl.torch.cuda.reset_peak_memory_stats()
    service_s, service_scores = timed(service(pairs), args.rounds)
    trl_s, trl_scores = timed(trl.call(pairs), args.rounds)
    row: dict[str, Any] = {
        "size": size,
        "tokens_mean": sum(tokens) / size,
        "tokens_max": max(tokens),
        "service_s": service_s,
        "trl_s": trl_s,
        "service_over_trl": service_s / trl_s,
        "service_items_per_s": size / service_s,
        "trl_items_per_s": size / trl_s,
        "scores": {"service": len(service_scores), "trl": len(trl_scores)},
    }
    if cuda:
        row["trl_peak_allocated_mib"] = trl.torch.cuda.max_memory_allocated() / 2**20
    return row


class GpuSampler:
    """The most GPU memory nvidia-smi shows a process holding, sampled every `every` seconds in a thread while the
    `with` block runs (MiB; None where nvidia-smi shows nothing, or not `active`)."""

    def __init__(self, pid: int, active: bool, every: float = 0.5) -> None:
        self.pid, self.active, self.every, self.peak = pid, active, every, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            held = process_gpu_mib().get(self.pid)
            if held is not None:
                self.peak = max(self.peak or 0, held)
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> GpuSampler:
        if self.active:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self.active:
            self._thread.join()


def measure_long(
    size: int, args: argparse.Namespace, client: httpx.Client, url: str, trl: TrlRewardModel, service_pid: int
) -> dict[str, Any]:
    """One batch of `size` long completions, once through the service and once through TRL's path, with the GPU
    memory each held; TRL's out-of-memory error is a result."""
    pairs = long_texts(size, args.long_tokens, trl.tokenizer)
    sample = pairs[:64]
    tokens = [len(ids) for ids in trl.tokenizer([p + c for p, c in sample], add_special_tokens=False)["input_ids"]]
    items = [{"prompt": p, "completion": c, "rm": {"model": MODEL, "template": "raw"}} for p, c in pairs]
    body = json.dumps({"items": items}).encode()
    cuda = args.device == "cuda"
    with GpuSampler(service_pid, cuda) as service_memory:
        started = time.perf_counter()
        response = client.post(f"{url}/v1/score", content=body, headers={"content-type": "application/json"})
        service_s = time.perf_counter() - started
    response.raise_for_status()
    results = [result["components"]["rm"] for result in response.json()["results"]]
    verdicts: dict[str, int] = {}
    for result in results:
        if result["score"] is None:
            verdicts[result["verdict"]] = verdicts.get(result["verdict"], 0) + 1
    row: dict[str, Any] = {
        "size": size,
        "request_mib": len(body) / 2**20,
        "tokens_mean_first_64": sum(tokens) / len(tokens),
        "tokens_max_first_64": max(tokens),
        "service_s": service_s,
        "service_scored": len(results) - sum(verdicts.values()),
        "service_unscored": verdicts,
        "service_peak_gpu_mib": service_memory.peak,
    }
    if cuda:
        trl.torch.cuda.empty_cache()
        trl.torch.cuda.reset_peak_memory_stats()
    with GpuSampler(os.getpid(), cuda) as trl_memory:
        started = time.perf_counter()
        try:
            trl_scores = trl.call(pairs)()
            row["trl_scored"] = len(trl_scores)
        except (MemoryError, trl.torch.OutOfMemoryError) as exc:
            row["trl_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        row["trl_s"] = time.perf_counter() - started
    row["trl_peak_gpu_mib"] = trl_memory.peak
    if cuda:
        row["trl_peak_allocated_mib"] = trl.torch.cuda.max_memory_allocated() / 2**20
        trl.torch.cuda.empty_cache()
    return row


def long_line(row: dict[str, Any]) -> str:
    line = (
        f"long: {row['size']:>5} items of ~{row['tokens_mean_first_64']:.0f} tokens ({row['request_mib']:.0f} MiB of "
        f"JSON): service {row['service_s']:.1f} s, {row['service_scored']} scored, unscored {row['service_unscored']},"
        f" peak GPU held {row['service_peak_gpu_mib']} MiB; TRL "
    )
    if "trl_error" in row:
        line += f"failed after {row['trl_s']:.1f} s ({row['trl_error'][:120]})"
    else:
        line += f"{row['trl_s']:.1f} s, {row['trl_scored']} scored"
    return line + f", peak GPU held {row['trl_peak_gpu_mib']} MiB, allocated {row.get('trl_peak_allocated_mib')} MiB"


def report_line(row: dict[str, Any]) -> str:
    line = (
        f"{row['size']:>5} items ({row['tokens_mean']:.0f} tokens mean, {row['tokens_max']} max): "
        f"service {row['service_s']:.3f} s ({row['service_items_per_s']:.0f} items/s), "
        f"TRL {row['trl_s']:.3f} s ({row['trl_items_per_s']:.0f} items/s), service/TRL {row['service_over_trl']:.2f}"
    )
    if "trl_peak_allocated_mib" in row:
        line += f"; GPU: TRL peak allocated {row['trl_peak_allocated_mib']:.0f} MiB"
        line += f", nvidia-smi service {row.get('service_gpu_mib')} MiB, TRL process {row.get('trl_gpu_mib')} MiB"
    return line


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import torch
    import transformers
    import trl as trl_package

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here")
    report: dict[str, Any] = {
        "device": args.device,
        "phases": args.phases,
        "model_shape": args.model_shape,
        "dtype": args.dtype,
        "rounds": args.rounds,
        "batch_tokens": args.batch_tokens,
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl_package.__version__,
            "load_average": load_average(),
            "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        },
        "sizes": [],
    }
    print(f"machine: {json.dumps(report['machine'])}", flush=True)
    started = time.monotonic()
    checkpoint = work / "rm"
    lines = [p + c for size in args.sizes for p, c in texts(size, seed=size)] + [c for _, c in texts(512, seed=7)]
    max_tokens = SHAPES[args.model_shape]["max_positions"]
    if "long" in args.phases:
        max_tokens = max(max_tokens, args.long_tokens + 256)
    build(checkpoint, args.model_shape, args.device, lines, max_tokens)
    print(f"checkpoint built in {time.monotonic() - started:.1f} s", flush=True)
    spec = {
        "path": str(checkpoint),
        "device": args.device,
        "dtype": args.dtype,
        "max_tokens": max_tokens,
        "batch_tokens": max(args.batch_tokens, max_tokens),
    }
    settings = {"VERIFIER_MODELS": json.dumps({MODEL: spec}), "VERIFIER_MATH_WORKERS": "1"}
    settings["VERIFIER_BATCH_TIMEOUT_S"] = str(args.deadline)
    settings["VERIFIER_MAX_REQUEST_BYTES"] = str(2**30)  # the long phase's one request: ~130 MiB at 4,096 x 8,000
    report["long"] = []
    with verifier(log=work / "verifier.log", **settings) as url, httpx.Client(timeout=900) as client:
        service_pid = service_processes(url)[0]
        trl = TrlRewardModel(checkpoint, args.device, args.dtype)
        print(f"service and TRL model loaded at {time.monotonic() - started:.1f} s", flush=True)
        warm = texts(args.sizes[0], seed=0)  # one call each first: CUDA kernels, allocator, the service's imports
        service_call(client, url, warm)()
        trl.call(warm)()
        for size in args.sizes if "sizes" in args.phases else ():
            row = measure_size(size, args, lambda pairs: service_call(client, url, pairs), trl)
            if args.device == "cuda":
                held = process_gpu_mib()
                row["service_gpu_mib"], row["trl_gpu_mib"] = held.get(service_pid), held.get(os.getpid())
            row["load_average"], row["elapsed_s"] = load_average(), time.monotonic() - started
            report["sizes"].append(row)
            print(report_line(row), flush=True)
            if args.out:
                args.out.write_text(json.dumps(report, indent=2))
        for size in args.long_sizes if "long" in args.phases else ():
            row = measure_long(size, args, client, url, trl, service_pid)
            row["load_average"], row["elapsed_s"] = load_average(), time.monotonic() - started
            report["long"].append(row)
            print(long_line(row), flush=True)
            if args.out:
                args.out.write_text(json.dumps(report, indent=2))
    report["total_s"] = time.monotonic() - started
    held = [row.get("service_gpu_mib") for row in report["sizes"]] + [
        row["service_peak_gpu_mib"] for row in report["long"]
    ]
    if args.device == "cuda" and all(mib is None for mib in held):
        report["note"] = "nvidia-smi showed no per-process memory here (no nvidia-smi, or another PID namespace)"
    return report


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    # a SIGTERM (a timeout's) unwinds: the verifier is stopped on the way out, not left running with the model loaded
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # nothing comes from the hub
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rm-bench-") as work:
        try:
            report = run(args, Path(work))
        finally:
            if args.verifier_log and (Path(work) / "verifier.log").exists():
                shutil.copy(Path(work) / "verifier.log", args.verifier_log)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    print(f"done in {report['total_s']:.0f} s; load average {load_average()}", flush=True)


if __name__ == "__main__":
    main()
