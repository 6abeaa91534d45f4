"""The generative judge's plumbing measured (issue 26): what `judge` with `when: "rule_miss"` rescues beside `math`,
what it adds to a batch's time, and how often its verdict cache answers.

    python bench/judge_rescue.py --out /tmp/judge.json          # 2-core CPU: about a minute
    python bench/judge_rescue.py --smoke --out /tmp/judge.json  # seconds (the test's run)

The judge is tests/judge_standin.py, a separate server process speaking the OpenAI chat-completions protocol, scripted
as an **oracle**: it knows each item's true label and answers CompassVerifier's "A" (correct) or "B" (incorrect) for
the exact prompt the verifier will send about it (built here with the verifier's own functions: the question, the
reference and the final answer as `math` extracts it). It measures the plumbing, not a judge model's accuracy: a real
judge is wrong at times, the oracle never. A prompt the oracle was not scripted for gets a reply with no label
(judge_unparseable), counted as `unscripted` (0 in a sound run).

- **rescue**: the math conformance rows (tests/data/math.jsonl: gold/prediction pairs from math-verify's and
  lighteval's tests, with the verdict each expects: the true label) and GSM8K-shaped items (bench/workloads.py: the
  generator's intent says which are right; an answer in words is right when its number is the gold), each with `math`
  (default options) and `judge` (`when: "rule_miss"`): how many of the rule's `wrong` and `no_answer` verdicts turn
  to `correct`, and a check that no item the rule called correct is lowered (judge 1, reward 2, at default weights).
- **latency**: GSM8K-shaped GRPO batches (`--prompts` prompts x `--group-size` completions) scored with `math` alone,
  with `math` + `judge` `rule_miss`, and with `math` + `judge` `always` (weight 0.5, below the rule's), each batch
  with questions of its own so no verdict is cached from an earlier one; the median batch time of `--batches`
  batches after a warm-up, the judge's added time (the median less math's alone) and the requests the oracle saw per
  batch. With `--judge-delay-s` the oracle waits that long before each reply (a judge model's time per request),
  the verifier sending at most `--max-concurrency` at once.
- **cache**: one GRPO batch judged `always`, sent twice: the items the judge decided, the requests the oracle saw each
  time (the first send asks each distinct (question, reference, answer) once; the second, none) and the hit rate
  (1 - requests / items decided).

Results print as each phase ends and go to `--out` (JSON) after it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from machine import ROOT, free_port, load_average, stop, verifier
from workloads import Sample, gsm8k_step

from verifier_service.scoring.extract import extract_candidate, final_answer_region
from verifier_service.scoring.judge import fitted
from verifier_service.scoring.judge_prompts import COMPASS, fill

CONFORMANCE = ROOT / "tests" / "data" / "math.jsonl"
JUDGE = "oracle"
CONTEXT_CHARS = 8_000  # the judge's context_chars (the default): the prompt is cut to it as the verifier cuts it
ANSWER_WINDOW = 20_000  # the verifier's answer_window_chars (the default)
WORDS = {"twelve": 12, "forty-two": 42, "seventy-two": 72, "one hundred": 100, "eight": 8, "nineteen": 19}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=64, help="prompts per GRPO batch")
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt")
    parser.add_argument("--batches", type=int, default=5, help="timed batches per mode (the median is kept)")
    parser.add_argument("--rescue-prompts", type=int, default=64, help="GSM8K-shaped prompts in the rescue phase")
    parser.add_argument("--judge-delay-s", type=float, nargs="+", default=[0.0, 0.05], help="the oracle's reply time")
    parser.add_argument("--max-concurrency", type=int, default=16, help="the judge's max_concurrency")
    parser.add_argument("--smoke", action="store_true", help="a few items per phase: seconds")
    parser.add_argument("--out", type=Path, help="write the results here (JSON)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.prompts, args.group_size, args.batches, args.rescue_prompts = 4, 8, 2, 4
        args.judge_delay_s = [0.0]
    return args


# ---------------------------------------------------------------- the oracle


@contextmanager
def oracle(log: Path) -> Iterator[str]:
    """tests/judge_standin.py on a free loopback port; its base URL once it answers."""
    port = free_port()
    with log.open("wb") as out:
        command = [sys.executable, "-m", "tests.judge_standin", "--port", str(port)]
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the judge stand-in exited:\n{log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/_count", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the judge stand-in did not answer within 60s")
            time.sleep(0.1)
        yield url
    finally:
        stop(process)


def judge_prompt(question: str, gold: str, completion: str) -> str | None:
    """The prompt the verifier sends the judge about this item (compass, input answer), or None where it sends none
    (the reasoning never closed)."""
    region = final_answer_region(completion)
    if region is None:
        return None
    answer = extract_candidate(region[-ANSWER_WINDOW:]).text
    return fill(COMPASS, *fitted(COMPASS, question, gold, answer, CONTEXT_CHARS))


def script(url: str, items: list[dict[str, Any]], truths: list[bool], delay_s: float = 0.0) -> None:
    """The oracle's answer for each item: A where it is truly right, else B."""
    exact = {}
    for item, truth in zip(items, truths, strict=True):
        prompt = judge_prompt(item["prompt"], item["judge"]["gold"], item["completion"])
        if prompt is not None:
            exact[prompt] = {"reply": "A" if truth else "B", "delay_s": delay_s}
    body = {"rules": [], "default": {"reply": "unscripted", "delay_s": delay_s}, "exact": exact}
    httpx.post(f"{url}/_script", json=body, timeout=60).raise_for_status()


