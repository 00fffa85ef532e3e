/* The content fingerprints of a page in one C call: the 64-bit SimHash and the
 * MinHash bottom-64 sketch of its word shingles (simhash.py, minhash.py).
 *
 * Why hand-written: these values are stored for good (dedup.py compares new pages
 * with them), so they must equal bit for bit what simhash.py's numpy code gives:
 * CRC-32 per word, tabulation hashing with its 8 + 8 fixed multipliers, the fold,
 * the distinct hashes sorted, the majority vote, the first 64 top halves. No
 * library computes these, and on a crawled page's ~120 words numpy's per-call cost
 * is the whole cost (~48 us a page in ~20 calls, against a few us of arithmetic).
 * simhash.py's numpy path stays the reference; tests/unit/test_fingerprint_c.py
 * compares both on arbitrary text.
 *
 * Two entry points, the same result:
 *   of_words(words, shingle_words): words as simhash.words() cuts them (bytes);
 *   of_ascii(text, shingle_words): an ASCII str, cut here without making the
 *     word objects. For ASCII, words() is: lowercase, every byte not in
 *     [a-z0-9_] a separator, the runs between separators (str.lower() and
 *     bytes.split() change nothing else on ASCII).
 * Both return (simhash: int, sketch: bytes | None).
 *
 * The module's third function, near(), is the SimHash index's lookup: see
 * trawler/_simhash_near.c.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "_growable.h"

#define MAX_SHINGLE_WORDS 8
#define SKETCH_SIZE 64

/* simhash.py's _MULTIPLIERS_HIGH and _MULTIPLIERS_LOW (fixed forever). */
static const uint64_t MULT_HIGH[MAX_SHINGLE_WORDS] = {
    0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F,
    0x165667B1, 0xD3A2646D, 0xFD7046C5, 0xB55A4F09,
};
static const uint64_t MULT_LOW[MAX_SHINGLE_WORDS] = {
    0x8F5D3C07, 0xE6546B65, 0x4CF5AD43, 0x68E31DA5,
    0xA54FF53B, 0x510E527F, 0x9B05688D, 0x1F83D9AB,
};

/* Python's zlib.crc32(data): zlib's crc32, fed at most UINT_MAX bytes a call. */
static uint32_t word_crc(const unsigned char *data, size_t size)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (size > 0) {
        uInt part = size > (size_t)UINT_MAX ? UINT_MAX : (uInt)size;
        crc = crc32(crc, data, part);
        data += part;
        size -= part;
    }
    return (uint32_t)crc;
}

/* A growable array of the words' CRCs. */
typedef struct {
    uint32_t *items;
    size_t count, capacity;
} Crcs;

static int crcs_push(Crcs *crcs, uint32_t value)
{
    uint32_t *items = grown_for_one(crcs->items, crcs->count, &crcs->capacity,
                                    sizeof *items, 256);
    if (items == NULL)
        return -1;
    crcs->items = items;
    crcs->items[crcs->count++] = value;
    return 0;
}

/* Sorting the shingle hashes, in place, ascending. Hand-written because qsort's
 * comparison callback and merge buffer were 39 % of a page's fingerprinting (~70
 * hashes a page: 4 of 10 us); this quicksort inlines the comparison. A median of
 * three, insertion sort below 16 items, and qsort for what is left past 2 log2 n
 * levels: O(n log n) whatever a page's text makes of the hashes. */
