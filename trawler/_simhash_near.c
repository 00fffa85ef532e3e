/* The near-duplicate index's lookup, SimHashIndex._near (simhash_index.py), for
 * blocks of at most 16 bits (k >= 3); part of the trawler._fingerprint extension.
 *
 * near(fingerprint, radius, max_bits, blocks, tag_shift, offsets, positions, stored,
 *      merged, count) -> [(distance, position), ...], sorted, each position once:
 * the stored fingerprints within max_bits of ``fingerprint`` and within ``radius``
 * (0 or 1) bits of it in some block.
 *
 * The index's arrays, read through the buffer protocol: ``offsets`` (intp) says where
 * each key's bucket starts in ``positions`` (uint32), a key being
 * table << tag_shift | block; ``stored`` (uint64) holds the fingerprints by position,
 * those from ``merged`` to ``count`` not yet in the buckets (the tail). numpy does this
 * in ~15 calls on arrays of a few hundred items, their per-call cost most of the
 * cost: ~14 us a lookup on the crawl benchmark's clustered fingerprints, 3.2 here
 * (bench/RESULTS.md, issue 14, session 35). The numpy code stays, for k < 3 and
 * builds without a compiler, and as the reference tests/unit/test_simhash_near_c.py
 * compares this with.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "_growable.h"

#define MAX_BLOCKS 16
#define MAX_BLOCK_BITS 16
#define PREFETCH_AHEAD 8

#if defined(__GNUC__) || defined(__clang__)
#define POPCOUNT64(x) __builtin_popcountll(x)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define POPCOUNT64(x) popcount_swar(x)
#define PREFETCH(address) ((void)0)
#endif

typedef struct {
    unsigned shift, width;
    uint64_t mask;
} Block;

/* The numpy arrays as read through the buffer protocol. */
typedef struct {
    const Py_ssize_t *offsets;
    const uint32_t *positions;
    const uint64_t *stored;
    size_t key_limit, position_count, merged, count;
} Tables;

/* Hits packed distance << 32 | position: sorting them sorts as (distance, position). */
typedef struct {
    uint64_t *items;
    size_t count, capacity;
} Hits;

static int hits_push(Hits *hits, int distance, uint64_t position)
{
    uint64_t *items = grown_for_one(hits->items, hits->count, &hits->capacity,
                                    sizeof *items, 64);
    if (items == NULL)
        return -1;
    hits->items = items;
    hits->items[hits->count++] = (uint64_t)distance << 32 | position;
    return 0;
}

static inline int popcount_swar(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555u;
    x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Fu;
    return (int)((x * 0x0101010101010101u) >> 56);
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int corrupt(void)
{
    PyErr_SetString(PyExc_ValueError, "near: the index's arrays disagree");
    return -1;
}

/* [start, end) in ``positions`` of the bucket of ``key``. */
static int bucket(const Tables *t, uint64_t key, Py_ssize_t *range)
{
    if (key + 1 >= t->key_limit)
        return corrupt();
    range[0] = t->offsets[key];
    range[1] = t->offsets[key + 1];
    if (range[0] < 0 || range[1] < range[0] || (size_t)range[1] > t->position_count)
        return corrupt();
    return 0;
}

/* Every table's bucket of the fingerprint's block, and with radius 1 the buckets of
 * the blocks one bit away; their fingerprints within ``max_bits`` (no block test: a
 * bucket holds only fingerprints with the probed block). All the buckets are found
 * before any is read, and each stored fingerprint is prefetched a few entries ahead:
 * at a million random fingerprints (~1,000 entries a lookup, each a cache miss) the
 * two took a lookup from ~36 to ~24 us (bench/RESULTS.md, issue 14, session 35). */
static int scan_buckets(const Tables *t, const Block *blocks, int block_count,
                        unsigned tag_shift, uint64_t fingerprint, int radius, int max_bits,
                        Hits *hits)
{
    Py_ssize_t ranges[MAX_BLOCKS * (1 + MAX_BLOCK_BITS)][2];
    int count = 0;
    for (int table = 0; table < block_count; table++) {
        const Block *b = &blocks[table];
        uint64_t own = (uint64_t)table << tag_shift | ((fingerprint >> b->shift) & b->mask);
        if (bucket(t, own, ranges[count++]) < 0)
            return -1;
        for (unsigned bit = 0; radius == 1 && bit < b->width; bit++)
            if (bucket(t, own ^ (uint64_t)1 << bit, ranges[count++]) < 0)
                return -1;
    }
    for (int r = 0; r < count; r++) {
        for (Py_ssize_t i = ranges[r][0], end = ranges[r][1]; i < end; i++) {
            if (i + PREFETCH_AHEAD < end && t->positions[i + PREFETCH_AHEAD] < t->merged)
                PREFETCH(&t->stored[t->positions[i + PREFETCH_AHEAD]]);
            uint32_t position = t->positions[i];
            if (position >= t->merged)
                return corrupt();
            int distance = POPCOUNT64(t->stored[position] ^ fingerprint);
            if (distance <= max_bits && hits_push(hits, distance, position) < 0)
                return -1;
        }
    }
    return 0;
}

/* The tail, every fingerprint tested, with the rule the buckets apply: within
 * ``radius`` bits in some block. */
static int scan_tail(const Tables *t, const Block *blocks, int block_count,
                     uint64_t fingerprint, int radius, int max_bits, Hits *hits)
{
    for (size_t position = t->merged; position < t->count; position++) {
        uint64_t difference = t->stored[position] ^ fingerprint;
        int distance = POPCOUNT64(difference);
        if (distance > max_bits)
            continue;
        for (int i = 0; i < block_count; i++) {
            if (POPCOUNT64((difference >> blocks[i].shift) & blocks[i].mask) <= radius) {
                if (hits_push(hits, distance, position) < 0)
                    return -1;
                break;
            }
        }
    }
    return 0;
}

/* (shift, mask) pairs into ``blocks``; their count, or -1. */
static int parse_blocks(PyObject *pairs, Block *blocks)
{
    if (!PyTuple_Check(pairs) || PyTuple_GET_SIZE(pairs) < 1 ||
        PyTuple_GET_SIZE(pairs) > MAX_BLOCKS) {
        PyErr_SetString(PyExc_ValueError, "near: blocks must be a tuple of 1..16 pairs");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pairs); i++) {
        Block *b = &blocks[i];
        unsigned long long mask;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pairs, i), "IK:near", &b->shift, &mask))
            return -1;
        if (b->shift >= 64) {
            PyErr_SetString(PyExc_ValueError, "near: a block's shift must be below 64");
            return -1;
        }
        b->mask = mask;
        for (b->width = 0; b->width < 64 && mask >> b->width; b->width++)
            ;
        if (b->width > MAX_BLOCK_BITS) {
            PyErr_SetString(PyExc_ValueError, "near: blocks of at most 16 bits (k >= 3)");
            return -1;
        }
    }
    return (int)PyTuple_GET_SIZE(pairs);
}

