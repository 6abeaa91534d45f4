"""The steps component's reader in C (scoring/_arithmetic.c) finds the same claims as the Python reader
(scoring/arithmetic.py, the reference), on every text the steps tests read, the benchmark's dense arithmetic, and
seeded strings of the pieces the reader treats specially: the same (start, end, right) list, text by text."""

from __future__ import annotations

import ast
import json
import random
import re
import shutil
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from verifier_service.scoring import arithmetic, exact

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "steps"
ANNOTATION = re.compile(r"<<[^<>]*>>")
Found = list[tuple[int, int, bool]]


def require_compiled() -> Callable[[str, Callable[..., tuple[int, int, Found]]], Found]:
    """The C reader; skip where no C compiler is to build it, fail where one is and it was not built."""
    if arithmetic.READ_CLAIMS is not None:
        return arithmetic.READ_CLAIMS
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here to build verifier_service/scoring/_arithmetic.c")
    pytest.fail(f"{compiler} is here but verifier_service/scoring/_arithmetic.c was not built: run make install")


@pytest.fixture
def compiled() -> Callable[[str, Callable[..., tuple[int, int, Found]]], Found]:
    return require_compiled()


def python_claims(text: str, monkeypatch: pytest.MonkeyPatch) -> Found:
    with monkeypatch.context() as patch:
        patch.setattr(arithmetic, "READ_CLAIMS", None)
        return arithmetic.claims(text)


def differences(texts: list[str], monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Found, Found]]:
    """(text, C's claims, Python's claims) for each text where they differ."""
    assert arithmetic.READ_CLAIMS is not None
    found = []
    for text in texts:
        fast, reference = arithmetic.claims(text), python_claims(text, monkeypatch)
        if fast != reference:
            found.append((text[:500], fast, reference))
    return found


