/* rocketrio.protocol._speedups: the next whole JSON frame of a reader's buffer as a
 * DirectRequest (remoting.FrameDecoder.next_command's Python path for a plain request of a
 * direct code: orjson's parse of the header, then _direct_json), for the frames a client
 * writes: one POP consumer's ACK_MESSAGE per acknowledged message.
 *
 * It reads only a narrow, plain subset of JSON and declines (None) everything else, which
 * then takes the Python path unchanged: a string with an escape or a control character or
 * not UTF-8, a number with a fraction, an exponent, a leading zero or more than 18 digits, a
 * nested array or object but extFields, anything after the object. A repeated key keeps its
 * last value, as in orjson's parse. So whatever it accepts, orjson parses to the same values,
 * and the DirectRequest is the one _direct_json would give. */
#include "speedups.h"

#define SERIALIZE_JSON 0
#define MIN_JSON_HEADER 2 /* remoting._MIN_JSON_HEADER */

typedef struct {
    const unsigned char *p, *end;
} Cur;

static void
skip_ws(Cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* A plain string at c->p (its opening quote): its bytes [*s, *s + *n), 1 if all ASCII, 0 if
 * not, -1 to decline (an escape, a control character, no closing quote). */
static int
plain_string(Cur *c, const unsigned char **s, Py_ssize_t *n)
{
    if (c->p >= c->end || *c->p != '"')
        return -1;
    const unsigned char *q = ++c->p;
    int ascii = 1;
    while (q < c->end && *q != '"') {
        if (*q == '\\' || *q < 0x20)
            return -1;
        if (*q >= 0x80)
            ascii = 0;
        q++;
    }
    if (q >= c->end)
        return -1;
    *s = c->p;
    *n = q - c->p;
    c->p = q + 1;
    return ascii;
}

/* A plain string as a str; NULL with no error set to decline (not UTF-8 included). */
static PyObject *
string_value(Cur *c)
{
    const unsigned char *s;
    Py_ssize_t n;
    int ascii = plain_string(c, &s, &n);
    if (ascii < 0)
        return NULL;
    PyObject *out = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (out == NULL)
        PyErr_Clear();
    return out;
}

/* A plain string whose value is not kept: 0, or -1 to decline. */
static int
skip_string(Cur *c)
{
    const unsigned char *s;
    Py_ssize_t n;
    int ascii = plain_string(c, &s, &n);
    if (ascii != 0)
        return ascii;
    PyObject *check = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (check == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_DECREF(check);
    return 0;
}

/* A plain integer -?(0|[1-9][0-9]{0,17}) not followed by a fraction or an exponent (not -0). */
static int
int_value(Cur *c, long long *v)
{
    const unsigned char *q = c->p;
    int neg = q < c->end && *q == '-';
    q += neg;
    if (q >= c->end || *q < '0' || *q > '9')
        return -1;
    const unsigned char *digits = q;
    long long x = 0;
    while (q < c->end && *q >= '0' && *q <= '9')
        x = x * 10 + (*q++ - '0');
    Py_ssize_t nd = q - digits;
    if (nd > 18 || (nd > 1 && *digits == '0') || (neg && x == 0))
        return -1; /* too long for this reader, a leading zero, or -0 */
    if (q < c->end && (*q == '.' || *q == 'e' || *q == 'E'))
        return -1;
    *v = neg ? -x : x;
    c->p = q;
    return 0;
}

/* A scalar whose value is not kept: a plain string, integer, true, false or null. */
static int
skip_scalar(Cur *c)
{
    if (c->p >= c->end)
        return -1;
    if (*c->p == '"')
        return skip_string(c);
    static const char *const words[3] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(words[i]);
        if ((size_t)(c->end - c->p) >= len && memcmp(c->p, words[i], len) == 0) {
            c->p += len;
            return 0;
        }
    }
    long long ignored;
    return int_value(c, &ignored);
}

/* extFields: an object of plain strings (a repeated key: its last value); NULL with no error
 * to decline. */
static PyObject *
ext_object(Cur *c)
{
    if (c->p >= c->end || *c->p != '{')
        return NULL;
    c->p++;
    PyObject *ext = PyDict_New();
    if (ext == NULL)
        return NULL;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return ext;
    }
    for (;;) {
        skip_ws(c);
        PyObject *k = string_value(c);
        if (k == NULL)
            break;
        skip_ws(c);
        PyObject *v = NULL;
        if (c->p < c->end && *c->p == ':') {
            c->p++;
            skip_ws(c);
            v = string_value(c);
        }
        int put = v == NULL ? -1 : PyDict_SetItem(ext, k, v);
        Py_DECREF(k);
        Py_XDECREF(v);
        if (put < 0)
            break;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return ext;
        }
        break;
    }
    Py_DECREF(ext);
    return NULL; /* an error set by the dict (memory) stays set */
}

