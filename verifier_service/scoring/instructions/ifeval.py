"""Google IFEval's 25 checks (google-research `instruction_following_eval/instructions.py`), ported as pure functions
`check(response, kwargs) -> followed`, each linear in the response.

The semantics are Google's, with these deliberate differences (README, "instructions"):
- kwargs are the ones the item gives, never drawn at random: Google's `build_description` draws a random value for a
  missing one (and for a negative count, an empty keyword list, a letter that is not one character); here that is
  `BadKwargs`, which the component turns into `null` (`bad_kwargs`).
- Keywords, forbidden words, the section splitter and the postscript marker are matched as literal text (Google
  splices them into a regular expression unescaped; IFEval's own kwargs hold no metacharacters, so the verdicts are
  the same), case-insensitively, as substrings (`keywords:existence` finds "cat" in "category", as Google does).
- Language: a seeded, offline detector (`_language_of`: langdetect, Google's detector, in C where it is built, with
  langdetect's own probabilities); text it cannot decide (no letters) is *not* followed, where Google counts
  langdetect's exception as followed for response_language, english_capital and english_lowercase.
- Sentences and capital words are counted without NLTK (`text.py`).
- Where Google's regular expressions are quadratic on some texts (placeholders, bullets, titles, postscripts) the same
  matches are found by a linear scan.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from verifier_service.scoring.instructions import detect
from verifier_service.scoring.instructions import text as split

Check = Callable[[str, dict[str, Any]], bool]


class BadKwargs(ValueError):
    """The kwargs do not give this check what it needs; the message names the key (never its value)."""


def _int(kwargs: dict[str, Any], key: str, low: int = 0) -> int:
    value = kwargs.get(key)
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or value < low:
        raise BadKwargs(f"{key} must be an integer of at least {low}")
    return value


def _str(kwargs: dict[str, Any], key: str) -> str:
    value = kwargs.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadKwargs(f"{key} must be a non-empty string")
    return value


def _strings(kwargs: dict[str, Any], key: str) -> list[str]:
    value = kwargs.get(key)
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) and v for v in value):
        raise BadKwargs(f"{key} must be a non-empty list of non-empty strings")
    return list(value)


def _compare(count: int, kwargs: dict[str, Any], threshold_key: str, relation_key: str = "relation") -> bool:
    threshold = _int(kwargs, threshold_key)
    relation = kwargs.get(relation_key)
    if relation == "less than":
        return count < threshold
    if relation == "at least":
        return count >= threshold
    raise BadKwargs(f'{relation_key} must be "less than" or "at least"')


def _language_of(text: str) -> str | None:
    """The ISO 639-1 code of the text's language by langdetect, Google's detector, with its seed fixed (unseeded,
    langdetect gives the same text different languages on different calls: langdetect#120); None when it cannot be
    decided (no letters). Not scoring/langid.py's fastText model, which the `language` component uses: on the
    responses where the two differ in IFEval's archived run, langdetect was right 4 times in 5 (Swahili, Nepali, short
    all-caps English), and it keeps the checks in agreement with Google's (tests/unit/test_instructions_google.py).
    It is `langdetect.detect`, in C where setup.py built `_langdetect.c` (detect.py: the same probabilities to the bit,
    about 30 times faster), else langdetect's Python with the detector's n-gram list made by `_ngrams` (the same list,
    three times faster). Any other langdetect error raises (the item is null, internal_error): never a silent "not
    followed"."""
    factory, error_type, error_code = _langdetect()
    if detect.COMPILED is not None:
        return detect.language_of(factory, text)
    try:
        detector = factory.create()
        detector.append(text)
        detector._extract_ngrams = functools.partial(_ngrams, detector)
        return str(detector.detect()).split("-")[0]
    except error_type as exc:
        if exc.get_code() == error_code.CantDetectError:  # no letters: nothing to decide from
            return None
        raise


