/* rocketrio.protocol._speedups: build_records, a client batch body to stored records. */
#include "speedups.h"

/* What every record of one batch shares (message_build._batch_layout's answer). */
typedef struct {
    const char *extra, *mid, *topic;
    Py_ssize_t extra_len, mid_len, topic_len;
    PyObject *uniq_all, *tags_all, *new_uniq_key; /* borrowed; Py_None when unset */
    int32_t magic, queue_id;
    long long max_body;
    PyObject *max_body_obj; /* for the error text */
} Layout;

/* One client message in the batch body, as `_build_records` reads it. */
typedef struct {
    Py_ssize_t pos, end, body, body_len, props, props_len;
    int32_t flag;
} Item;

/* The `_BATCH_HEAD` unpack + length checks of `_build_records`: 0 when the message at pos is
 * well formed, 1 when it is bad (truncated or inconsistent). */
static int
parse_item(const unsigned char *d, Py_ssize_t n, Py_ssize_t pos, Item *it)
{
    it->pos = pos;
    it->body_len = 0;
    if (n - pos < 20)
        return 1;
    int32_t total = get_be32(d + pos);
    it->flag = get_be32(d + pos + 12);
    int32_t body_len = get_be32(d + pos + 16);
    it->body_len = body_len;
    Py_ssize_t end = pos + total;
    if (body_len < 0 || end > n)
        return 1;
    Py_ssize_t q = pos + 20 + body_len;
    if (q + 2 > n)
        return 1;
    if (q + 2 + (((Py_ssize_t)d[q] << 8) | d[q + 1]) != end)
        return 1;
    it->end = end;
    it->body = pos + 20;
    it->props = q + 2;
    it->props_len = end - q - 2;
    return 0;
}

/* The message's own properties as `_build_records` keeps them: a stale __CRC32# removed
 * (strip), then a \x02 so the batch properties start a pair of their own. New reference. */
static PyObject *
own_props(const char *p, Py_ssize_t n, int strip, Buf *tmp)
{
    if (strip && contains(p, n, "__CRC32#", 8)) {
        if (strip_crc(p, n, tmp) < 0)
            return NULL;
        p = tmp->mem;
        n = tmp->len;
    }
    int sep = n > 0 && p[n - 1] != 2;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n + sep);
    if (out == NULL)
        return NULL;
    memcpy(PyBytes_AS_STRING(out), p, (size_t)n);
    if (sep)
        PyBytes_AS_STRING(out)[n] = 2;
    return out;
}

/* find_property(props, key) as a new bytes object, or `missing` (new reference) for none. */
static PyObject *
prop_or(PyObject *props, const char *key, Py_ssize_t klen, PyObject *missing)
{
    Py_ssize_t vlen = 0;
    Py_ssize_t v = find_prop(PyBytes_AS_STRING(props), PyBytes_GET_SIZE(props), key, klen, &vlen);
    if (v < 0) {
        Py_XINCREF(missing);
        return missing;
    }
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(props) + v, vlen);
}

/* new_uniq_key().encode(); new reference. */
static PyObject *
fresh_uniq(PyObject *new_uniq_key)
{
    PyObject *s = PyObject_CallNoArgs(new_uniq_key);
    if (s == NULL)
        return NULL;
    PyObject *b = PyObject_CallMethod(s, "encode", NULL);
    Py_DECREF(s);
    if (b != NULL && !PyBytes_Check(b)) {
        PyErr_SetString(PyExc_TypeError, "new_uniq_key() must return str");
        Py_CLEAR(b);
    }
    return b;
}

/* Offsets of the record being written: sticky overflow flags stand for Python ints that
 * no longer fit the header's long (struct.error when packed, as in the pure path). */
typedef struct {
    long long qo, phy;
    int qo_over, phy_over;
} Offsets;

/* One sealed record of `_build_records` appended to out: head, body, tail (topic, props
 * length, own props, batch props, a generated UNIQ_KEY pair when gen), CRC trailer.
 * Returns the record size, or -1 with an exception set. */