/* The hits as a list of (distance, position), sorted, repeats (a fingerprint found
 * through two tables) dropped. */
static PyObject *hits_list(Hits *hits)
{
    PyObject *list = PyList_New(0);
    qsort(hits->items, hits->count, sizeof *hits->items, compare_u64);
    for (size_t i = 0; list != NULL && i < hits->count; i++) {
        uint64_t hit = hits->items[i];
        if (i > 0 && hit == hits->items[i - 1])
            continue;
        PyObject *pair = Py_BuildValue("(II)", (unsigned)(hit >> 32), (unsigned)hit);
        if (pair == NULL || PyList_Append(list, pair) < 0)
            Py_CLEAR(list);
        Py_XDECREF(pair);
    }
    return list;
}

static int check_tables(Tables *t, const Py_buffer *offsets, const Py_buffer *positions,
                        const Py_buffer *stored, Py_ssize_t merged, Py_ssize_t count)
{
    if (offsets->itemsize != sizeof(Py_ssize_t) || positions->itemsize != 4 ||
        stored->itemsize != 8 || merged < 0 || count < merged ||
        (size_t)count > (size_t)stored->len / 8 || count > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "near: offsets intp, positions uint32, stored uint64 holding count");
        return -1;
    }
    t->offsets = offsets->buf;
    t->positions = positions->buf;
    t->stored = stored->buf;
    t->key_limit = (size_t)offsets->len / sizeof(Py_ssize_t);
    t->position_count = (size_t)positions->len / 4;
    t->merged = (size_t)merged;
    t->count = (size_t)count;
    return 0;
}

PyObject *simhash_near(PyObject *module, PyObject *args)
{
    unsigned long long fingerprint;
    int radius, max_bits, block_count = -1;
    unsigned tag_shift;
    PyObject *pairs, *result = NULL;
    Py_buffer offsets, positions, stored;
    Py_ssize_t merged, count;
    Block blocks[MAX_BLOCKS];
    Tables t;
    Hits hits = {NULL, 0, 0};
    (void)module;
    if (!PyArg_ParseTuple(args, "KiiOIy*y*y*nn:near", &fingerprint, &radius, &max_bits,
                          &pairs, &tag_shift, &offsets, &positions, &stored, &merged, &count))
        return NULL;
    if (radius != 0 && radius != 1)
        PyErr_SetString(PyExc_ValueError, "near: radius must be 0 or 1");
    else if (tag_shift >= 64)
        PyErr_SetString(PyExc_ValueError, "near: tag_shift must be below 64");
    else if ((block_count = parse_blocks(pairs, blocks)) >= 0 &&
             check_tables(&t, &offsets, &positions, &stored, merged, count) == 0 &&
             scan_buckets(&t, blocks, block_count, tag_shift, fingerprint, radius, max_bits,
                          &hits) == 0 &&
             scan_tail(&t, blocks, block_count, fingerprint, radius, max_bits, &hits) == 0)
        result = hits_list(&hits);
    PyMem_Free(hits.items);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&positions);
    PyBuffer_Release(&stored);
    return result;
}
