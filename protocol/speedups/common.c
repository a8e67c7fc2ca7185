/* rocketrio.protocol._speedups: configuration and the helpers every twin shares. */
#include "speedups.h"

PyObject *DecodeError;  /* MessageDecodeError */
PyObject *SizeError;    /* MessageSizeError */
PyObject *StructError;  /* struct.error */
PyObject *Crc32;        /* crc32(data, start=0) */
PyObject *Crc32Combine; /* crc32_combine(a, b, len_b), or None */
long long CombineMin;   /* from this body size on, combine instead of re-reading */

/* Replace a configured reference (the old one released). */
int
set_ref(PyObject **slot, PyObject *value)
{
    Py_XINCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

/* configure(decode_error, size_error, struct_error, crc32, crc32_combine, combine_min) */
PyObject *
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

/* A CRC returned by a Python call (a new reference, or NULL on error) as 0..2^32-1; -1 on
 * error. Takes the reference. */
static long long
crc_result(PyObject *res)
{
    if (res == NULL)
        return -1;
    unsigned long v = PyLong_AsUnsignedLong(res);
    Py_DECREF(res);
    if (v == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return (long long)(v & 0xFFFFFFFFUL);
}

/* A long long that fits [lo, hi], else 0 to decline (the Python twin then runs and raises
 * where it must). */
int
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

/* crc32(mem[0:len], start) through the configured Python function; -1 on error. */
long long
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
    return crc_result(res);
}

/* crc32_combine(a, b, len_b) through the configured Python function; -1 on error. */
long long
crc_combine(unsigned long a, unsigned long b, Py_ssize_t len_b)
{
    return crc_result(PyObject_CallFunction(Crc32Combine, "kkn", a, b, len_b));
}

/* Last start of key in data[start:end] that lies wholly inside it (Python's rfind). */
Py_ssize_t
rfind_in(const char *data, Py_ssize_t start, Py_ssize_t end, const char *key, Py_ssize_t klen)
{
    for (Py_ssize_t p = end - klen; p >= start; p--)
        if (memcmp(data + p, key, (size_t)klen) == 0)
            return p;
    return -1;
}

/* First c in data[start:end] (Python's find of one byte), or -1. */
Py_ssize_t
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
Py_ssize_t
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

/* Room for `more` bytes after b->len (doubling); 0, or -1 with MemoryError set. */
int
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

/* Append n bytes the caller reserved. */
void
buf_put(Buf *b, const void *src, Py_ssize_t n)
{
    memcpy(b->mem + b->len, src, (size_t)n);
    b->len += n;
}

/* Twin of message_build._strip_crc_property: the properties without a __CRC32# pair, into
 * out (emptied first). Returns 0, or -1 on a memory error. */
int
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

/* Whether key occurs in p[0:n] (Python's `in`). */
int
contains(const char *p, Py_ssize_t n, const char *key, Py_ssize_t klen)
{
    return rfind_in(p, 0, n, key, klen) >= 0;
}

/* struct.error with the text struct.pack gives for a field out of its width; NULL. */
PyObject *
struct_range_error(const char *fmt)
{
    if (fmt[0] == 'q') /* the text struct gives for a Python int beyond a long long */
        PyErr_SetString(StructError, "int too large to convert");
    else
        PyErr_SetString(StructError, "'i' format requires -2147483648 <= number <= 2147483647");
    return NULL;
}

/* The record CRC of the record at rec (size bytes, trailer last): chained over head, body
 * and tail like `_build_records`, combining the body's own CRC for a large body. */
long long
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
void
write_trailer(char *w, long long seal)
{
    seal &= 0x7FFFFFFF;
    memcpy(w, "__CRC32#\x01", 9);
    for (int i = 0; i < 10; i++, seal /= 10)
        w[9 + i] = (char)('0' + seal % 10);
    w[19] = 2;
}

/* zlib's crc32(data, start), by a table: an index key is a few dozen bytes, where calling the
 * configured (zlib-ng) crc32 through Python costs more than the sum itself (the index key hashes
 * of replica_runs.c and record_fields.c). */
static uint32_t key_crc_table[256];

uint32_t
key_crc32(uint32_t start, const unsigned char *p, Py_ssize_t n)
{
    if (key_crc_table[1] == 0) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
            key_crc_table[i] = c;
        }
    }
    uint32_t c = ~start;
    for (Py_ssize_t i = 0; i < n; i++)
        c = key_crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return ~c;
}

/* zlib's adler32(data, start). */
uint32_t
key_adler32(uint32_t start, const unsigned char *p, Py_ssize_t n)
{
    uint32_t a = start & 0xFFFF, b = start >> 16;
    for (Py_ssize_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521;
        b = (b + a) % 65521;
    }
    return (b << 16) | a;
}

/* The whole frame at buf[pos:] (a[0] a bytearray, a[1] pos, a[2] the frame size limit, as
 * FrameDecoder.next_command holds them) when its header's serialization is `serialize` and the
 * header is at least `min_header` bytes: 1, with *frame its first byte, *pos_out, *total (the
 * length word) and *hlen set; 0 for everything else (fewer than a whole frame buffered, a
 * length or header word the Python path refuses, another serialization), which the caller's
 * Python path then decodes with its own errors. */
int
whole_frame_at(PyObject *const *a, int serialize, Py_ssize_t min_header,
               const unsigned char **frame, Py_ssize_t *pos_out, Py_ssize_t *total,
               Py_ssize_t *hlen)
{
    if (!PyByteArray_CheckExact(a[0]) || !PyLong_CheckExact(a[1]) || !PyLong_CheckExact(a[2]))
        return 0;
    Py_ssize_t pos = PyLong_AsSsize_t(a[1]), max_frame = PyLong_AsSsize_t(a[2]);
    if ((pos == -1 || max_frame == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t n = PyByteArray_GET_SIZE(a[0]);
    if (pos < 0 || pos > n || n - pos < 8)
        return 0;
    const unsigned char *p = (const unsigned char *)PyByteArray_AS_STRING(a[0]) + pos;
    Py_ssize_t t = get_be32(p);
    uint32_t hword = (uint32_t)get_be32(p + 4);
    Py_ssize_t h = (Py_ssize_t)(hword & 0xFFFFFF);
    if (t < MIN_FRAME || t > max_frame || (int)(hword >> 24) != serialize ||
        h < min_header || h > t - 4 || n - pos < 4 + t)
        return 0;
    *frame = p;
    *pos_out = pos;
    *total = t;
    *hlen = h;
    return 1;
}
