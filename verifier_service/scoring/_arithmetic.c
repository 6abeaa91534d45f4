/* The steps component's reader in C: arithmetic.claims, some 50 times faster, for all but rare windows.
 *
 *     claims(text: str, fallback) -> [(start, end, right), ...]
 *
 * The same reading as scoring/arithmetic.py (the reference: every rule is spelled out there, and each function here
 * is named after the Python it mirrors), over the same windows around each `=`, `≈`, `~`, `\approx`, `<<`, with the
 * same token budget: the regex's alternatives are tried in its order, LaTeX's commands included, and values are exact
 * rationals of 128-bit integers. A window this code does not read itself goes to
 * `fallback(text, start, end, cut, budget) -> (stop, budget, found)` (arithmetic._read_window, the Python reader),
 * so the result is the Python reader's in every case. It hands over a window where:
 *
 *   - a value does not fit 128 bits (a long number, a big product): Python's ints and Fractions compute it;
 *   - an HTML-like tag holds a non-ASCII character (the regex's \w is Unicode).
 *
 * It reads LaTeX's text words (`\text{kg}`, `\mathrm{...}`, `\mbox{...}`) itself, inside their braces too, and a decimal
 * digit of any script (`٣`, `３`: the regex's \d), as int() reads it. 8,000 tokens of dense arithmetic
 * (bench/domains.py) take about 0.3 ms, against 24 ms in Python.
 * tests/unit/test_arithmetic_compiled.py checks that this equals the Python reader on the steps tests' texts, edge
 * cases of each rule, the benchmark's texts, and seeded random text. Built by setup.py where a C compiler is; without
 * it arithmetic.py reads every window itself.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* arithmetic.py's and exact.py's bounds (a test checks they agree). */
#define WINDOW 300
#define MAX_TOKENS 50000
#define MAX_DIGITS 100
#define MAX_BITS 4096
#define MAX_DEPTH 64
#define FLOAT_NOISE_DIGITS 15

typedef __int128 i128;
typedef unsigned __int128 u128;
typedef struct { i128 n, d; } Rat; /* d > 0, in lowest terms */

enum { K_NUM, K_BIG, K_OP, K_EQ, K_OPEN, K_CLOSE, K_PCT, K_SUP, K_FRAC, K_OTHER, K_WORDS, K_SKIP, K_TAG, K_ANN };

typedef struct Tok {
    int kind;
    Py_ssize_t start, end;
    Rat value, unit;
    int digits;        /* num, big: significant digits of its text (_significant) */
    Py_UCS4 ch;        /* op: its text after _OPS (`^` for `**`); open, close: the bracket */
    char labelled, approx;
} Tok;

typedef struct { Py_ssize_t start, end; int right; } Claim;

typedef struct {
    const Py_UCS4 *s;
    Py_ssize_t len;
    int fail; /* decline: the window goes to the Python reader */
    long budget;
    Claim *found;
    Py_ssize_t nfound, capfound;
    /* the last `words` token read, as Reader.word sees it: how many words piece.split() makes, the shortest, whether
     * the last is `x` or `X`; with LaTeX in it, whether _first_word is one of _REMAINDER, else the first's length */
    int nwords, shortest, last_x, latex, remainder, first_len;
    /* the readers' token buffers (a run's tokens), kept from window to window: a window's, an annotation's inside it */
    int depth;
    struct Tok *toks[2];
    Py_ssize_t captok[2];
} Ctx;

/* ---- exact values ---------------------------------------------------------------------------------------------- */

static u128 uabs(i128 x) { return x < 0 ? (u128)0 - (u128)x : (u128)x; }

