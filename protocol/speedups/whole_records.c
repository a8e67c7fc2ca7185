/* rocketrio.protocol._speedups: whole_records, how many leading bytes of replicated data are
 * whole records.
 *
 * Twin of rocketrio.actors.broker.ha.slave_core._whole_records_length_py, which a slave runs
 * on every transfer packet it reads (a Python loop over each record's header, about 0.5 us a
 * 1 KiB record): walk the records' (total size, magic) headers from CommitLog `offset`; a
 * BLANK record covers the rest of its segment; stop before a record that is not all there.
 * Returns that length, or None for input it does not take (a header that is neither a record
 * nor a BLANK of its segment's rest, offsets out of range, not a buffer): the Python twin then
 * runs and raises the StreamError it always raised. */
#include "speedups.h"

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MAGIC_V2 ((int32_t)0xDAA320AB)
#define BLANK_MAGIC ((int32_t)0xCBD43194)

/* whole_records(data, offset, segment_size) -> int | None */
PyObject *
whole_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "whole_records takes 3 arguments");
        return NULL;
    }
    long long offset, seg;
    if (!fits_ll(args[1], 0, LLONG_MAX, &offset) || !fits_ll(args[2], 1, LLONG_MAX, &seg))
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, pos = 0;
    int declined = offset > LLONG_MAX - (long long)n; /* offset + pos must not overflow */
    while (!declined && n - pos >= 8) {
        int32_t total = get_be32(p + pos), magic = get_be32(p + pos + 4);
        long long at = offset + (long long)pos;
        if (magic == BLANK_MAGIC) {
            if ((long long)total != seg - at % seg) {
                declined = 1;
                break;
            }
        }
        else if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total <= 8) {
            declined = 1;
            break;
        }
        if ((Py_ssize_t)total > n - pos)
            break;
        pos += total;
    }
    PyBuffer_Release(&view);
    if (declined)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(pos);
}