def steps_test_texts() -> Iterator[str]:
    """Every string written in tests/unit/test_steps.py (its cases, read from its source), and the data it reads."""
    source = (ROOT / "tests" / "unit" / "test_steps.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
    for name in ("gsm8k_test_300.jsonl", "gsm8k_test_errors.jsonl"):
        for line in (DATA / name).read_text().splitlines():
            yield json.loads(line)["answer"]
            yield ANNOTATION.sub("", json.loads(line)["answer"])
    for line in (DATA / "planted.jsonl").read_text().splitlines():
        yield json.loads(line)["solution"]
        yield ANNOTATION.sub("", json.loads(line)["solution"])
    yield from EDGES
    yield "1" * 100_000
    yield "1=" * 20_000
    yield "2^" * 10_000 + "2 = 4"
    yield "9" * 99 + "^" + "9" * 99 + " = 1"
    yield "1,000" * 20_000 + " = 1"
    yield "(" * 5_000 + "1" + ")" * 5_000 + " = 1"
    yield "1.5 apples per day " * 5_000 + "= 3"
    yield "1 + 1 = 2. " * (arithmetic.MAX_TOKENS // 5) + "1 + 1 = 3."  # past the token budget


EDGES = [  # the edges of what the C reader spells out: each regex bound, each number shape, each lookahead
    *[f"7 / 2 = 3 1/{'2' * k}{end}" for k in (8, 9, 10) for end in ("", ".", ".5", ",", "/", "0", " x")],
    *[f"7 / 2 = 3 \\frac{{1}}{{{'2' * k}}}" for k in (9, 10)],
    *["1000 + 500 = 1 500", "1000 + 500 = 01 000", "2 + 2 = 0 1/2", "2 + 2 = 4 1/2 + 1", "6 / 2 = 3\t000"],
    *["1,2345 + 1 = 2", "1,000,2345 = 1", "2,5 * 2 = 5", "1,000.5 * 2 = 2001", "1,00 * 2 = 2", ".5 * 2 = 1"],
    *["2**3 = 8", "a**3 = 8", "2** 3 = 8", "(2)**(3) = 8", "**2 + 2 = 4**", "2 ** 3 = 8", "2³ = 8", "2^-1 = 0.5"],
    *["<a-b> 2 + 2 = 4", "<abcdefghijklmnopqrst> 2 + 2 = 5", "<abcdefghijklmnopqrstu> 2 + 2 = 5", "<é> 1 + 1 = 3"],
    *["<<" + " " * 295 + "2+2=5>>", "<<" + " " * 296 + "2+2=5>>", "<<2+2=5>", "<<2+2=5>>>", "<<<2+2=5>>"],
    *["3 x 4 = 12", "3 X 4 = 12", "3 x = 12", "2x = 10", "15 pages x 1/3 = 5", "$30/packet * 2 = $60"],
    *["20% of 50 = 10", "100 - 20 = 80%", "1121 / 3 = 373 remainder 2", "1121 / 3 = 373 R 2", "Post-it 3 - 1 = 2"],
    *["6 nephews = 96 / 6", "1.5 quarts = 4 * 1.5", "Weeks 1-2 = 3", "3:2 = 1.5", "a_{37} = 1 + 1", "5! = 120"],
    *["0.1 + 0.2 = 0.30000000000000004", "1 / 3 = 0.333333333333333", "1 / 3 = 0.33", "1 / 3 ≈ 0.3", "1/3 ~ 0.34"],
    *["2^4096 = 1", "1^100000 = 1", "(-1)^100001 = -1", "0^0 = 1", "0^-1 = 1", "2^0.5 = 1", "9" * 38 + " * 9 = 1"],
    *[" " * k + "2 + 2 = 5" + " " * k for k in (1, 2)],
    "x = 5 + 3 = 8",
    *["2 \\divide 3 + 4 = 7", "2 \\div 3 + 4 = 7", "2 \\timesx 3 + 4 = 7", "2 \\times 3 + 4 = 10", "\\left. 3 + 4 = 7"],
    *[
        "3 \\left( 2 \\right) = 6",
        "\\left\\{ 2 + 2 \\right\\} = 4",
        "\\left [ 1 + 1 \\right ] = 2",
        "\\$3 \\times 4 = \\$12",
    ],
    *[
        "50\\% of 8 = 4",
        "3 \\approx 3.1",
        "1/2 \\approx 0.5",
        "\\frac12 = 0.5",
        "\\dfrac{3}{4} \\cdot 4 = 3",
        "\\tfracx = 1",
    ],
    *[
        "\\(2 + 2 = 5\\)",
        "\\begin{align} 2 + 2 &= 4 \\\\ 3 + 3 &= 7 \\end{align}",
        "\\boxed{2 + 2 = 5}",
        "\\quad 2 + 2 = 5",
    ],
    *["2 + 2 = \\boxed{5}", "\\sqrt{4} + 1 = 3", "2 \\, + 2 = 4", "\\textbf{2 + 2 = 5}", "\\mathbf{2} + 2 = 5", "2 \\"],
    "- 30 + 12 = 42 and 1) 30 + 12 = 42",
    *[f"3 \\text{{{'a' * k}}} + 2 = 5" for k in (0, 1, 40, 41)],
    *["3 \\text {kg} + 2 = 5", "3 \\text\t{kg} + 2 = 5", "3 \\text\u2003{kg} + 2 = 5", "3 \\mathrm{kg}+ 2 = 5"],
    *["3 \\textrm{kg} + 2 = 5", "3 \\mbox{kg} + 2 = 5", "3 \\textit{kg} + 2 = 5", "3 \\text{k{g}} + 2 = 5"],
    *["1121 / 3 = 373 \\text{ remainder } 2", "1121 / 3 = 373 \\text{R} 2", "1121 / 3 = 373 \\mathrm{Rem.} 2"],
    *["3 \\text{ab\xa0cd\u2003ef\u3000gh} + 2 = 5", "3 \\text{ab\xa0cd} + 2 = 5", "3 \\text{kg\u2003x} 4 = 12"],
    *["12 \\text{kg} x 3 = 36", "12 \\text{kg x} 3 = 36", "$30/\\text{packet} * 2 = $60", "2 \\text{x} = 10"],
    *["\u0663\u0660 / \u0662 = \u0661\u0665", "\uff11,\uff10\uff10\uff10 + 1 = 1001", "\u0660\u0665 + 1 = 6"],
    *["\u0969 \u0967/\u0968 * 2 = 7", "7 / 2 = 3 \u0661/\u0662", "1000 + 500 = 1 \u0665\u0660\u0660", "2**\u0663 = 8"],
]


def test_the_bounds_are_the_python_readers(compiled: object) -> None:
    from verifier_service.scoring import _arithmetic

    assert _arithmetic.WINDOW == arithmetic.WINDOW and _arithmetic.MAX_TOKENS == arithmetic.MAX_TOKENS
    assert _arithmetic.MAX_DIGITS == exact.MAX_DIGITS and _arithmetic.MAX_BITS == exact.MAX_BITS
    assert _arithmetic.MAX_DEPTH == exact.MAX_DEPTH
    assert _arithmetic.FLOAT_NOISE_DIGITS == arithmetic._FLOAT_NOISE_DIGITS


def test_the_same_claims_on_the_steps_tests_texts(compiled: object, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = list(steps_test_texts())
    assert len(texts) > 1500
    assert differences(texts, monkeypatch) == []


def benchmark_texts() -> list[str]:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from domains import CHARS_PER_TOKEN, TOKENS, arithmetic_reasoning
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return [arithmetic_reasoning(random.Random(seed), TOKENS * CHARS_PER_TOKEN) for seed in range(6)]


def test_the_same_claims_on_the_benchmark_read_in_c_alone(compiled: Callable[..., Found]) -> None:
    """bench/domains.py's steps input, 8,000 tokens of dense arithmetic: the C reader reads every window itself (the
    benchmark measures it, not the Python reader behind it), and finds what the Python reader finds."""
    for text in benchmark_texts():
        handed: list[str] = []
        fast = compiled(text, recording(handed))
        assert handed == []
        reference = python_reference(text)
        assert fast == reference and len(reference) > 150


def recording(handed: list[str]) -> Callable[[str, int, int, bool, int], tuple[int, int, Found]]:
    """The Python reader of one window (what the C reader hands a window to), noting each window in `handed`."""

    def fallback(text: str, start: int, end: int, cut: bool, budget: int) -> tuple[int, int, Found]:
        handed.append(text[start:end])
        return arithmetic._read_window(text, start, end, cut, budget)

    return fallback


def python_reference(text: str) -> Found:
    """arithmetic.claims's Python path, spelled out: no switch to flip."""
    found: Found = []
    pos, budget = 0, [arithmetic.MAX_TOKENS]
    while budget[0] > 0 and (anchor := arithmetic._ANCHOR.search(text, pos)) is not None:
        line_start = text.rfind("\n", 0, anchor.start()) + 1
        start = max(line_start, pos, anchor.start() - arithmetic.WINDOW)
        end = len(text) if (line_end := text.find("\n", anchor.end())) < 0 else line_end
        pos = max(anchor.end(), arithmetic._read(text, start, end, start > line_start, found, budget))
    return sorted(found)


def test_a_window_the_c_reader_declines_is_read_by_python(compiled: Callable[..., Found]) -> None:
    """Values past 128 bits and tags with a name outside ASCII (the regex's \\w) go to the Python reader, window by
    window; LaTeX's text (`\\text{kg}`) and digits outside ASCII (which the regex's \\d reads) the C reader reads."""
    handed: list[str] = []
    fallback = recording(handed)
    big = "9" * 40 + " + 1 = 1" + "0" * 40
    text = (
        f"2 + 2 = 4\n\\frac{{1}}{{2}} + 1 = 1.5\n3 \\text{{kg}} + 1 = 4\n{big}\n<b\u00e9> 1 + 1 = 3\n"
        "\u0663 + \u0661 = \u0664\n\uff11\uff12 \u00d7 3 = 36\n3 * 3 = 10"
    )
    assert compiled(text, fallback) == python_reference(text)
    assert handed == [big, "<b\u00e9> 1 + 1 = 3"]
    assert [right for _, _, right in python_reference(text)] == [True, True, True, True, False, True, True, False]


PIECES = [
    *"0123456789+-*/^=().,%$ xX<>:;!?{}[]~≈≃×÷·⋅∗−–²³¹⁰⁴\n\t_'\"&€£é",
    *["\\frac", "\\dfrac", "\\times", "\\cdot", "\\div", "\\approx", "\\left(", "\\right)", "\\text{kg}", "\\%"],
    *["\\$", "\\,", "\\\\", "\\boxed{", "\\begin{align}", "\\(", "\\)", "\\{", "\\}", "\\sqrt", "$$", "**", "=="],
    *["<<", ">>", "</think>", "<think>", "<b>", "of", "apples", "per", "remainder", "rem", "r", "kg", "Post", "it"],
    *["1,000", "12,345,678", "2,5", "0.5", ".5", "007", "0", "3 1/2", "1 500", "12 000", "1/3", "100%", "20% of "],
    *["9" * 30, "9" * 45, "1" * 101, "0.30000000000000004", "3.14159265358979", "\x00", "\r", "　"],
    # digits outside ASCII, which the regex's \d reads (Arabic-Indic, fullwidth, Devanagari, mathematical bold), and
    # characters near them that it does not (a superscript, a fraction, a Roman numeral)
    *["\u0663", "\u0660", "\uff11\uff12", "\uff10", "\u0967", "\U0001d7d7", "\u0660\u0665", "\u066b", "½", "Ⅻ"],
    # LaTeX's text, inside a run of words or not, and near misses of its shape
    *["\\text{kg}", "\\text{ kg per day }", "\\text {R}", "\\mathrm{rem}", "\\textrm{x}", "\\mbox{Remainder 2}"],
    *["\\text{}", "\\text{" + "a" * 40 + "}", "\\text{" + "a" * 41 + "}", "\\text{a{b}}", "\\text{a\xa0b}"],
    *["\\textit{x}", "\\text{\\bf x}", "\\text{ x}", "\\text{X }", "\\text{of}", "\\text{r\u0130}"],
    *["\\mathrm\u2003{m}", "\\text{\u0663}", "\\textbf{2}"],
]


def fuzz_text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40)))
    text = rng.choice([" ", "  ", ". ", "\n", " and "]).join(claim_text(rng) for _ in range(rng.randint(1, 6)))
    return text.translate(rng.choice(SCRIPTS)) if rng.random() < 0.1 else text