static u128 gcd(u128 a, u128 b) {
    if ((a >> 64) == 0 && (b >> 64) == 0) { /* the usual case: 64-bit division, not a 128-bit one in a library call */
        uint64_t x = (uint64_t)a, y = (uint64_t)b;
        while (y) {
            uint64_t t = x % y;
            x = y;
            y = t;
        }
        return x;
    }
    while (b) {
        u128 t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int bitlen(u128 x) {
    int n = 0;
    while (x) {
        n++;
        x >>= 1;
    }
    return n;
}

static const i128 I128_MAX = (i128)(((u128)1 << 127) - 1);

static Rat rint_(i128 n) { return (Rat){n, 1}; }

/* n/d in lowest terms; d != 0. Sets fail where a value leaves the range. */
static Rat rmake(Ctx *c, i128 n, i128 d) {
    if (n == -I128_MAX - 1 || d == -I128_MAX - 1) {
        c->fail = 1;
        return rint_(0);
    }
    if (d < 0) {
        n = -n;
        d = -d;
    }
    u128 g = gcd(uabs(n), (u128)d);
    if (g > 1) {
        n /= (i128)g;
        d /= (i128)g;
    }
    return (Rat){n, d};
}

static i128 mul(Ctx *c, i128 a, i128 b) {
    i128 r;
    if (__builtin_mul_overflow(a, b, &r)) {
        c->fail = 1;
        return 0;
    }
    return r;
}

static i128 add(Ctx *c, i128 a, i128 b) {
    i128 r;
    if (__builtin_add_overflow(a, b, &r)) {
        c->fail = 1;
        return 0;
    }
    return r;
}

static Rat radd(Ctx *c, Rat a, Rat b) {
    if (a.d == 1 && b.d == 1) return rint_(add(c, a.n, b.n)); /* whole numbers: most values are */
    i128 g = (i128)gcd((u128)a.d, (u128)b.d);
    i128 n = add(c, mul(c, a.n, b.d / g), mul(c, b.n, a.d / g));
    i128 d = mul(c, a.d, b.d / g);
    return c->fail ? rint_(0) : rmake(c, n, d);
}

static Rat rneg(Ctx *c, Rat a) {
    if (a.n == -I128_MAX - 1) { /* its negation does not fit (nor may it be computed): the window goes to Python */
        c->fail = 1;
        return rint_(0);
    }
    return (Rat){-a.n, a.d};
}

static Rat rsub(Ctx *c, Rat a, Rat b) { return radd(c, a, rneg(c, b)); }

static Rat rmul(Ctx *c, Rat a, Rat b) {
    if (a.d == 1 && b.d == 1) return rint_(mul(c, a.n, b.n));
    i128 g1 = (i128)gcd(uabs(a.n), (u128)b.d), g2 = (i128)gcd(uabs(b.n), (u128)a.d);
    if (g1 == 0) g1 = 1;
    if (g2 == 0) g2 = 1;
    i128 n = mul(c, a.n / g1, b.n / g2), d = mul(c, a.d / g2, b.d / g1);
    return c->fail ? rint_(0) : rmake(c, n, d);
}

/* a / b; returns 0 for a division by zero (ZeroDivisionError). */
static int rdiv(Ctx *c, Rat a, Rat b, Rat *out) {
    if (b.n == 0) return 0;
    if (b.n == -I128_MAX - 1) { /* its inverse's denominator would not fit */
        c->fail = 1;
        *out = rint_(0);
        return 1;
    }
    Rat inverse = b.n < 0 ? (Rat){-b.d, -b.n} : (Rat){b.d, b.n};
    *out = rmul(c, a, inverse);
    return 1;
}

static Rat rabs(Ctx *c, Rat a) { return a.n < 0 ? rneg(c, a) : a; }

static int rcmp(Ctx *c, Rat a, Rat b) {
    if (a.d == b.d) return a.n < b.n ? -1 : a.n > b.n;
    i128 x = mul(c, a.n, b.d), y = mul(c, b.n, a.d);
    return x < y ? -1 : x > y;
}

static int req(Rat a, Rat b) { return a.n == b.n && a.d == b.d; }

static i128 pow10_(Ctx *c, int k) {
    i128 r = 1;
    while (k-- > 0) r = mul(c, r, 10);
    return r;
}

/* exact.power: base ** exponent for a whole exponent within MAX_BITS; returns 0 for Skip. */
static int rpow(Ctx *c, Rat base, Rat exponent, Rat *out) {
    if (exponent.d != 1 || (base.n == 0 && exponent.n < 0)) return 0;
    int size = bitlen(uabs(base.n));
    if (bitlen((u128)base.d) > size) size = bitlen((u128)base.d);
    if (size < 1) size = 1;
    u128 e = uabs(exponent.n);
    if (size > 1 && (e > MAX_BITS || e * (u128)(size - 1) > MAX_BITS)) return 0;
    Rat b = base;
    if (exponent.n < 0 && !rdiv(c, rint_(1), base, &b)) return 0;
    Rat result = rint_(1);
    while (e && !c->fail) {
        if (e & 1) result = rmul(c, result, b);
        e >>= 1;
        if (e) b = rmul(c, b, b);
    }
    *out = result;
    return 1;
}

/* ---- tokens: arithmetic._TOKEN, one match at a time ---------------------------------------------------------------- */

/* The regex's \d: a decimal digit of any script (`٣`, `３`), as int() and Fraction() read them. */
static int is_digit(Py_UCS4 ch) { return (ch >= '0' && ch <= '9') || (ch >= 128 && Py_UNICODE_ISDECIMAL(ch)); }
static int digit_value(Py_UCS4 ch) { return ch <= '9' ? (int)(ch - '0') : Py_UNICODE_TODECIMAL(ch); }
static int is_alpha(Py_UCS4 ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }
static int superscript(Py_UCS4 ch) {
    return ch == 0x2070 || ch == 0xB9 || ch == 0xB2 || ch == 0xB3 || (ch >= 0x2074 && ch <= 0x2079);
}
static int superscript_value(Py_UCS4 ch) {
    return ch == 0x2070 ? 0 : ch == 0xB9 ? 1 : ch == 0xB2 ? 2 : ch == 0xB3 ? 3 : (int)(ch - 0x2070);
}
static int skip_char(Py_UCS4 ch) {
    return ch == ' ' || ch == '\t' || ch == '$' || ch == 0x20AC || ch == 0xA3 || ch == 0xA5 || ch == '&';
}

/* _OPS: the operator a character is, 0 for none. */
static Py_UCS4 operator(Py_UCS4 ch) {
    switch (ch) {
    case '-': case '+': case '*': case '/': case '^': return ch;
    case 0xD7: case 0xB7: case 0x22C5: case 0x2217: return '*'; /* × · ⋅ ∗ */
    case 0xF7: return '/';                                       /* ÷ */
    case 0x2212: case 0x2013: return '-';                        /* − – */
    default: return 0;
    }
}

/* _number: a written number's token, from its text p[0:n] (a match of the regex's `num`) */
static Tok number(Ctx *c, const Py_UCS4 *p, Py_ssize_t n, Py_ssize_t at, Py_ssize_t stop) {
    Tok t = {0};
    t.start = at;
    t.end = stop;
    t.unit = rint_(1);
    t.value = rint_(0);
    int commas = 0, dots = 0;
    for (Py_ssize_t i = 0; i < n; i++) commas += p[i] == ',', dots += p[i] == '.';
    if (!commas && !dots && n <= 36 && !(n > 1 && p[0] == '0')) { /* a whole number, the usual case */
        i128 value = 0;
        for (Py_ssize_t i = 0; i < n; i++) value = value * 10 + (i128)digit_value(p[i]);
        t.kind = K_NUM;
        t.value = rint_(value);
        t.digits = n == 1 && p[0] == '0' ? 0 : (int)n;
        return t;
    }
    int big = n > MAX_DIGITS || (n > 1 && p[0] == '0' && is_digit(p[1]));
    Py_ssize_t i = 0; /* \d+(?:,\d{3})+ as a fullmatch */
    while (i < n && is_digit(p[i])) i++;
    int grouped = i > 0 && i < n;
    while (grouped && i < n) {
        grouped = i + 4 <= n && p[i] == ',' && is_digit(p[i + 1]) && is_digit(p[i + 2]) && is_digit(p[i + 3]);
        i += 4;
    }
    int decimal_comma = !big && commas && !dots && !grouped;
    /* _significant of the token's text: the piece itself for `big`, else with grouping commas dropped */
    int significant = 0, leading = 1;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_UCS4 ch = p[k];
        if (ch == '.' || (ch == ',' && (decimal_comma || !big))) continue;
        if (leading && ch == '0') continue;
        leading = 0;
        significant++;
    }
    t.digits = significant;
    t.kind = big ? K_BIG : K_NUM;
    if (big) return t;
    i128 value = 0;
    int decimals = 0, after = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_UCS4 ch = p[k];
        if (ch == '.' || (ch == ',' && decimal_comma)) {
            after = 1;
            continue;
        }
        if (ch == ',') continue;
        value = add(c, mul(c, value, 10), (i128)digit_value(ch));
        decimals += after;
    }
    i128 scale = pow10_(c, decimals);
    if (c->fail) return t;
    t.value = rmake(c, value, scale);
    t.unit = rmake(c, 1, scale);
    return t;
}

/* Whether text[p:end] starts with the ASCII word w. */
static int starts(const Py_UCS4 *s, Py_ssize_t p, Py_ssize_t end, const char *w) {
    for (; *w; w++, p++)
        if (p >= end || s[p] != (Py_UCS4)*w) return 0;
    return 1;
}

/* Whether a letter follows at p (the regex's (?![A-Za-z]) fails there). */
static int letter_at(const Py_UCS4 *s, Py_ssize_t p, Py_ssize_t end) { return p < end && is_alpha(s[p]); }

/* _W's LaTeX text at p, \\(?:text|mathrm|textrm|mbox)\s*\{[^{}\n]{0,40}\} (`\text{kg}`): where it ends, -1 for none */
static Py_ssize_t latex_text(const Py_UCS4 *s, Py_ssize_t p, Py_ssize_t end) {
    static const char *const NAMES[] = {"\\text", "\\mathrm", "\\textrm", "\\mbox"};
    for (size_t k = 0; k < sizeof(NAMES) / sizeof(NAMES[0]); k++) {
        if (!starts(s, p, end, NAMES[k])) continue;
        Py_ssize_t q = p + (Py_ssize_t)strlen(NAMES[k]);
        while (q < end && Py_UNICODE_ISSPACE(s[q])) q++;
        if (q >= end || s[q] != '{') continue;
        Py_ssize_t open = ++q;
        while (q < end && q - open <= 40 && s[q] != '{' && s[q] != '}' && s[q] != '\n') q++;
        if (q < end && q - open <= 40 && s[q] == '}') return q + 1;
    }
    return -1;
}

/* _W at p: a LaTeX text or [A-Za-z]+; where it ends, -1 for none */
static Py_ssize_t word_at(const Py_UCS4 *s, Py_ssize_t p, Py_ssize_t end) {
    if (p < end && s[p] == '\\') return latex_text(s, p, end);
    if (!letter_at(s, p, end)) return -1;
    while (p < end && is_alpha(s[p])) p++;
    return p;
}

/* Whether word[0:n], lowercased, is one of _REMAINDER (only ASCII letters lowercase to theirs) */
static int remainder_word(const Py_UCS4 *word, Py_ssize_t n) {
    static const char *const REMAINDER[] = {"remainder", "rem", "r"};
    for (size_t k = 0; k < 3; k++) {
        const char *name = REMAINDER[k];
        if ((Py_ssize_t)strlen(name) != n) continue;
        int same = 1;
        for (Py_ssize_t i = 0; i < n; i++) same &= (word[i] | 0x20) == (Py_UCS4)name[i];
        if (same) return 1;
    }
    return 0;
}

/* The shape of a run of words with LaTeX text in it (text[p:q]), as Reader.word reads it: piece.split()'s words (apart
 * by any Unicode space, inside the braces too), and _first_word: the piece with each `\name{` and `}` made a space,
 * split, its first word. */
