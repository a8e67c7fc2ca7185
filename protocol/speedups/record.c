/* rocketrio.protocol._speedups: append_record, one stored record of put_messages. */
#include "speedups.h"

static PyObject *AppendRecordPy; /* message_build._append_record_py, for what we decline */

/* configure_record(append_record_py) */
PyObject *
configure_record(PyObject *self, PyObject *twin)
{
    set_ref(&AppendRecordPy, twin);
    Py_RETURN_NONE;
}

/* A (ip bytes of 4 or 16, int32 port) host tuple, else 0 to decline. */
static int
host_of(PyObject *h, const char **ip, Py_ssize_t *ip_len, long long *port)
{
    if (!PyTuple_CheckExact(h) || PyTuple_GET_SIZE(h) != 2 ||
        !PyBytes_CheckExact(PyTuple_GET_ITEM(h, 0)))
        return 0;
    *ip = PyBytes_AS_STRING(PyTuple_GET_ITEM(h, 0));
    *ip_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(h, 0));
    return (*ip_len == 4 || *ip_len == 16) &&
           fits_ll(PyTuple_GET_ITEM(h, 1), INT32_MIN, INT32_MAX, port);
}

/* The checked arguments of append_record. */
typedef struct {
    const char *topic, *body, *props, *born_ip, *store_ip;
    Py_ssize_t topic_len, body_len, props_len, born_len, store_len;
    long long queue_id, flag, sys_flag, born_ts, born_port, store_ts, store_port, reconsume,
        prepared, qo, phy;
} RecordArgs;

/* append_record's arguments when they take the fast path (V1 topic, bytes, ints in their
 * widths, properties that fit); 0 declines. */
static int
record_args(PyObject *const *a, RecordArgs *r)
{
    const long long I32 = INT32_MAX, I64 = LLONG_MAX;
    if (!PyList_CheckExact(a[0]) || !PyUnicode_CheckExact(a[1]) || !PyBytes_CheckExact(a[3]) ||
        !PyBytes_CheckExact(a[5]))
        return 0;
    r->topic = PyUnicode_AsUTF8AndSize(a[1], &r->topic_len);
    if (r->topic == NULL) {
        PyErr_Clear();
        return 0;
    }
    r->body = PyBytes_AS_STRING(a[3]);
    r->body_len = PyBytes_GET_SIZE(a[3]);
    r->props = PyBytes_AS_STRING(a[5]);
    r->props_len = PyBytes_GET_SIZE(a[5]);
    return r->topic_len <= 127 && r->body_len <= I32 && fits_ll(a[2], -I32 - 1, I32, &r->queue_id) &&
           fits_ll(a[4], -I32 - 1, I32, &r->flag) && fits_ll(a[6], -I32 - 1, I32, &r->sys_flag) &&
           fits_ll(a[7], -I64 - 1, I64, &r->born_ts) &&
           host_of(a[8], &r->born_ip, &r->born_len, &r->born_port) &&
           fits_ll(a[9], -I64 - 1, I64, &r->store_ts) &&
           host_of(a[10], &r->store_ip, &r->store_len, &r->store_port) &&
           fits_ll(a[11], -I32 - 1, I32, &r->reconsume) &&
           fits_ll(a[12], -I64 - 1, I64, &r->prepared) && fits_ll(a[13], -I64 - 1, I64, &r->qo) &&
           fits_ll(a[14], -I64 - 1, I64, &r->phy);
}

/* The fixed part of a record (totalSize .. bodyLen) at w; returns its length. */
static Py_ssize_t
record_head(char *w, const RecordArgs *r, Py_ssize_t size, unsigned long body_crc)
{
    long long sys_flag = r->sys_flag & ~0x30LL;
    if (r->born_len == 16)
        sys_flag |= 0x10; /* BORNHOST_V6_FLAG */
    if (r->store_len == 16)
        sys_flag |= 0x20; /* STOREHOSTADDRESS_V6_FLAG */
    char *p = w;
    put_be32(p, (uint32_t)size);
    put_be32(p + 4, (uint32_t)-626843481); /* MAGIC_CODE_V1 */
    put_be32(p + 8, (uint32_t)(body_crc & 0x7FFFFFFF));
    put_be32(p + 12, (uint32_t)r->queue_id);
    put_be32(p + 16, (uint32_t)r->flag);
    put_be64(p + 20, (uint64_t)r->qo);
    put_be64(p + 28, (uint64_t)r->phy);
    put_be32(p + 36, (uint32_t)sys_flag);
    put_be64(p + 40, (uint64_t)r->born_ts);
    p += 48;
    memcpy(p, r->born_ip, (size_t)r->born_len);
    put_be32(p + r->born_len, (uint32_t)r->born_port);
    p += r->born_len + 4;
    put_be64(p, (uint64_t)r->store_ts);
    memcpy(p + 8, r->store_ip, (size_t)r->store_len);
    put_be32(p + 8 + r->store_len, (uint32_t)r->store_port);
    p += 12 + r->store_len;
    put_be32(p, (uint32_t)r->reconsume);
    put_be64(p + 4, (uint64_t)r->prepared);
    put_be32(p + 12, (uint32_t)r->body_len);
    return p + 16 - w;
}

/* append_record(out, topic, queue_id, body, flag, properties, sys_flag, born_timestamp,
 *               born_host, store_timestamp, store_host, reconsume_times,
 *               prepared_transaction_offset, queue_offset, physical_offset) -> size
 * Twin of message_build._append_record_py: appends the same sealed record (as one part) and
 * returns its size; anything off the fast path (a V2 topic, a field out of its width, too
 * long properties, other types) is handed to the twin, which appends or raises. */
PyObject *
append_record(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    RecordArgs r;
    if (nargs != 15 || Crc32 == NULL || AppendRecordPy == NULL || !record_args(a, &r))
        goto twin;
    int sep = r.props_len > 0 && r.props[r.props_len - 1] != 2;
    Py_ssize_t props_len = r.props_len + sep + 20;
    Py_ssize_t head_len = 80 + r.born_len + r.store_len; /* message_format._FIXED */
    Py_ssize_t size = head_len + r.body_len + 1 + r.topic_len + 2 + props_len;
    if (props_len > 32767 || size > INT32_MAX)
        goto twin;
    long long body_crc = crc_of(r.body, r.body_len, 0);
    PyObject *rec = body_crc < 0 ? NULL : PyBytes_FromStringAndSize(NULL, size);
    if (rec == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(rec);
    record_head(w, &r, size, (unsigned long)body_crc);
    char *p = w + head_len;
    memcpy(p, r.body, (size_t)r.body_len);
    p += r.body_len;
    p[0] = (char)r.topic_len;
    memcpy(p + 1, r.topic, (size_t)r.topic_len);
    p += 1 + r.topic_len;
    p[0] = (char)(props_len >> 8);
    p[1] = (char)props_len;
    memcpy(p + 2, r.props, (size_t)r.props_len);
    p += 2 + r.props_len;
    if (sep)
        *p++ = 2;
    long long seal = record_crc(head_len, w, size, r.body_len, (unsigned long)body_crc);
    if (seal >= 0)
        write_trailer(p, seal);
    if (seal < 0 || PyList_Append(a[0], rec) < 0) {
        Py_DECREF(rec);
        return NULL;
    }
    Py_DECREF(rec);
    return PyLong_FromSsize_t(size);
twin:
    if (PyErr_Occurred())
        return NULL;
    return PyObject_Vectorcall(AppendRecordPy, a, (size_t)nargs, NULL);
}