SCRIPTS = [  # the ASCII digits in another script (`٣ + ٤ = ٧`), or some of them
    str.maketrans("0123456789", "".join(chr(0x0660 + k) for k in range(10))),
    str.maketrans("0123456789", "".join(chr(0xFF10 + k) for k in range(10))),
    str.maketrans("3579", "".join(chr(0x0966 + k) for k in (3, 5, 7, 9))),
]


def written_number(rng: random.Random) -> str:
    return rng.choice(
        [
            str(rng.randint(0, 100)),
            str(rng.randint(100, 10 ** rng.randint(3, 20))),
            f"{rng.randint(0, 999)}.{rng.randint(0, 10 ** rng.randint(1, 6))}",
            f"{rng.randint(1, 999)},{rng.randint(0, 999):03d}",
            f"{rng.randint(1, 9)} {rng.randint(1, 9)}/{rng.randint(2, 12)}",
            f"{rng.randint(0, 999):0{rng.randint(1, 5)}d}",
            str(rng.randint(10**20, 10**40)),  # past 64 bits; sums and products of them past 128
            rng.choice(["(2 + 3)", "(4 - 1) * 2", "2^3", "2**3", "3²", "50%", "1/3", "-5", "- 5", "(-2)"]),
        ]
    )


def side_text(rng: random.Random) -> str:
    text = written_number(rng)
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        operator = rng.choice(
            [" + ", " - ", " * ", " / ", "+", "-", "*", "/", " x ", " × ", " ÷ ", " of ", "^", "% of "]
        )
        text += operator + written_number(rng)
    return text