static void insertion_sort(uint64_t *items, size_t count)
{
    for (size_t i = 1; i < count; i++) {
        uint64_t item = items[i];
        size_t j = i;
        for (; j > 0 && items[j - 1] > item; j--)
            items[j] = items[j - 1];
        items[j] = item;
    }
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void intro_sort(uint64_t *items, size_t count, int depth)
{
    while (count > 16) {
        if (depth-- == 0) {  /* partitions gone bad: libc's sort for the rest */
            qsort(items, count, sizeof *items, compare_u64);
            return;
        }
        uint64_t a = items[0], b = items[count / 2], c = items[count - 1];
        uint64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = 0, j = count - 1;
        for (;;) {  /* Hoare: items[..i) <= pivot <= items(j..] */
            while (items[i] < pivot)
                i++;
            while (items[j] > pivot)
                j--;
            if (i >= j)
                break;
            uint64_t swap = items[i];
            items[i++] = items[j];
            items[j--] = swap;
        }
        /* [0, j] and [j + 1, count): recurse into the smaller, loop on the larger. */
        size_t left = j + 1;
        if (left < count - left) {
            intro_sort(items, left, depth);
            items += left;
            count -= left;
        } else {
            intro_sort(items + left, count - left, depth);
            count = left;
        }
    }
    insertion_sort(items, count);
}

static void sort_u64(uint64_t *items, size_t count)
{
    int depth = 0;
    for (size_t n = count; n > 1; n >>= 1)
        depth += 2;
    intro_sort(items, count, depth);
}

/* low32(p) ^ high32(p): the "mum" mix of wyhash. */
static inline uint64_t fold(uint64_t p)
{
    return (p ^ (p >> 32)) & 0xFFFFFFFFu;
}

/* The distinct shingle hashes of the words, sorted, into hashes (count - width + 1
 * slots); returns how many. As distinct_shingle_hashes: a text shorter than
 * shingle_words words is one shingle of all its words. */
static size_t distinct_hashes(const uint32_t *crc, size_t words, int shingle_words,
                              uint64_t *hashes)
{
    size_t width = words < (size_t)shingle_words ? words : (size_t)shingle_words;
    size_t count = words - width + 1, distinct = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t high = 0, low = 0;
        for (size_t p = 0; p < width; p++) {  /* 32 x 32 bits: no wrap, as in numpy */
            high ^= crc[i + p] * MULT_HIGH[p];
            low ^= crc[i + p] * MULT_LOW[p];
        }
        hashes[i] = (fold(high) << 32) | fold(low);
    }
    sort_u64(hashes, count);
    for (size_t i = 0; i < count; i++)
        if (i == 0 || hashes[i] != hashes[i - 1])
            hashes[distinct++] = hashes[i];
    return distinct;
}

/* Bit i is 1 when at least half of the hashes have it (2 * votes >= count). Votes
 * in size_t: they cannot exceed the count of hashes held in memory. Counted eight
 * bits at a time: lanes[s] holds, in byte k, the votes for bit 8 k + s, emptied
 * into votes before a byte can pass 255 (8 additions a hash instead of 64). */
static uint64_t majority(const uint64_t *hashes, size_t count)
{
    const uint64_t low_bits = 0x0101010101010101u;
    size_t votes[64] = {0};
    uint64_t fingerprint = 0;
    for (size_t start = 0; start < count; start += 255) {
        uint64_t lanes[8] = {0};
        size_t end = count - start < 255 ? count : start + 255;
        for (size_t i = start; i < end; i++)
            for (int shift = 0; shift < 8; shift++)
                lanes[shift] += (hashes[i] >> shift) & low_bits;
        for (int shift = 0; shift < 8; shift++)
            for (int byte = 0; byte < 8; byte++)
                votes[8 * byte + shift] += (lanes[shift] >> (8 * byte)) & 0xFF;
    }
    for (int bit = 0; bit < 64; bit++)
        if (votes[bit] >= (count + 1) / 2)
            fingerprint |= (uint64_t)1 << bit;
    return fingerprint;
}

/* The sketch: the distinct top 32 bits of the first 64 sorted hashes, 4 bytes each,
 * little-endian; None for no hashes. */
static PyObject *sketch_bytes(const uint64_t *hashes, size_t count)
{
    unsigned char out[4 * SKETCH_SIZE];
    size_t size = 0;
    uint32_t last = 0;
    if (count == 0)
        Py_RETURN_NONE;
    for (size_t i = 0; i < count && i < SKETCH_SIZE; i++) {
        uint32_t top = (uint32_t)(hashes[i] >> 32);
        if (i > 0 && top == last)
            continue;  /* two may share 32 bits */
        for (int b = 0; b < 4; b++)
            out[size++] = (unsigned char)(top >> (8 * b));
        last = top;
    }
    return PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)size);
}

/* (simhash, sketch) of the words' CRCs. */
static PyObject *fingerprints(const Crcs *crcs, int shingle_words)
{
    if (crcs->count == 0)
        return Py_BuildValue("(iO)", 0, Py_None);
    uint64_t *hashes = PyMem_Malloc(crcs->count * sizeof *hashes);
    if (hashes == NULL)
        return PyErr_NoMemory();
    size_t count = distinct_hashes(crcs->items, crcs->count, shingle_words, hashes);
    PyObject *sketch = sketch_bytes(hashes, count);
    PyObject *simhash = PyLong_FromUnsignedLongLong(majority(hashes, count));
    PyMem_Free(hashes);
    if (sketch == NULL || simhash == NULL) {
        Py_XDECREF(sketch);
        Py_XDECREF(simhash);
        return NULL;
    }
    return Py_BuildValue("(NN)", simhash, sketch);
}

