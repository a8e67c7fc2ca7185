/* rocketrio.protocol._speedups: replica_runs, what a slave dispatches once confirmOffset passes
 * records it appended.
 *
 * Twin of rocketrio.storage.dispatch_request.replica_runs_py for a run of RecordFields tuples
 * (`records.check_replicated`) of ordinary records: per queue, in order of first appearance,
 * (key, first queue offset, the ConsumeQueue entries joined), and the index hashes of every
 * record's KEYS and UNIQ_KEY with their CommitLog offsets. It declines (None) what the
 * reference treats apart or may refuse: SCHEDULE_TOPIC_XXXX and rmq_sys_wheel_timer records
 * (their tagsCode is a due time), tags that are not ASCII, queue offsets that jump, a field out
 * of its width, more than MAX_GROUPS queues; the reference then dispatches the run or raises. */
#include "speedups.h"

#define MAX_GROUPS 64
#define TRAN_MASK 0xC /* TRANSACTION_ROLLBACK_TYPE: the transaction bits of sysFlag */
#define TRAN_PREPARED 0x4
#define TRAN_ROLLBACK 0xC

typedef struct {
    PyObject *topic, *queue_id; /* borrowed from the items */
    long long qid, first, count;
    Buf entries;
} Group;

typedef struct {
    PyObject *topic; /* the topic the seed is of (borrowed), or NULL */
    uint32_t crc, adler;
} Seed;

/* index_file.key_hash_seed: (CRC32, Adler-32) of "topic#"; 1, or 0 to decline. */
static int
seed_of(PyObject *topic, Seed *s)
{
    if (s->topic == topic)
        return 1;
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(topic, &n);
    if (u == NULL) { /* lone surrogates: the reference raises */
        PyErr_Clear();
        return 0;
    }
    s->crc = key_crc32(key_crc32(0, (const unsigned char *)u, n), (const unsigned char *)"#", 1);
    s->adler = key_adler32(key_adler32(1, (const unsigned char *)u, n),
                            (const unsigned char *)"#", 1);
    s->topic = topic;
    return 1;
}

/* Append key_hash_from(seed, key) and the record's offset; 0, or -1 on error. */
static int
add_hash(const Seed *s, const char *k, Py_ssize_t n, PyObject *offset, PyObject *hashes,
         PyObject *offsets)
{
    const unsigned char *key = (const unsigned char *)k;
    uint64_t h = ((uint64_t)key_crc32(s->crc, key, n) << 32) | key_adler32(s->adler, key, n);
    PyObject *o = PyLong_FromUnsignedLongLong(h);
    int r = o == NULL || PyList_Append(hashes, o) < 0 || PyList_Append(offsets, offset) < 0;
    Py_XDECREF(o);
    return r ? -1 : 0;
}

/* Where a property's value lies (-1: none) and its length. */
typedef struct {
    Py_ssize_t at, len;
} Value;

/* TAGS, KEYS and UNIQ_KEY of encoded properties in one pass: for each, the last non-empty value
 * of a pair the key starts (message_format.find_property: an occurrence of a key at a property
 * boundary is a pair that begins with it, its value the rest of that pair). */
static void
scan_props(const char *p, Py_ssize_t n, Value *tags, Value *keys, Value *uniq)
{
    tags->at = keys->at = uniq->at = -1;
    for (Py_ssize_t i = 0; i < n;) {
        const char *hit = memchr(p + i, 2, (size_t)(n - i));
        Py_ssize_t e = hit ? hit - p : n, len = e - i;
        Value *v = NULL;
        Py_ssize_t klen = 0;
        if (len > 5 && memcmp(p + i, "TAGS\x01", 5) == 0)
            v = tags, klen = 5;
        else if (len > 5 && memcmp(p + i, "KEYS\x01", 5) == 0)
            v = keys, klen = 5;
        else if (len > 9 && memcmp(p + i, "UNIQ_KEY\x01", 9) == 0)
            v = uniq, klen = 9;
        if (v != NULL) {
            v->at = i + klen;
            v->len = len - klen;
        }
        i = e + 1;
    }
}

/* The index hashes of one record's KEYS (space separated) and UNIQ_KEY; 1, 0, -1. */
static int
index_record(PyObject *topic, const char *p, const Value *keys, const Value *uniq,
             PyObject *offset, Seed *seed, PyObject *hashes, PyObject *offsets)
{
    Py_ssize_t k = keys->at, klen = keys->len, u = uniq->at, ulen = uniq->len;
    if (k < 0 && u < 0)
        return 1;
    int got = seed_of(topic, seed);
    if (got <= 0)
        return got;
    for (Py_ssize_t i = k; k >= 0 && i <= k + klen;) {
        Py_ssize_t e = find_byte(p, i, k + klen, ' ');
        if (e < 0)
            e = k + klen;
        if (e > i && add_hash(seed, p + i, e - i, offset, hashes, offsets) < 0)
            return -1;
        i = e + 1;
    }
    if (u >= 0 && add_hash(seed, p + u, ulen, offset, hashes, offsets) < 0)
        return -1;
    return 1;
}

/* The group of (topic, queue id), made when new; NULL to decline (too many queues). */
static Group *
group_of(Group *groups, int *ng, int *last, PyObject *topic, PyObject *qid_obj, long long qid,
         long long qo)
{
    for (int j = *last, tries = 0; tries < *ng; tries++, j = (j + 1) % *ng) {
        if (j < 0)
            j = 0;
        Group *g = &groups[j];
        if (g->qid == qid && (g->topic == topic || PyUnicode_Compare(g->topic, topic) == 0)) {
            *last = j;
            return g;
        }
    }
    if (*ng == MAX_GROUPS)
        return NULL;
    Group *g = &groups[*ng];
    memset(g, 0, sizeof *g);
    g->topic = topic;
    g->queue_id = qid_obj;
    g->qid = qid;
    g->first = qo;
    *last = (*ng)++;
    return g;
}