def requests_seen(url: str) -> int:
    return int(httpx.get(f"{url}/_count", timeout=30).json())


# ---------------------------------------------------------------- items


def item(question: str, gold: str, completion: str, when: str | None) -> dict[str, Any]:
    """math alone (when None), or math with judge asked `when`; `always` at weight 0.5, below the rule's."""
    out: dict[str, Any] = {"prompt": question, "completion": completion, "math": {"gold": gold}}
    if when is not None:
        out["judge"] = {"judge": JUDGE, "gold": gold, "when": when}
    if when == "always":
        out["weights"] = {"math": 1.0, "judge": 0.5}
    return out


def conformance_items() -> tuple[list[dict[str, Any]], list[bool]]:
    rows = [json.loads(line) for line in CONFORMANCE.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [item(f"Conformance row {i}.", row["gold"], row["pred"], "rule_miss") for i, row in enumerate(rows)]
    return items, [bool(row["expected"]) for row in rows]


def truly_right(sample: Sample) -> bool:
    if sample.intent == "malformed:words":  # "The answer is forty-two.": right when the word is the gold's number
        word = sample.completion.rsplit("The answer is ", 1)[1].rstrip(".")
        return str(WORDS[word]) == sample.gold.replace(",", "")
    return sample.intent == "right"


def gsm8k_items(
    seed: int, prompts: int, group_size: int, when: str | None, tag: str
) -> tuple[list[dict[str, Any]], list[bool]]:
    samples = gsm8k_step(seed, prompts, group_size)
    items = [item(f"[{tag}] GSM8K-shaped problem {s.prompt}.", s.gold, s.completion, when) for s in samples]
    return items, [truly_right(s) for s in samples]


def score(url: str, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    started = time.perf_counter()
    response = httpx.post(f"{url}/v1/score", json={"items": items}, timeout=600)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return response.json()["results"], elapsed


# ---------------------------------------------------------------- phases


def rescue(verifier_url: str, oracle_url: str, items: list[dict[str, Any]], truths: list[bool]) -> dict[str, Any]:
    """Rule verdicts, what the judge made of each rule miss, and whether any rule-correct item was lowered."""
    script(oracle_url, items, truths)
    results, _ = score(verifier_url, items)
    rule = Counter(r["components"]["math"]["verdict"] for r in results)
    pairs = list(zip(results, truths, strict=True))
    misses = [(r, truth) for r, truth in pairs if r["components"]["math"]["verdict"] in ("wrong", "no_answer")]
    rescued = Counter(r["components"]["math"]["verdict"] for r, _ in misses if r["components"]["judge"]["score"] == 1)
    rule_correct = [(r, truth) for r, truth in pairs if r["components"]["math"]["verdict"] == "correct"]
    lowered = [r for r, _ in rule_correct if r["components"]["judge"]["score"] != 1.0 or r["reward"] != 2.0]
    false_rescues = sum(1 for r, truth in misses if r["components"]["judge"]["score"] == 1 and not truth)
    judge = Counter(r["components"]["judge"]["verdict"] for r, _ in misses)
    failures = Counter(
        f"{j['verdict']}: {j['detail']}" for r, _ in misses if (j := r["components"]["judge"])["score"] is None
    )
    return {
        "items": len(items),
        "truly_right": sum(truths),
        "rule_verdicts": dict(rule),
        "rule_misses": len(misses),
        "rule_misses_truly_right": sum(truth for _, truth in misses),
        "rescued": {"wrong": rescued["wrong"], "no_answer": rescued["no_answer"]},
        "judge_verdicts_on_misses": dict(judge),
        "rule_correct_but_truly_wrong": sum(1 for _, truth in rule_correct if not truth),
        "rule_correct_lowered": len(lowered),
        "false_rescues": false_rescues,
        "unscripted": judge["judge_unparseable"],
        "judge_null": dict(failures),  # the judge could not say (null): why, e.g. a connection the oracle dropped
    }


def latency(verifier_url: str, oracle_url: str, args: argparse.Namespace, delay_s: float) -> dict[str, Any]:
    """Median batch time per mode, the judge's added time and the oracle's requests per batch."""
    out: dict[str, Any] = {"judge_delay_s": delay_s, "items_per_batch": args.prompts * args.group_size}
    for mode in ("math", "rule_miss", "always"):
        when = None if mode == "math" else mode
        times, asked, nulls = [], [], 0
        for batch in range(args.batches + 1):  # the first is a warm-up
            tag = f"delay {delay_s} {mode} batch {batch}"
            items, truths = gsm8k_items(100 + batch, args.prompts, args.group_size, when, tag)
            if when is not None:
                script(oracle_url, items, truths, delay_s)
            before = requests_seen(oracle_url)
            results, elapsed = score(verifier_url, items)
            if batch:
                times.append(elapsed)
                asked.append(requests_seen(oracle_url) - before)
                nulls += sum(1 for r in results if r["reward"] is None)
        out[mode] = {"median_s": median(times), "times_s": times, "requests_per_batch": asked, "null_rewards": nulls}
    for mode in ("rule_miss", "always"):
        out[mode]["added_s"] = out[mode]["median_s"] - out["math"]["median_s"]
    return out


def cache(verifier_url: str, oracle_url: str, args: argparse.Namespace) -> dict[str, Any]:
    items, truths = gsm8k_items(900, args.prompts, args.group_size, "always", "cache")
    script(oracle_url, items, truths)
    sends = []
    for _ in range(2):
        before = requests_seen(oracle_url)
        results, elapsed = score(verifier_url, items)
        decided = sum(1 for r in results if r["components"]["judge"]["verdict"] in ("correct", "incorrect"))
        requests = requests_seen(oracle_url) - before
        hit_rate = 1 - requests / decided if decided else None
        sends.append(
            {
                "items": len(items),
                "decided_by_judge": decided,
                "requests": requests,
                "hit_rate": hit_rate,
                "seconds": elapsed,
            }
        )
    decided = sum(send["decided_by_judge"] for send in sends)
    return {"sends": sends, "hit_rate": 1 - sum(send["requests"] for send in sends) / decided if decided else None}


# ---------------------------------------------------------------- report


def print_rescue(name: str, row: dict[str, Any]) -> None:
    print(
        f"rescue {name:<11} {row['items']:>4} items ({row['truly_right']} truly right): rule {row['rule_verdicts']}; "
        f"of {row['rule_misses']} misses ({row['rule_misses_truly_right']} truly right) the judge raised "
        f"{row['rescued']['wrong']} wrong + {row['rescued']['no_answer']} no_answer to correct; "
        f"rule-correct lowered {row['rule_correct_lowered']}, false rescues {row['false_rescues']}, "
        f"unscripted {row['unscripted']}, judge null {sum(row['judge_null'].values())}",
        flush=True,
    )


def print_latency(row: dict[str, Any]) -> None:
    print(f"latency (judge reply {row['judge_delay_s']:g}s, {row['items_per_batch']} items per batch):", flush=True)
    for mode in ("math", "rule_miss", "always"):
        entry = row[mode]
        added = f", judge adds {entry['added_s'] * 1000:7.1f} ms" if "added_s" in entry else ""
        requests = entry["requests_per_batch"]
        print(f"  {mode:<9} median {entry['median_s'] * 1000:7.1f} ms{added}, judge requests per batch {requests}")


def print_cache(row: dict[str, Any]) -> None:
    for i, send in enumerate(row["sends"], 1):
        print(
            f"cache send {i}: {send['items']} items, {send['decided_by_judge']} decided by the judge, "
            f"{send['requests']} requests, hit rate {send['hit_rate']:.3f}, {send['seconds'] * 1000:.1f} ms",
            flush=True,
        )
    print(f"cache overall hit rate {row['hit_rate']:.3f}", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    shown_args = {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()}
    report: dict[str, Any] = {"args": shown_args, "cpus": os.cpu_count(), "load_average_start": load_average()}

    def save() -> None:
        if args.out is not None:
            args.out.write_text(json.dumps(report, indent=2) + "\n")

    logs = Path(os.environ.get("TMPDIR", "/tmp"))
    with oracle(logs / f"judge-oracle-{os.getpid()}.log") as oracle_url:
        limits = {"max_concurrency": args.max_concurrency, "timeout_s": 60}
        judges = {JUDGE: {"base_url": f"{oracle_url}/v1", "model": JUDGE, **limits}}
        settings = {"VERIFIER_JUDGES": json.dumps(judges), "VERIFIER_BATCH_TIMEOUT_S": "600"}
        with verifier(logs / f"judge-verifier-{os.getpid()}.log", **settings) as verifier_url:
            items, truths = conformance_items()  # all of them in the smoke run too: a second or two
            report["rescue"] = {"conformance": rescue(verifier_url, oracle_url, items, truths)}
            items, truths = gsm8k_items(0, args.rescue_prompts, args.group_size, "rule_miss", "rescue")
            report["rescue"]["gsm8k"] = rescue(verifier_url, oracle_url, items, truths)
            for name, row in report["rescue"].items():
                print_rescue(name, row)
                assert row["rule_correct_lowered"] == 0, f"{name}: a rule-correct item was lowered"
                assert row["unscripted"] == 0, f"{name}: the verifier asked what the oracle was not scripted for"
            save()
            report["latency"] = []
            for delay_s in args.judge_delay_s:
                report["latency"].append(latency(verifier_url, oracle_url, args, delay_s))
                print_latency(report["latency"][-1])
                save()
            report["cache"] = cache(verifier_url, oracle_url, args)
            print_cache(report["cache"])
    report["load_average_end"] = load_average()
    print(f"load average: {report['load_average_start']} at the start, {report['load_average_end']} at the end")
    save()


if __name__ == "__main__":
    main()
