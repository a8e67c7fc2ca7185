/* rocketrio.protocol._speedups: SEND_MESSAGE_V2's extFields to the V1 send header
 * (actors/broker/send/handlers.parse_send_header_v2 for the plain case). */
#include "speedups.h"

/* The one-letter keys in SendMessageRequestHeader's field order; interned at the first call. */
static const char *const NAMES[14] = {"a", "b", "c", "d", "e", "f", "g",
                                      "h", "i", "j", "k", "m", "l", "n"};
static PyObject *Keys[14];
/* how each field is read: s text (required), i int (required), S text or None, I int or None,
 * B "true"/"false" or None */
static const char KINDS[15] = "sssiiiiiSIBBIS";

/* A plain decimal int64 (an optional '-', 1 to 18 ASCII digits): what int() gives for it;
 * NULL with no exception for any other text (the caller declines: int() decides). */
static PyObject *
plain_int(PyObject *s)
{
    Py_ssize_t n;
    const char *b = PyUnicode_AsUTF8AndSize(s, &n);
    if (b == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_ssize_t i = b[0] == '-' ? 1 : 0;
    if (n - i < 1 || n - i > 18)
        return NULL;
    long long v = 0;
    for (Py_ssize_t j = i; j < n; j++) {
        if (b[j] < '0' || b[j] > '9')
            return NULL;
        v = v * 10 + (b[j] - '0');
    }
    return PyLong_FromLongLong(i ? -v : v);
}

/* send_header_v2(ext, header_type) -> header | None
 * header_type(a, b, c, int(d), int(e), int(f), int(g), int(h), i, int(j), bool(k), bool(m),
 * int(l), n) with the absent optional fields None, exactly what the Python path builds; None
 * when a required key is absent, a value is not a str, a number is not a plain decimal or a
 * bool not "true"/"false" (the Python path then decides, and names the bad field). */
PyObject *
send_header_v2(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(a[0]))
        Py_RETURN_NONE;
    if (Keys[0] == NULL) {
        for (int i = 0; i < 14; i++)
            if ((Keys[i] = PyUnicode_InternFromString(NAMES[i])) == NULL)
                return NULL;
    }
    PyObject *call[15] = {NULL};
    PyObject *res = Py_None;
    int i;
    for (i = 0; i < 14; i++) {
        PyObject *v = PyDict_GetItemWithError(a[0], Keys[i]);
        char kind = KINDS[i];
        if (v == NULL) {
            if (PyErr_Occurred()) {
                res = NULL;
                break;
            }
            if (kind == 's' || kind == 'i')
                break; /* a required field is absent */
            call[i + 1] = Py_NewRef(Py_None);
            continue;
        }
        if (!PyUnicode_CheckExact(v))
            break;
        if (kind == 's' || kind == 'S') {
            call[i + 1] = Py_NewRef(v);
        } else if (kind == 'B') {
            if (PyUnicode_CompareWithASCIIString(v, "false") == 0)
                call[i + 1] = Py_NewRef(Py_False);
            else if (PyUnicode_CompareWithASCIIString(v, "true") == 0)
                call[i + 1] = Py_NewRef(Py_True);
            else
                break;
        } else if ((call[i + 1] = plain_int(v)) == NULL) {
            if (PyErr_Occurred())
                res = NULL;
            break;
        }
    }
    if (i == 14)
        res = PyObject_Vectorcall(a[1], call + 1, 14 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    else if (res == Py_None)
        Py_INCREF(res);
    for (int j = 1; j < 15; j++)
        Py_XDECREF(call[j]);
    return res;
}