enum { K_CODE, K_OPAQUE, K_FLAG, K_VERSION, K_EXT, K_OTHER };

static int
key_of(const unsigned char *s, Py_ssize_t n)
{
    static const char *const names[K_OTHER] = {"code", "opaque", "flag", "version", "extFields"};
    for (int i = 0; i < K_OTHER; i++)
        if ((size_t)n == strlen(names[i]) && memcmp(s, names[i], (size_t)n) == 0)
            return i;
    return K_OTHER;
}

/* A code in the frozenset ``codes``: 1, 0 if not, -1 with an error set. */
static int
one_of(long long code, PyObject *codes)
{
    PyObject *obj = PyLong_FromLongLong(code);
    if (obj == NULL)
        return -1;
    int ours = PySet_Contains(codes, obj);
    Py_DECREF(obj);
    return ours;
}

/* The header's code (one of ``codes``), opaque and extFields (flag 0, version an integer); 0,
 * -1 to decline (a header of another code as soon as its code is read: a client writes it
 * first, so the other JSON requests cost this reader a few bytes). */
static int
plain_header(Cur *c, PyObject *codes, long long *code, long long *opaque, PyObject **ext)
{
    long long num[K_EXT] = {0, 0, 0, 0};
    int seen[K_OTHER] = {0};
    skip_ws(c);
    if (c->p >= c->end || *c->p != '{')
        return -1;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}')
        return -1; /* no code */
    for (;;) {
        skip_ws(c);
        const unsigned char *s;
        Py_ssize_t n;
        const unsigned char *at = c->p;
        int ascii = plain_string(c, &s, &n);
        if (ascii < 0)
            return -1;
        int key = ascii ? key_of(s, n) : K_OTHER;
        if (!ascii) { /* a key not ours: still UTF-8, or declined */
            c->p = at;
            if (skip_string(c) < 0)
                return -1;
        }
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':')
            return -1;
        c->p++;
        skip_ws(c);
        if (key != K_OTHER)
            seen[key] = 1;
        if (key == K_EXT) { /* a repeated extFields: the last one, as orjson */
            Py_XDECREF(*ext);
            if ((*ext = ext_object(c)) == NULL)
                return -1;
        }
        else if (key != K_OTHER) {
            if (int_value(c, &num[key]) < 0)
                return -1;
            if (key == K_CODE && one_of(num[K_CODE], codes) <= 0)
                return -1; /* (an error set stays set) */
        }
        else if (skip_scalar(c) < 0)
            return -1;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}')
            break;
        return -1;
    }
    c->p++;
    skip_ws(c);
    if (c->p != c->end || !seen[K_CODE] || !seen[K_EXT] || num[K_FLAG] != 0)
        return -1;
    *code = num[K_CODE];
    *opaque = num[K_OPAQUE];
    return 0;
}

/* next_direct_json(buf, pos, max_frame, codes) -> ((code, opaque, extFields, body, 0,
 * header bytes), end) | None
 * The whole plain JSON request frame at buf[pos:] whose code is in the frozenset ``codes``,
 * and the offset after it; None for everything else (fewer than a whole frame buffered, a
 * length or header word the Python path refuses, a ROCKETMQ frame, a header this reader
 * declines, another code), which the caller's Python path then decodes as ever. */
PyObject *
next_direct_json(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    const unsigned char *p;
    Py_ssize_t pos, total, hlen;
    if (nargs != 4 || !PyFrozenSet_CheckExact(a[3]) ||
        !whole_frame_at(a, SERIALIZE_JSON, MIN_JSON_HEADER, &p, &pos, &total, &hlen))
        Py_RETURN_NONE;
    Cur c = {p + 8, p + 8 + hlen};
    long long code, opaque;
    PyObject *ext = NULL;
    if (plain_header(&c, a[3], &code, &opaque, &ext) < 0) {
        Py_XDECREF(ext);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out = Py_BuildValue(
        "((LLNy#iy#)n)", code, opaque, ext, (const char *)p + 8 + hlen,
        (Py_ssize_t)(total - 4 - hlen), SERIALIZE_JSON, (const char *)p + 8, hlen, pos + 4 + total);
    return out;
}