static Py_ssize_t
write_record(const Layout *L, const unsigned char *d, const Item *it, Py_ssize_t index,
             PyObject *props, PyObject *uniq, int gen, const Offsets *o, Buf *out)
{
    Py_ssize_t pn = PyBytes_GET_SIZE(props), un = gen ? PyBytes_GET_SIZE(uniq) : 0;
    Py_ssize_t gen_len = gen ? 9 + un + 1 : 0;
    Py_ssize_t props_len = pn + L->extra_len + gen_len + 20;
    if (props_len > 32767) {
        PyErr_Format(SizeError, "message %zd: properties of %zd bytes exceed 32767",
                     index, props_len);
        return -1;
    }
    Py_ssize_t size = L->mid_len + 40 + it->body_len + L->topic_len + 2 + props_len;
    long long body_crc = crc_of((const char *)d + it->body, it->body_len, 0);
    if (body_crc < 0)
        return -1;
    if (size > INT32_MAX || o->qo_over || o->phy_over) {
        struct_range_error(size > INT32_MAX ? "i" : "q");
        return -1;
    }
    if (buf_reserve(out, size) < 0)
        return -1;
    char *rec = out->mem + out->len;
    char *w = rec;
    put_be32(w, (uint32_t)size);
    put_be32(w + 4, (uint32_t)L->magic);
    put_be32(w + 8, (uint32_t)(body_crc & 0x7FFFFFFF));
    put_be32(w + 12, (uint32_t)L->queue_id);
    put_be32(w + 16, (uint32_t)it->flag);
    put_be64(w + 20, (uint64_t)o->qo);
    put_be64(w + 28, (uint64_t)o->phy);
    memcpy(w + 36, L->mid, (size_t)L->mid_len);
    w += 36 + L->mid_len;
    put_be32(w, (uint32_t)it->body_len);
    memcpy(w + 4, d + it->body, (size_t)it->body_len);
    w += 4 + it->body_len;
    memcpy(w, L->topic, (size_t)L->topic_len);
    w += L->topic_len;
    w[0] = (char)(props_len >> 8);
    w[1] = (char)props_len;
    memcpy(w + 2, PyBytes_AS_STRING(props), (size_t)pn);
    w += 2 + pn;
    memcpy(w, L->extra, (size_t)L->extra_len);
    w += L->extra_len;
    if (gen) {
        memcpy(w, "UNIQ_KEY\x01", 9);
        memcpy(w + 9, PyBytes_AS_STRING(uniq), (size_t)un);
        w[9 + un] = 2;
        w += gen_len;
    }
    long long seal = record_crc(L->mid_len + 40, rec, size, it->body_len, (unsigned long)body_crc);
    if (seal < 0)
        return -1;
    write_trailer(w, seal);
    out->len += size;
    return size;
}

/* The per-message lists `_built` returns. */
typedef struct {
    PyObject *sizes, *tags, *uniqs, *props;
} Columns;

/* Message it of the batch: its own properties, UNIQ_KEY (found, from the batch, or fresh),
 * sealed record and column entries. 0, or -1 with an exception set. */
static int
build_one(const Layout *L, const unsigned char *d, const Item *it, int strip, Offsets *o,
          Buf *out, Buf *tmp, Columns *c, PyObject *empty)
{
    Py_ssize_t index = PyList_GET_SIZE(c->sizes);
    PyObject *props = own_props((const char *)d + it->props, it->props_len, strip, tmp);
    if (props == NULL)
        return -1;
    PyObject *uniq = L->uniq_all != Py_None ? Py_NewRef(L->uniq_all)
                                            : prop_or(props, "UNIQ_KEY\x01", 9, NULL);
    int gen = 0;
    if (uniq == NULL && !PyErr_Occurred()) {
        if (L->new_uniq_key != Py_None) {
            uniq = fresh_uniq(L->new_uniq_key);
            gen = 1;
        } else {
            uniq = Py_NewRef(empty);
        }
    }
    PyObject *tag = NULL, *size_obj = NULL;
    Py_ssize_t size = uniq ? write_record(L, d, it, index, props, uniq, gen, o, out) : -1;
    if (size >= 0)
        size_obj = PyLong_FromSsize_t(size);
    if (size_obj != NULL)
        tag = L->tags_all != Py_None ? Py_NewRef(L->tags_all) : prop_or(props, "TAGS\x01", 5, empty);
    int rc = -1;
    if (tag != NULL && PyList_Append(c->sizes, size_obj) == 0 &&
        PyList_Append(c->tags, tag) == 0 && PyList_Append(c->uniqs, uniq) == 0 &&
        PyList_Append(c->props, props) == 0) {
        rc = 0;
        o->qo_over |= __builtin_add_overflow(o->qo, 1, &o->qo);
        o->phy_over |= __builtin_add_overflow(o->phy, (long long)size, &o->phy);
    }
    Py_XDECREF(tag);
    Py_XDECREF(size_obj);
    Py_XDECREF(uniq);
    Py_DECREF(props);
    return rc;
}