static void latex_words_shape(Ctx *c, Py_ssize_t p, Py_ssize_t q) {
    const Py_UCS4 *s = c->s;
    c->nwords = 0;
    c->shortest = 1 << 30;
    c->last_x = 0;
    for (Py_ssize_t i = p; i < q;) {
        while (i < q && Py_UNICODE_ISSPACE(s[i])) i++;
        if (i == q) break;
        Py_ssize_t word = i;
        while (i < q && !Py_UNICODE_ISSPACE(s[i])) i++;
        c->nwords++;
        if (i - word < c->shortest) c->shortest = (int)(i - word);
        c->last_x = i - word == 1 && (s[word] == 'x' || s[word] == 'X');
    }
    Py_UCS4 first[10]; /* the first word's start, as far as it can be one of _REMAINDER */
    Py_ssize_t n = 0;
    int begun = 0;
    for (Py_ssize_t i = p; i < q; i++) {
        Py_UCS4 ch = s[i];
        if (ch == '\\' && i + 1 < q && is_alpha(s[i + 1])) { /* _LATEX_TEXT's \\[A-Za-z]+\s*\{ */
            Py_ssize_t k = i + 1;
            while (k < q && is_alpha(s[k])) k++;
            while (k < q && Py_UNICODE_ISSPACE(s[k])) k++;
            if (k < q && s[k] == '{') {
                i = k;
                ch = ' ';
            }
        }
        if (ch == '}') ch = ' ';
        if (Py_UNICODE_ISSPACE(ch)) {
            if (begun) break;
            continue;
        }
        begun = 1;
        if (n == 10) break;
        first[n++] = ch;
    }
    c->remainder = n < 10 && remainder_word(first, n);
}

/* The regex's `words`, _W(?:[ \t]+_W)*, from p where a _W starts; its shape in c (latex_words_shape's, read here in
 * one pass for the usual run of plain words). */
static int words(Ctx *c, Py_ssize_t p, Py_ssize_t end, int *kind, Py_ssize_t *stop) {
    const Py_UCS4 *s = c->s;
    Py_ssize_t q = p, first_len = 0;
    int latex = 0;
    c->nwords = 0;
    c->shortest = 1 << 30;
    for (;;) {
        Py_ssize_t word = q;
        latex |= s[q] == '\\';
        q = word_at(s, q, end);
        if (!c->nwords) first_len = q - word;
        c->nwords++;
        if (q - word < c->shortest) c->shortest = (int)(q - word);
        c->last_x = q - word == 1 && (s[word] == 'x' || s[word] == 'X');
        Py_ssize_t r = q;
        while (r < end && (s[r] == ' ' || s[r] == '\t')) r++;
        if (r == q || word_at(s, r, end) < 0) break;
        q = r;
    }
    c->latex = latex;
    c->first_len = (int)first_len;
    if (latex) latex_words_shape(c, p, q);
    *kind = K_WORDS;
    *stop = q;
    return 1;
}

/* The match of _TOKEN that starts with a backslash at p, its alternatives in the regex's order; 0 to decline. */
static int latex_token(Ctx *c, Py_ssize_t p, Py_ssize_t end, int *kind, Py_ssize_t *stop) {
    const Py_UCS4 *s = c->s;
    Py_UCS4 next = p + 1 < end ? s[p + 1] : 0;
    static const char *const SKIPPED[] = {"\\quad", "\\qquad", "\\boxed", "\\mathbf", "\\textbf", "\\displaystyle"};
    if (starts(s, p, end, "\\begin{") || starts(s, p, end, "\\end{")) { /* tag: \\(?:begin|end)\{[A-Za-z*]{1,20}\} */
        Py_ssize_t q = p + (s[p + 1] == 'b' ? 7 : 5), k = 0;
        while (q < end && k <= 20 && (is_alpha(s[q]) || s[q] == '*')) q++, k++;
        if (k >= 1 && k <= 20 && q < end && s[q] == '}') {
            *kind = K_TAG;
            *stop = q + 1;
            return 1;
        }
    }
    if (next == '(' || next == ')' || next == '[' || next == ']') {
        *kind = K_TAG;
        *stop = p + 2;
        return 1;
    }
    if (starts(s, p, end, "\\approx")) {
        *kind = K_EQ;
        *stop = p + 7;
        return 1;
    }
    if (starts(s, p, end, "\\times") || starts(s, p, end, "\\cdot") ||
        (starts(s, p, end, "\\div") && !letter_at(s, p + 4, end))) {
        *kind = K_OP;
        *stop = p + (next == 't' ? 6 : next == 'c' ? 5 : 4);
        return 1;
    }
    Py_ssize_t frac = starts(s, p, end, "\\frac") ? 5 : starts(s, p, end, "\\dfrac") || starts(s, p, end, "\\tfrac") ? 6 : 0;
    if (frac && !letter_at(s, p + frac, end)) {
        *kind = K_FRAC;
        *stop = p + frac;
        return 1;
    }
    for (int closing = 0; closing < 2; closing++) { /* \left\s*[(\[] and \{; \right\s*[)\]] and \} */
        const char *word = closing ? "\\right" : "\\left";
        if (starts(s, p, end, word)) {
            Py_ssize_t q = p + (Py_ssize_t)strlen(word);
            while (q < end && Py_UNICODE_ISSPACE(s[q])) q++;
            if (q < end && (closing ? (s[q] == ')' || s[q] == ']') : (s[q] == '(' || s[q] == '['))) {
                *kind = closing ? K_CLOSE : K_OPEN;
                *stop = q + 1;
                return 1;
            }
        }
        if (next == (closing ? '}' : '{')) {
            *kind = closing ? K_CLOSE : K_OPEN;
            *stop = p + 2;
            return 1;
        }
    }
    if (next == '%') {
        *kind = K_PCT;
        *stop = p + 2;
        return 1;
    }
    if (latex_text(s, p, end) >= 0) return words(c, p, end, kind, stop);
    *kind = K_SKIP;
    if (next == '\\' || next == ',' || next == ';' || next == ':' || next == '!' || next == ' ' || next == '$') {
        *stop = p + 2;
        return 1;
    }
    if (starts(s, p, end, "\\left.") || starts(s, p, end, "\\right.")) {
        *stop = p + (next == 'l' ? 6 : 7);
        return 1;
    }
    for (size_t k = 0; k < sizeof(SKIPPED) / sizeof(SKIPPED[0]); k++) {
        Py_ssize_t n = (Py_ssize_t)strlen(SKIPPED[k]);
        if (starts(s, p, end, SKIPPED[k]) && !letter_at(s, p + n, end)) {
            *stop = p + n;
            return 1;
        }
    }
    *kind = K_OTHER; /* \\[A-Za-z]+, or the backslash alone */
    Py_ssize_t q = p + 1;
    while (q < end && is_alpha(s[q])) q++;
    *stop = q > p + 1 ? q : p + 1;
    return 1;
}

/* The next match of _TOKEN in text[pos:end] (pos < end): its kind, where its group starts, where it ends. Returns 0
 * where this reader declines. */
