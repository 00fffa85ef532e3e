/* Room for one more item in an array on PyMem's heap, shared by the C sources of
 * trawler._fingerprint (_fingerprint.c's word CRCs, _simhash_near.c's hits). */
#ifndef TRAWLER_GROWABLE_H
#define TRAWLER_GROWABLE_H

#include <Python.h>

/* ``items`` (``count`` used of ``*capacity``, each ``item_size`` bytes) with room
 * for one more: itself, or a copy twice as big (``first`` items when empty); NULL
 * with MemoryError set when that fails, ``items`` then left as it was. */
static void *grown_for_one(void *items, size_t count, size_t *capacity, size_t item_size,
                           size_t first)
{
    if (count < *capacity)
        return items;
    size_t wanted = *capacity ? 2 * *capacity : first;
    void *bigger = PyMem_Realloc(items, wanted * item_size);
    if (bigger == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    *capacity = wanted;
    return bigger;
}

#endif