def _langdetect() -> tuple[Any, Any, Any]:
    """langdetect's detector factory with its profiles loaded and its seed fixed, its exception type and its error
    codes. Its own lazy loading publishes the factory before the profiles are in, so a second thread's first call
    could find none (NeedLoadProfileError): loaded here once, under a lock. Its profiles ship in the package: nothing
    is fetched."""
    import langdetect
    from langdetect import detector_factory
    from langdetect.lang_detect_exception import ErrorCode

    with _LANGDETECT_LOADING:
        detector_factory.init_factory()
        langdetect.DetectorFactory.seed = 0
    return detector_factory._factory, langdetect.LangDetectException, ErrorCode


def _ngrams(detector: Any) -> list[str]:
    """langdetect 1.0.9's `Detector._extract_ngrams` (for langdetect's Python, where _langdetect.c is not built), the
    same list in the same order, without its loop over every character: the text is normalized with one
    `str.translate`, and each word's n-grams (which depend on the word alone: langdetect starts afresh after each
    space) are found once and remembered. langdetect's sampling draws from this list with its fixed seed, so the
    language found is the same."""
    words = detector.text.translate(_NORMALIZED).split(" ")
    found: list[str] = []
    for index, word in enumerate(words):
        if word:
            found += _word_ngrams(word, index < len(words) - 1)
    return found


@functools.lru_cache(maxsize=1 << 14)  # a few MB: an answer's vocabulary, and more
def _word_ngrams(word: str, before_space: bool) -> tuple[str, ...]:
    """The 1-, 2- and 3-grams langdetect's `NGram` gives for one normalized word (and the space after it, when there
    is one) that its profiles know; none inside a run of capitals."""
    from langdetect import detector_factory

    known = detector_factory._factory.word_lang_prob_map
    found = []
    grams, capitals = " ", False
    for char in word + (" " if before_space else ""):
        last = grams[-1]
        grams = (" " if last == " " else grams[1:] if len(grams) >= 3 else grams) + char
        capitals = char.isupper() and (capitals or last.isupper())
        if not capitals:
            found += [gram for n in (1, 2, 3) if len(grams) >= n and (gram := grams[-n:]) != " " and gram in known]
    return tuple(found)


class _Normalized(dict[int, str]):
    """langdetect's per-character `NGram.normalize` as a `str.translate` table, filled as characters are met (up to
    65,536 of them: text made of ever new characters cannot grow it without bound)."""

    def __missing__(self, code: int) -> str:
        from langdetect.utils.ngram import NGram

        normalized = NGram.normalize(chr(code))
        if len(self) < 1 << 16:
            self[code] = normalized
        return normalized


_NORMALIZED = _Normalized()
_LANGDETECT_LOADING = threading.Lock()


# --- the checks, in the order of Google's registry ---------------------------------------------------------------


def keywords_existence(response: str, kwargs: dict[str, Any]) -> bool:
    return all(re.search(re.escape(word), response, re.IGNORECASE) for word in _strings(kwargs, "keywords"))


def keywords_frequency(response: str, kwargs: dict[str, Any]) -> bool:
    keyword = re.escape(_str(kwargs, "keyword").strip())
    return _compare(len(re.findall(keyword, response, re.IGNORECASE)), kwargs, "frequency")


def keywords_forbidden_words(response: str, kwargs: dict[str, Any]) -> bool:
    words = _strings(kwargs, "forbidden_words")
    return not any(re.search(rf"\b{re.escape(word)}\b", response, re.IGNORECASE) for word in words)


def keywords_letter_frequency(response: str, kwargs: dict[str, Any]) -> bool:
    letter = _str(kwargs, "letter").strip().lower()
    if len(letter) != 1:
        raise BadKwargs("letter must be one character")
    return _compare(response.lower().count(letter), kwargs, "let_frequency", "let_relation")


def response_language(response: str, kwargs: dict[str, Any]) -> bool:
    language = _str(kwargs, "language")
    return _language_of(response) == language


def number_sentences(response: str, kwargs: dict[str, Any]) -> bool:
    return _compare(split.count_sentences(response), kwargs, "num_sentences")