static int next_token(Ctx *c, Py_ssize_t pos, Py_ssize_t end, int *kind, Py_ssize_t *at, Py_ssize_t *stop) {
    const Py_UCS4 *s = c->s;
    Py_ssize_t p = pos;
    while (p < end && (s[p] == ' ' || s[p] == '\t')) p++;
    if (p == end) { /* only spaces: the last one is a `skip` of its own */
        *kind = K_SKIP;
        *at = end - 1;
        *stop = end;
        return 1;
    }
    Py_UCS4 ch = s[p];
    *at = p;
    if (ch == '\\') return latex_token(c, p, end, kind, stop);
    if (ch == '<') {
        if (p + 1 < end && s[p + 1] == '<') { /* <<[^<>\n]{1,300}>> */
            Py_ssize_t q = p + 2;
            while (q < end && q - (p + 2) <= 300 && s[q] != '<' && s[q] != '>' && s[q] != '\n') q++;
            Py_ssize_t k = q - (p + 2);
            if (k >= 1 && k <= 300 && q + 1 < end && s[q] == '>' && s[q + 1] == '>') {
                *kind = K_ANN;
                *stop = q + 2;
                return 1;
            }
        }
        Py_ssize_t q = p + 1; /* </?[A-Za-z][\w-]{0,20}> */
        if (q < end && s[q] == '/') q++;
        if (q < end && is_alpha(s[q])) {
            q++;
            int k = 0;
            while (q < end && k <= 20 && (is_alpha(s[q]) || is_digit(s[q]) || s[q] == '_' || s[q] == '-')) q++, k++;
            if (q < end && k <= 20 && s[q] >= 128) return 0;
            if (q < end && k <= 20 && s[q] == '>') {
                *kind = K_TAG;
                *stop = q + 1;
                return 1;
            }
        }
        *kind = K_OTHER;
        *stop = p + 1;
        return 1;
    }
    if (is_digit(ch) || (ch == '.' && p + 1 < end && is_digit(s[p + 1]))) {
        Py_ssize_t q = p;
        if (ch == '.') {
            q++;
            while (q < end && is_digit(s[q])) q++;
            *kind = K_NUM;
            *stop = q;
            return 1;
        }
        while (q < end && is_digit(s[q])) q++;
        /* (?:,\d{3})+(?!\d)(?:\.\d+)? */
        Py_ssize_t groups = 0, r = q;
        while (r + 3 < end && s[r] == ',' && is_digit(s[r + 1]) && is_digit(s[r + 2]) && is_digit(s[r + 3])) r += 4, groups++;
        int taken = 0;
        if (groups >= 1) {
            if (!(r < end && is_digit(s[r]))) taken = 1;
            else if (groups >= 2) r -= 4, taken = 1;
        }
        if (taken) {
            q = r;
            if (q + 1 < end && s[q] == '.' && is_digit(s[q + 1])) {
                q++;
                while (q < end && is_digit(s[q])) q++;
            }
        } else if (q + 1 < end && (s[q] == '.' || s[q] == ',') && is_digit(s[q + 1])) {
            q++;
            while (q < end && is_digit(s[q])) q++;
        }
        *kind = K_NUM;
        *stop = q;
        return 1;
    }
    if (ch == '$') {
        if (p + 1 < end && s[p + 1] == '$') {
            *kind = K_TAG;
            *stop = p + 2;
            return 1;
        }
    }
    if (ch == '*' && p + 1 < end && s[p + 1] == '*') {
        int before = p > 0 && (is_digit(s[p - 1]) || s[p - 1] == ')');
        int after = p + 2 < end && (is_digit(s[p + 2]) || s[p + 2] == '(');
        *kind = before && after ? K_OP : K_TAG;
        *stop = p + 2;
        return 1;
    }
    *stop = p + 1;
    if (superscript(ch)) {
        Py_ssize_t q = p;
        while (q < end && superscript(s[q])) q++;
        *kind = K_SUP;
        *stop = q;
        return 1;
    }
    if (ch == '=') {
        if (p + 1 < end && s[p + 1] == '=') *stop = p + 2;
        *kind = K_EQ;
        return 1;
    }
    if (ch == 0x2248 || ch == 0x2243 || ch == '~') {
        *kind = K_EQ;
        return 1;
    }
    if (operator(ch)) {
        *kind = K_OP;
        return 1;
    }
    if (ch == '(' || ch == '[' || ch == '{') {
        *kind = K_OPEN;
        return 1;
    }
    if (ch == ')' || ch == ']' || ch == '}') {
        *kind = K_CLOSE;
        return 1;
    }
    if (ch == '%') {
        *kind = K_PCT;
        return 1;
    }
    if (is_alpha(ch)) return words(c, p, end, kind, stop);
    if (skip_char(ch)) {
        Py_ssize_t q = p;
        while (q < end && skip_char(s[q])) q++;
        *kind = K_SKIP;
        *stop = q;
        return 1;
    }
    *kind = K_OTHER;
    return 1;
}

/* _token: the token of a match the reader keeps. */
static Tok make_token(Ctx *c, int kind, Py_ssize_t at, Py_ssize_t stop) {
    const Py_UCS4 *s = c->s;
    if (kind == K_NUM) return number(c, s + at, stop - at, at, stop);
    Tok t = {0};
    t.kind = kind;
    t.start = at;
    t.end = stop;
    t.value = rint_(0);
    t.unit = rint_(1);
    if (kind == K_OP && s[at] == '\\') t.ch = s[at + 1] == 'd' ? '/' : '*'; /* \div; \times, \cdot */
    else if (kind == K_OP) t.ch = stop - at == 2 ? '^' : operator(s[at]);
    else if (kind == K_OPEN || kind == K_CLOSE) t.ch = s[at];
    else if (kind == K_EQ) t.approx = !(s[at] == '=');
    else if (kind == K_SUP) {
        i128 v = 0;
        for (Py_ssize_t i = at; i < stop; i++) v = add(c, mul(c, v, 10), superscript_value(s[i]));
        t.value = rint_(v);
    }
    return t;
}

/* ---- exact.evaluate -------------------------------------------------------------------------------------------- */

static int tight(const Tok *t, Py_ssize_t n, Py_ssize_t at) {
    return 0 < at && at < n - 1 && t[at - 1].end == t[at].start && t[at].end == t[at + 1].start;
}

/* exact.flat: 1 with the value, 0 for another shape, -1 for a division by zero */
static int flat(Ctx *c, const Tok *t, Py_ssize_t n, Rat *out) {
    if (n % 2 == 0 || n > 2 * MAX_DEPTH) return 0;
    for (Py_ssize_t at = 1; at < n; at += 2) {
        Py_UCS4 op = t[at].ch;
        if (t[at].kind != K_OP || !(op == '+' || op == '-' || op == '*' || op == '/') || t[at - 1].kind != K_NUM)
            return 0;
        if (op == '/' && tight(t, n, at) && at >= 3 && !tight(t, n, at - 2)) return 0;
    }
    if (t[n - 1].kind != K_NUM) return 0;
    Rat total = rint_(0), term = t[0].value;
    int sign = 1;
    for (Py_ssize_t at = 1; at < n; at += 2) {
        Py_UCS4 op = t[at].ch;
        Rat operand = t[at + 1].value;
        if (op == '*') term = rmul(c, term, operand);
        else if (op == '/') {
            if (!rdiv(c, term, operand, &term)) return -1;
        } else {
            total = radd(c, total, sign > 0 ? term : rneg(c, term));
            sign = op == '+' ? 1 : -1;
            term = operand;
        }
    }
    *out = radd(c, total, sign > 0 ? term : rneg(c, term));
    return 1;
}

typedef struct {
    Ctx *c;
    const Tok *t;
    Py_ssize_t n, at;
    int percent, depth;
} Parser;

/* Each returns 1 with the value, 0 for Skip (or a division by zero: both make the side no step). */
static int p_sum(Parser *p, Rat *out);
static int p_unary(Parser *p, Rat *out);

static int p_take(Parser *p, int kind, Py_UCS4 ch) {
    if (p->at < p->n && p->t[p->at].kind == kind && (!ch || p->t[p->at].ch == ch)) {
        p->at++;
        return 1;
    }
    return 0;
}

static int p_braced(Parser *p, Rat *out) {
    if (!p_take(p, K_OPEN, 0)) return 0;
    if (++p->depth > MAX_DEPTH) return 0;
    if (!p_sum(p, out)) return 0;
    if (!p_take(p, K_CLOSE, 0)) return 0;
    p->depth--;
    return 1;
}

static int p_atom(Parser *p, Rat *out) {
    if (p->at >= p->n) return 0;
    const Tok *token = &p->t[p->at++];
    if (token->kind == K_NUM) {
        *out = token->value;
        return 1;
    }
    if (token->kind == K_FRAC) {
        Rat a, b;
        if (!p_braced(p, &a) || !p_braced(p, &b)) return 0;
        return rdiv(p->c, a, b, out);
    }
    if (token->kind == K_OPEN) {
        p->at--;
        return p_braced(p, out);
    }
    return 0;
}

