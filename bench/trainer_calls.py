"""Per-sample reward calls where the trainers make them, against one batched request of the same items (issue 23).

    .venv-interop/bin/python bench/trainer_calls.py        # verl and OpenRLHF live in the overlay (`make interop`)
    .venv-interop/bin/python bench/trainer_calls.py --samples 2048 --verl-workers 8 --in-flight 256 --rounds 5

One verifier (started here from the project's .venv, as beside a trainer: math cache off, code off, default workers)
and a local Ray. Each round scores fresh GSM8K-shaped samples (bench/workloads.py, `gsm8k_step`) five ways, one after
another, in an order that turns round by round:

1. **batched**: the items the verl adapter builds for the samples, as one `POST /v1/score` (plain httpx): the floor.
2. **verl**: verl 0.9's own reward loop, `RewardLoopManager(config).compute_rm_score(batch)`, with the adapter as its
   custom reward function (trainer_client.integrations.verl.compute_score): the batch is split over
   `reward.num_workers` Ray actors, and each gathers its chunk's per-sample calls at once, which the adapter
   coalesces into requests.
3. **verl floor**: the same reward loop with a custom reward function that returns a constant and calls nothing:
   what verl's loop costs by itself (slicing the batch per sample, decoding, its tasks), which no reward function
   can save.
4. **OpenRLHF URL**: one `POST /v1/compat/openrlhf` per sample, as OpenRLHF's URL mode sends it (aiohttp, a session
   per request, the prompt and the response decoded together), `--in-flight` of them at once.
5. **OpenRLHF file**: one call of the adapter's reward file (trainer_client.integrations.openrlhf_reward_func) per
   sample, as OpenRLHF's file mode makes them (`asyncio.to_thread`, `--in-flight` at most); they coalesce.

Prints each round's wall time, CPU time (the verifier's: its process and its math workers, all threads; the caller's:
this process, and for verl its reward actors) and score requests, then the medians and the ratios to batched:
target verl / batched <= 1.5x.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from machine import ROOT, load_average, process_cpu_ns, service_processes, verifier
from workloads import Sample, gsm8k_step

from trainer_client.integrations.common import adapter_config, build_item
from verifier_service.schema import ScoreRequest

GROUP = 8
DATA_SOURCE = "openai/gsm8k"
PROMPT = "<|im_start|>user\nSolve the problem.<|im_end|>\n<|im_start|>assistant\n"
EOS = "<|im_end|>"
WAYS = ("batched", "verl", "verl floor", "OpenRLHF URL", "OpenRLHF file")


@dataclass(frozen=True)
class Timing:
    wall_s: float
    verifier_cpu_s: float
    caller_cpu_s: float
    requests: int


def samples(seed: int, count: int) -> list[Sample]:
    return gsm8k_step(seed=seed, prompts=count // GROUP, group_size=GROUP)


def batched_body(step: Sequence[Sample], url: str) -> bytes:
    """The request body of the items the verl adapter makes of these samples, in one request."""
    config = adapter_config({"url": url}, "bench")
    items = [build_item(s.completion, s.gold, config, data_source=DATA_SOURCE) for s in step]
    return ScoreRequest(items=items).model_dump_json(exclude_none=True).encode()


def batched(client: httpx.Client, body: bytes) -> list[float | None]:
    response = client.post("/v1/score", content=body, headers={"Content-Type": "application/json"})
    response.raise_for_status()
    return [result["reward"] for result in response.json()["results"]]


def openrlhf_url(url: str, step: Sequence[Sample], in_flight: int) -> list[float | None]:
    """One request per sample as OpenRLHF's `SingleTurnAgentExecutor` posts it (`_fetch_rewards_via_http`)."""
    import aiohttp

    async def main() -> list[float | None]:
        limit = asyncio.Semaphore(in_flight)
        timeout = aiohttp.ClientTimeout(total=180)

        async def one(sample: Sample) -> float | None:
            payload = {"query": [PROMPT + sample.completion + EOS], "prompts": [PROMPT], "labels": [sample.gold]}
            async with (
                limit,
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(f"{url}/v1/compat/openrlhf?components=math", json=payload) as response,
            ):
                response.raise_for_status()
                rewards: list[float | None] = (await response.json())["rewards"]
                return rewards[0]

        return await asyncio.gather(*(one(sample) for sample in step))

    return asyncio.run(main())


