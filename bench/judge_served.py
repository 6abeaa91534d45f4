"""A judge model behind a real OpenAI-compatible server, measured through the verifier (issue 26's GPU check): how
many `judge` items per second the verifier gets from `transformers serve`, against the same prompts sent to the
server directly at the same concurrency.

    python bench/judge_served.py --device cuda --model-shape qwen0.5b --items 1024 --out /tmp/judge/served.json
    python bench/judge_served.py --smoke --out /tmp/judge/served.json    # CPU, tiny model, 16 items: a minute or two
    bash bench/judge-device.sh                                           # the first command on a lent GPU machine

The machine has no network, so the model is built here: a byte-level BPE tokenizer trained on the bench's own judge
prompts and a Qwen2-style causal LM with random weights (`tiny`: hidden 32, two layers; `qwen0.5b`: Qwen2.5-0.5B's
shape), taught in `--teach-steps` Adam steps on a sample of the prompts to reply CompassVerifier's "A" (then end of
turn). It times the serving path, not a judge's accuracy: the replies the taught model gives to prompts it never saw
are counted (a reply with no label is `judge_unparseable`, null).

Items are GSM8K-shaped completions (bench/workloads.py), each with its own question, so no verdict is answered from
the verifier's cache; `judge` with `when: "always"`, `input: "answer"`. `transformers serve` runs with continuous
batching on a GPU (`--continuous-batching`, the default on cuda). Phases:
- **direct**: the judge prompts the verifier would send (built with its own functions), sent straight to the server
  by an asyncio client at `--max-concurrency`: the server's own rate.
- **verifier**: the items through `POST /v1/score` in requests of `--request-items`, the judge's `max_concurrency`
  `--max-concurrency`: items per second, verdicts, and the verifier's share of the time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from machine import ROOT, free_port, load_average, stop, verifier
from workloads import gsm8k_step

from verifier_service.scoring.extract import extract_candidate, final_answer_region
from verifier_service.scoring.judge import fitted
from verifier_service.scoring.judge_prompts import COMPASS, fill

SHAPES = {
    "tiny": {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2, "kv_heads": 1},
    "qwen0.5b": {"hidden": 896, "intermediate": 4864, "layers": 24, "heads": 14, "kv_heads": 2},  # bench/gpu.py
}
TOKENIZER_VOCAB = {"tiny": 2000, "qwen0.5b": 8000}
CONTEXT_CHARS = 8_000  # the judge's context_chars (the default)
SERVE_READY_S = 300.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (the model's and the server's)")
    parser.add_argument("--model-shape", choices=tuple(SHAPES), default="tiny")
    parser.add_argument("--items", type=int, default=1024, help="judge items (each its own question)")
    parser.add_argument("--request-items", type=int, default=256, help="items per /v1/score request")
    parser.add_argument("--max-concurrency", type=int, default=64, help="judge requests in flight at once")
    parser.add_argument("--max-tokens", type=int, default=8, help="the judge's max_tokens (reply length cap)")
    parser.add_argument("--teach-steps", type=int, default=40, help="Adam steps teaching the reply 'A'")
    parser.add_argument("--continuous-batching", action=argparse.BooleanOptionalAction, default=None,
                        help="transformers serve --continuous-batching (default: on for cuda)")  # fmt: skip
    parser.add_argument("--work", type=Path, default=Path("/tmp/judge-served"), help="model and logs go here")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny model, 16 items")
    parser.add_argument("--out", type=Path, help="write the results here (JSON)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.device, args.model_shape, args.items, args.request_items, args.max_concurrency = "cpu", "tiny", 16, 8, 4
        args.teach_steps = 30
    if args.continuous_batching is None:
        args.continuous_batching = args.device.startswith("cuda")
    return args


# ---------------------------------------------------------------- items and prompts


def items(count: int) -> list[dict[str, Any]]:
    """`count` GSM8K-shaped items, each with a question of its own, judged always (weight 1, no rule beside it)."""
    samples = gsm8k_step(seed=26, prompts=max(1, -(-count // 8)), group_size=8)[:count]
    return [
        {"prompt": f"GSM8K-shaped problem {i} (group {s.prompt}).", "completion": s.completion,
         "judge": {"judge": "served", "gold": s.gold, "when": "always"}}
        for i, s in enumerate(samples)
    ]  # fmt: skip


def prompt(item: dict[str, Any]) -> str | None:
    """The prompt the verifier sends about `item` (compass, input answer); None where it sends none."""
    region = final_answer_region(item["completion"])
    if region is None:
        return None
    answer = extract_candidate(region).text
    return fill(COMPASS, *fitted(COMPASS, item["prompt"], item["judge"]["gold"], answer, CONTEXT_CHARS))


# ---------------------------------------------------------------- the model and its server


def build(path: Path, shape: str, device: str, prompts: list[str], steps: int) -> float:
    """Tokenizer, random-weight model, and `steps` Adam steps so that its greedy reply is "A"; seconds taken."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer_client.tiny_model import build_model, build_tokenizer

    started = time.perf_counter()
    build_tokenizer(path, [*prompts, "A", "B", "C"], vocab_size=TOKENIZER_VOCAB[shape])
    build_model(path, seed=0, device=device, max_positions=4096, **SHAPES[shape])
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    target = tokenizer("A", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    rows = []
    for text in prompts[: 4 if shape == "tiny" else 16]:
        turn = [{"role": "user", "content": text}]
        ids = tokenizer.apply_chat_template(turn, add_generation_prompt=True, tokenize=True, return_dict=False)
        rows.append((torch.tensor([[*ids, *target]], device=device),
                     torch.tensor([[-100] * len(ids) + target], device=device)))  # fmt: skip
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2 if shape == "tiny" else 1e-4)
    for _ in range(steps):
        optimizer.zero_grad()
        for inputs, labels in rows:
            (model(input_ids=inputs, labels=labels).loss / len(rows)).backward()
        optimizer.step()
    model.generation_config.do_sample = False
    model.to(torch.bfloat16 if device.startswith("cuda") else torch.float32).save_pretrained(path)
    return time.perf_counter() - started


