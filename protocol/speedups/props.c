/* rocketrio.protocol._speedups: a message's properties text as the store writes and indexes
 * it (storage/dispatch_request.wire_properties for a text without a stale CRC pair). */
#include "speedups.h"

static const char *const WIRE_KEYS[3] = {"TAGS\x01", "KEYS\x01", "UNIQ_KEY\x01"};

/* wire_text_properties(props) -> (encoded, TAGS, KEYS, UNIQ_KEY) | None
 * Twin of wire_properties(props) for a str with no "__CRC32#" in it: its UTF-8 bytes and the
 * three values find_property gives (the last non-empty value of a pair whose key starts at a
 * property boundary; the search runs over the UTF-8 bytes, the keys and separators being
 * ASCII). None for anything else (not a str, not encodable, a CRC pair to drop): the Python
 * path then answers, or raises. */
PyObject *
wire_text_properties(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyUnicode_CheckExact(a[0]))
        Py_RETURN_NONE;
    Py_ssize_t n;
    const char *b = PyUnicode_AsUTF8AndSize(a[0], &n);
    if (b == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (contains(b, n, "__CRC32#", 8))
        Py_RETURN_NONE;
    PyObject *out = PyTuple_New(4);
    if (out == NULL)
        return NULL;
    PyObject *encoded = PyBytes_FromStringAndSize(b, n);
    if (encoded == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, encoded);
    for (int i = 0; i < 3; i++) {
        Py_ssize_t vlen = 0;
        Py_ssize_t v = find_prop(b, n, WIRE_KEYS[i], (Py_ssize_t)strlen(WIRE_KEYS[i]), &vlen);
        PyObject *value = v < 0 ? Py_NewRef(Py_None) : PyUnicode_DecodeUTF8(b + v, vlen, NULL);
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i + 1, value);
    }
    return out;
}
