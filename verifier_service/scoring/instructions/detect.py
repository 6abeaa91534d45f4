"""langdetect 1.0.9's detection (`Detector.detect` with its seed fixed) in C, where setup.py built `_langdetect.c`:
the same probabilities to the bit, in about 0.3 ms instead of 8-14 on an 8,000-token answer. ifeval.`_language_of`
uses it when it is built and langdetect's Python (with `_ngrams`) when it is not.

What stays in Python is `Detector.append`'s three substitutions (`appended`): web addresses, e-mail addresses and
Vietnamese letters written with a combining mark, by langdetect's own regular expressions; the rest of `append`,
`cleaning_text`, the n-gram list and the seeded sampling run in C (_langdetect.c says how it draws what Python draws).
"""

from __future__ import annotations

import functools
import random
from typing import Any

try:
    from verifier_service.scoring.instructions import _langdetect as COMPILED
except ImportError:  # no C compiler where it was installed: langdetect's Python does it
    COMPILED = None  # type: ignore[assignment]

_MAIL_BEFORE, _MAIL_AFTER = 64, 512  # MAIL_RE's reach around its "@": {1,64} before it, 1 + {1,255}{1,255} after


def language_of(factory: Any, text: str) -> str | None:
    """`factory.create()`'s `detect()` of the text, or None where it raises CantDetectError (no n-gram its profiles
    know): `_language_of`'s verdict, without the region suffix (zh-cn is zh)."""
    from langdetect.detector import Detector
    from langdetect.language import Language

    found = probabilities(factory, text)
    if found is None:
        return None
    ranked = [Language(lang, p) for lang, p in zip(factory.langlist, found, strict=True) if p > Detector.PROB_THRESHOLD]
    ranked.sort(reverse=True)  # Detector._sort_probability, whose first is detect()'s language
    return str(ranked[0].lang if ranked else Detector.UNKNOWN_LANG).split("-")[0]


def probabilities(factory: Any, text: str) -> list[float] | None:
    """langdetect's `langprob` for the text (a probability per language of `factory.langlist`, before
    `get_probabilities` drops those of 0.1 and under), or None for CantDetectError."""
    assert COMPILED is not None, "_langdetect.c is not built"
    return COMPILED.probabilities(_model(factory), appended(text))


def appended(text: str) -> str:
    """`Detector.append`'s substitutions of the text, as it makes them, in its order: every text is searched for web
    addresses (fast: the pattern starts with "http"), and for e-mail addresses and Vietnamese combining marks only
    where they can be (an "@"; a mark), since those patterns try every position: 1.2 and 0.5 ms on 32,000
    characters."""
    from langdetect.detector import Detector
    from langdetect.utils.ngram import NGram

    text = Detector.URL_RE.sub(" ", text)
    if "@" in text:
        text = _without_mail(text)
    if any(mark in text for mark in NGram.DMARK_CLASS):
        text = NGram.normalize_vi(text)
    return text


def _without_mail(text: str) -> str:
    """`Detector.MAIL_RE.sub(" ", text)`, run on the spans around each "@" only. An address is 1 to 64 of its
    characters, an "@" (which is none of them) and at most 510 after: one that uses an "@" lies inside that "@"'s
    span, and the pattern, which has no anchor and no look-around, finds in a span the addresses it finds there in
    the whole text (spans that overlap are merged, so no address is cut)."""
    from langdetect.detector import Detector

    spans: list[list[int]] = []
    at = text.find("@")
    while at >= 0:
        start, stop = max(0, at - _MAIL_BEFORE), at + _MAIL_AFTER
        if spans and start <= spans[-1][1]:
            spans[-1][1] = stop
        else:
            spans.append([start, stop])
        at = text.find("@", at + 1)
    pieces, done = [], 0
    for start, stop in spans:
        pieces += [text[done:start], Detector.MAIL_RE.sub(" ", text[start:stop])]
        done = stop
    pieces.append(text[done:])
    return "".join(pieces)


@functools.lru_cache(maxsize=1)
def _model(factory: Any) -> Any:
    """The factory's profiles in C (about 0.1 s and 8 MB, once per process), with the state of the random generator
    that its Detector seeds in `_detect_block` (`self.random.seed(self.seed)`) and the Detector's settings."""
    from langdetect.utils.ngram import NGram

    detector = factory.create()
    seeded = random.Random()
    seeded.seed(detector.seed)
    version, state, gauss_next = seeded.getstate()
    assert version == 3 and gauss_next is None, "random's state is not the Mersenne Twister's"
    settings = (
        float(detector.alpha),
        float(detector.ALPHA_WIDTH),
        int(detector.n_trial),
        int(detector.ITERATION_LIMIT),
        float(detector.CONV_THRESHOLD),
        float(detector.BASE_FREQ),
        int(detector.max_text_length),
    )
    assert detector.prior_map is None, "a prior map is not supported"
    return COMPILED.load(factory.word_lang_prob_map, len(factory.langlist), state, NGram.normalize, settings)