def openrlhf_file(step: Sequence[Sample], in_flight: int) -> list[float | None]:
    """One call of the adapter's `reward_func` per sample in a worker thread, as OpenRLHF calls a reward file
    (`_fetch_rewards_via_func`: `asyncio.to_thread`, so at most the loop's default executor's threads at once); the
    calls coalesce on the adapter's background loop. The verifier is $VERIFIER_URL."""
    from trainer_client.integrations.openrlhf_reward_func import reward_func

    async def main() -> list[float | None]:
        limit = asyncio.Semaphore(in_flight)

        async def one(sample: Sample) -> float | None:
            async with limit:
                answer = await asyncio.to_thread(
                    reward_func, [PROMPT + sample.completion + EOS], [PROMPT], [sample.gold]
                )
                rewards: list[float | None] = answer["rewards"]
                return rewards[0]

        return await asyncio.gather(*(one(sample) for sample in step))

    return asyncio.run(main())


class VerlLoop:
    """verl's `RewardLoopManager` for a reward configuration, and its reward actors' pids."""

    def __init__(self, config: Any, actor_prefix: str = "") -> None:
        import ray
        from verl.experimental.reward_loop.reward_loop import RewardLoopManager

        class Manager(RewardLoopManager):
            def _init_reward_loop_workers(self) -> None:
                # verl names its actors reward_loop_worker_<i>: a prefix lets two managers live side by side
                self.reward_loop_workers_class = _Prefixed(self.reward_loop_workers_class, actor_prefix)
                super()._init_reward_loop_workers()

        self.manager = Manager(config)
        workers = self.manager.reward_loop_workers
        self.pids: list[int] = ray.get([worker.__ray_call__.remote(_pid) for worker in workers])

    def score(self, data: Any) -> list[float | None]:
        output = self.manager.compute_rm_score(data)
        return [float(value) for value in output.batch["rm_scores"].sum(dim=-1).tolist()]

    def close(self) -> None:
        import ray

        for worker in self.manager.reward_loop_workers:
            ray.kill(worker)


class _Prefixed:
    def __init__(self, actor_class: Any, prefix: str) -> None:
        self.actor_class, self.prefix = actor_class, prefix

    def options(self, *, name: str, **options: Any) -> Any:
        return self.actor_class.options(name=self.prefix + name, **options)


def _pid(_: object) -> int:
    return os.getpid()


CONSTANT_REWARD = """
async def compute_score(data_source, solution_str, ground_truth, extra_info=None, **reward_kwargs):
    return {"score": 0.0, "acc": 0.0, "verifier_judged": 1.0}
"""


def _tokenizer(folder: Path) -> Any:
    """A byte-level BPE with the chat tokens, trained here on GSM8K-shaped text (no hub)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token=None))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    special = [EOS, "<|endoftext|>", "<|im_start|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=2000, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator([PROMPT] + [s.completion for s in samples(99_999, 512)], trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token=EOS, pad_token="<|endoftext|>", additional_special_tokens=["<|im_start|>"]
    )
    fast.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def _reward_config(folder: Path, workers: int, function: dict[str, Any]) -> Any:
    """The reward section verl's trainer builds (its defaults: the `naive` manager), with this custom function."""
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": str(folder), "tokenizer_path": str(folder)}},
            "reward": {
                "num_workers": workers,
                "custom_reward_function": function,
                "reward_manager": {"source": "register", "name": "naive", "module": {"path": None, "name": "x"}},
                "reward_model": {"enable": False, "enable_resource_pool": False},
                "sandbox_fusion": {"url": None},
            },
        }
    )


