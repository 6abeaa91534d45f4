/* langdetect 1.0.9's detection of one text, in C, with the same result to the bit: the language checks of IFEval
 * (ifeval._language_of) cost ~0.3 ms on an 8,000-token answer instead of 8-14 ms in langdetect's Python.
 *
 *     load(word_lang_prob_map, languages, state, normalize, settings) -> model (a capsule)
 *     probabilities(model, text) -> [a probability per language] | None
 *
 * `load` takes langdetect's profile table (n-gram -> a probability per language, held here as the non-zero ones of
 * each n-gram, found through an open-addressing table of the n-grams packed in 63 bits), the state of the Mersenne
 * Twister that langdetect's Detector seeds (`random.Random().seed(seed)`, its getstate()), `NGram.normalize`
 * (called here once per character ever met, and remembered) and the detector's settings.
 *
 * `probabilities` is, for a text that `Detector.append`'s three substitutions were already applied to (detect.py
 * applies them): the rest of `append` (the first max_text_length characters, runs of spaces made one),
 * `cleaning_text`, `_extract_ngrams` and `_detect_block`, which returns the detector's `langprob`; None where
 * langdetect raises CantDetectError (no n-gram its profiles know). `_detect_block` draws with CPython's `random`
 * (random.py and _randommodule.c): `choice` is `_randbelow_with_getrandbits` (getrandbits(k) for k <= 32 is the next
 * 32-bit output shifted right by 32 - k, redrawn while >= n), `gauss` is its Box-Muller pair with its cached second
 * value, `random()` is (a * 2**26 + b) / 2**53 of two outputs; the draws come in langdetect's order, the float
 * arithmetic is langdetect's in its order, in doubles, with libm's cos, sin, log and sqrt (as the math module's),
 * and setup.py compiles this with -ffp-contract=off so that no multiply-add is fused. `sum()` is CPython's: a plain
 * running sum before 3.12, Neumaier's compensated one from 3.12 on.
 *
 * The n-grams of a word (and of the space after it) depend on the word alone, since langdetect's n-gram state starts
 * afresh after a space: they are looked up once per distinct word of the text.
 *
 * tests/unit/test_instructions_detect.py checks the probabilities against langdetect's own, bit for bit (on CPython
 * 3.11 there; 3.12 and 3.13 agreed on the same responses when this was written, and a plain sum on 3.12 did not).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MT_N 624
#define MT_M 397
#define CODE_POINTS 0x110000

typedef struct {
    uint32_t state[MT_N];
    int index;
} Twister;

/* CPython's genrand_uint32 (Modules/_randommodule.c): MT19937. */
static uint32_t next32(Twister *mt) {
    static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
    uint32_t y, *s = mt->state;
    if (mt->index >= MT_N) {
        int k;
        for (k = 0; k < MT_N - MT_M; k++) {
            y = (s[k] & 0x80000000U) | (s[k + 1] & 0x7fffffffU);
            s[k] = s[k + MT_M] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        for (; k < MT_N - 1; k++) {
            y = (s[k] & 0x80000000U) | (s[k + 1] & 0x7fffffffU);
            s[k] = s[k + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        y = (s[MT_N - 1] & 0x80000000U) | (s[0] & 0x7fffffffU);
        s[MT_N - 1] = s[MT_M - 1] ^ (y >> 1) ^ mag01[y & 0x1U];
        mt->index = 0;
    }
    y = s[mt->index++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

/* random.random() */
static double next_double(Twister *mt) {
    uint32_t a = next32(mt) >> 5, b = next32(mt) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* random.choice's index: _randbelow_with_getrandbits(n), 0 < n < 2**32 */
static uint32_t below(Twister *mt, uint32_t n) {
    int k = 0;
    for (uint32_t m = n; m; m >>= 1) k++; /* n.bit_length() */
    uint32_t r = next32(mt) >> (32 - k);
    while (r >= n) r = next32(mt) >> (32 - k);
    return r;
}

typedef struct {
    uint64_t key; /* the n-gram, packed (key()), 0 where the slot is free */
    int64_t row;
} Slot;

typedef struct {
    int languages, n_trial, iteration_limit;
    double alpha, alpha_width, conv_threshold, base_freq;
    Py_ssize_t max_text_length;
    Slot *slots; /* the n-grams, key and row side by side: a lookup reads one cache line */
    uint64_t slot_mask;
    int32_t *row_start; /* row r's non-zero probabilities are entries row_start[r] .. row_start[r + 1] - 1 */
    uint8_t *entry_language;
    double *entry_prob;
    Twister seeded;
    Py_UCS4 *normalized; /* NGram.normalize of each code point met so far, 0 before */
    PyObject *normalize;
} Model;

static uint64_t key(const Py_UCS4 *chars, int n) { /* never 0: no normalized character is U+0000 */
    uint64_t packed = 0;
    for (int i = 0; i < n; i++) packed |= (uint64_t)chars[i] << (21 * i);
    return packed;
}

static uint64_t mix(uint64_t h) { /* MurmurHash3's finaliser, as in _repetition.c */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb93fe53b2a8bULL;
    h ^= h >> 33;
    return h;
}

static int32_t row_of(const Model *m, uint64_t packed) {
    for (uint64_t slot = mix(packed) & m->slot_mask;; slot = (slot + 1) & m->slot_mask) {
        if (m->slots[slot].key == packed) return (int32_t)m->slots[slot].row;
        if (m->slots[slot].key == 0) return -1;
    }
}

static void free_model(Model *m) {
    if (!m) return;
    PyMem_RawFree(m->slots);
    PyMem_RawFree(m->row_start);
    PyMem_RawFree(m->entry_language);
    PyMem_RawFree(m->entry_prob);
    PyMem_RawFree(m->normalized);
    Py_XDECREF(m->normalize);
    PyMem_RawFree(m);
}

static void capsule_free(PyObject *capsule) { free_model(PyCapsule_GetPointer(capsule, "langdetect model")); }

/* The profile table: each n-gram of 1 to 3 characters (the only ones an n-gram of the text can equal) with its
 * non-zero probabilities. */
static int load_table(Model *m, PyObject *table) {
    Py_ssize_t rows = PyDict_Size(table), entries = 0, position = 0;
    PyObject *gram, *probs;
    while (PyDict_Next(table, &position, &gram, &probs)) {
        if (!PyList_Check(probs) || PyList_GET_SIZE(probs) != m->languages) {
            PyErr_SetString(PyExc_ValueError, "each n-gram needs a list of a probability per language");
            return -1;
        }
        for (Py_ssize_t j = 0; j < m->languages; j++) {
            if (!PyFloat_Check(PyList_GET_ITEM(probs, j))) {
                PyErr_SetString(PyExc_TypeError, "the probabilities must be floats");
                return -1;
            }
            entries += PyFloat_AS_DOUBLE(PyList_GET_ITEM(probs, j)) != 0.0;
        }
    }
    uint64_t slots = 16;
    while (slots < 3 * (uint64_t)rows) slots *= 2;
    m->slot_mask = slots - 1;
    m->slots = PyMem_RawCalloc(slots, sizeof(Slot));
    m->row_start = PyMem_RawMalloc((rows + 1) * sizeof(int32_t));
    m->entry_language = PyMem_RawMalloc(entries + 1);
    m->entry_prob = PyMem_RawMalloc((entries + 1) * sizeof(double));
    if (!m->slots || !m->row_start || !m->entry_language || !m->entry_prob) {
        PyErr_NoMemory();
        return -1;
    }
    int32_t row = 0, entry = 0;
    position = 0;
    while (PyDict_Next(table, &position, &gram, &probs)) {
        if (!PyUnicode_Check(gram)) {
            PyErr_SetString(PyExc_TypeError, "the n-grams must be strings");
            return -1;
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(gram);
        Py_UCS4 chars[3];
        int usable = n >= 1 && n <= 3;
        for (Py_ssize_t i = 0; usable && i < n; i++) {
            chars[i] = PyUnicode_READ_CHAR(gram, i);
            usable = chars[i] != 0;
        }
        if (!usable) continue; /* no n-gram of a text can equal it */
        uint64_t packed = key(chars, (int)n), slot = mix(packed) & m->slot_mask;
        while (m->slots[slot].key != 0) slot = (slot + 1) & m->slot_mask; /* a dict's keys are distinct */
        m->slots[slot].key = packed;
        m->slots[slot].row = row;
        m->row_start[row++] = entry;
        for (Py_ssize_t j = 0; j < m->languages; j++) {
            double p = PyFloat_AS_DOUBLE(PyList_GET_ITEM(probs, j)); /* a float: checked above */
            if (p != 0.0) {
                m->entry_language[entry] = (uint8_t)j;
                m->entry_prob[entry++] = p;
            }
        }
    }
    m->row_start[row] = entry;
    return 0;
}

static int load_state(Model *m, PyObject *state) {
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != MT_N + 1) {
        PyErr_SetString(PyExc_ValueError, "state must be the 625 integers of random.Random().getstate()[1]");
        return -1;
    }
    for (int i = 0; i <= MT_N; i++) {
        unsigned long word = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(state, i));
        if (word == (unsigned long)-1 && PyErr_Occurred()) return -1;
        if (i < MT_N)
            m->seeded.state[i] = (uint32_t)word;
        else
            m->seeded.index = word > MT_N ? MT_N : (int)word;
    }
    return 0;
}

static PyObject *load(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *table, *state, *normalize;
    Model *m = PyMem_RawCalloc(1, sizeof(Model));
    if (!m) return PyErr_NoMemory();
    if (!PyArg_ParseTuple(args, "O!iO!O(ddiiddn):load", &PyDict_Type, &table, &m->languages, &PyTuple_Type, &state,
                          &normalize, &m->alpha, &m->alpha_width, &m->n_trial, &m->iteration_limit,
                          &m->conv_threshold, &m->base_freq, &m->max_text_length)) {
        free_model(m);
        return NULL;
    }
    Py_INCREF(normalize);
    m->normalize = normalize;
    if (m->languages < 1 || m->languages > 256 || m->n_trial < 1 || m->max_text_length < 0) {
        PyErr_SetString(PyExc_ValueError, "1 to 256 languages, a trial or more, a length of 0 or more");
        free_model(m);
        return NULL;
    }
    m->normalized = PyMem_RawCalloc(CODE_POINTS, sizeof(Py_UCS4)); /* 4 MB of address space, touched as met */
    if (!m->normalized) {
        free_model(m);
        return PyErr_NoMemory();
    }
    if (load_state(m, state) < 0 || load_table(m, table) < 0) {
        free_model(m);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(m, "langdetect model", capsule_free);
    if (!capsule) free_model(m);
    return capsule;
}

/* NGram.normalize(ch), remembered. */
static Py_UCS4 normalized(Model *m, Py_UCS4 ch) {
    if (m->normalized[ch]) return m->normalized[ch];
    PyObject *given = PyUnicode_FromOrdinal((int)ch);
    if (!given) return 0;
    PyObject *found = PyObject_CallOneArg(m->normalize, given);
    Py_DECREF(given);
    if (!found) return 0;
    Py_UCS4 result = 0;
    if (!PyUnicode_Check(found) || PyUnicode_GET_LENGTH(found) != 1 || PyUnicode_READ_CHAR(found, 0) == 0)
        PyErr_SetString(PyExc_ValueError, "normalize must give one character, not U+0000");
    else
        result = m->normalized[ch] = PyUnicode_READ_CHAR(found, 0);
    Py_DECREF(found);
    return result;
}

/* Detector.append after its substitutions, then cleaning_text, then NGram.normalize per character: the characters
 * _extract_ngrams reads, in `chars`; their number, or -1 on an error. */
static Py_ssize_t prepare(Model *m, PyObject *text, Py_UCS4 *chars) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), limit = size < m->max_text_length ? size : m->max_text_length;
    Py_ssize_t count = 0, latin = 0, non_latin = 0;
    Py_UCS4 before = 0; /* `pre`: the character before, kept or not */
    for (Py_ssize_t i = 0; i < limit; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch != ' ' || before != ' ') chars[count++] = ch;
        before = ch;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        /* cleaning_text compares unicode_block(ch), a number, with 'Latin Extended Additional', a string: every
         * character from U+0300 on counts as non-Latin */
        if (chars[i] >= 'A' && chars[i] <= 'z')
            latin++;
        else if (chars[i] >= 0x300)
            non_latin++;
    }
    if (latin * 2 < non_latin) {
        Py_ssize_t kept = 0;
        for (Py_ssize_t i = 0; i < count; i++)
            if (chars[i] < 'A' || chars[i] > 'z') chars[kept++] = chars[i];
        count = kept;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!(chars[i] = normalized(m, chars[i]))) return -1;
    }
    return count;
}

/* _extract_ngrams (NGram.add_char and its get(n)): the table rows of the n-grams the profiles know, in its order. */
static Py_ssize_t extract(const Model *m, const Py_UCS4 *chars, Py_ssize_t count, int32_t *rows) {
    Py_UCS4 grams[3] = {' ', 0, 0};
    int length = 1, capital = 0;
    Py_ssize_t found = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_UCS4 ch = chars[i], last = grams[length - 1];
        if (last == ' ') {
            grams[0] = ' ';
            length = 1;
            capital = 0;
            if (ch == ' ') continue;
        } else if (length >= 3) {
            grams[0] = grams[1];
            grams[1] = grams[2];
            length = 2;
        }
        grams[length++] = ch;
        if (Py_UNICODE_ISUPPER(ch)) {
            if (Py_UNICODE_ISUPPER(last)) capital = 1;
        } else {
            capital = 0;
        }
        if (capital) continue;
        for (int n = 1; n <= 3 && n <= length; n++) {
            if (n == 1 && ch == ' ') continue;
            int32_t row = row_of(m, key(grams + length - n, n));
            if (row >= 0) rows[found++] = row;
        }
    }
    return found;
}

typedef struct {
    uint64_t hash;
    Py_ssize_t start, length, first_row, rows; /* length 0: a free slot */
} Word;

/* extract() word by word, each word met before copied: after a space langdetect's n-gram state starts afresh, so a
 * word's n-grams (and those of the space after it) depend on the word alone. Text repeats its words: a few hundred
 * distinct ones among 2,000 in 10,000 characters, which spares most lookups in the profile table. */
static Py_ssize_t extract_words(const Model *m, const Py_UCS4 *chars, Py_ssize_t count, int32_t *rows) {
    Py_ssize_t slots = 16, found = 0, words = 0;
    for (Py_ssize_t i = 0; i < count; i++) words += chars[i] != ' ' && (i + 1 == count || chars[i + 1] == ' ');
    while (slots < 2 * words) slots *= 2; /* at most half full */
    Word *memo = PyMem_RawCalloc(slots, sizeof(Word));
    if (!memo) return extract(m, chars, count, rows);
    for (Py_ssize_t i = 0; i < count;) {
        if (chars[i] == ' ') {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        while (i < count && chars[i] != ' ') i++;
        Py_ssize_t length = (i < count ? i + 1 : i) - start; /* with the space after it */
        uint64_t hash = 0xcbf29ce484222325ULL;
        for (Py_ssize_t k = 0; k < length; k++) hash = (hash ^ chars[start + k]) * 0x100000001b3ULL;
        hash = mix(hash);
        Word *word = memo + (hash & (uint64_t)(slots - 1));
        while (word->length && !(word->hash == hash && word->length == length &&
                                 !memcmp(chars + word->start, chars + start, length * sizeof(Py_UCS4)))) {
            word = word + 1 == memo + slots ? memo : word + 1;
        }
        if (word->length) {
            memcpy(rows + found, rows + word->first_row, word->rows * sizeof(int32_t));
            found += word->rows;
        } else {
            Py_ssize_t made = extract(m, chars + start, length, rows + found);
            *word = (Word){hash, start, length, found, made};
            found += made;
        }
    }
    PyMem_RawFree(memo);
    return found;
}

/* Detector._normalize_prob; -1.0 for its ZeroDivisionError. */
static double normalize_prob(double *prob, int languages) {
    double sum = 0.0 + prob[0];
#if PY_VERSION_HEX >= 0x030C0000
    double c = 0.0;
    for (int i = 1; i < languages; i++) {
        double x = prob[i], t = sum + x;
        if (fabs(sum) >= fabs(x))
            c += (sum - t) + x;
        else
            c += (x - t) + sum;
        sum = t;
    }
    if (c && isfinite(c)) sum += c;
#else
    for (int i = 1; i < languages; i++) sum += prob[i];
#endif
    if (sum == 0.0) return -1.0;
    double most = 0.0;
    for (int i = 0; i < languages; i++) {
        double p = prob[i] / sum;
        if (most < p) most = p;
        prob[i] = p;
    }
    return most;
}

/* Detector._detect_block after its n-grams: `langprob`; -1 for a division by zero (langdetect's would raise). */
static int detect_block(const Model *m, const int32_t *rows, Py_ssize_t count, double *langprob) {
    Twister mt = m->seeded; /* self.random.seed(self.seed) */
    int languages = m->languages, has_next = 0;
    double prob[256], factor[256], gauss_next = 0.0;
    for (int j = 0; j < languages; j++) langprob[j] = 0.0;
    for (int t = 0; t < m->n_trial; t++) {
        for (int j = 0; j < languages; j++) prob[j] = 1.0 / languages;
        double z;
        if (has_next) { /* random.gauss */
            z = gauss_next;
            has_next = 0;
        } else {
            double x2pi = next_double(&mt) * (2.0 * 3.141592653589793);
            double g2rad = sqrt(-2.0 * log(1.0 - next_double(&mt)));
            z = cos(x2pi) * g2rad;
            gauss_next = sin(x2pi) * g2rad;
            has_next = 1;
        }
        double alpha = m->alpha + (0.0 + z * 1.0) * m->alpha_width;
        double weight = alpha / m->base_freq;
        for (int i = 0;; i++) {
            int32_t row = rows[below(&mt, (uint32_t)count)];
            for (int j = 0; j < languages; j++) factor[j] = weight + 0.0;
            for (int32_t e = m->row_start[row]; e < m->row_start[row + 1]; e++)
                factor[m->entry_language[e]] = weight + m->entry_prob[e];
            for (int j = 0; j < languages; j++) prob[j] *= factor[j];
            if (i % 5 == 0) {
                double most = normalize_prob(prob, languages);
                if (most < 0.0) return -1;
                if (most > m->conv_threshold || i >= m->iteration_limit) break;
            }
        }
        for (int j = 0; j < languages; j++) langprob[j] += prob[j] / m->n_trial;
    }
    return 0;
}

static PyObject *probabilities(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *capsule, *text;
    if (!PyArg_ParseTuple(args, "OU:probabilities", &capsule, &text)) return NULL;
    Model *m = PyCapsule_GetPointer(capsule, "langdetect model");
    if (!m) return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) return NULL;
#endif
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), most = size < m->max_text_length ? size : m->max_text_length;
    if ((uint64_t)most * 3 >= 0xffffffffULL) {
        PyErr_SetString(PyExc_ValueError, "max_text_length is too large");
        return NULL;
    }
    Py_UCS4 *chars = PyMem_RawMalloc((most + 1) * sizeof(Py_UCS4));
    int32_t *rows = PyMem_RawMalloc((3 * most + 1) * sizeof(int32_t));
    if (!chars || !rows) {
        PyMem_RawFree(chars);
        PyMem_RawFree(rows);
        return PyErr_NoMemory();
    }
    double langprob[256];
    Py_ssize_t count = prepare(m, text, chars), found = 0;
    int status = 0;
    if (count >= 0) {
        Py_BEGIN_ALLOW_THREADS
        found = extract_words(m, chars, count, rows);
        if (found > 0) status = detect_block(m, rows, found, langprob);
        Py_END_ALLOW_THREADS
    }
    PyMem_RawFree(chars);
    PyMem_RawFree(rows);
    if (count < 0) return NULL;
    if (found == 0) Py_RETURN_NONE; /* CantDetectError */
    if (status < 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "float division by zero");
        return NULL;
    }
    PyObject *result = PyList_New(m->languages);
    for (int j = 0; result && j < m->languages; j++) {
        PyObject *p = PyFloat_FromDouble(langprob[j]);
        if (!p) Py_CLEAR(result);
        else PyList_SET_ITEM(result, j, p);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"load", load, METH_VARARGS,
     "load(word_lang_prob_map, languages, state, normalize, (alpha, alpha_width, n_trial, iteration_limit, "
     "conv_threshold, base_freq, max_text_length)) -> model"},
    {"probabilities", probabilities, METH_VARARGS,
     "probabilities(model, text) -> langdetect's langprob for the text (Detector.append's substitutions already "
     "made), or None where it raises CantDetectError"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_langdetect", "langdetect's detection of one text, in C.", -1, methods, NULL, NULL, NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__langdetect(void) { return PyModule_Create(&module); }
