/* rocketrio.protocol._speedups: check_replicated, a slave's check of the master's bytes.
 *
 * Twin of rocketrio.storage.commitlog.records._check_replicated_py for a chunk whose message
 * records all have the usual shape (magic V1, IPv4 hosts, a UTF-8 topic): every record checked
 * in full as `message_decode._replica_fast` checks it (sizes, physical offset = its position,
 * inner lengths, the __CRC32# trailer and its CRC), none crossing a segment, a BLANK record
 * covering the rest of its segment. Returns the list of RecordFields tuples (an empty list
 * without fields), or None for a chunk it does not take: anything unusual or wrong anywhere in
 * it. The Python twin then checks the whole chunk again and accepts it or raises the exact
 * ValueError, so the errors and their text have one source. */
#include "speedups.h"

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define BLANK_MAGIC ((int32_t)0xCBD43194)
#define HOST_FLAGS 48      /* BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG */
#define FIXED_V4 88        /* message_decode._REPLICA_V4.size: totalSize .. bodyLength */
#define MIN_CHECKED 111    /* MIN_RECORD_SIZE + CRC32_RESERVED_LEN */
#define TRAILER 20         /* CRC32_RESERVED_LEN: "__CRC32#\x01" + 10 digits + "\x02" */
#define MIN_BLANK 8        /* record_scan.END_FILE_MIN_BLANK_LENGTH */

static inline int64_t
get_be64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)(uint32_t)get_be32(p) << 32) | (uint32_t)get_be32(p + 4));
}

/* The record CRC its trailer states (10 decimal digits, least significant first), or -1 when
 * a digit is not one. */
static long long
trailer_crc(const unsigned char *d)
{
    long long v = 0;
    for (int i = 9; i >= 0; i--) {
        if (d[i] < '0' || d[i] > '9')
            return -1;
        v = v * 10 + (d[i] - '0');
    }
    return v;
}

/* One message record at b[pos..] that passes every check, its size; 0 for one to decline;
 * -1 with an exception set (the CRC call failed). `n` is where it must end by (the data's
 * end or the segment's last room for a BLANK record); sets the fields it read. */
typedef struct {
    int32_t queue_id, sys_flag;
    int64_t queue_offset, store_ts;
    Py_ssize_t topic_at, topic_len, props_at;
} Fields;

static Py_ssize_t
checked_record(const unsigned char *b, Py_ssize_t pos, Py_ssize_t n, long long at, Fields *f)
{
    if (n - pos < FIXED_V4)
        return 0;
    const unsigned char *r = b + pos;
    int32_t total = get_be32(r), body_len = get_be32(r + 84);
    f->sys_flag = get_be32(r + 36);
    if (get_be32(r + 4) != MAGIC_V1 || (f->sys_flag & HOST_FLAGS) || get_be64(r + 28) != at ||
        total < MIN_CHECKED || total > n - pos || body_len < 0 || body_len > total)
        return 0;
    Py_ssize_t end = pos + total;
    Py_ssize_t q = pos + FIXED_V4 + body_len; /* the topic length byte */
    if (q + 3 > end)
        return 0;
    Py_ssize_t t = q + 1 + b[q]; /* the properties length */
    if (t + 2 > end)
        return 0;
    Py_ssize_t props_len = ((Py_ssize_t)b[t] << 8) | b[t + 1];
    Py_ssize_t c = end - TRAILER; /* the CRC trailer */
    if (props_len > 0x7FFF || t + 2 + props_len != end || c < t + 2)
        return 0;
    if (memcmp(b + c, "__CRC32#\x01", 9) != 0 || b[end - 1] != 2)
        return 0;
    long long stated = trailer_crc(b + c + 9);
    if (stated < 0)
        return 0;
    long long crc = crc_of((const char *)r, c - pos, 0);
    if (crc < 0)
        return -1;
    if ((crc & 0x7FFFFFFF) != stated)
        return 0;
    f->queue_id = get_be32(r + 12);
    f->queue_offset = get_be64(r + 20);
    f->store_ts = get_be64(r + 56);
    f->topic_at = q + 1;
    f->topic_len = b[q];
    f->props_at = t + 2;
    return total;
}

/* (offset, size, topic, queueId, queueOffset, sysFlag, storeTimestamp, properties); the topic
 * is a new reference the tuple takes. NULL on error. */