def _data_proto(tokenizer: Any, step: Sequence[Sample]) -> Any:
    """The samples as verl's rollout hands them to the reward loop: prompts left-padded, responses right-padded and
    ended by EOS, the gold in `reward_model.ground_truth`."""
    import numpy as np
    import torch
    from verl import DataProto

    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    prompt = tokenizer.encode(PROMPT, add_special_tokens=False)
    responses = [[*tokenizer.encode(s.completion, add_special_tokens=False), eos] for s in step]
    width = max(len(r) for r in responses)
    response_ids = torch.tensor([r + [pad] * (width - len(r)) for r in responses])
    prompt_ids = torch.tensor([prompt] * len(step))
    response_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in responses])
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": torch.cat([torch.ones_like(prompt_ids), response_mask], dim=1),
        },
        non_tensors={
            "data_source": np.array([DATA_SOURCE] * len(step), dtype=object),
            "reward_model": np.array([{"ground_truth": s.gold} for s in step], dtype=object),
            "extra_info": np.array([{} for _ in step], dtype=object),
        },
    )


def timed(
    run: Callable[[], list[Any]], caller_pids: list[int], verifier_pids: list[int], client: httpx.Client
) -> tuple[Timing, list[Any]]:
    """Run one way; its wall time, the CPU time the verifier's processes and the caller's took meanwhile, and how many
    score requests the verifier answered."""
    verifier_before = sum(process_cpu_ns(pid) for pid in verifier_pids)
    caller_before = sum(process_cpu_ns(pid) for pid in caller_pids)
    requests_before = score_requests(client)
    started = time.perf_counter()
    rewards = run()
    wall = time.perf_counter() - started
    verifier_cpu = sum(process_cpu_ns(pid) for pid in verifier_pids) - verifier_before
    caller_cpu = sum(process_cpu_ns(pid) for pid in caller_pids) - caller_before
    requests = score_requests(client) - requests_before
    return Timing(wall, verifier_cpu / 1e9, caller_cpu / 1e9, requests), rewards


def score_requests(client: httpx.Client) -> int:
    found = re.search(r'^verifier_requests_total\{status="200"\} (\S+)$', client.get("/metrics").text, re.M)
    return int(float(found[1])) if found else 0


def run_rounds(
    url: str, args: argparse.Namespace, verl: VerlLoop, floor: VerlLoop, tokenizer: Any
) -> dict[str, list[Timing]]:
    """The rounds, each way once a round, in an order that turns round by round (a drift in the machine's load spreads
    over all of them); a first round warms up and is not counted."""
    main, workers = service_processes(url)
    service, here = [main, *workers], [os.getpid()]
    times: dict[str, list[Timing]] = {way: [] for way in WAYS}
    with httpx.Client(base_url=url, timeout=300) as client:
        for round_ in range(-1, args.rounds):
            step = samples(1000 + round_, args.samples)
            body, data = batched_body(step, url), _data_proto(tokenizer, step)
            ways = {
                "batched": (functools.partial(batched, client, body), here),
                "verl": (functools.partial(verl.score, data), here + verl.pids),
                "verl floor": (functools.partial(floor.score, data), here + floor.pids),
                "OpenRLHF URL": (functools.partial(openrlhf_url, url, step, args.in_flight), here),
                "OpenRLHF file": (functools.partial(openrlhf_file, step, args.in_flight), here),
            }
            turn = round_ % len(WAYS)
            results = {way: timed(*ways[way], service, client) for way in WAYS[turn:] + WAYS[:turn]}
            check(step, {way: rewards for way, (_, rewards) in results.items() if way != "verl floor"})
            if round_ >= 0:
                for way in WAYS:
                    times[way].append(results[way][0])
                print(f"round {round_ + 1}:")
                for way in WAYS:
                    print(f"  {_describe(way, results[way][0])}")
    return times


