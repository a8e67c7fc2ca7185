/* rocketrio.protocol._speedups: the ROCKETMQ (binary) remoting header, decode and encode. */
#include "speedups.h"

/* What `configure_remoting` hands over once (rocketrio.protocol.remoting). */
static PyObject *CommandType;  /* RemotingCommand */
static PyObject *LangNames;    /* language code -> name */
static PyObject *LangCodes;    /* language name -> code */
static PyObject *LangOther;    /* the code of a language not in LangCodes */
static PyObject *OtherName;    /* "OTHER" */

/* configure_remoting(command_type, lang_name_by_code, lang_code_by_name, lang_other) */
PyObject *
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
PyObject *
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

/* rocketmq_header(code, language, version, opaque, flag, remark, ext_fields) -> bytes | None
 * Twin of remoting._rocketmq_header_of_py: the ROCKETMQ header bytes; None for anything the
 * twin refuses or that is not plain (the caller then runs the twin). */
PyObject *
rocketmq_header(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    long long code, version, opaque, flag, lang;
    if (nargs != 7 || LangCodes == NULL || !PyDict_CheckExact(a[6]) ||
        !fits_ll(a[0], -32768, 32767, &code) || !fits_ll(a[2], -32768, 32767, &version) ||
        !fits_ll(a[3], INT32_MIN, INT32_MAX, &opaque) || !fits_ll(a[4], INT32_MIN, INT32_MAX, &flag))
        Py_RETURN_NONE;
    if (!PyUnicode_CheckExact(a[1]))
        Py_RETURN_NONE;
    PyObject *lang_obj = PyDict_GetItemWithError(LangCodes, a[1]);
    if (lang_obj == NULL && PyErr_Occurred())
        return NULL;
    if (!fits_ll(lang_obj ? lang_obj : LangOther, -128, 127, &lang))
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
