"""Sentences, words and lines the way IFEval counts them, without NLTK or any data file, each linear in the text.

Google's checker counts sentences with NLTK's trained English punkt model and capitalised words with
`nltk.word_tokenize`; both need the `punkt_tab` data, which NLTK downloads at run time (the verifier never does).
`count_sentences` follows punkt's rules with the English model's abbreviations, sentence starters and
collocations but without its per-word statistics (which decide a few cases after initials and abbreviations):
on Google's 541 archived responses and their loose variants it gives punkt's count for 1614 of 1623 texts, and the
same verdict on every number_sentences instruction. `word_tokens` follows the Treebank rules that change which tokens
are all capitals (contractions split off, punctuation apart): the same count of capitalised words for 1620 of them.
tests/unit/test_instructions_google.py checks the verdicts.
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The abbreviations and frequent sentence starters of NLTK's English punkt model (punkt_tab/english). A period after
# an abbreviation ends a sentence only before a frequent sentence starter; "e.g." and "etc." are not abbreviations
# there, so they end one.
_ABBREVIATIONS = _words(
    "a.a a.c a.d a.g a.h a.m a.m.e a.s a.t adm ala ariz aug ave b.f b.v bros c c.i.t c.o.m.b c.v calif chg cie "
    "co col colo conn corp cos ct d d.c d.h d.w dec dr e e.f e.h e.l e.m f f.g f.j feb fla fri ft g g.d g.f g.k "
    "ga gen h h.c h.f h.m i.m.s ill inc j.b j.c j.j j.k j.p j.r jan jr k kan ky l l.a l.f l.p lt ltd m m.b.a "
    "m.d.c m.j maj messrs mg mich minn mr mrs ms n n.c n.d n.h n.j n.m n.v n.y nev nov oct ok okla ore p p.a.m "
    "p.m pa ph.d prof r r.a r.h r.i r.j r.k r.t rep reps s s.a s.a.y s.c s.g s.p.a s.s sen sep sept sr st sw t "
    "t.j tenn tues u.k u.n u.s u.s.a u.s.s.r v va vs vt w w.c w.r w.va w.w wash wed wis yr"
)
_STARTERS = _words(
    "according although among both but despite even he however i if in indeed instead it many meanwhile moreover "
    "most nevertheless nonetheless nor sales separately similarly since so some the there these they this though "
    "thus under when while yet"
)
# punkt's collocations: a number (or initial) and the word after it that its training text never split.
_COLLOCATIONS = _words(
    "abreast aes business cbot colgate commodities cooper corrections credit dividend financing genentech henley "
    "insider international leisure letters notable pay-fone pegasus pepper review rj wedgestone who zimmer"
)
_NON_WORD = frozenset("?!)\";}]*:@'({[")  # punkt's NonWord: a candidate stop may be followed by one of these
_NOT_WORD_START = frozenset('("`{[:;&#*@)}]-,')
_CANDIDATE = re.compile(r"[.?!](?=[?!)\";}\]*:@'({\[]|\s+\S)")
_SPACE = re.compile(r"\s")
_NEXT = re.compile(r"\s+(\S{1,100})")
_NUMBER = re.compile(r"^-?[.,]?\d[\d,.-]*\.?$")
_CLOSING = re.compile(r"[\"')\]}]+?(?:\s+|$)")


def count_sentences(text: str) -> int:
    """The number of sentences NLTK's English punkt model finds (see the module's note): each run of non-space text
    may end one at its last `.`, `?` or `!` that is followed by punctuation or by white space and more text."""
    count, last_break = 0, 0
    stops = [found.start() for found in _CANDIDATE.finditer(text)]
    for index, at in enumerate(stops):
        if index + 1 < len(stops) and not _SPACE.search(text, at, stops[index + 1]):
            continue  # punkt reads only the last candidate of a run of non-space text
        word = text[max(0, at - 100) : at + 1].split()[-1]  # the stop is not space: there is a last word
        after = _NEXT.match(text, at + 1)
        following = after.group(1) if after else text[at + 1]
        if _breaks(word, following):
            count += 1
            last_break = after.start(1) if after else at + 1
    rest = text[last_break:].rstrip()
    closing = _CLOSING.match(rest)
    if closing and last_break > 0:  # closing quotes after the last stop go with its sentence
        rest = rest[closing.end() :]
    return count + (1 if rest else 0)


def _breaks(word: str, following: str) -> bool:
    """Whether punkt ends a sentence at the end of `word` (which ends in a stop), before the token `following`."""
    if word[-1] in "?!":
        return True
    if word.endswith(".."):  # an ellipsis
        return _starts_sentence(following)
    start = max((at for at, char in enumerate(word[:-1]) if char in _NON_WORD), default=-1) + 1
    token = word[start:].lstrip("".join(_NOT_WORD_START))
    kind = token[:-1].lower()
    initial = len(token) == 2 and token[0].isalpha()
    abbreviation = kind in _ABBREVIATIONS or kind.split("-")[-1] in _ABBREVIATIONS
    lower_next = following[:1].islower() or following[:1] in tuple(";:,.!?")
    if initial:  # "I. Introduction" ends one (punkt cannot tell a name from a word without its word statistics)
        return not abbreviation and not lower_next
    if abbreviation:
        return _starts_sentence(following)
    if _NUMBER.match(token):  # "1." before a lower-case word is an ordinal, not an end
        return not lower_next and re.split(r"[^\w-]", following.lower())[0] not in _COLLOCATIONS
    return True


def _starts_sentence(following: str) -> bool:
    word = re.match(r"[^\W_]+", following)
    return bool(word) and following[0].isupper() and word.group().lower() in _STARTERS  # type: ignore[union-attr]


_WORD_SPLITS = [
    (re.compile(r"([«“‘„”’»\"`])"), r" \1 "),  # quotes apart
    (re.compile(r"([;@#$%&?!*\[\](){}<>])"), r" \1 "),
    (re.compile(r"--"), r" -- "),
    (re.compile(r"\.{2,}"), r" \g<0> "),
    (re.compile(r"([:,])(?=\D|$)"), r" \1 "),  # not in 1,000 or 10:30
    # Treebank's contractions ('s 'm 'd 'll 're 've n't after a word character, case-insensitive), "cannot" and a
    # quote that opens a word. Each pattern starts with a character, its context checked behind it, so that the
    # regex engine jumps to the few places it can match: a leading look-behind or \b is tried at every position
    # (five times slower on a 32,000-character answer). [nN], [cC]... are (?i)'s only matches for these letters.
    (re.compile(r"(?:'(?<=\w')(?i:s|m|d|ll|re|ve)|[nN](?<=\w[nN])'[tT])(?=\s|$)"), r" \g<0>"),
    (re.compile(r"[cC](?<=\b[cC])[aA][nN](?=[nN][oO][tT]\b)"), r"\g<0> "),
    (re.compile(r"'(?<!\S')(?=\w)"), r"' "),
]


def word_tokens(text: str) -> list[str]:
    """The words and punctuation `nltk.word_tokenize` gives, as far as which are all capitals goes."""
    for pattern, replacement in _WORD_SPLITS:
        text = pattern.sub(replacement, text)
    return text.split()


def count_capital_words(text: str) -> int:
    """The number of `word_tokens` that are all capitals, reading only the runs of non-space text that can hold one.

    Every rule of `word_tokens` looks no further than the white space around a run, so a run is split the same on
    its own: the runs with an ASCII capital or any non-ASCII character (which may be a capital) are joined and
    tokenized, the rest (most of an English answer) never are."""
    runs = (_ASCII_RUN_WITH_CAPITAL if text.isascii() else _MAY_HOLD_CAPITALS).findall(" " + text)
    return sum(1 for word in word_tokens(" ".join(runs)) if word.isupper())


# A run of non-space text with a capital A-Z or a non-ASCII character, found from the white space before it: other
# ASCII characters, possessively (each run read once: linear), then one of those (not space) and the rest of the run.
_MAY_HOLD_CAPITALS = re.compile(r"\s([^\sA-Z\x80-\U0010ffff]*+[^\s\x00-@\[-\x7f]\S*)")
# The same for ASCII text with ASCII classes (str.split's white space there is \t-\r and \x1c-\x20): half the time.
_ASCII_RUN_WITH_CAPITAL = re.compile(r"[\t-\r\x1c- ]([\x00-\x08\x0e-\x1b!-@\[-\x7f]*+[A-Z][^\t-\r\x1c- ]*)")


def count_words(text: str) -> int:
    """Runs of word characters: NLTK's RegexpTokenizer(r"\\w+"), which Google counts words with. ASCII text (most
    answers) is counted in bytes, every non-word byte made a space and the rest split: five times the regex's speed
    on an 8,000-token answer, the same count."""
    if text.isascii():
        return len(text.encode().translate(_NON_WORD_BYTES_AS_SPACE).split())
    return len(_WORD.findall(text))


_WORD = re.compile(r"\w+")
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_NON_WORD_BYTES_AS_SPACE = bytes(byte if byte in _WORD_BYTES else 32 for byte in range(256))