/* The result of an entry point: its fingerprints if ``ok`` (else NULL, the error
 * set), the CRCs freed either way. */
static PyObject *finish(Crcs *crcs, int shingle_words, int ok)
{
    PyObject *result = ok ? fingerprints(crcs, shingle_words) : NULL;
    PyMem_Free(crcs->items);
    return result;
}

static int check_width(int shingle_words)
{
    if (shingle_words >= 1 && shingle_words <= MAX_SHINGLE_WORDS)
        return 0;
    PyErr_Format(PyExc_ValueError, "shingle_words must be 1..%d, not %d", MAX_SHINGLE_WORDS,
                 shingle_words);
    return -1;
}

static PyObject *of_words(PyObject *module, PyObject *args)
{
    PyObject *words;
    int shingle_words;
    Crcs crcs = {NULL, 0, 0};
    (void)module;
    if (!PyArg_ParseTuple(args, "O!i:of_words", &PyList_Type, &words, &shingle_words) ||
        check_width(shingle_words) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(words); i++) {
        PyObject *word = PyList_GET_ITEM(words, i);
        if (!PyBytes_Check(word)) {
            PyErr_SetString(PyExc_TypeError, "of_words: words must be bytes");
            goto fail;
        }
        uint32_t crc = word_crc((const unsigned char *)PyBytes_AS_STRING(word),
                                (size_t)PyBytes_GET_SIZE(word));
        if (crcs_push(&crcs, crc) < 0)
            goto fail;
    }
    return finish(&crcs, shingle_words, 1);
fail:
    return finish(&crcs, shingle_words, 0);
}

/* simhash.py's _TOKEN_TABLE on ASCII, after lower(): [A-Za-z0-9_] are word bytes. */
static inline int is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

static PyObject *of_ascii(PyObject *module, PyObject *args)
{
    PyObject *text;
    int shingle_words;
    Crcs crcs = {NULL, 0, 0};
    unsigned char stack_word[256];
    (void)module;
    if (!PyArg_ParseTuple(args, "Ui:of_ascii", &text, &shingle_words) ||
        check_width(shingle_words) < 0)
        return NULL;
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "of_ascii: the text is not ASCII");
        return NULL;
    }
    const unsigned char *chars = PyUnicode_1BYTE_DATA(text);
    size_t length = (size_t)PyUnicode_GET_LENGTH(text), i = 0;
    while (i < length) {
        while (i < length && !is_word_byte(chars[i]))
            i++;
        size_t start = i;
        while (i < length && is_word_byte(chars[i]))
            i++;
        if (i == start)
            break;
        /* Lowercased into a copy: on the stack for all but absurdly long words. */
        size_t size = i - start;
        unsigned char *word = size <= sizeof stack_word ? stack_word : PyMem_Malloc(size);
        if (word == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (size_t k = 0; k < size; k++) {
            unsigned char c = chars[start + k];
            word[k] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
        }
        uint32_t crc = word_crc(word, size);
        if (word != stack_word)
            PyMem_Free(word);
        if (crcs_push(&crcs, crc) < 0)
            goto fail;
    }
    return finish(&crcs, shingle_words, 1);
fail:
    return finish(&crcs, shingle_words, 0);
}

/* SimHashIndex's lookup, in its own file (trawler/_simhash_near.c). */
PyObject *simhash_near(PyObject *module, PyObject *args);

static PyMethodDef methods[] = {
    {"of_words", of_words, METH_VARARGS,
     "of_words(words, shingle_words) -> (simhash, sketch | None): of simhash.words()."},
    {"of_ascii", of_ascii, METH_VARARGS,
     "of_ascii(text, shingle_words) -> (simhash, sketch | None): of an ASCII str."},
    {"near", simhash_near, METH_VARARGS,
     "near(fingerprint, radius, max_bits, blocks, tag_shift, offsets, positions, stored, "
     "merged, count) -> [(distance, position)]: SimHashIndex._near (see the C source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "trawler._fingerprint",
    "A page's SimHash and MinHash sketch in one call; the SimHash index's lookup.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fingerprint(void)
{
    return PyModule_Create(&module_def);
}