@contextmanager
def served(args: argparse.Namespace) -> Iterator[str]:
    """`transformers serve` on loopback, offline; its /v1 base URL once /v1/models answers."""
    port = free_port()
    log = args.work / "serve.log"
    command = [str(Path(sys.executable).with_name("transformers")), "serve", "--host", "127.0.0.1",
               "--port", str(port), "--device", args.device]  # fmt: skip
    if not Path(command[0]).exists():
        command = [sys.executable, "-m", "transformers.cli.transformers", *command[1:]]
    if args.continuous_batching:
        command.append("--continuous-batching")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + SERVE_READY_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"transformers serve exited:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"transformers serve did not answer within {SERVE_READY_S:.0f}s")
            time.sleep(0.5)
        yield url
    finally:
        stop(process)


# ---------------------------------------------------------------- phases


async def direct(url: str, model: str, prompts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The prompts straight to the server, `max_concurrency` at once: its own rate, and what it replied."""
    gate = asyncio.Semaphore(args.max_concurrency)
    replies: Counter[str] = Counter()

    async def ask(client: httpx.AsyncClient, text: str) -> None:
        body = {"model": model, "messages": [{"role": "user", "content": text}], "temperature": 0,
                "max_tokens": args.max_tokens}  # fmt: skip
        async with gate:
            response = await client.post(f"{url}/chat/completions", json=body)
        response.raise_for_status()
        replies[response.json()["choices"][0]["message"]["content"].strip()[:20]] += 1

    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=600) as client:
        await asyncio.gather(*(ask(client, text) for text in prompts))
    elapsed = time.perf_counter() - started
    return {"requests": len(prompts), "seconds": round(elapsed, 2), "per_second": round(len(prompts) / elapsed, 1),
            "replies": dict(replies.most_common(5))}  # fmt: skip


def through_verifier(url: str, batch: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    verdicts: Counter[str] = Counter()
    details: Counter[str] = Counter()
    started = time.perf_counter()
    for at in range(0, len(batch), args.request_items):
        response = httpx.post(f"{url}/v1/score", json={"items": batch[at : at + args.request_items]}, timeout=900)
        response.raise_for_status()
        for result in response.json()["results"]:
            judged = result["components"]["judge"]
            verdicts[judged["verdict"]] += 1
            if judged["score"] is None:
                details[judged["detail"][:80]] += 1
    elapsed = time.perf_counter() - started
    return {"items": len(batch), "seconds": round(elapsed, 2), "per_second": round(len(batch) / elapsed, 1),
            "verdicts": dict(verdicts), "null_details": dict(details.most_common(3))}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    batch = items(args.items)
    prompts = [text for item in batch if (text := prompt(item)) is not None]
    model = args.work / "model"
    head = f"{args.items} items, shape {args.model_shape}, device {args.device}, max_concurrency {args.max_concurrency}"
    print(f"# judge_served: {head}, max_tokens {args.max_tokens}, load {load_average()}", flush=True)
    taught = build(model, args.model_shape, args.device, prompts, args.teach_steps)
    print(f"model built and taught in {taught:.1f}s", flush=True)
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "build_s": round(taught, 1)}
    with served(args) as url:
        asyncio.run(direct(url, str(model), prompts[: min(len(prompts), 2 * args.max_concurrency)], args))  # warm-up
        report["direct"] = asyncio.run(direct(url, str(model), prompts, args))
        print(f"direct: {report['direct']}", flush=True)
        judges = {"served": {"base_url": url, "model": str(model), "max_tokens": args.max_tokens, "timeout_s": 600,
                             "max_concurrency": args.max_concurrency}}  # fmt: skip
        settings = {"VERIFIER_JUDGES": json.dumps(judges), "VERIFIER_BATCH_TIMEOUT_S": "900"}
        with verifier(args.work / "verifier.log", **settings) as verifier_url:
            report["verifier"] = through_verifier(verifier_url, batch, args)
        print(f"verifier: {report['verifier']}", flush=True)
    ratio = report["verifier"]["per_second"] / report["direct"]["per_second"]
    report["verifier_over_direct"] = round(ratio, 3)
    print(f"items/s through the verifier {report['verifier']['per_second']} vs direct "
          f"{report['direct']['per_second']} ({ratio:.2f}x)", flush=True)  # fmt: skip
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
