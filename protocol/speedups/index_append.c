/* rocketrio.protocol._speedups: index_entries, the key index's entries of a run of keys.
 *
 * Twin of rocketrio.storage.index_segment._index_entries_py: for keys a..b-1 (the high half of
 * each hash picks the slot), the 20-byte entries "<IIqI" (low half, high half, CommitLog
 * offset, the slot's previous newest entry), each slot then pointing at its new entry and its
 * page marked dirty. Returns (entries, new count), or None, having changed nothing, for input
 * it does not take (a value out of its width, a slot table not of u32, a count past u32); the
 * Python twin then runs and raises where it must. */
#include "speedups.h"

#define PAGE_SHIFT 10 /* index_segment._PAGE_SHIFT: 1024 slots, one 4 KiB page */

static inline void
put_le32(char *p, uint32_t v)
{
    p[0] = (char)v;
    p[1] = (char)(v >> 8);
    p[2] = (char)(v >> 16);
    p[3] = (char)(v >> 24);
}

/* The three lists' items a..b-1 in range (u32, u32, int64); 0 declines. */
static int
all_fit(PyObject *his, PyObject *los, PyObject *offsets, Py_ssize_t a, Py_ssize_t b)
{
    long long v;
    for (Py_ssize_t i = a; i < b; i++)
        if (!fits_ll(PyList_GET_ITEM(his, i), 0, UINT32_MAX, &v) ||
            !fits_ll(PyList_GET_ITEM(los, i), 0, UINT32_MAX, &v) ||
            !fits_ll(PyList_GET_ITEM(offsets, i), LLONG_MIN, LLONG_MAX, &v))
            return 0;
    return 1;
}

/* The run into `out` (20 bytes a key), slots and dirty pages updated. */
static void
write_entries(char *out, uint32_t *slots, char *dirty, Py_ssize_t ns, PyObject *his,
              PyObject *los, PyObject *offsets, Py_ssize_t a, Py_ssize_t b, long long count)
{
    for (Py_ssize_t i = a; i < b; i++, out += 20) {
        uint32_t hi = (uint32_t)PyLong_AsUnsignedLong(PyList_GET_ITEM(his, i));
        uint32_t lo = (uint32_t)PyLong_AsUnsignedLong(PyList_GET_ITEM(los, i));
        long long off = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));
        Py_ssize_t s = (Py_ssize_t)(hi % (uint64_t)ns);
        count++;
        put_le32(out, lo);
        put_le32(out + 4, hi);
        put_le32(out + 8, (uint32_t)(uint64_t)off);
        put_le32(out + 12, (uint32_t)((uint64_t)off >> 32));
        put_le32(out + 16, slots[s]);
        slots[s] = (uint32_t)count;
        dirty[s >> PAGE_SHIFT] = 1;
    }
}

/* index_entries(slots, dirty, slot_num, his, los, offsets, a, b, count) -> (bytes, int) | None */
PyObject *
index_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "index_entries takes 9 arguments");
        return NULL;
    }
    PyObject *his = args[3], *los = args[4], *offsets = args[5];
    long long ns, a, b, count;
    if (!PyList_CheckExact(his) || !PyList_CheckExact(los) || !PyList_CheckExact(offsets) ||
        !fits_ll(args[2], 1, PY_SSIZE_T_MAX, &ns) || !fits_ll(args[6], 0, PY_SSIZE_T_MAX, &a) ||
        !fits_ll(args[7], a, PY_SSIZE_T_MAX, &b) || !fits_ll(args[8], 0, UINT32_MAX, &count) ||
        PyList_GET_SIZE(his) != PyList_GET_SIZE(offsets) ||
        PyList_GET_SIZE(los) != PyList_GET_SIZE(offsets) || b > PyList_GET_SIZE(offsets) ||
        count + (b - a) > UINT32_MAX || !all_fit(his, los, offsets, a, b))
        Py_RETURN_NONE;
    Py_buffer sv, dv;
    if (PyObject_GetBuffer(args[0], &sv, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (PyObject_GetBuffer(args[1], &dv, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&sv);
        Py_RETURN_NONE;
    }
    PyObject *out = NULL;
    if (sv.itemsize == 4 && sv.format != NULL && strcmp(sv.format, "I") == 0 &&
        sv.len / 4 == ns && dv.len > (ns - 1) >> PAGE_SHIFT) {
        PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(b - a) * 20);
        if (data != NULL) {
            write_entries(PyBytes_AS_STRING(data), sv.buf, dv.buf, (Py_ssize_t)ns, his, los,
                          offsets, a, b, count);
            out = Py_BuildValue("(NL)", data, count + (b - a));
        }
    } else {
        out = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&dv);
    PyBuffer_Release(&sv);
    return out;
}
