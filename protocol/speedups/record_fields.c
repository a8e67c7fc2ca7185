/* rocketrio.protocol._speedups: record_fields, one plain message's stored record and what its
 * dispatch needs, in one call.
 *
 * Twin of rocketrio.storage.record_fields.record_fields_py: for a message whose properties are
 * a text (no stale "__CRC32#" pair) it appends the sealed record to `parts` (append_record, the
 * properties as their UTF-8 bytes) and returns (size, tagsCode, index hashes or None): the
 * tagsCode is Java's String.hashCode of TAGS (UTF-16 code units), the hashes those of KEYS
 * (space separated) and UNIQ_KEY from the seed "topic#" when `indexed` and the message is no
 * transaction ROLLBACK. What the reference treats apart (a properties value that is not a str,
 * a text not encodable, a CRC pair to drop, the SCHEDULE_TOPIC_XXXX and rmq_sys_wheel_timer
 * topics, whose tagsCode is a due time) it hands, with nothing appended, to the twin set by
 * configure_record_fields (None when none is set), which answers or raises. */
#include "speedups.h"

static PyObject *RecordFieldsPy; /* record_fields.record_fields_py, for what we decline */

/* configure_record_fields(record_fields_py) */
PyObject *
configure_record_fields(PyObject *self, PyObject *twin)
{
    set_ref(&RecordFieldsPy, twin);
    Py_RETURN_NONE;
}

/* What is declined: the twin's answer, or None without one. */
static PyObject *
declined(PyObject *const *a, Py_ssize_t nargs)
{
    if (RecordFieldsPy == NULL)
        Py_RETURN_NONE;
    return PyObject_Vectorcall(RecordFieldsPy, a, (size_t)nargs, NULL);
}

#define TRAN_ROLLBACK 0xC /* TRANSACTION_ROLLBACK_TYPE */

/* message_format.tags_hash_code of a UTF-8 value: Java String.hashCode over UTF-16 units. */
static int32_t
tags_code(const unsigned char *p, Py_ssize_t n)
{
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < n;) {
        uint32_t c = p[i];
        int more = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
        c &= more == 0 ? 0x7F : more == 1 ? 0x1F : more == 2 ? 0x0F : 0x07;
        for (int k = 1; k <= more && i + k < n; k++)
            c = (c << 6) | (p[i + k] & 0x3F);
        i += 1 + more;
        if (c >= 0x10000) { /* a surrogate pair: two units */
            h = 31 * h + (0xD800 + ((c - 0x10000) >> 10));
            c = 0xDC00 + ((c - 0x10000) & 0x3FF);
        }
        h = 31 * h + c;
    }
    return (int32_t)h;
}

/* Append the hash of key p[0..n) from the seed to hashes; 0, or -1 on error. */
static int
add_key(PyObject *hashes, uint32_t crc, uint32_t adler, const char *p, Py_ssize_t n)
{
    const unsigned char *k = (const unsigned char *)p;
    uint64_t h = ((uint64_t)key_crc32(crc, k, n) << 32) | key_adler32(adler, k, n);
    PyObject *o = PyLong_FromUnsignedLongLong(h);
    int r = o == NULL || PyList_Append(hashes, o) < 0;
    Py_XDECREF(o);
    return r ? -1 : 0;
}

/* storage.dispatch_request.key_hashes of the text's KEYS and UNIQ_KEY: a list, None when the
 * message has neither, NULL on error. */
static PyObject *
key_hashes_of(PyObject *topic, const char *b, Py_ssize_t n)
{
    Py_ssize_t klen = 0, ulen = 0;
    Py_ssize_t k = find_prop(b, n, "KEYS\x01", 5, &klen);
    Py_ssize_t u = find_prop(b, n, "UNIQ_KEY\x01", 9, &ulen);
    if (k < 0 && u < 0)
        Py_RETURN_NONE;
    Py_ssize_t tn;
    const unsigned char *t = (const unsigned char *)PyUnicode_AsUTF8AndSize(topic, &tn);
    PyObject *hashes = t == NULL ? NULL : PyList_New(0);
    if (hashes == NULL)
        return NULL;
    uint32_t crc = key_crc32(key_crc32(0, t, tn), (const unsigned char *)"#", 1);
    uint32_t adler = key_adler32(key_adler32(1, t, tn), (const unsigned char *)"#", 1);
    for (Py_ssize_t i = k; k >= 0 && i <= k + klen;) {
        Py_ssize_t e = find_byte(b, i, k + klen, ' ');
        if (e < 0)
            e = k + klen;
        if (e > i && add_key(hashes, crc, adler, b + i, e - i) < 0)
            goto fail;
        i = e + 1;
    }
    if (u >= 0 && add_key(hashes, crc, adler, b + u, ulen) < 0)
        goto fail;
    return hashes;
fail:
    Py_DECREF(hashes);
    return NULL;
}

/* What follows the record: (size, tagsCode, hashes | None); NULL on error. */
static PyObject *
fields_after(PyObject *const *a, PyObject *size, const char *b, Py_ssize_t n, int index)
{
    Py_ssize_t tlen = 0;
    Py_ssize_t t = find_prop(b, n, "TAGS\x01", 5, &tlen);
    int32_t code = t < 0 ? 0 : tags_code((const unsigned char *)b + t, tlen);
    PyObject *hashes = index ? key_hashes_of(a[1], b, n) : Py_NewRef(Py_None);
    if (hashes == NULL)
        return NULL;
    PyObject *out = Py_BuildValue("(OiN)", size, (int)code, hashes);
    return out;
}

/* record_fields(parts, topic, queue_id, body, flag, properties, sys_flag, born_timestamp,
 *               born_host, store_timestamp, store_host, reconsume_times,
 *               prepared_transaction_offset, queue_offset, physical_offset, indexed)
 *   -> (size, tags_code, hashes | None), by the twin for what is declined */
PyObject *
record_fields(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 16 || !PyUnicode_CheckExact(a[1]) || !PyUnicode_CheckExact(a[5]) ||
        !PyLong_CheckExact(a[6]))
        return declined(a, nargs);
    if (PyUnicode_CompareWithASCIIString(a[1], "SCHEDULE_TOPIC_XXXX") == 0 ||
        PyUnicode_CompareWithASCIIString(a[1], "rmq_sys_wheel_timer") == 0)
        return declined(a, nargs);
    long long sys_flag;
    Py_ssize_t n;
    const char *b = PyUnicode_AsUTF8AndSize(a[5], &n);
    if (b == NULL || !fits_ll(a[6], LLONG_MIN, LLONG_MAX, &sys_flag)) {
        PyErr_Clear();
        return declined(a, nargs);
    }
    if (contains(b, n, "__CRC32#", 8))
        return declined(a, nargs);
    int index = PyObject_IsTrue(a[15]);
    if (index < 0)
        return NULL;
    PyObject *raw = PyBytes_FromStringAndSize(b, n);
    if (raw == NULL)
        return NULL;
    PyObject *args[15];
    for (int i = 0; i < 15; i++)
        args[i] = a[i];
    args[5] = raw;
    PyObject *size = append_record(self, args, 15);
    Py_DECREF(raw);
    if (size == NULL)
        return NULL;
    PyObject *out = fields_after(a, size, b, n, index && (sys_flag & TRAN_ROLLBACK) != TRAN_ROLLBACK);
    Py_DECREF(size);
    return out;
}
