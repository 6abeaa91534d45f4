"""Finding the program in a completion: fenced blocks, in time linear in the completion."""

from __future__ import annotations

import random
import re

import pytest

from sandbox import RunResult, RunVerdict, TestOutcome, TestVerdict
from verifier_service.scoring.code import Program, code_component, extract_program, fenced_blocks

# The regex fenced_blocks replaced, as the oracle on small inputs: the same blocks, but quadratic in the number of
# opening lines never closed. One fix: the fence is the opening line's whole run of ` or ~ (the old regex could
# backtrack and let ```` be closed by ```, which CommonMark does not allow either).
REFERENCE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}(?!`)|~{3,}(?!~))[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<code>.*?)^[ \t]*(?P=fence)[ \t]*$",
    re.M | re.S,
)
LINES = ["```", "````", "~~~", "```python", "``` py extra", "~~~~ python", "x = 1", "  ```  ", "\t~~~", "", " ", "``",
         "```python3", "print(2)", "```\r", "~~~```", "a ```"]  # fmt: skip


def test_the_blocks_are_those_the_reference_regex_finds() -> None:
    rng = random.Random(20261122)
    for _ in range(5000):
        text = "\n".join(rng.choice(LINES) for _ in range(rng.randint(0, 14))) + rng.choice(["", "\n"])
        assert fenced_blocks(text) == [(m["lang"], m["code"]) for m in REFERENCE.finditer(text)], repr(text)


@pytest.mark.timeout(30)
def test_a_megabyte_of_opening_lines_never_closed_is_read_in_one_pass() -> None:
    """The reference regex would take hours here, holding the service's event loop (a hang guard, not a timing)."""
    flood = "```python\n" * 100_000
    assert fenced_blocks(flood) == []
    assert extract_program(flood) == Program(flood, fenced=False)  # no block: the whole answer (it will not compile)
    assert fenced_blocks(flood + "```") == [("python", flood[len("```python\n") :])]  # the first opening line


def test_the_last_python_block_after_the_reasoning_is_the_program() -> None:
    completion = (
        "<think>```python\nx = 1\n```</think>Try:\n```js\nf()\n```\n```py\nprint(2)\n```\n~~~text\nnot code\n~~~"
    )
    assert extract_program(completion) == Program("print(2)\n", fenced=True)
    assert extract_program("<think>plan</think>print(3)") == Program("print(3)", fenced=False)  # the whole answer
    assert extract_program("<think>plan</think>```python\n```") is None  # an empty block: nothing to run


def test_an_answer_taken_whole_that_does_not_compile_is_no_code_and_a_fenced_block_a_compile_error() -> None:
    error = RunResult(RunVerdict.COMPILE_ERROR, detail="SyntaxError: unterminated string literal (main.py, line 1)")
    prose, fenced = code_component(error, 2, fenced=False), code_component(error, 2, fenced=True)
    assert (prose.verdict, prose.score, prose.passed, prose.total) == ("no_code", 0.0, 0, 2)
    assert prose.detail == f"no code block, and the answer is not a Python program ({error.detail})"
    assert (fenced.verdict, fenced.score, fenced.detail) == ("compile_error", 0.0, error.detail)
    ran = code_component(RunResult(RunVerdict.OK, (TestOutcome(TestVerdict.PASSED),)), 1, fenced=False)
    assert (ran.verdict, ran.score) == ("passed", 1.0)  # a bare program that compiles runs as any other


def test_a_cpp_program_is_the_last_cpp_block_after_the_reasoning() -> None:
    answer = (
        "<think>```cpp\nint draft;\n```</think>\n```python\nprint(1)\n```\n```c++\nint first;\n```\n"
        "```cpp\nint main() {}\n```\nDone."
    )
    assert extract_program(answer, language="cpp") == Program("int main() {}\n", fenced=True)
    assert extract_program("```C++\nint x;\n```", language="cpp") == Program("int x;\n", fenced=True)
    assert extract_program("```python\nprint(1)\n```", language="python") == Program("print(1)\n", fenced=True)


def test_a_cpp_answer_without_a_cpp_block_has_no_code() -> None:
    """No whole-answer fallback: prose or a Python block is no C++ program (Python keeps its fallback)."""
    assert extract_program("int main() { return 0; }", language="cpp") is None
    assert extract_program("```python\nprint(1)\n```", language="cpp") is None
    assert extract_program("<think>```cpp\nint main() {}\n```</think>Sure.", language="cpp") is None
    assert extract_program("int main() { return 0; }") == Program("int main() { return 0; }", fenced=False)