def _describe(way: str, timing: Timing) -> str:
    return (
        f"{way:<13} {timing.wall_s:7.3f} s   CPU: verifier {timing.verifier_cpu_s:5.2f} s, caller "
        f"{timing.caller_cpu_s:5.2f} s   {timing.requests:5d} requests"
    )


def check(step: Sequence[Sample], rewards: dict[str, list[Any]]) -> None:
    """Every way must judge every sample, and alike: a null, a missing or a differing reward means the timing measures
    nothing."""
    expected = rewards["batched"]
    if None in expected or len(expected) != len(step):
        raise SystemExit("the batched request left samples unjudged: the benchmark measures nothing")
    for way, got in rewards.items():
        if [None if r is None else round(r, 6) for r in got] != [round(r, 6) for r in expected]:
            raise SystemExit(f"{way} gave other rewards than the batched request: the benchmark measures nothing")


def median_timing(timings: Sequence[Timing]) -> Timing:
    return Timing(
        statistics.median(t.wall_s for t in timings),
        statistics.median(t.verifier_cpu_s for t in timings),
        statistics.median(t.caller_cpu_s for t in timings),
        round(statistics.median(t.requests for t in timings)),
    )


def report(times: dict[str, list[Timing]], samples_per_round: int) -> list[str]:
    """The medians and the ratios, as lines."""
    median = {way: median_timing(times[way]) for way in WAYS}
    rounds = len(times["batched"])
    lines = [f"median of {rounds} rounds, {samples_per_round} samples each:"]
    lines += [f"  {_describe(way, median[way])}" for way in WAYS]
    base, verl, floor = median["batched"].wall_s, median["verl"].wall_s, median["verl floor"].wall_s
    lines += [
        f"verl / batched: {verl / base:.2f}x (target <= 1.5x)",
        f"verl floor / batched: {floor / base:.2f}x (verl's reward loop with a constant reward: verl's own cost)",
        f"(verl - verl floor) / batched: {(verl - floor) / base:.2f}x (what the adapter and the verifier add to it)",
    ]
    for way in ("OpenRLHF URL", "OpenRLHF file"):
        verifier_cpu = median[way].verifier_cpu_s / max(median["batched"].verifier_cpu_s, 1e-9)
        lines.append(f"{way} / batched: {median[way].wall_s / base:.2f}x, verifier CPU {verifier_cpu:.2f}x")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=2048, help="samples per round (a multiple of 8)")
    parser.add_argument("--verl-workers", type=int, default=8, help="verl's reward.num_workers (its default: 8)")
    parser.add_argument("--in-flight", type=int, default=256, help="OpenRLHF-shaped requests at once")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each way")
    parser.add_argument("--ray-cpus", type=int, default=os.cpu_count() or 1, help="CPUs the local Ray may use")
    args = parser.parse_args()
    import ray
    import verl

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, verl {verl.__version__}, ray {ray.__version__}; load average {load_average()}"
    )
    service_python = ROOT / ".venv" / "bin" / "python"
    python = str(service_python) if service_python.exists() else sys.executable
    ray.init(address="local", num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
    try:
        with verifier(python=python, VERIFIER_MATH_CACHE_SIZE="0") as url, tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            os.environ["VERIFIER_URL"] = url  # where OpenRLHF's reward file sends
            tokenizer = _tokenizer(folder)
            (folder / "constant_reward.py").write_text(CONSTANT_REWARD)
            adapter = {
                "path": "pkg://trainer_client.integrations.verl",
                "name": "compute_score",
                "reward_kwargs": {"url": url},
            }
            constant = {"path": str(folder / "constant_reward.py"), "name": "compute_score", "reward_kwargs": {}}
            verl_loop = VerlLoop(_reward_config(folder, args.verl_workers, adapter))
            floor = VerlLoop(_reward_config(folder, args.verl_workers, constant), actor_prefix="floor_")
            try:
                times = run_rounds(url, args, verl_loop, floor, tokenizer)
            finally:
                verl_loop.close()
                floor.close()
        print("\n" + "\n".join(report(times, args.samples)))
    finally:
        ray.shutdown()
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
