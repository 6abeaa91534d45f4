from collections.abc import Callable
from typing import Any

def load(
    word_lang_prob_map: dict[str, list[float]],
    languages: int,
    state: tuple[int, ...],
    normalize: Callable[[str], str],
    settings: tuple[float, float, int, int, float, float, int],
    /,
) -> Any: ...
def probabilities(model: Any, text: str, /) -> list[float] | None: ...
