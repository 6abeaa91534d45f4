"""The judge component's pieces that need no server: the cross-request verdict cache."""

from __future__ import annotations

import contextlib
import tracemalloc

from verifier_service.schema import ComponentResult
from verifier_service.scoring.judge import JudgeJob, VerdictCache

CORRECT = ComponentResult(score=1.0, verdict="correct", detail="decided by the judge (j)")


def job(prompt: str, judge: str = "j", swapped: str | None = None) -> JudgeJob:
    return JudgeJob(judge, prompt, swapped, "compass", (None, None, None), "zero")


def test_the_cache_finds_an_equal_job_and_tells_apart_what_decides_a_verdict() -> None:
    cache = VerdictCache(10)
    cache.put(job("Q / 7 / 7"), CORRECT)
    assert cache.get(job("Q / 7 / 7")) == CORRECT  # an equal job made by another request
    assert cache.get(job("Q / 7 / 8")) is None and cache.get(job("Q / 7 / 7", judge="k")) is None
    assert cache.get(job("Q / 7 / 7", swapped="Q / 7 / 7")) is None
    cache.put(job("Q / 7 / 9"), ComponentResult(score=None, verdict="judge_timeout"))
    assert cache.get(job("Q / 7 / 9")) is None  # null: a retry may get an answer