static int p_postfix(Parser *p, Rat *out) {
    Rat value;
    if (!p_atom(p, &value)) return 0;
    while (p->at < p->n && (p->t[p->at].kind == K_PCT || p->t[p->at].kind == K_SUP)) {
        const Tok *token = &p->t[p->at++];
        if (token->kind == K_PCT) {
            if (!rdiv(p->c, value, rint_(p->percent), &value)) return 0;
        } else if (!rpow(p->c, value, token->value, &value)) return 0;
    }
    *out = value;
    return 1;
}

static int p_power(Parser *p, Rat *out) {
    Rat base, exponent;
    if (!p_postfix(p, &base)) return 0;
    if (p_take(p, K_OP, '^')) {
        if (!p_unary(p, &exponent)) return 0;
        return rpow(p->c, base, exponent, out);
    }
    *out = base;
    return 1;
}

static int p_unary(Parser *p, Rat *out) {
    if (++p->depth > MAX_DEPTH) return 0;
    Rat value;
    if (p_take(p, K_OP, '-')) {
        if (!p_unary(p, &value)) return 0;
        value = rneg(p->c, value);
    } else if (p_take(p, K_OP, '+')) {
        if (!p_unary(p, &value)) return 0;
    } else if (!p_power(p, &value)) return 0;
    p->depth--;
    *out = value;
    return 1;
}

/* Parser.fraction: -1 where the shape is not a touching b/c, else as the others. */
static int p_fraction(Parser *p, Rat *out) {
    const Tok *t = p->t;
    Py_ssize_t at = p->at, n = p->n;
    int shaped = at + 2 < n && t[at].kind == K_NUM && t[at + 2].kind == K_NUM && t[at + 1].kind == K_OP &&
                 t[at + 1].ch == '/';
    if (shaped && tight(t, n, at + 1) && (at + 3 == n || t[at + 3].kind == K_OP || t[at + 3].kind == K_CLOSE)) {
        p->at += 3;
        return rdiv(p->c, t[at].value, t[at + 2].value, out);
    }
    return -1;
}

static int p_product(Parser *p, Rat *out) {
    Rat value, other;
    if (!p_unary(p, &value)) return 0;
    while (p->at < p->n && p->t[p->at].kind == K_OP && (p->t[p->at].ch == '*' || p->t[p->at].ch == '/')) {
        Py_UCS4 op = p->t[p->at].ch;
        int spaced = !tight(p->t, p->n, p->at);
        p->at++;
        int got = spaced ? p_fraction(p, &other) : -1;
        if (got == 0) return 0;
        if (got < 0 && !p_unary(p, &other)) return 0;
        if (op == '*') value = rmul(p->c, value, other);
        else if (!rdiv(p->c, value, other, &value)) return 0;
    }
    *out = value;
    return 1;
}

static int p_sum(Parser *p, Rat *out) {
    Rat value, other;
    if (!p_product(p, &value)) return 0;
    while (p->at < p->n && p->t[p->at].kind == K_OP && (p->t[p->at].ch == '+' || p->t[p->at].ch == '-')) {
        Py_UCS4 op = p->t[p->at].ch;
        p->at++;
        if (!p_product(p, &other)) return 0;
        value = op == '+' ? radd(p->c, value, other) : rsub(p->c, value, other);
    }
    *out = value;
    return 1;
}

/* exact.evaluate: 1 with the value, 0 for Skip or a division by zero */
static int evaluate(Ctx *c, const Tok *t, Py_ssize_t n, int percent, Rat *out) {
    int has_pct = 0;
    for (Py_ssize_t i = 0; i < n; i++) has_pct |= t[i].kind == K_PCT;
    if (percent == 100 || !has_pct) {
        int got = flat(c, t, n, out);
        if (got) return got > 0;
    }
    Parser p = {c, t, n, 0, percent, 0};
    if (!p_sum(&p, out)) return 0;
    return p.at == n;
}

/* ---- arithmetic._chain and the checks of a claim ------------------------------------------------------------------ */

typedef struct {
    int valid;
    Rat value, as_unit;
    Py_ssize_t start, end;
    int has_unit;
    Rat unit;
    int digits;
    const Tok *lead;
    int percent, labelled;
} Part;

static Part lone(const Tok *t) {
    Part part = {1, t->value, t->value, t->start, t->end, 1, t->unit, t->digits, NULL, 0, t->labelled};
    return part;
}

static int is_range(const Tok *g, Py_ssize_t n) {
    if (n != 3 || !(g[1].kind == K_OP && g[1].ch == '-') || !tight(g, n, 1)) return 0;
    return g[0].kind == K_NUM && g[2].kind == K_NUM && g[0].value.d == 1 && g[2].value.d == 1 &&
           g[0].value.n < g[2].value.n;
}

static Part part(Ctx *c, const Tok *g, Py_ssize_t n) {
    Part none = {0};
    if (n == 1 && g[0].kind == K_NUM) return lone(&g[0]);
    if (n == 0) return none;
    int percent = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (g[i].kind == K_BIG || g[i].kind == K_OTHER) return none;
        percent |= g[i].kind == K_PCT;
    }
    if (is_range(g, n)) return none;
    Part result = {1};
    if (!evaluate(c, g, n, 100, &result.value)) return none;
    if (percent) {
        if (!evaluate(c, g, n, 1, &result.as_unit)) return none;
    } else result.as_unit = result.value;
    /* body: the tokens but `%` */
    const Tok *last = NULL;
    Py_ssize_t body = 0, signs_ok = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (g[i].kind == K_PCT) continue;
        if (last != NULL && !(last->kind == K_OP && (last->ch == '+' || last->ch == '-'))) signs_ok = 0;
        last = &g[i];
        body++;
    }
    int is_lone = last->kind == K_NUM && signs_ok && body - 1 < 2;
    if (is_lone) {
        result.has_unit = 1;
        if (!rdiv(c, last->unit, rint_(percent ? 100 : 1), &result.unit)) return none;
        result.digits = last->digits;
    }
    if (!is_lone && g[0].kind == K_NUM && n > 1 && g[1].kind == K_OP) result.lead = &g[0];
    result.labelled = is_lone && last->labelled;
    result.percent = percent;
    result.start = g[0].start;
    result.end = g[n - 1].end;
    return result;
}

static int rounds_to(Ctx *c, Rat exact, Rat written, const Part *side, int loose, int scale) {
    Rat unit = rmul(c, side->unit, rint_(scale));
    Rat error = rabs(c, rsub(c, exact, written));
    if (loose) return rcmp(c, error, unit) <= 0;
    if (side->digits >= FLOAT_NOISE_DIGITS) {
        Rat bound = rint_(0);
        rdiv(c, rabs(c, exact), rint_(pow10_(c, 12)), &bound); /* 10^12: never zero */
        if (rcmp(c, error, bound) <= 0) return 1;
    }
    Rat ratio = rint_(1);
    if (!rdiv(c, exact, unit, &ratio)) c->fail = 1; /* a unit is never zero */
    int fewer = ratio.d != 1;
    return fewer && rcmp(c, rmul(c, rint_(2), error), unit) <= 0;
}

static int agree(Ctx *c, const Part *left, const Part *right, int loose) {
    Rat pairs[2][2] = {{left->value, right->value}, {left->as_unit, right->as_unit}};
    int count = left->percent || right->percent ? 2 : 1;
    for (int k = 0; k < count; k++) {
        Rat a = pairs[k][0], b = pairs[k][1];
        int as_unit = k == 1;
        if (req(a, b)) return 1;
        if (right->has_unit && rounds_to(c, a, b, right, loose, as_unit && right->percent ? 100 : 1)) return 1;
        if (left->has_unit && rounds_to(c, b, a, left, loose, as_unit && left->percent ? 100 : 1)) return 1;
        if (loose && rcmp(c, rmul(c, rint_(100), rabs(c, rsub(c, a, b))), rabs(c, a)) <= 0) return 1;
    }
    return 0;
}