/* Parse the arguments of build_records into L; 0, or -1 with an exception set. */
static int
parse_layout(PyObject *const *a, Layout *L, Offsets *o)
{
    if (!PyBytes_Check(a[1]) || !PyBytes_Check(a[4]) || !PyBytes_Check(a[6])) {
        PyErr_SetString(PyExc_TypeError, "extra, mid and topic_part must be bytes");
        return -1;
    }
    for (int i = 2; i <= 3; i++)
        if (a[i] != Py_None && !PyBytes_Check(a[i])) {
            PyErr_SetString(PyExc_TypeError, "uniq_all and tags_all must be bytes or None");
            return -1;
        }
    L->extra = PyBytes_AS_STRING(a[1]);
    L->extra_len = PyBytes_GET_SIZE(a[1]);
    L->uniq_all = a[2];
    L->tags_all = a[3];
    L->mid = PyBytes_AS_STRING(a[4]);
    L->mid_len = PyBytes_GET_SIZE(a[4]);
    L->topic = PyBytes_AS_STRING(a[6]);
    L->topic_len = PyBytes_GET_SIZE(a[6]);
    long magic = PyLong_AsLong(a[5]);
    long queue_id = PyLong_AsLong(a[7]);
    if (PyErr_Occurred())
        return -1;
    if (magic < INT32_MIN || magic > INT32_MAX || queue_id < INT32_MIN || queue_id > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "magic or queue id out of range");
        return -1;
    }
    L->magic = (int32_t)magic;
    L->queue_id = (int32_t)queue_id;
    int over = 0;
    o->qo = PyLong_AsLongLongAndOverflow(a[8], &over);
    o->qo_over = over != 0;
    o->phy = PyLong_AsLongLongAndOverflow(a[9], &over);
    o->phy_over = over != 0;
    L->max_body = PyLong_AsLongLongAndOverflow(a[10], &over);
    if (over)
        L->max_body = over > 0 ? LLONG_MAX : LLONG_MIN;
    if (PyErr_Occurred())
        return -1;
    L->max_body_obj = a[10];
    L->new_uniq_key = a[11];
    return 0;
}

/* build_records(data, extra, uniq_all, tags_all, mid, magic, topic_part, queue_id,
 *               first_queue_offset, first_physical_offset, max_body_size, new_uniq_key,
 *               strip_crc) -> (data, sizes, tags, uniq_keys, props)
 * Twin of message_build._build_records_py (the loop of `build_batch_records`, with `_built`
 * and `_tags_of`): the sealed stored records of a client batch body. */
PyObject *
build_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "build_records takes 13 arguments");
        return NULL;
    }
    if (Crc32 == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure was not called");
        return NULL;
    }
    Layout L;
    Offsets o;
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "data must be bytes");
        return NULL;
    }
    if (parse_layout(args, &L, &o) < 0)
        return NULL;
    int strip = PyObject_IsTrue(args[12]);
    if (strip < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    Buf out = {NULL, 0, 0}, tmp = {NULL, 0, 0};
    Columns c = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0)};
    PyObject *empty = PyBytes_FromStringAndSize(NULL, 0), *res = NULL;
    if (!c.sizes || !c.tags || !c.uniqs || !c.props || !empty)
        goto done;
    for (Py_ssize_t pos = 0; pos < n;) {
        Item it;
        if (parse_item(d, n, pos, &it)) {
            PyErr_Format(DecodeError, "batch message at %zd is truncated or inconsistent", pos);
            goto done;
        }
        if (it.body_len > L.max_body) {
            PyErr_Format(SizeError, "message %zd: body of %zd bytes exceeds %S",
                         PyList_GET_SIZE(c.sizes), it.body_len, L.max_body_obj);
            goto done;
        }
        if (build_one(&L, d, &it, strip, &o, &out, &tmp, &c, empty) < 0)
            goto done;
        pos = it.end;
    }
    PyObject *data = PyBytes_FromStringAndSize(out.mem ? out.mem : "", out.len);
    if (data != NULL)
        res = Py_BuildValue("(NOOOO)", data, c.sizes, c.tags, c.uniqs, c.props);
done:
    Py_XDECREF(c.sizes);
    Py_XDECREF(c.tags);
    Py_XDECREF(c.uniqs);
    Py_XDECREF(c.props);
    Py_XDECREF(empty);
    PyMem_Free(out.mem);
    PyMem_Free(tmp.mem);
    return res;
}
