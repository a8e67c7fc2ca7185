/* rocketrio.protocol._speedups: an ACK_MESSAGE's extFields and its receipt (extraInfo) read in
 * one call (protocol/pop_headers.ack_request_py, the plain case). */
#include "speedups.h"

static const char *const ACK_NAMES[5] = {"consumerGroup", "topic", "queueId", "extraInfo",
                                         "offset"};
static PyObject *AckKeys[5];

/* A plain decimal int64 in b[0:n] (an optional '-', 1 to 18 ASCII digits): 0 and *out set to
 * what int() gives for it; -1 for any other text (the caller declines: int() decides). */
static int
plain_decimal(const char *b, Py_ssize_t n, long long *out)
{
    Py_ssize_t i = n > 0 && b[0] == '-' ? 1 : 0;
    if (n - i < 1 || n - i > 18)
        return -1;
    long long v = 0;
    for (Py_ssize_t j = i; j < n; j++) {
        if (b[j] < '0' || b[j] > '9')
            return -1;
        v = v * 10 + (b[j] - '0');
    }
    *out = i ? -v : v;
    return 0;
}

/* `plain_decimal` of an ASCII str; -1 for a str that is not ASCII. */
static int
plain_str_int(PyObject *s, long long *out)
{
    if (!PyUnicode_IS_ASCII(s))
        return -1;
    return plain_decimal((const char *)PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s), out);
}

/* ack_request(ext) -> (consumerGroup, topic, queueId, extraInfo, offset, ck_offset, pop_time,
 * revive_qid, retry, broker_name) | None
 * What ack_request_py gives for a plain ACK: the five fields present and each a str, queueId
 * and offset plain decimals, extraInfo ASCII with 7 or 8 fields split by single spaces whose
 * numbers (0-3, 6 and 7) are plain decimals. None for anything else (the Python steps then
 * decide: they may take it, or refuse it with their own error). */
PyObject *
ack_request(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyDict_CheckExact(a[0]))
        Py_RETURN_NONE;
    if (AckKeys[0] == NULL) {
        for (int i = 0; i < 5; i++)
            if ((AckKeys[i] = PyUnicode_InternFromString(ACK_NAMES[i])) == NULL)
                return NULL;
    }
    PyObject *v[5]; /* borrowed: nothing below runs Python code */
    for (int i = 0; i < 5; i++) {
        v[i] = PyDict_GetItemWithError(a[0], AckKeys[i]);
        if (v[i] == NULL) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        if (!PyUnicode_CheckExact(v[i]))
            Py_RETURN_NONE;
    }
    long long queue_id, offset;
    if (plain_str_int(v[2], &queue_id) < 0 || plain_str_int(v[4], &offset) < 0)
        Py_RETURN_NONE;
    PyObject *extra = v[3];
    if (!PyUnicode_IS_ASCII(extra))
        Py_RETURN_NONE;
    const char *e = (const char *)PyUnicode_DATA(extra);
    Py_ssize_t n = PyUnicode_GET_LENGTH(extra);
    Py_ssize_t start[8], len[8];
    int count = 0;
    Py_ssize_t from = 0;
    for (Py_ssize_t j = 0; j <= n; j++) {
        if (j < n && e[j] != ' ')
            continue;
        if (count == 8)
            Py_RETURN_NONE; /* a ninth field */
        start[count] = from;
        len[count] = j - from;
        count++;
        from = j + 1;
    }
    if (count != 7 && count != 8)
        Py_RETURN_NONE;
    long long num[8];
    static const int NUMBERS[6] = {0, 1, 2, 3, 6, 7};
    for (int k = 0; k < 6; k++) {
        int f = NUMBERS[k];
        if (f >= count)
            break;
        if (plain_decimal(e + start[f], len[f], &num[f]) < 0)
            Py_RETURN_NONE;
    }
    PyObject *out = PyTuple_New(10);
    if (out == NULL)
        return NULL;
    PyTuple_SET_ITEM(out, 0, Py_NewRef(v[0]));
    PyTuple_SET_ITEM(out, 1, Py_NewRef(v[1]));
    PyTuple_SET_ITEM(out, 3, Py_NewRef(extra));
    PyObject *items[7] = {
        PyLong_FromLongLong(queue_id),
        PyLong_FromLongLong(offset),
        PyLong_FromLongLong(num[0]),
        PyLong_FromLongLong(num[1]),
        PyLong_FromLongLong(num[3]),
        PyUnicode_Substring(extra, start[4], start[4] + len[4]),
        PyUnicode_Substring(extra, start[5], start[5] + len[5]),
    };
    static const int AT[7] = {2, 4, 5, 6, 7, 8, 9};
    int failed = 0;
    for (int k = 0; k < 7; k++) {
        if (items[k] == NULL) {
            failed = 1;
            items[k] = Py_NewRef(Py_None);
        }
        PyTuple_SET_ITEM(out, AT[k], items[k]);
    }
    if (failed) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}