static void found_add(Ctx *c, Py_ssize_t start, Py_ssize_t end, int right) {
    if (c->nfound == c->capfound) {
        Py_ssize_t cap = c->capfound ? 2 * c->capfound : 64;
        Claim *grown = realloc(c->found, cap * sizeof(Claim));
        if (grown == NULL) {
            c->fail = 1;
            return;
        }
        c->found = grown;
        c->capfound = cap;
    }
    c->found[c->nfound++] = (Claim){start, end, right};
}

/* _strip: the range [*lo, *hi) of a group without the prose's brackets and marks. */
static void strip(const Tok *t, Py_ssize_t *lo, Py_ssize_t *hi, int opening) {
    int depth = 0;
    for (Py_ssize_t i = *lo; i < *hi; i++) depth += (t[i].kind == K_OPEN) - (t[i].kind == K_CLOSE);
    if (opening) {
        if (*hi - *lo > 1 && t[*lo].kind == K_OP && (t[*lo].ch == '-' || t[*lo].ch == '+' || t[*lo].ch == '*') &&
            t[*lo + 1].start > t[*lo].end)
            (*lo)++;
        if (*hi - *lo > 2 && t[*lo].kind == K_NUM && t[*lo + 1].kind == K_CLOSE && t[*lo + 1].ch == ')' && depth < 0)
            *lo += 2, depth++;
        while (depth > 0 && *lo < *hi && t[*lo].kind == K_OPEN) (*lo)++, depth--;
    } else {
        while (depth < 0 && *lo < *hi && t[*hi - 1].kind == K_CLOSE) (*hi)--, depth++;
        while (depth > 0 && *lo < *hi && t[*hi - 1].kind == K_OPEN) (*hi)--, depth--;
    }
}

static int chain(Ctx *c, const Tok *t, Py_ssize_t n, int first_tainted, int last_tainted, int sure,
                 const Tok *joined) {
    int eqs = 0;
    for (Py_ssize_t i = 0; i < n; i++) eqs += t[i].kind == K_EQ;
    if (!eqs) return 0;
    /* a chain of up to 16 `=` on the stack; a longer one on the heap */
    Py_ssize_t lo_[17], hi_[17];
    char approx_[17];
    Part parts_[17];
    int heap = eqs > 16;
    Py_ssize_t *lo = heap ? malloc((eqs + 1) * sizeof(Py_ssize_t)) : lo_;
    Py_ssize_t *hi = heap ? malloc((eqs + 1) * sizeof(Py_ssize_t)) : hi_;
    char *approx = heap ? malloc(eqs + 1) : approx_;
    Part *parts = heap ? malloc((eqs + 1) * sizeof(Part)) : parts_;
    int plain = 0;
    if (!lo || !hi || !approx || !parts) {
        c->fail = 1;
        goto done;
    }
    Py_ssize_t groups = 1, napprox = 0;
    lo[0] = hi[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i].kind != K_EQ) {
            hi[groups - 1] = i + 1; /* a group is the run since its `=` */
        } else if (hi[groups - 1] > lo[groups - 1]) {
            lo[groups] = hi[groups] = i + 1;
            groups++;
            approx[napprox++] = t[i].approx;
        } else if (napprox) {
            approx[napprox - 1] |= t[i].approx;
            lo[groups - 1] = hi[groups - 1] = i + 1;
        } else {
            first_tainted = 0;
            lo[groups - 1] = hi[groups - 1] = i + 1;
        }
    }
    if (groups < 2) goto done;
    strip(t, &lo[0], &hi[0], 1);
    strip(t, &lo[groups - 1], &hi[groups - 1], 0);
    int compound = 0;
    for (Py_ssize_t k = 0; k < groups; k++) {
        parts[k] = part(c, t + lo[k], hi[k] - lo[k]);
        if (c->fail) goto done;
    }
    if (first_tainted) parts[0].valid = 0;
    if (last_tainted) parts[groups - 1].valid = 0;
    for (Py_ssize_t k = 0; k < groups; k++) compound |= parts[k].valid && !parts[k].has_unit;
    for (Py_ssize_t k = 0; k + 1 < groups; k++) {
        const Part *left = &parts[k], *right = &parts[k + 1];
        int loose = approx[k];
        if (!left->valid || !right->valid) continue;
        if (sure) {
        } else if (!compound && !(left->percent || right->percent)) continue;
        else if (left->labelled || (left->has_unit && !right->has_unit)) continue;
        Py_ssize_t end = right->end;
        int right_ok = agree(c, left, right, loose);
        if (!right_ok && right->lead != NULL) {
            Part lead = lone(right->lead);
            if (agree(c, left, &lead, loose)) {
                end = right->lead->end;
                right_ok = 1;
            }
        }
        plain = right_ok;
        if (joined != NULL && k == groups - 2) {
            Part whole = lone(joined);
            if (agree(c, left, &whole, loose)) {
                end = joined->end;
                right_ok = 1;
                plain = 0;
            }
        }
        found_add(c, left->start, end, right_ok);
        if (c->fail) goto done;
    }
done:
    if (heap) {
        free(lo);
        free(hi);
        free(approx);
        free(parts);
    }
    return plain;
}

/* ---- arithmetic._Reader ---------------------------------------------------------------------------------------- */

typedef struct {
    Ctx *c;
    int sure;
    Tok *toks;
    Py_ssize_t ntok, captok; /* the current run: toks[:ntok] */
    char tainted, soft, pending_unit, pending_times, has_joined;
    char inside; /* the last run's result may have gone on into this run (`= 12 000`, `= 3 1/2`) */
    Tok joined;
    Py_ssize_t last_eq, prev_end;
} Reader;

static Py_ssize_t read_window(Ctx *c, Py_ssize_t start, Py_ssize_t end, int cut, int sure);

static void push(Reader *r, Tok t) {
    if (r->ntok == r->captok) {
        Py_ssize_t cap = r->captok ? 2 * r->captok : 64;
        Tok *grown = realloc(r->toks, cap * sizeof(Tok));
        if (grown == NULL) {
            r->c->fail = 1;
            return;
        }
        r->toks = grown;
        r->captok = cap;
    }
    r->toks[r->ntok++] = t;
}

static Tok *last_tok(Reader *r, Py_ssize_t back) { return r->ntok > back ? &r->toks[r->ntok - 1 - back] : NULL; }

/* Reader.cut, and at once the run's claims (_Reader.close reads the runs in order: their order is all it needs, and
 * nothing reads a run's tokens once it is cut, so the token buffer holds one run, not a window's) */
static void r_cut(Reader *r, int last_tainted, int next_tainted, int soft) {
    Tok *last = last_tok(r, 0);
    if (last != NULL && last->kind == K_OP) soft = 0;
    if (last != NULL && !r->c->fail) {
        int plain = chain(r->c, r->toks, r->ntok, r->tainted || r->inside, last_tainted, r->sure,
                          r->has_joined ? &r->joined : NULL);
        r->inside = r->has_joined && !plain;
    }
    r->ntok = 0;
    r->tainted = (char)next_tainted;
    r->soft = (char)soft;
    r->has_joined = 0;
}

static int result_number(Reader *r) {
    Tok *last = last_tok(r, 0), *before = last_tok(r, 1);
    return before != NULL && (last->kind == K_NUM || last->kind == K_BIG) && before->kind == K_EQ;
}

