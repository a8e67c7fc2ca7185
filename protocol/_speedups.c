/* rocketrio.protocol._speedups: compiled twins of a few pure-Python hot loops.
 *
 * Every function here has a Python twin that stays the reference and the fallback
 * (ROCKETRIO_PURE_PYTHON=1 or no compiler): same bytes out, same exception class and
 * message for bad input (tests/unit/protocol/test_speedups.py proves it with Hypothesis).
 *
 * No library but Python's: CRC-32 is zlib-ng's, called through the Python objects that
 * `configure` receives (rocketrio.protocol.message_format.crc32 / crc32_combine), so the
 * values are the ones the pure path computes. Every read of input bytes is bounds-checked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ configuration */

/* What `configure` hands over once at import (rocketrio.protocol.message_build). */
static PyObject *DecodeError;  /* MessageDecodeError */
static PyObject *SizeError;    /* MessageSizeError */
static PyObject *StructError;  /* struct.error */
static PyObject *Crc32;        /* crc32(data, start=0) */
static PyObject *Crc32Combine; /* crc32_combine(a, b, len_b), or None */
static long long CombineMin;   /* from this body size on, combine instead of re-reading */

static int
set_ref(PyObject **slot, PyObject *value)
{
    Py_XINCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

/* configure(decode_error, size_error, struct_error, crc32, crc32_combine, combine_min) */
static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *de, *se, *st, *crc, *comb;
    long long cmin;
    if (!PyArg_ParseTuple(args, "OOOOOL", &de, &se, &st, &crc, &comb, &cmin))
        return NULL;
    set_ref(&DecodeError, de);
    set_ref(&SizeError, se);
    set_ref(&StructError, st);
    set_ref(&Crc32, crc);
    set_ref(&Crc32Combine, comb);
    CombineMin = cmin;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ small helpers */

/* crc32(mem[0:len], start) through the configured Python function; -1 on error. */
static long long
crc_of(const char *mem, Py_ssize_t len, unsigned long start)
{
    PyObject *view = PyMemoryView_FromMemory((char *)mem, len, PyBUF_READ);
    if (view == NULL)
        return -1;
    PyObject *res;
    if (start == 0) {
        res = PyObject_CallOneArg(Crc32, view);
    } else {
        PyObject *s = PyLong_FromUnsignedLong(start);
        res = s ? PyObject_CallFunctionObjArgs(Crc32, view, s, NULL) : NULL;
        Py_XDECREF(s);
    }
    Py_DECREF(view);
    if (res == NULL)
        return -1;
    unsigned long v = PyLong_AsUnsignedLong(res);
    Py_DECREF(res);
    if (v == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return (long long)(v & 0xFFFFFFFFUL);
}

/* crc32_combine(a, b, len_b) through the configured Python function; -1 on error. */
static long long
crc_combine(unsigned long a, unsigned long b, Py_ssize_t len_b)
{
    PyObject *res = PyObject_CallFunction(Crc32Combine, "kkn", a, b, len_b);
    if (res == NULL)
        return -1;
    unsigned long v = PyLong_AsUnsignedLong(res);
    Py_DECREF(res);
    if (v == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return (long long)(v & 0xFFFFFFFFUL);
}

static void
put_be32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

static void
put_be64(char *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static int32_t
get_be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

/* Last start of key in data[start:end] that lies wholly inside it (Python's rfind). */
static Py_ssize_t
rfind_in(const char *data, Py_ssize_t start, Py_ssize_t end, const char *key, Py_ssize_t klen)
{
    for (Py_ssize_t p = end - klen; p >= start; p--)
        if (memcmp(data + p, key, (size_t)klen) == 0)
            return p;
    return -1;
}

static Py_ssize_t
find_byte(const char *data, Py_ssize_t start, Py_ssize_t end, char c)
{
    if (start >= end)
        return -1;
    const char *hit = memchr(data + start, c, (size_t)(end - start));
    return hit ? hit - data : -1;
}

/* Twin of message_format.find_property on bytes (whole data): the last non-empty value of a
 * pair whose key starts at a property boundary. Sets *vlen and returns the value's offset,
 * or -1 when there is none. */
static Py_ssize_t
find_prop(const char *data, Py_ssize_t n, const char *key, Py_ssize_t klen, Py_ssize_t *vlen)
{
    Py_ssize_t p = rfind_in(data, 0, n, key, klen);
    while (p >= 0) {
        if (p == 0 || data[p - 1] == 2) {
            Py_ssize_t v = p + klen;
            Py_ssize_t e = find_byte(data, v, n, 2);
            if (e < 0)
                e = n;
            if (e > v) {
                *vlen = e - v;
                return v;
            }
        }
        p = rfind_in(data, 0, p, key, klen);
    }
    return -1;
}

/* A growable byte buffer (PyMem). */
typedef struct {
    char *mem;
    Py_ssize_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t more)
{
    if (more > PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap = cap > PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : cap * 2;
    char *mem = PyMem_Realloc(b->mem, (size_t)cap);
    if (mem == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->mem = mem;
    b->cap = cap;
    return 0;
}

static void
buf_put(Buf *b, const void *src, Py_ssize_t n)
{
    memcpy(b->mem + b->len, src, (size_t)n);
    b->len += n;
}

/* Twin of message_build._strip_crc_property: the properties without a __CRC32# pair, into
 * out (emptied first). Returns 0, or -1 on a memory error. */
static int
strip_crc(const char *p, Py_ssize_t n, Buf *out)
{
    out->len = 0;
    if (buf_reserve(out, n + 1) < 0)
        return -1;
    Py_ssize_t i = 0;
    while (i <= n) {
        Py_ssize_t e = find_byte(p, i, n, 2);
        if (e < 0)
            e = n;
        Py_ssize_t len = e - i;
        if (len > 0 && !(len >= 9 && memcmp(p + i, "__CRC32#\x01", 9) == 0)) {
            if (buf_reserve(out, len + 1) < 0)
                return -1;
            buf_put(out, p + i, len);
            buf_put(out, "\x02", 1);
        }
        i = e + 1;
    }
    return 0;
}

static int
contains(const char *p, Py_ssize_t n, const char *key, Py_ssize_t klen)
{
    return rfind_in(p, 0, n, key, klen) >= 0;
}

static PyObject *
struct_range_error(const char *fmt)
{
    if (fmt[0] == 'q') /* the text struct gives for a Python int beyond a long long */
        PyErr_SetString(StructError, "int too large to convert");
    else
        PyErr_SetString(StructError, "'i' format requires -2147483648 <= number <= 2147483647");
    return NULL;
}

/* ------------------------------------------------------------------ batch record build */

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

/* The record CRC of the record at rec (size bytes, trailer last): chained over head, body
 * and tail like `_build_records`, combining the body's own CRC for a large body. */
static long long
record_crc(Py_ssize_t head, const char *rec, Py_ssize_t size, Py_ssize_t body_len,
           unsigned long body_crc)
{
    if (body_len < CombineMin || Crc32Combine == Py_None)
        return crc_of(rec, size - 20, 0);
    long long h = crc_of(rec, head, 0);
    if (h < 0)
        return -1;
    long long c = crc_combine((unsigned long)h, body_crc, body_len);
    if (c < 0)
        return -1;
    return crc_of(rec + head + body_len, size - 20 - head - body_len, (unsigned long)c);
}

/* The 20-byte __CRC32# trailer of a record CRC at w: its 10 digits least-significant first
 * (message_build._TRAILER_REVERSED). */
static void
write_trailer(char *w, long long seal)
{
    seal &= 0x7FFFFFFF;
    memcpy(w, "__CRC32#\x01", 9);
    for (int i = 0; i < 10; i++, seal /= 10)
        w[9 + i] = (char)('0' + seal % 10);
    w[19] = 2;
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
static PyObject *
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

/* ------------------------------------------------------------------ one record */

static PyObject *AppendRecordPy; /* message_build._append_record_py, for what we decline */

/* configure_record(append_record_py) */
static PyObject *
configure_record(PyObject *self, PyObject *twin)
{
    set_ref(&AppendRecordPy, twin);
    Py_RETURN_NONE;
}

/* A long long that fits [lo, hi], else 0 to decline. */
static int
fits_ll(PyObject *o, long long lo, long long hi, long long *out)
{
    if (!PyLong_CheckExact(o))
        return 0;
    int over = 0;
    *out = PyLong_AsLongLongAndOverflow(o, &over);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !over && *out >= lo && *out <= hi;
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
static PyObject *
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

/* ------------------------------------------------------------------ remoting header */

/* What `configure_remoting` hands over once (rocketrio.protocol.remoting). */
static PyObject *CommandType;  /* RemotingCommand */
static PyObject *LangNames;    /* language code -> name */
static PyObject *LangCodes;    /* language name -> code */
static PyObject *LangOther;    /* the code of a language not in LangCodes */
static PyObject *OtherName;    /* "OTHER" */

/* configure_remoting(command_type, lang_name_by_code, lang_code_by_name, lang_other) */
static PyObject *
configure_remoting(PyObject *self, PyObject *args)
{
    PyObject *t, *names, *codes, *other;
    if (!PyArg_ParseTuple(args, "OO!O!O", &t, &PyDict_Type, &names, &PyDict_Type, &codes, &other))
        return NULL;
    if (OtherName == NULL && (OtherName = PyUnicode_InternFromString("OTHER")) == NULL)
        return NULL;
    set_ref(&CommandType, t);
    set_ref(&LangNames, names);
    set_ref(&LangCodes, codes);
    set_ref(&LangOther, other);
    Py_RETURN_NONE;
}

static int16_t
get_be16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

/* UTF-8 text of b[0:n], or NULL with no exception set when it is not valid UTF-8 (the caller
 * then declines: the Python twin raises the error). */
static PyObject *
utf8_or_decline(const unsigned char *b, Py_ssize_t n)
{
    PyObject *s = PyUnicode_DecodeUTF8((const char *)b, n, NULL);
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
    return s;
}

/* The extFields entries of raw[pos:n] (remoting._decode_ext_entries) into ext. 1 done, 0
 * declined (out of range or not UTF-8: the Python twin raises), -1 error. */
static int
ext_entries(const unsigned char *raw, Py_ssize_t pos, Py_ssize_t n, PyObject *ext)
{
    while (pos < n) {
        if (n - pos < 2)
            return 0;
        Py_ssize_t klen = get_be16(raw + pos);
        Py_ssize_t kpos = pos + 2, kend = kpos + klen;
        if (klen < 0 || n - kend < 4)
            return 0;
        Py_ssize_t vlen = get_be32(raw + kend), vpos = kend + 4;
        if (vlen < 0 || vlen > n - vpos)
            return 0;
        PyObject *key = utf8_or_decline(raw + kpos, klen);
        if (key == NULL)
            return PyErr_Occurred() ? -1 : 0;
        PyObject *value = utf8_or_decline(raw + vpos, vlen);
        int rc = value == NULL ? (PyErr_Occurred() ? -1 : 0) : PyDict_SetItem(ext, key, value);
        Py_DECREF(key);
        Py_XDECREF(value);
        if (rc != 0 || value == NULL)
            return rc < 0 ? -1 : 0;
        pos = vpos + vlen;
    }
    return 1;
}

/* decode_rocketmq_header(raw, body) -> RemotingCommand | None
 * Twin of remoting._decode_rocketmq_header_py for a well-formed header: the same command.
 * Anything the twin would refuse (short, lengths out of range, not UTF-8) gives None, and
 * the caller lets the twin raise its RemoteProtocolError (same text, same reason). */
static PyObject *
decode_rocketmq_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0]) || CommandType == NULL)
        Py_RETURN_NONE;
    const unsigned char *raw = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    if (n < 17)
        Py_RETURN_NONE;
    Py_ssize_t rlen = get_be32(raw + 13), pos = 17;
    if (rlen < 0 || rlen > n - pos || n - pos - rlen < 4)
        Py_RETURN_NONE;
    Py_ssize_t elen = get_be32(raw + pos + rlen);
    if (elen < 0 || pos + rlen + 4 + elen != n)
        Py_RETURN_NONE;
    PyObject *remark = rlen ? utf8_or_decline(raw + pos, rlen) : Py_NewRef(Py_None);
    if (remark == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *ext = PyDict_New(), *res = NULL;
    int done = ext ? ext_entries(raw, pos + rlen + 4, n, ext) : -1;
    if (done == 0)
        res = Py_NewRef(Py_None);
    if (done == 1) {
        PyObject *lang = PyLong_FromLong((signed char)raw[2]);
        PyObject *name = lang ? PyDict_GetItemWithError(LangNames, lang) : NULL;
        if (name == NULL && !PyErr_Occurred())
            name = OtherName;
        PyObject *call[10] = {NULL};
        call[1] = PyLong_FromLong(get_be16(raw));
        call[2] = PyLong_FromLong(get_be32(raw + 5));
        call[3] = PyLong_FromLong(get_be32(raw + 9));
        call[4] = remark;
        call[5] = ext;
        call[6] = args[1];
        call[7] = name;
        call[8] = PyLong_FromLong(get_be16(raw + 3));
        call[9] = PyLong_FromLong(1); /* SERIALIZE_ROCKETMQ */
        if (name && call[1] && call[2] && call[3] && call[8] && call[9])
            res = PyObject_Vectorcall(CommandType, call + 1,
                                      9 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(lang);
        Py_XDECREF(call[1]);
        Py_XDECREF(call[2]);
        Py_XDECREF(call[3]);
        Py_XDECREF(call[8]);
        Py_XDECREF(call[9]);
    }
    Py_XDECREF(ext);
    Py_DECREF(remark);
    return res;
}

/* One ext key or value: its UTF-8 bytes, or 0 to decline (not a str, or not encodable). */
static int
utf8_of(PyObject *s, const char **b, Py_ssize_t *n)
{
    if (!PyUnicode_CheckExact(s))
        return 0;
    *b = PyUnicode_AsUTF8AndSize(s, n);
    if (*b == NULL) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The extFields bytes of ext into w (when not NULL); their length, or -1 to decline. */
static Py_ssize_t
ext_bytes(PyObject *ext, char *w)
{
    Py_ssize_t total = 0, i = 0, kn, vn;
    PyObject *k, *v;
    const char *kb, *vb;
    while (PyDict_Next(ext, &i, &k, &v)) {
        if (!utf8_of(k, &kb, &kn) || !utf8_of(v, &vb, &vn) || kn > 32767 || vn > INT32_MAX)
            return -1;
        if (w != NULL) {
            w[0] = (char)(kn >> 8);
            w[1] = (char)kn;
            memcpy(w + 2, kb, (size_t)kn);
            put_be32(w + 2 + kn, (uint32_t)vn);
            memcpy(w + 6 + kn, vb, (size_t)vn);
            w += 6 + kn + vn;
        }
        total += 6 + kn + vn;
        if (total > INT32_MAX)
            return -1;
    }
    return total;
}

/* A long that fits [lo, hi], else 0 to decline (the twin raises). */
static int
fits(PyObject *o, long lo, long hi, long *out)
{
    if (!PyLong_CheckExact(o))
        return 0;
    int over = 0;
    *out = PyLong_AsLongAndOverflow(o, &over);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !over && *out >= lo && *out <= hi;
}

/* rocketmq_header(code, language, version, opaque, flag, remark, ext_fields) -> bytes | None
 * Twin of remoting._rocketmq_header_of_py: the ROCKETMQ header bytes; None for anything the
 * twin refuses or that is not plain (the caller then runs the twin). */
static PyObject *
rocketmq_header(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    long code, version, opaque, flag, lang;
    if (nargs != 7 || LangCodes == NULL || !PyDict_CheckExact(a[6]) ||
        !fits(a[0], -32768, 32767, &code) || !fits(a[2], -32768, 32767, &version) ||
        !fits(a[3], INT32_MIN, INT32_MAX, &opaque) || !fits(a[4], INT32_MIN, INT32_MAX, &flag))
        Py_RETURN_NONE;
    if (!PyUnicode_CheckExact(a[1]))
        Py_RETURN_NONE;
    PyObject *lang_obj = PyDict_GetItemWithError(LangCodes, a[1]);
    if (lang_obj == NULL && PyErr_Occurred())
        return NULL;
    if (!fits(lang_obj ? lang_obj : LangOther, -128, 127, &lang))
        Py_RETURN_NONE;
    const char *rb = "";
    Py_ssize_t rn = 0;
    if (a[5] != Py_None && !utf8_of(a[5], &rb, &rn))
        Py_RETURN_NONE;
    Py_ssize_t en = ext_bytes(a[6], NULL);
    if (en < 0 || rn > INT32_MAX - 21 - en)
        Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 21 + rn + en);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    w[0] = (char)(code >> 8);
    w[1] = (char)code;
    w[2] = (char)lang;
    w[3] = (char)(version >> 8);
    w[4] = (char)version;
    put_be32(w + 5, (uint32_t)opaque);
    put_be32(w + 9, (uint32_t)flag);
    put_be32(w + 13, (uint32_t)rn);
    memcpy(w + 17, rb, (size_t)rn);
    put_be32(w + 17 + rn, (uint32_t)en);
    ext_bytes(a[6], w + 21 + rn);
    return out;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(decode_error, size_error, struct_error, crc32, crc32_combine, combine_min)"},
    {"build_records", (PyCFunction)(void (*)(void))build_records, METH_FASTCALL,
     "Twin of rocketrio.protocol.message_build._build_records_py."},
    {"configure_record", configure_record, METH_O, "configure_record(append_record_py)"},
    {"append_record", (PyCFunction)(void (*)(void))append_record, METH_FASTCALL,
     "Twin of rocketrio.protocol.message_build._append_record_py."},
    {"configure_remoting", configure_remoting, METH_VARARGS,
     "configure_remoting(command_type, lang_name_by_code, lang_code_by_name, lang_other)"},
    {"decode_rocketmq_header", (PyCFunction)(void (*)(void))decode_rocketmq_header,
     METH_FASTCALL, "Twin of rocketrio.protocol.remoting._decode_rocketmq_header_py."},
    {"rocketmq_header", (PyCFunction)(void (*)(void))rocketmq_header, METH_FASTCALL,
     "Twin of rocketrio.protocol.remoting._rocketmq_header_of_py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rocketrio.protocol._speedups",
    "Compiled twins of rocketrio's send-path hot loops (pure Python stays the reference).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
