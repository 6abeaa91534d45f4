"""The text components (choice, answer, overlong, length, repetition, language, steps): their cost in-process and
through the service.

    .venv/bin/python bench/components.py                      # starts a verifier on a free loopback port
    .venv/bin/python bench/components.py --repeats 300 --steps 6

Three parts, in one run:

1. **In-process, on 8,000-token completions** (English reasoning of about 32,000 characters, a Chinese one of 12,000
   Han characters, and English that ends in a loop): each component's scorer called directly, `--repeats` times per
   completion; p50 and p99 per call. Where TRL ships the same reward (`get_soft_overlong_punishment`,
   `get_repetition_penalty_reward` on token ids, `get_cosine_scaled_reward`, which runs math-verify itself), it is
   timed on the same completions beside ours, and the ratio is printed (TRL time / ours).
2. **Through the service, on the same completions**: 64 items per request with one component each; ms per item.
3. **A 512-item GSM8K step** (bench/workloads.py, a fresh seed per step, the math cache off): math + format alone,
   with each text component added on its own, and with all five added (choice, answer, overlong, cosine length on
   math, repetition), alternated step by step; the median time of each and its ratio to math + format (target for
   all five: under 2x). The service's time: each body is encoded before the clock starts and the answer decoded
   after it stops. Beside it (Linux), per request: the service process's time on a CPU, its time waiting for a CPU
   (runnable while other processes held both), and its math workers' time on a CPU, from /proc/<pid>/schedstat.
   When the first two add up to about the whole time, the service process is the step's critical path.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from machine import load_average, service_processes, verifier, verifier_cpu_ns
from workloads import gsm8k_step

from verifier_service.schema import ComponentResult, ScoreItem
from verifier_service.scoring import GATED, TEXT

ROOT = Path(__file__).resolve().parents[1]
TOKENS = 8_000
CHARS_PER_TOKEN = 4

_WORDS = [
    "so",
    "the",
    "total",
    "is",
    "then",
    "we",
    "add",
    "subtract",
    "multiply",
    "each",
    "of",
    "the",
    "apples",
    "costs",
    "dollars",
    "and",
    "cents",
    "which",
    "gives",
    "us",
    "let",
    "me",
    "check",
    "again",
    "this",
    "step",
    "carefully",
    "because",
    "the",
    "numbers",
    "must",
    "match",
    "what",
    "the",
    "problem",
    "says",
]
_HAN = "我们需要计算总数然后检查每一步是否正确这个问题的答案应该是"


def english(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS) if rng.random() > 0.2 else str(rng.randint(1, 999))
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def chinese(rng: random.Random, chars: int) -> str:
    return "".join(rng.choice(_HAN) for _ in range(chars))


def completions(rng: random.Random) -> dict[str, str]:
    """Three 8,000-token completions, each ending in an answer."""
    size = TOKENS * CHARS_PER_TOKEN
    answer = "</think>The answer is \\boxed{C}. <answer>42</answer>"
    loop = english(rng, size // 2) + " I need to check this again." * (size // 2 // 28)
    return {
        "english": "<think>" + english(rng, size) + answer,
        # Qwen-family tokenizers take about 1.5 Han characters per token: 8,000 tokens are some 12,000 characters
        "chinese": "<think>" + chinese(rng, TOKENS * 3 // 2) + answer,
        "loop": "<think>" + loop,
    }


def specs() -> dict[str, dict[str, Any]]:
    return {
        "choice": {"choice": {"gold": "C"}},
        "answer": {"answer": {"gold": "42"}},
        "overlong": {"overlong": {"max_tokens": 8192}},
        "length": {"math": {"gold": "42"}, "length": {"max_tokens": 8192}},
        "repetition": {"repetition": {}},
        # target en: the English text's words all go through the language identifier (one window here, as the random
        # words have no sentence ends; prose in sentences costs about the same: the model's time is per character)
        "language": {"language": {"target": "en"}},
        "steps": {"steps": {}},
    }


def arithmetic_completions(rng: random.Random) -> dict[str, str]:
    """Two 8,000-token completions full of written arithmetic, for `steps`: GSM8K reference solutions (tests/data/steps)
    with 600 characters of reasoning prose between them (about 200 claims), and the solutions alone (about 650)."""
    solutions = [json.loads(line)["answer"] for line in (ROOT / "tests/data/steps/gsm8k_test_300.jsonl").open()]
    size = TOKENS * CHARS_PER_TOKEN
    mixed, dense = "", ""
    while len(mixed) < size:
        mixed += english(rng, 600) + "\n" + rng.choice(solutions) + "\n"
    while len(dense) < size:
        dense += rng.choice(solutions) + "\n"
    return {"prose+gsm8k": f"<think>{mixed[:size]}</think>42", "gsm8k only": f"<think>{dense[:size]}</think>42"}


def steps_on_arithmetic(repeats: int) -> None:
    print(f"\n1b. steps in-process on {TOKENS}-token completions full of arithmetic, {repeats} calls: ms (p50 / p99)")
    for kind, text in arithmetic_completions(random.Random(0)).items():
        item = ScoreItem(completion=text, steps={})
        times = time_calls(lambda i=item: TEXT["steps"](i, i.steps), repeats)
        claims = len(TEXT["steps"](item, item.steps).steps or ())
        p50, p99 = percentile(times, 0.5) * 1e3, percentile(times, 0.99) * 1e3
        print(f"{kind:<12} {claims:4d} steps  {p50:7.3f} / {p99:7.3f}")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def time_calls(call: Callable[[], Any], repeats: int) -> list[float]:
    return wall_and_cpu(call, repeats)[0]


def wall_and_cpu(call: Callable[[], Any], repeats: int) -> tuple[list[float], list[float]]:
    """Each call's wall time and this thread's CPU time (what the call itself cost, without the waits for a core
    that a shared machine adds to the wall time), after a warm-up call."""
    call()
    wall, cpu = [], []
    for _ in range(repeats):
        started, cpu_started = time.perf_counter(), time.thread_time()
        call()
        cpu.append(time.thread_time() - cpu_started)
        wall.append(time.perf_counter() - started)
    return wall, cpu


def in_process(texts: dict[str, str], repeats: int) -> None:
    print(f"\n1. in-process, {TOKENS}-token completions, {repeats} calls each: ms per call (p50 / p99)")
    print(f"{'component':<11} " + " ".join(f"{kind:>17}" for kind in texts))
    right = ComponentResult(score=1.0, verdict="correct")
    for name, spec in specs().items():
        cells = []
        for text in texts.values():
            item = ScoreItem(completion=text, completion_tokens=TOKENS, truncated=False, **spec)
            options = item.spec(name)
            if name in GATED:
                scorer = GATED[name]
                times = time_calls(lambda s=scorer, i=item, o=options: s(i, o, right), repeats)
            else:
                scorer = TEXT[name]
                times = time_calls(lambda s=scorer, i=item, o=options: s(i, o), repeats)
            cells.append(f"{percentile(times, 0.5) * 1e3:7.3f} / {percentile(times, 0.99) * 1e3:7.3f}")
        print(f"{name:<11} " + " ".join(f"{cell:>17}" for cell in cells))


# Five of IFEval's instructions, and the same with a language check, on an 8,000-token *answer* (instructions grade
# the text after the reasoning, so the reasoning of the completions above would leave them a few words).
INSTRUCTIONS = {
    "instruction_ids": ["punctuation:no_comma", "length_constraints:number_words", "keywords:existence",
                        "detectable_format:number_highlighted_sections", "length_constraints:number_sentences"],
    "kwargs": [None, {"num_words": 300, "relation": "at least"}, {"keywords": ["apples", "dollars"]},
               {"num_highlights": 2}, {"num_sentences": 10, "relation": "at least"}],
}  # fmt: skip
LANGUAGE = {"instruction_ids": ["language:response_language"], "kwargs": [{"language": "en"}]}


def instructions_in_process(rng: random.Random, repeats: int) -> None:
    answer = "<think>short</think>" + ". ".join(english(rng, 400) for _ in range(TOKENS * CHARS_PER_TOKEN // 400))
    print(f"\n1b. instructions in-process, a {TOKENS}-token answer, {repeats} calls each: ms per call (p50 / p99)")
    cases = {
        "5 instructions, strict": INSTRUCTIONS,
        "5 instructions, loose": {**INSTRUCTIONS, "mode": "loose"},
        "response_language alone": LANGUAGE,
        "5 + language, strict": {key: INSTRUCTIONS[key] + LANGUAGE[key] for key in INSTRUCTIONS},
    }
    for name, spec in cases.items():
        item = ScoreItem(completion=answer, instructions=spec)
        options = item.spec("instructions")
        times = time_calls(lambda i=item, o=options: TEXT["instructions"](i, o), repeats)
        print(f"{name:<24} {percentile(times, 0.5) * 1e3:7.3f} / {percentile(times, 0.99) * 1e3:7.3f}")


def token_ids(text: str) -> list[int]:
    """Stand-in token ids: one per word, the same word the same id (what TRL's n-gram count sees)."""
    vocabulary: dict[str, int] = {}
    return [vocabulary.setdefault(word, len(vocabulary)) for word in text.lower().split()]


def against_trl(texts: dict[str, str], repeats: int) -> None:
    from trl.rewards import get_cosine_scaled_reward, get_repetition_penalty_reward, get_soft_overlong_punishment

    print(f"\n   beside TRL's own rewards, same completions ({repeats} calls): ms per call (p50), TRL / ours")
    text = texts["english"]
    ids = token_ids(text)
    right = ComponentResult(score=1.0, verdict="correct")
    pairs: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
    item = ScoreItem(completion=text, completion_tokens=len(ids), overlong={"max_tokens": 8192})
    trl_overlong = get_soft_overlong_punishment(8192, 8192 // 5)
    pairs["overlong"] = (lambda: trl_overlong([ids]), lambda: TEXT["overlong"](item, item.overlong))
    item_r = ScoreItem(completion=text, repetition={"units": "words"})
    trl_repetition = get_repetition_penalty_reward(3, -1.0)
    pairs["repetition"] = (lambda: trl_repetition([ids]), lambda: TEXT["repetition"](item_r, item_r.repetition))
    item_l = ScoreItem(completion=text, completion_tokens=len(ids), math={"gold": "42"}, length={"max_tokens": 8192})
    trl_cosine = get_cosine_scaled_reward(8192)
    chat = [[{"role": "assistant", "content": text}]]
    pairs["length"] = (
        lambda: trl_cosine(completions=chat, solution=["42"], completion_ids=[ids]),
        lambda: GATED["length"](item_l, item_l.length, right),
    )
    for name, (theirs, ours) in pairs.items():
        t = statistics.median(time_calls(theirs, repeats))
        o = statistics.median(time_calls(ours, repeats))
        note = " (TRL's runs math-verify inside; ours reads the math result)" if name == "length" else ""
        print(f"{name:<11} TRL {t * 1e3:8.3f}  ours {o * 1e3:8.3f}  ratio {t / o:8.1f}{note}")


def post(client: httpx.Client, items: list[dict[str, Any]]) -> float:
    """The service's time for one request: the body is encoded before the clock starts, the answer decoded after."""
    body = json.dumps({"items": items}).encode()
    started = time.perf_counter()
    response = client.post("/v1/score", content=body, headers={"content-type": "application/json"})
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    nulls = sum(result["reward"] is None for result in response.json()["results"])
    if nulls:
        raise SystemExit(f"{nulls} items were not judged: the benchmark measures nothing")
    return elapsed


def through_service(client: httpx.Client, texts: dict[str, str], repeats: int) -> None:
    print(f"\n2. through the service, 64 {TOKENS}-token completions per request, {repeats} requests: ms per item")
    print(f"{'component':<11} " + " ".join(f"{kind:>10}" for kind in texts))
    for name, spec in specs().items():
        cells = []
        for text in texts.values():
            items = [{"completion": text, "completion_tokens": TOKENS, "truncated": False, **spec}] * 64
            times = [post(client, items) for _ in range(repeats)]
            cells.append(f"{statistics.median(times) / 64 * 1e3:10.3f}")
        print(f"{name:<11} " + " ".join(cells))


ADDED = ("choice", "answer", "overlong", "length", "repetition")


def gsm8k_items(seed: int, added: tuple[str, ...]) -> list[dict[str, Any]]:
    """A GSM8K step with math and format, and the `added` components."""
    items = []
    for sample in gsm8k_step(seed=seed, prompts=64, group_size=8):
        item: dict[str, Any] = {"completion": sample.completion, "math": {"gold": sample.gold}, "format": {}}
        extra = {
            "choice": {"gold": "A"},
            "answer": {"gold": sample.gold},
            "overlong": {"max_tokens": 512},
            "length": {"max_tokens": 512, "correct_from": "math"},
            "repetition": {},
        }
        if added:
            item |= {
                "completion_tokens": len(sample.completion) // CHARS_PER_TOKEN,
                "truncated": sample.intent == "malformed:truncated",
            }
        item |= {name: extra[name] for name in added}
        items.append(item)
    return items


def gsm8k_step_cost(client: httpx.Client, steps: int, service: tuple[int, list[int]] | None) -> None:
    print(f"\n3. a 512-item GSM8K step, {steps} steps each, alternated, fresh seeds, math cache off")
    configurations = {"math + format": (), **{f"  + {name} only": (name,) for name in ADDED}, "+ all five": ADDED}
    post(client, gsm8k_items(seed=999, added=ADDED))  # warm-up
    times: dict[str, list[float]] = {name: [] for name in configurations}
    used = {name: [0, 0, 0] for name in configurations}  # ns: service on a CPU, service waiting for one, workers
    for step in range(steps):
        for offset, (name, added) in enumerate(configurations.items()):
            items = gsm8k_items(seed=len(configurations) * step + offset, added=added)
            before = _cpu(service)
            times[name].append(post(client, items))
            after = _cpu(service)
            used[name] = [total + now - then for total, now, then in zip(used[name], after, before, strict=True)]
    alone = statistics.median(times["math + format"])
    if service is not None:
        print(f"{'':<22} {'time':>10} {'ratio':>6}   CPU per request: service, its wait for a CPU, workers (ms)")
    for name, found in times.items():
        cpu = " ".join(f"{ns / steps / 1e6:6.1f}" for ns in used[name]) if service is not None else ""
        print(f"{name:<22} {statistics.median(found) * 1e3:7.1f} ms  {statistics.median(found) / alone:5.2f}x   {cpu}")
    ratio = statistics.median(times["+ all five"]) / alone
    print(f"ratio, all five added: {ratio:.2f}x (target < 2x)")


def _cpu(service: tuple[int, list[int]] | None) -> tuple[int, int, int]:
    """`verifier_cpu_ns` where the processes are known (Linux), else zeros."""
    return (0, 0, 0) if service is None else verifier_cpu_ns(service)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=200, help="in-process calls per component and completion")
    parser.add_argument("--requests", type=int, default=5, help="service requests per component and completion")
    parser.add_argument("--steps", type=int, default=6, help="GSM8K steps per configuration")
    args = parser.parse_args()
    import trl

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, trl {trl.__version__}; load average {load_average()}"
    )
    texts = completions(random.Random(0))
    in_process(texts, args.repeats)
    instructions_in_process(random.Random(1), args.repeats)
    steps_on_arithmetic(args.repeats)
    against_trl(texts, min(args.repeats, 50))
    with verifier(VERIFIER_MATH_CACHE_SIZE="0") as url, httpx.Client(base_url=url, timeout=300) as client:
        through_service(client, texts, args.requests)
        gsm8k_step_cost(client, args.steps, service_processes(url) if sys.platform == "linux" else None)
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
