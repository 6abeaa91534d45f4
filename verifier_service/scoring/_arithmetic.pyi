from collections.abc import Callable

WINDOW: int
MAX_TOKENS: int
MAX_DIGITS: int
MAX_BITS: int
MAX_DEPTH: int
FLOAT_NOISE_DIGITS: int

def claims(
    text: str, fallback: Callable[[str, int, int, bool, int], tuple[int, int, list[tuple[int, int, bool]]]], /
) -> list[tuple[int, int, bool]]: ...