/* Reader.mixed */
static void r_mixed(Reader *r, const Tok *first, Py_ssize_t num_at, Py_ssize_t num_end, Py_ssize_t den_at,
                    Py_ssize_t den_end, Py_ssize_t stop) {
    Ctx *c = r->c;
    i128 numerator = 0, denominator = 0; /* int(...), clamped: only whether 0 < numerator < denominator counts */
    for (Py_ssize_t i = num_at; i < num_end; i++) numerator = numerator > 100000000000 ? numerator : numerator * 10 + digit_value(c->s[i]);
    for (Py_ssize_t i = den_at; i < den_end; i++) denominator = denominator * 10 + digit_value(c->s[i]);
    if (!(0 < numerator && numerator < denominator)) return;
    Tok t = {0};
    t.kind = K_NUM;
    t.start = first->start;
    t.end = stop;
    t.value = radd(c, first->value, rmake(c, numerator, denominator));
    t.unit = rint_(1);
    /* _significant(f"{value} {numerator}/{denominator}"): a whole part of 0 is stripped as a leading zero */
    int digits = 1 + (int)(num_end - num_at) + 1 + (int)(den_end - den_at);
    for (i128 w = first->value.n; w; w /= 10) digits++;
    t.digits = digits;
    r->joined = t;
    r->has_joined = 1;
}

/* Reader.end_result */
static void r_end_result(Reader *r, int kind, Py_ssize_t at, Py_ssize_t stop) {
    Ctx *c = r->c;
    const Py_UCS4 *s = c->s;
    Tok first = *last_tok(r, 0);
    int whole = first.kind == K_NUM && req(first.unit, rint_(1));
    if (kind == K_FRAC) { /* \{(\d{1,9})\}\{(\d{1,9})\} at stop, in the whole text */
        Py_ssize_t q = stop, na, ne, da, de;
        if (!whole || q >= c->len || s[q] != '{') return;
        na = ++q;
        while (q < c->len && is_digit(s[q]) && q - na < 10) q++;
        ne = q;
        if (ne - na < 1 || ne - na > 9 || q >= c->len || s[q] != '}') return;
        if (++q >= c->len || s[q] != '{') return;
        da = ++q;
        while (q < c->len && is_digit(s[q]) && q - da < 10) q++;
        de = q;
        if (de - da < 1 || de - da > 9 || q >= c->len || s[q] != '}') return;
        r_mixed(r, &first, na, ne, da, de, q + 1);
        r_cut(r, 0, 0, 0);
        return;
    }
    /* _GROUP.fullmatch(text, first.start, stop): \d{1,3} \d{3} */
    Py_ssize_t w = 0;
    while (first.start + w < stop && is_digit(s[first.start + w])) w++;
    int grouped = w >= 1 && w <= 3 && first.start + w + 4 == stop && s[first.start + w] == ' ' &&
                  is_digit(s[stop - 3]) && is_digit(s[stop - 2]) && is_digit(s[stop - 1]);
    if (grouped) {
        Py_UCS4 joined[7];
        Py_ssize_t n = 0;
        for (Py_ssize_t i = first.start; i < first.end; i++) joined[n++] = s[i];
        for (Py_ssize_t i = at; i < stop; i++) joined[n++] = s[i];
        r->joined = number(c, joined, n, first.start, stop);
        r->has_joined = 1;
    } else if (whole && stop < c->len && s[stop] == '/') { /* _MIXED: /(\d{1,9})(?![\d.,/]) */
        Py_ssize_t q = stop + 1;
        while (q < c->len && is_digit(s[q])) q++;
        Py_ssize_t k = q - (stop + 1);
        int piece_digits = 1;
        for (Py_ssize_t i = at; i < stop; i++) piece_digits &= is_digit(s[i]);
        /* a run of more than 9 digits: \d{1,9} then a digit, which the lookahead refuses */
        if (k >= 1 && k <= 9 && !(q < c->len && (s[q] == '.' || s[q] == ',' || s[q] == '/')) && piece_digits)
            r_mixed(r, &first, at, stop, stop + 1, q, q);
    }
    r_cut(r, 0, 0, 0);
}

/* Reader.word: piece = text[at:stop], words apart by spaces and tabs */
static void r_word(Reader *r, Py_ssize_t at, Py_ssize_t stop, int spaced) {
    const Py_UCS4 *s = r->c->s;
    Tok *last = last_tok(r, 0);
    int operand = last != NULL && (last->kind == K_NUM || last->kind == K_CLOSE || last->kind == K_PCT ||
                                   last->kind == K_SUP);
    Ctx *c = r->c; /* the words' shape, as next_token read them */
    int nwords = c->nwords, shortest = c->shortest, last_x = c->last_x;
    int unit_like = nwords <= 3 && shortest > 1;
    Tok *before = last_tok(r, 1);
    int per = last != NULL && last->kind == K_OP && last->ch == '/' && before != NULL &&
              (before->kind == K_NUM || before->kind == K_CLOSE || before->kind == K_PCT || before->kind == K_SUP);
    if (per && (unit_like || (nwords > 1 && last_x))) {
        r->ntok--; /* `$30/packet` */
        operand = 1;
        spaced = 1;
    }
    int remainder = operand && (c->latex ? c->remainder : remainder_word(s + at, c->first_len));
    int times_word = nwords == 1 && ((stop - at == 1 && (s[at] == 'x' || s[at] == 'X')) ||
                                     (stop - at == 2 && s[at] == 'o' && s[at + 1] == 'f'));
    if (operand && remainder) r_cut(r, 1, 1, 0);
    else if (times_word && operand) {
        Tok t = {0};
        t.kind = K_OP;
        t.ch = '*';
        t.start = at;
        t.end = stop;
        t.value = rint_(0);
        t.unit = rint_(1);
        push(r, t);
        r->pending_times = stop - at == 1;
    } else if (operand && spaced && nwords <= 4 && last_x) {
        Tok t = {0};
        t.kind = K_OP;
        t.ch = '*';
        t.start = at;
        t.end = stop;
        t.value = rint_(0);
        t.unit = rint_(1);
        push(r, t);
        r->pending_times = 1;
    } else if (operand && spaced && unit_like) r->pending_unit = 1;
    else r_cut(r, !spaced && operand, 1, !last_x);
}

/* Reader.feed: 0 where the window ends here */
static int r_feed(Reader *r, int kind, Py_ssize_t at, Py_ssize_t stop) {
    Ctx *c = r->c;
    const Py_UCS4 *s = c->s;
    if (r->last_eq >= 0 && at > r->last_eq + WINDOW && r->ntok == 0) return 0;
    if (kind == K_SKIP) return 1;
    if (kind == K_TAG) {
        r_cut(r, 0, 0, 0);
        r->pending_unit = r->pending_times = 0;
        return 1;
    }
    if (kind == K_ANN) {
        r->last_eq = at;
        int eq = 0;
        for (Py_ssize_t i = at; i < stop; i++) eq |= s[i] == '=';
        if (eq) read_window(c, at + 2, stop - 2, 0, 1);
        return 1;
    }
    int spaced = at > r->prev_end;
    r->prev_end = stop;
    if (r->pending_times) {
        r->pending_times = 0;
        if (kind != K_NUM && kind != K_OPEN && kind != K_FRAC) {
            r->ntok--; /* `2x = 10` */
            r_cut(r, 1, 1, 0);
        }
    }
    if (r->pending_unit) {
        r->pending_unit = 0;
        if (kind == K_OP && !spaced && s[at] != '/') kind = K_OTHER; /* `Post-it` */
        if (kind != K_OP && kind != K_EQ && kind != K_CLOSE && kind != K_PCT) r_cut(r, 0, 1, 1);
        else if (r->ntok > 0 && r->toks[r->ntok - 1].kind == K_NUM) r->toks[r->ntok - 1].labelled = 1;
    }
    if (kind == K_WORDS) r_word(r, at, stop, spaced);
    else if (kind == K_OTHER) {
        Py_UCS4 ch = s[at]; /* a single character: this reader declines `\name` */
        Tok *last = last_tok(r, 0);
        int ratio = ch == ':' && !spaced && last != NULL && last->kind == K_NUM;
        int touching = ratio || ch == '_' || ch == '\\'; /* `3:2`, `a_{37}`, `\sqrt{4}` */
        int clean = ch == ',' || ch == ';' || ch == '.' || ch == '?' || ch == '"' || ch == '\'';
        r_cut(r, !spaced && !clean, touching, 1);
    } else {
        if (kind == K_EQ) r->last_eq = at;
        if ((kind == K_NUM || kind == K_FRAC) && spaced && result_number(r)) r_end_result(r, kind, at, stop);
        else if (kind == K_OPEN && spaced && result_number(r)) r_cut(r, 0, 0, 0);
        if (r->tainted && r->soft && r->ntok == 0 && spaced &&
            (kind == K_NUM || kind == K_EQ || kind == K_OPEN || kind == K_FRAC))
            r->tainted = 0;
        push(r, make_token(c, kind, at, stop));
    }
    return 1;
}