/* One record into the groups and the index lists; 1 taken, 0 declined, -1 error. */
static int
one_record(PyObject *it, int indexed, Group *groups, int *ng, int *last, Seed *seed,
           PyObject *hashes, PyObject *offsets)
{
    if (!PyTuple_CheckExact(it) || PyTuple_GET_SIZE(it) != 8)
        return 0;
    PyObject *topic = PyTuple_GET_ITEM(it, 2), *props = PyTuple_GET_ITEM(it, 7);
    long long offset, size, qid, qo, sys_flag;
    if (!fits_ll(PyTuple_GET_ITEM(it, 0), LLONG_MIN, LLONG_MAX, &offset) ||
        !fits_ll(PyTuple_GET_ITEM(it, 1), INT32_MIN, INT32_MAX, &size) ||
        !PyUnicode_CheckExact(topic) || !PyBytes_CheckExact(props) ||
        !fits_ll(PyTuple_GET_ITEM(it, 3), LLONG_MIN, LLONG_MAX, &qid) ||
        !fits_ll(PyTuple_GET_ITEM(it, 4), LLONG_MIN, LLONG_MAX, &qo) ||
        !fits_ll(PyTuple_GET_ITEM(it, 5), LLONG_MIN, LLONG_MAX, &sys_flag))
        return 0;
    if (PyUnicode_CompareWithASCIIString(topic, "SCHEDULE_TOPIC_XXXX") == 0 ||
        PyUnicode_CompareWithASCIIString(topic, "rmq_sys_wheel_timer") == 0)
        return 0;
    const char *p = PyBytes_AS_STRING(props);
    Py_ssize_t n = PyBytes_GET_SIZE(props);
    long long tran = sys_flag & TRAN_MASK;
    uint32_t code = 0; /* Java String.hashCode of the tag, ASCII only */
    Value tags, keys, uniq;
    scan_props(p, n, &tags, &keys, &uniq);
    Py_ssize_t t = tags.at, tlen = tags.len;
    for (Py_ssize_t i = 0; t >= 0 && i < tlen; i++) {
        if ((unsigned char)p[t + i] > 0x7F)
            return 0;
        code = 31 * code + (unsigned char)p[t + i];
    }
    if (tran != TRAN_PREPARED && tran != TRAN_ROLLBACK) {
        Group *g = group_of(groups, ng, last, topic, PyTuple_GET_ITEM(it, 3), qid, qo);
        if (g == NULL || g->first > LLONG_MAX - g->count || qo != g->first + g->count)
            return 0;
        if (buf_reserve(&g->entries, 20) < 0)
            return -1;
        char *w = g->entries.mem + g->entries.len;
        put_be64(w, (uint64_t)offset);
        put_be32(w + 8, (uint32_t)size);
        put_be64(w + 12, (uint64_t)(int64_t)(int32_t)code);
        g->entries.len += 20;
        g->count++;
    }
    if (indexed && n && tran != TRAN_ROLLBACK)
        return index_record(topic, p, &keys, &uniq, PyTuple_GET_ITEM(it, 0), seed, hashes,
                            offsets);
    return 1;
}

/* [(key, first queue offset, entries)] of the groups; NULL on error. */
static PyObject *
runs_of(Group *groups, int ng)
{
    PyObject *runs = PyList_New(ng);
    for (int j = 0; runs != NULL && j < ng; j++) {
        Group *g = &groups[j];
        PyObject *run = Py_BuildValue("(OO)Ly#", g->topic, g->queue_id, g->first,
                                      g->entries.mem, g->entries.len);
        if (run == NULL)
            Py_CLEAR(runs);
        else
            PyList_SET_ITEM(runs, j, run);
    }
    return runs;
}

/* replica_runs(items, indexed) -> (runs, hashes, offsets) | None */
PyObject *
replica_runs(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "replica_runs takes 2 arguments");
        return NULL;
    }
    int indexed = PyObject_IsTrue(a[1]);
    if (indexed < 0)
        return NULL;
    if (!PyList_CheckExact(a[0]))
        Py_RETURN_NONE;
    Group groups[MAX_GROUPS];
    int ng = 0, last = -1, status = 1;
    Seed seed = {NULL, 0, 0};
    PyObject *hashes = PyList_New(0), *offsets = PyList_New(0), *out = NULL;
    if (hashes == NULL || offsets == NULL)
        status = -1;
    for (Py_ssize_t i = 0; status > 0 && i < PyList_GET_SIZE(a[0]); i++)
        status = one_record(PyList_GET_ITEM(a[0], i), indexed, groups, &ng, &last, &seed,
                            hashes, offsets);
    if (status > 0) {
        PyObject *runs = runs_of(groups, ng);
        if (runs != NULL)
            out = PyTuple_Pack(3, runs, hashes, offsets);
        Py_XDECREF(runs);
    } else if (status == 0) {
        out = Py_NewRef(Py_None);
    }
    for (int j = 0; j < ng; j++)
        PyMem_Free(groups[j].entries.mem);
    Py_XDECREF(hashes);
    Py_XDECREF(offsets);
    return out;
}