static PyObject *
fields_tuple(const unsigned char *b, long long at, Py_ssize_t total, PyObject *topic,
             const Fields *f, Py_ssize_t end)
{
    PyObject *t = PyTuple_New(8);
    if (t == NULL)
        return NULL;
    Py_INCREF(topic);
    PyTuple_SET_ITEM(t, 2, topic);
    PyObject *items[7] = {
        PyLong_FromLongLong(at),
        PyLong_FromSsize_t(total),
        PyLong_FromLong(f->queue_id),
        PyLong_FromLongLong(f->queue_offset),
        PyLong_FromLong(f->sys_flag),
        PyLong_FromLongLong(f->store_ts),
        PyBytes_FromStringAndSize((const char *)b + f->props_at, end - f->props_at),
    };
    static const int slot[7] = {0, 1, 3, 4, 5, 6, 7};
    int failed = 0;
    for (int i = 0; i < 7; i++) {
        if (items[i] == NULL)
            failed = 1;
        else
            PyTuple_SET_ITEM(t, slot[i], items[i]);
    }
    if (failed) {
        Py_DECREF(t); /* the unset slots are NULL, which tuple dealloc skips */
        return NULL;
    }
    return t;
}

/* The loop over the chunk; 1 taken, 0 declined, -1 error. Appends to `found` with fields. */
static int
check_chunk(const unsigned char *b, Py_ssize_t n, long long offset, long long seg,
            int with_fields, PyObject *found)
{
    PyObject *topic = NULL; /* the last topic decoded: topics repeat within a chunk */
    Py_ssize_t topic_at = 0, topic_len = -1;
    int status = 1;
    Py_ssize_t pos = 0;
    while (pos < n) {
        long long at = offset + pos;
        long long room = seg - at % seg;
        if (n - pos < 8) {
            status = 0;
            break;
        }
        int32_t total = get_be32(b + pos);
        if (get_be32(b + pos + 4) == BLANK_MAGIC) {
            if (total != room || total > n - pos) {
                status = 0;
                break;
            }
            pos += total;
            continue;
        }
        /* the record must leave room for a BLANK record in its segment (room - MIN_BLANK
         * cannot overflow, pos + room could) */
        long long fit = room - MIN_BLANK;
        Fields f;
        Py_ssize_t by = fit < n - pos ? pos + (Py_ssize_t)fit : n;
        Py_ssize_t size = checked_record(b, pos, by, at, &f);
        if (size <= 0) {
            status = (int)size;
            break;
        }
        if (with_fields) {
            if (topic == NULL || f.topic_len != topic_len ||
                memcmp(b + f.topic_at, b + topic_at, (size_t)topic_len) != 0) {
                Py_XDECREF(topic);
                topic = PyUnicode_DecodeUTF8((const char *)b + f.topic_at, f.topic_len, NULL);
                if (topic == NULL) { /* not UTF-8: the twin says so */
                    PyErr_Clear();
                    status = 0;
                    break;
                }
                topic_at = f.topic_at;
                topic_len = f.topic_len;
            }
            PyObject *t = fields_tuple(b, at, size, topic, &f, pos + size);
            if (t == NULL || PyList_Append(found, t) < 0) {
                Py_XDECREF(t);
                status = -1;
                break;
            }
            Py_DECREF(t);
        }
        pos += size;
    }
    Py_XDECREF(topic);
    return status;
}

/* check_replicated(offset, data, segment_size, with_fields) -> list | None */
PyObject *
check_replicated(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "check_replicated takes 4 arguments");
        return NULL;
    }
    long long offset, seg;
    if (!fits_ll(a[0], 0, LLONG_MAX, &offset) || !fits_ll(a[2], 1, LLONG_MAX, &seg))
        Py_RETURN_NONE;
    int with_fields = PyObject_IsTrue(a[3]);
    if (with_fields < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(a[1], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear(); /* not bytes-like: the twin raises what Python raises */
        Py_RETURN_NONE;
    }
    PyObject *found = NULL;
    if (view.len <= LLONG_MAX - offset && (found = PyList_New(0)) != NULL) {
        int status = check_chunk(view.buf, view.len, offset, seg, with_fields, found);
        if (status <= 0) {
            Py_CLEAR(found);
            if (status == 0)
                found = Py_NewRef(Py_None);
        }
    } else if (found == NULL && !PyErr_Occurred()) {
        found = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&view);
    return found;
}