def test_the_cache_holds_no_answer_text() -> None:
    """Keyed by a fixed-size digest: entries for answers of 200 kB each cost what entries for "42" cost; keying by the
    job kept every prompt (and swapped twin) alive, 100,000 of them by default."""
    cache = VerdictCache(1000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(50):
            big = f"Q / 7 / {n}" + "x" * 200_000
            cache.put(job(big, swapped=big[::-1]), CORRECT)
        del big
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 200_000  # 50 answers of 400 kB each were put: 20 MB if kept
    assert cache.get(job("Q / 7 / 3" + "x" * 200_000, swapped=("Q / 7 / 3" + "x" * 200_000)[::-1])) == CORRECT


def test_the_cache_is_a_bounded_lru() -> None:
    cache = VerdictCache(2)
    cache.put(job("a"), CORRECT)
    cache.put(job("b"), CORRECT)
    assert cache.get(job("a")) == CORRECT  # a is now the newest
    cache.put(job("c"), CORRECT)
    assert cache.get(job("b")) is None and cache.get(job("a")) == CORRECT and cache.get(job("c")) == CORRECT


DEGENERATE = [  # a judge that repeats itself to its max_tokens (or past it): replies up to MAX_REPLY_BYTES
    ("compass", "INCORRECT" + "\n" * 1_000_000),
    ("compass", "\\boxed{B}" + " " * 1_000_000),
    ("general_verifier", "Final Decision:" + " " * 1_000_000),
    ("general_verifier", "\\boxed{Yes} " * 350_000),
    ("compass", "`\\boxed{A}` " * 350_000),
]


def test_a_degenerate_reply_of_the_largest_size_is_read_in_linear_time() -> None:
    """parse_label runs on the event loop: whitespace after a label word or `Final Decision:` made the patterns
    backtrack (40,000 newlines after INCORRECT held the loop 7 s, 20,000 spaces after `Final Decision:` 37 s), and
    checking each match for an open code span counted the backticks before it (quadratic in the matches). A child
    process reads replies of 1 to 4 MiB: linear, it is done in seconds; it is given a minute (before: hours)."""
    import subprocess
    import sys

    code = (
        "from tests.unit.test_judge import DEGENERATE\n"
        "from verifier_service.scoring.judge_prompts import parse_label\n"
        "print([parse_label(preset, reply, (None, None, None)) for preset, reply in DEGENERATE])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["['incorrect',", "'incorrect',", "None,", "'correct',", "None]"]


def test_the_probe_reads_no_body_and_has_one_deadline() -> None:
    """GET /models is answered by its status: a server that answers 200 then streams its body without end (a byte
    every 0.1 s, within httpx's read timeout each time) kept the probe reading it, memory growing, forever; now the
    probe is done at the status, within its deadline either way."""
    import asyncio

    from verifier_service.judges import JudgeClient
    from verifier_service.settings import JudgeSettings

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            with contextlib.suppress(ConnectionError):
                while True:
                    writer.write(b"1\r\n \r\n")
                    await writer.drain()
                    await asyncio.sleep(0.1)
        finally:
            writer.close()

    async def main() -> tuple[bool | None, str | None]:
        server = await asyncio.start_server(endless, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = JudgeClient("j", JudgeSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=1), None)
        try:
            await asyncio.wait_for(client.probe(), 60)  # before: never done
        finally:
            await client.close()
            server.close()
        return client.reachable, client.why

    assert asyncio.run(main()) == (True, None)


def test_a_step_named_alone_is_an_answer_and_a_step_heading_a_master_key() -> None:
    """ "Step 3" answers "which step is wrong?" (a process-judging set's question): it was taken for a step heading
    and scored 0 (no_answer) without asking the judge, whatever the reference. A heading (a colon after it), or a
    step beside reasoning openers, is still a master key."""
    from verifier_service.scoring.judge import says_nothing

    answers = ["Step 3", "step 12", "\\boxed{\\text{Step 3}}", "第3步", "第三步"]
    assert [says_nothing(answer) for answer in answers] == [False] * len(answers)
    keys = ["Step 1:", "**Step 1**:", "\\textbf{Step 1}:", "第一步：", "Thought process:\n\nStep 1", "Solution: step 1"]
    assert [says_nothing(key) for key in keys] == [True] * len(keys)


def test_a_custom_label_of_marks_is_read_wherever_it_stands() -> None:
    """Whole words apply to a label's word-character ends only (as the docs say): "[[YES]]" right after a word was
    not read (judge_unparseable) though no other label was there."""
    from verifier_service.scoring.judge_prompts import parse_label

    labels = ("[[YES]]", "[[NO]]", None)
    assert parse_label("custom", "Verdict[[YES]]", labels) == "correct"
    assert parse_label("custom", "So: [[NO]]x", labels) == "incorrect"
    assert parse_label("custom", "Nonetheless, Yes", ("Yes", "No", None)) == "correct"


def test_a_refused_call_is_not_overturned_by_a_probe_until_a_call_is_answered() -> None:
    """A judge whose /models answers 200 without checking the key while every /chat/completions answers 401: each
    probe used to set it reachable and the next call unreachable again (readiness flapping, a warning every probe);
    now the refused call stands until a call is answered."""
    import asyncio

    from verifier_service.judges import JudgeClient
    from verifier_service.settings import JudgeSettings

    refusing = [True]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        lengths = [line.split(":")[1] for line in head.split("\r\n") if line.lower().startswith("content-length")]
        length = int(lengths[0]) if lengths else 0
        await reader.readexactly(length)
        if head.startswith("POST") and refusing[0]:
            status, body = "401 Unauthorized", b'{"error": "invalid api key"}'
        elif head.startswith("POST"):
            status, body = "200 OK", b'{"choices": [{"message": {"content": "A"}}]}'
        else:
            status, body = "200 OK", b'{"object": "list", "data": []}'
        writer.write(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()

    async def main() -> list[tuple[bool | None, bool]]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = JudgeClient("j", JudgeSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=5), None)
        seen = []
        try:
            await client.probe()
            seen.append((client.reachable, client.why is None))
            await client.ask("q")  # 401
            seen.append((client.reachable, client.why is None))
            await client.probe()  # /models still answers 200
            seen.append((client.reachable, client.why is not None and "401" in client.why))
            refusing[0] = False
            await client.ask("q")  # answered
            await client.probe()
            seen.append((client.reachable, client.why is None))
        finally:
            await client.close()
            server.close()
        return seen

    assert asyncio.run(main()) == [(True, True), (False, False), (False, True), (True, True)]