def number_paragraphs(response: str, kwargs: dict[str, Any]) -> bool:
    wanted = _int(kwargs, "num_paragraphs")
    paragraphs = re.split(r"\s?\*\*\*\s?", response)
    count = len(paragraphs)
    for index, paragraph in enumerate(paragraphs):
        if not paragraph.strip():
            if index in (0, len(paragraphs) - 1):
                count -= 1
            else:  # an empty paragraph between two dividers
                return False
    return count == wanted


def number_words(response: str, kwargs: dict[str, Any]) -> bool:
    return _compare(split.count_words(response), kwargs, "num_words")


def nth_paragraph_first_word(response: str, kwargs: dict[str, Any]) -> bool:
    wanted, nth = _int(kwargs, "num_paragraphs", 1), _int(kwargs, "nth_paragraph", 1)
    first_word = _str(kwargs, "first_word").lower()
    if nth > wanted:
        raise BadKwargs("nth_paragraph must be at most num_paragraphs")
    paragraphs = response.split("\n\n")
    count = sum(1 for paragraph in paragraphs if paragraph.strip())
    if nth > count:
        return False
    paragraph = paragraphs[nth - 1].strip()  # Google indexes the paragraphs empty ones included
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    cut = re.search(r"[.,?!'\"]", word)
    found = (word[: cut.start()] if cut else word).lower()
    return count == wanted and found == first_word


def number_placeholders(response: str, kwargs: dict[str, Any]) -> bool:
    """Google's `[.*?]` matches, counted by a scan (the regex is quadratic on a long line of '[')."""
    wanted, count, position = _int(kwargs, "num_placeholders"), 0, 0
    while (opening := response.find("[", position)) >= 0:
        line_end = response.find("\n", opening)
        line_end = len(response) if line_end < 0 else line_end
        closing = response.find("]", opening + 1, line_end)
        if closing < 0:  # no ']' after it on its line: no placeholder starts later on that line
            position = line_end + 1
            continue
        count, position = count + 1, closing + 1
    return count >= wanted


def postscript(response: str, kwargs: dict[str, Any]) -> bool:
    marker = _str(kwargs, "postscript_marker").strip()
    lowered = response.lower()
    # Google's patterns start with `\s*` and end with `.*$`, which every position satisfies: only the middle counts.
    if marker == "P.P.S":
        return re.search(r"p\.\s?p\.\s?s", lowered) is not None
    if marker == "P.S.":
        return re.search(r"p\.\s?s\.", lowered) is not None
    return marker.lower() in lowered


_SPACE_RUN = re.compile(r"\s*")


def _bullet_lines(response: str, bullet: str, star: bool) -> int:
    """How many times Google's `^\\s*\\*[^\\*].*$` (star) or `^\\s*-.*$` (MULTILINE) matches: at a line start, white
    space (newlines too), then the bullet. Every line start in one run of white space reaches the same character, so
    each run is read once here (the regex reads it again from each line start in it: quadratic)."""
    count, position, size = 0, 0, len(response)
    while position < size:
        end = _SPACE_RUN.match(response, position).end()  # type: ignore[union-attr]
        if response.startswith(bullet, end) and (not star or (end + 1 < size and response[end + 1] != "*")):
            count += 1
            # `.*$` runs to the next newline; with the star, `[^*]` may itself be a newline, and `.*` the next line.
            match_end = response.find("\n", end + (2 if star else 1))
            if match_end < 0:
                break
            position = match_end if response[match_end - 1] == "\n" else match_end + 1
            continue
        line_end = response.find("\n", end)
        if line_end < 0:
            break
        position = line_end + 1
    return count


def number_bullet_lists(response: str, kwargs: dict[str, Any]) -> bool:
    wanted = _int(kwargs, "num_bullets")
    return _bullet_lines(response, "*", True) + _bullet_lines(response, "-", False) == wanted


_CONSTRAINED = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def constrained_response(response: str, kwargs: dict[str, Any]) -> bool:
    stripped = response.strip()
    return any(option in stripped for option in _CONSTRAINED)


_HIGHLIGHT = re.compile(r"\*[^\n*]*\*")
_DOUBLE_HIGHLIGHT = re.compile(r"\*\*[^\n*]*\*\*")