def claim_text(rng: random.Random) -> str:
    """A written claim (a chain of one to three `=`), right, rounded or wrong, with prose, units and marks around it."""
    text = side_text(rng)
    for _ in range(rng.randint(1, 3)):
        right = text if rng.random() < 0.5 and not any(mark in text for mark in "^*²") else ""  # "": another side
        try:
            value = eval(re.sub(r" x | of |×", "*", right).replace("÷", "/").replace("%", "/100").replace(",", ""))
            shown = str(rng.choice([value, round(value, rng.randint(0, 4)), value + 1, value * 10]))
        except (SyntaxError, ZeroDivisionError, TypeError):
            shown = side_text(rng)
        text += rng.choice([" = ", "=", " ≈ ", " == ", " ~ ", " = $", " =  "]) + shown
        text += rng.choice(["", "", " apples", " kg", "%", " 5 boxes", " (5 boxes)", ".", ",", " 000", " 1/2"])
    before = rng.choice(["", "", "So ", "x ", "the ", "- ", "1) ", "**", "(", "$", "Post-it ", "a_", ":"])
    after = rng.choice(["", "", ".", ")", "**", " remainder 2", "x", "!", " so", "\n"])
    return f"{before}<<{text}>>{after}" if rng.random() < 0.2 else before + text + after