static void r_close(Reader *r) {
    if (r->pending_times) {
        r->ntok--;
        r_cut(r, 1, 0, 0);
    }
    r_cut(r, 0, 0, 0);
}

/* arithmetic._read: returns where it stopped; sets c->fail where it declines */
static Py_ssize_t read_window(Ctx *c, Py_ssize_t start, Py_ssize_t end, int cut, int sure) {
    if (c->depth == 2) { /* an annotation in an annotation: `<<` cannot be inside one, but never read past the buffers */
        c->fail = 1;
        return end;
    }
    Reader r;
    memset(&r, 0, sizeof(r));
    int depth = c->depth++;
    r.toks = c->toks[depth];
    r.captok = c->captok[depth];
    r.c = c;
    r.sure = sure;
    r.tainted = (char)cut;
    r.last_eq = -1;
    r.prev_end = -1;
    Py_ssize_t pos = start;
    while (pos < end && !c->fail) {
        int kind;
        Py_ssize_t at, stop;
        if (!next_token(c, pos, end, &kind, &at, &stop)) {
            c->fail = 1;
            break;
        }
        c->budget--;
        if (c->budget < 0 || !r_feed(&r, kind, at, stop)) {
            end = pos;
            break;
        }
        pos = stop;
    }
    if (!c->fail) r_close(&r);
    c->toks[depth] = r.toks;
    c->captok[depth] = r.captok;
    c->depth--;
    return end;
}

/* ---- arithmetic.claims ----------------------------------------------------------------------------------------- */

static int by_position(const void *a, const void *b) {
    const Claim *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->right - y->right;
}

/* Hands text[start:end] to the Python reader; 0 on an error (raised). */
static int fallback_window(Ctx *c, PyObject *text, PyObject *fallback, Py_ssize_t start, Py_ssize_t end, int cut,
                           Py_ssize_t *stop) {
    PyObject *got = PyObject_CallFunction(fallback, "OnnOl", text, start, end, cut ? Py_True : Py_False, c->budget);
    if (got == NULL) return 0;
    PyObject *found;
    long budget;
    if (!PyArg_ParseTuple(got, "nlO!", stop, &budget, &PyList_Type, &found)) {
        Py_DECREF(got);
        return 0;
    }
    c->budget = budget;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(found); i++) {
        Py_ssize_t a, b;
        int right;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(found, i), "nnp", &a, &b, &right)) {
            Py_DECREF(got);
            return 0;
        }
        found_add(c, a, b, right);
        if (c->fail) {
            Py_DECREF(got);
            PyErr_NoMemory();
            return 0;
        }
    }
    Py_DECREF(got);
    return 1;
}

/* _ANCHOR.search(text, pos): where the next `=`, `≈`, `≃`, `~`, `\approx` or `<<` starts, and its end; -1 for none */
static Py_ssize_t anchor(const Py_UCS4 *s, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t *end) {
    static const Py_UCS4 APPROX[] = {'\\', 'a', 'p', 'p', 'r', 'o', 'x'};
    for (Py_ssize_t p = pos; p < len; p++) {
        Py_UCS4 ch = s[p];
        if (ch == '=' || ch == 0x2248 || ch == 0x2243 || ch == '~') {
            *end = p + 1;
            return p;
        }
        if (ch == '<' && p + 1 < len && s[p + 1] == '<') {
            *end = p + 2;
            return p;
        }
        if (ch == '\\' && p + 7 <= len) {
            int same = 1;
            for (int k = 1; k < 7; k++) same &= s[p + k] == APPROX[k];
            if (same) {
                *end = p + 7;
                return p;
            }
        }
    }
    return -1;
}

static PyObject *claims(PyObject *self, PyObject *args) {
    PyObject *text, *fallback;
    if (!PyArg_ParseTuple(args, "UO", &text, &fallback)) return NULL;
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    Py_UCS4 *s = PyUnicode_AsUCS4Copy(text);
    if (s == NULL) return NULL;
    Ctx c = {.s = s, .len = len, .budget = MAX_TOKENS};
    PyObject *result = NULL;
    Py_ssize_t pos = 0, last_nl = -1, nl_scanned = 0, next_nl = -2;
    Py_ssize_t anchor_end;
    Py_ssize_t at;
    while (c.budget > 0 && (at = anchor(s, len, pos, &anchor_end)) >= 0) {
        for (; nl_scanned < at; nl_scanned++)
            if (s[nl_scanned] == '\n') last_nl = nl_scanned;
        Py_ssize_t line_start = last_nl + 1;
        Py_ssize_t start = line_start > pos ? line_start : pos;
        if (at - WINDOW > start) start = at - WINDOW;
        if (next_nl != -1 && next_nl < anchor_end) {
            next_nl = -1;
            for (Py_ssize_t p = anchor_end; p < len; p++)
                if (s[p] == '\n') {
                    next_nl = p;
                    break;
                }
        }
        Py_ssize_t end = next_nl < 0 ? len : next_nl;
        Py_ssize_t found_before = c.nfound;
        long budget_before = c.budget;
        Py_ssize_t stop = read_window(&c, start, end, start > line_start, 0);
        if (c.fail) {
            c.fail = 0;
            c.nfound = found_before;
            c.budget = budget_before;
            if (!fallback_window(&c, text, fallback, start, end, start > line_start, &stop)) goto done;
        }
        pos = stop > anchor_end ? stop : anchor_end;
    }
    if (c.nfound) qsort(c.found, c.nfound, sizeof(Claim), by_position);
    result = PyList_New(c.nfound);
    if (result == NULL) goto done;
    for (Py_ssize_t i = 0; i < c.nfound; i++) {
        PyObject *item = PyTuple_New(3), *start = PyLong_FromSsize_t(c.found[i].start);
        PyObject *stop = PyLong_FromSsize_t(c.found[i].end);
        if (item == NULL || start == NULL || stop == NULL) {
            Py_XDECREF(item);
            Py_XDECREF(start);
            Py_XDECREF(stop);
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(item, 0, start);
        PyTuple_SET_ITEM(item, 1, stop);
        PyTuple_SET_ITEM(item, 2, Py_NewRef(c.found[i].right ? Py_True : Py_False));
        PyList_SET_ITEM(result, i, item);
    }
done:
    free(c.found);
    for (int depth = 0; depth < 2; depth++) {
        free(c.toks[depth]);
    }
    PyMem_Free(s);
    return result;
}

static PyMethodDef methods[] = {
    {"claims", claims, METH_VARARGS,
     "claims(text, fallback) -> [(start, end, right), ...]: arithmetic.claims, with fallback(text, start, end, cut, "
     "budget) -> (stop, budget, found) reading the windows this reader declines."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_arithmetic", "The steps component's claim reader, in C.", -1, methods, NULL, NULL, NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__arithmetic(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "WINDOW", WINDOW) < 0 || PyModule_AddIntConstant(m, "MAX_TOKENS", MAX_TOKENS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DIGITS", MAX_DIGITS) < 0 || PyModule_AddIntConstant(m, "MAX_BITS", MAX_BITS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DEPTH", MAX_DEPTH) < 0 ||
        PyModule_AddIntConstant(m, "FLOAT_NOISE_DIGITS", FLOAT_NOISE_DIGITS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