def number_highlighted_sections(response: str, kwargs: dict[str, Any]) -> bool:
    wanted = _int(kwargs, "num_highlights")
    count = sum(1 for found in _HIGHLIGHT.finditer(response) if found.group().strip("*").strip())
    count += sum(1 for found in _DOUBLE_HIGHLIGHT.finditer(response) if found.group()[2:-2].strip())
    return count >= wanted


def multiple_sections(response: str, kwargs: dict[str, Any]) -> bool:
    splitter = re.escape(_str(kwargs, "section_spliter").strip())
    wanted = _int(kwargs, "num_sections")
    return len(re.split(rf"\s?{splitter}\s?\d+\s?", response)) - 1 >= wanted


def json_format(response: str, kwargs: dict[str, Any]) -> bool:
    value = response.strip()
    for prefix in ("```json", "```Json", "```JSON", "```"):
        value = value.removeprefix(prefix)
    value = value.removesuffix("```").strip()
    try:
        json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes, not JSON to us
        return False
    return True


def title(response: str, kwargs: dict[str, Any]) -> bool:
    """Google's `<<[^\\n]+>>`: on a line, from the first '<<' to the last '>>' (a scan: the regex is quadratic on a
    long line of '<')."""
    for line in response.split("\n"):
        opening, closing = line.find("<<"), line.rfind(">>")
        if opening >= 0 and closing >= opening + 3 and line[opening : closing + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


def two_responses(response: str, kwargs: dict[str, Any]) -> bool:
    parts = response.split("******")
    valid = []
    for index, part in enumerate(parts):
        if part.strip():
            valid.append(part)
        elif index not in (0, len(parts) - 1):
            return False
    return len(valid) == 2 and valid[0].strip() != valid[1].strip()


def repeat_prompt(response: str, kwargs: dict[str, Any]) -> bool:
    return response.strip().lower().startswith(_str(kwargs, "prompt_to_repeat").strip().lower())


def end_checker(response: str, kwargs: dict[str, Any]) -> bool:
    return response.strip().strip('"').lower().endswith(_str(kwargs, "end_phrase").strip().lower())


def capital_word_frequency(response: str, kwargs: dict[str, Any]) -> bool:
    count = split.count_capital_words(response)
    return _compare(count, kwargs, "capital_frequency", "capital_relation")


def english_capital(response: str, kwargs: dict[str, Any]) -> bool:
    return _is_upper(response) and _language_of(response) == "en"


def english_lowercase(response: str, kwargs: dict[str, Any]) -> bool:
    return _is_lower(response) and _language_of(response) == "en"


def _is_upper(text: str) -> bool:
    """`str.isupper`; for ASCII text by `bytes.isupper`, the same definition there (a capital and no small letter:
    the only cased ASCII characters are letters), five times faster (0.03 ms on 32,000 characters)."""
    return text.encode("ascii").isupper() if text.isascii() else text.isupper()


def _is_lower(text: str) -> bool:
    """`str.islower`; for ASCII text by `bytes.islower`, as `_is_upper`."""
    return text.encode("ascii").islower() if text.isascii() else text.islower()


def no_comma(response: str, kwargs: dict[str, Any]) -> bool:
    return "," not in response


def quotation(response: str, kwargs: dict[str, Any]) -> bool:
    stripped = response.strip()
    return len(stripped) > 1 and stripped[0] == '"' and stripped[-1] == '"'


CHECKS: dict[str, Check] = {
    "keywords:existence": keywords_existence,
    "keywords:frequency": keywords_frequency,
    "keywords:forbidden_words": keywords_forbidden_words,
    "keywords:letter_frequency": keywords_letter_frequency,
    "language:response_language": response_language,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:number_words": number_words,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:json_format": json_format,
    "detectable_format:title": title,
    "combination:two_responses": two_responses,
    "combination:repeat_prompt": repeat_prompt,
    "startend:end_checker": end_checker,
    "change_case:capital_word_frequency": capital_word_frequency,
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "punctuation:no_comma": no_comma,
    "startend:quotation": quotation,
}