LATEX = [  # a written piece and LaTeX ways to write it, some of them near misses (`\\timesx`, `\\divide`, `\\left.`)
    (" * ", [" \\times ", " \\cdot ", "\\times", " \\timesx "]),
    (" / ", [" \\div ", "\\div", " \\divide "]),
    ("(", ["\\left(", "\\left (", "\\{", "\\left."]),
    (")", ["\\right)", "\\right )", "\\}", "\\right."]),
    ("%", ["\\%"]),
    ("$", ["\\$", "\\,"]),
    ("≈", ["\\approx"]),
    (" = ", [" &= ", " = \\boxed{", " =\\quad ", " \\\\ = ", " =\\! "]),
]
LATEX_AROUND = ["\\(", "\\[", "$$", "\\begin{align}", "\\text{so }", "\\mathrm{kg} ", "\\sqrt", "\\textbf{", "\\)"]


def latex_text(rng: random.Random, text: str) -> str:
    """The text as LaTeX writes it, piece by piece at random: `\\frac{1}{2}`, `\\times`, `\\left(`, ..."""

    def fraction(match: re.Match[str]) -> str:
        return rng.choice([f"\\frac{{{match[1]}}}{{{match[2]}}}", f"\\dfrac{match[1]}{match[2]}", match[0]])

    text = re.sub(r"(\d+)/(\d+)", fraction, text)
    for written, forms in LATEX:
        choices = [written, *forms]
        text = re.sub(re.escape(written), lambda _, choices=choices: rng.choice(choices), text)  # type: ignore[misc]
    return rng.choice(["", *LATEX_AROUND]) + text + rng.choice(["", *LATEX_AROUND, "}", " \\text{ dollars}"])


def test_the_same_claims_on_seeded_random_text(compiled: object, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(2024)
    texts = [fuzz_text(rng) for _ in range(2000)]
    texts += [latex_text(rng, fuzz_text(rng)) for _ in range(1000)]
    assert differences(texts, monkeypatch) == []


def bombs() -> list[str]:
    """Completions shaped to make a regex or a reader work hard: long runs of each piece it treats specially."""
    n = 20_000
    return [
        "1=" * n,
        "=" * n,
        "(" * n + "1 = 1",
        "<<" * n + "1+1=3>>",
        "<<" + "1+" * 140 + "1=141>>" * 200,
        "\\text{" * n + "} = 1",
        "\\text{ a" * n,
        "\\left(" * n + "2 = 2",
        "\\frac{" * n + "1}{2} = 0.5",
        "1/" * n + "2 = 0.5",
        "1,000" * n + " = 1",
        "1 " * n + "= 2",
        "a " * n + "= 1",
        "**" * n + "2**3 = 8",
        "$" * n + "3 = 3",
        "\u0663" * n + " = 1",
        "\uff11 + " * n + "\uff11 = 2",
        "1.5 apples per day " * 5_000 + "= 3",
        "12 \\text{kg} x " * 5_000 + "1 = 12",
    ]


def megabyte(rng: random.Random) -> list[str]:
    """Four completions of about a megabyte each, each with wrong steps among the right ones: dense arithmetic, the
    same in Arabic-Indic digits, LaTeX with text units, and Chinese prose with fullwidth-digit claims."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from domains import arithmetic_reasoning
    finally:
        sys.path.remove(str(ROOT / "bench"))
    dense = "So 2 + 2 = 5. " + arithmetic_reasoning(rng, 1_000_000)
    latex = "".join(
        f"so ${a} \\times {b} = {a * b + (k % 97 == 0)}$ \\text{{ dollars}} and \\[ \\frac{{{a}}}{{{b}}} \\approx "
        f"{a / b:.2f} \\] "
        for k, (a, b) in enumerate((rng.randint(2, 999), rng.randint(2, 99)) for _ in range(12_500))
    )
    arabic = dense.translate(SCRIPTS[0])
    chinese = "".join(
        f"因为每盒有{b}个，一共{a}盒，所以 {a} × {b} = {a * b + (k % 97 == 0)} 个。".translate(SCRIPTS[1])
        for k, (a, b) in enumerate((rng.randint(2, 999), rng.randint(2, 99)) for _ in range(40_000))
    )
    return [dense, arabic, latex, chinese]


def test_the_same_results_on_adversarial_completions(compiled: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps component's whole result (score, verdict, detail, each step's span and score) with the C reader and
    with the Python reader alone, for each aggregate and scope: on GSM8K's solutions and the planted errors made
    one completion, regex-bomb-shaped text, and megabyte completions (LaTeX, digits outside ASCII, Chinese)."""
    from verifier_service.schema import ScoreItem, StepsSpec
    from verifier_service.scoring.steps import score

    gsm8k = "\n".join(json.loads(line)["answer"] for line in (DATA / "gsm8k_test_300.jsonl").read_text().splitlines())
    planted = "\n".join(json.loads(line)["solution"] for line in (DATA / "planted.jsonl").read_text().splitlines())
    texts = [gsm8k, planted, *bombs(), *megabyte(random.Random(7))]
    assert all(len(text) > 1_000_000 for text in texts[-4:])
    specs = [StepsSpec(), StepsSpec(aggregate="mean", scope="reasoning")]
    verdicts = []
    for text in texts:
        item = ScoreItem(completion=f"<think>{text}</think>{text[:1000]}", steps={})
        for spec in specs:
            fast = score(item, spec)
            with monkeypatch.context() as patch:
                patch.setattr(arithmetic, "READ_CLAIMS", None)
                assert score(item, spec) == fast, (text[:200], spec)
            verdicts.append(fast.verdict)
    assert set(verdicts) == {"valid", "invalid_step", "no_steps"}
    assert verdicts[-8:] == ["invalid_step"] * 8  # the megabyte completions, each read by both readers
