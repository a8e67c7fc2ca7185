/* rocketrio.protocol._speedups: the frame of a stored send's answer to a ROCKETMQ request
 * (remoting.encode_response of SUCCESS with the SendMessageResponseHeader's four extFields),
 * written in one pass: no extFields dict, no str() of the two numbers. */
#include "speedups.h"

/* The answer's extFields keys, in the order send/handlers.py builds them. */
static const char *const KEYS[4] = {"msgId", "queueId", "queueOffset", "transactionId"};

/* send_answer_frame(head, opaque, flag, remark, msg_id, queue_id, queue_offset, uniq)
 *   -> bytes | None
 * ``head``: the header's first 5 bytes (code, language, version), fixed per process. The
 * whole frame (length words included), byte for byte remoting.encode_response(request,
 * code, remark, {"msgId": msg_id, "queueId": str(queue_id), "queueOffset":
 * str(queue_offset), "transactionId": uniq}) of a ROCKETMQ request; None for what that
 * declines or refuses (a number out of its width, text that is not plain UTF-8): the caller
 * then runs it. */
PyObject *
send_answer_frame(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    long long opaque, flag, qid, qoff;
    if (nargs != 8 || !PyBytes_CheckExact(a[0]) || PyBytes_GET_SIZE(a[0]) != 5 ||
        !fits_ll(a[1], INT32_MIN, INT32_MAX, &opaque) ||
        !fits_ll(a[2], INT32_MIN, INT32_MAX, &flag) ||
        !fits_ll(a[5], LLONG_MIN, LLONG_MAX, &qid) ||
        !fits_ll(a[6], LLONG_MIN, LLONG_MAX, &qoff))
        Py_RETURN_NONE;
    const char *rb = "";
    Py_ssize_t rn = 0;
    if (a[3] != Py_None) {
        if (!PyUnicode_CheckExact(a[3]))
            Py_RETURN_NONE;
        if ((rb = PyUnicode_AsUTF8AndSize(a[3], &rn)) == NULL) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    char nums[2][24];
    const char *vb[4];
    Py_ssize_t vn[4];
    vn[1] = snprintf(nums[0], sizeof nums[0], "%lld", qid);
    vn[2] = snprintf(nums[1], sizeof nums[1], "%lld", qoff);
    vb[1] = nums[0];
    vb[2] = nums[1];
    PyObject *texts[2] = {a[4], a[7]};
    for (int i = 0; i < 2; i++) {
        int at = i == 0 ? 0 : 3;
        if (!PyUnicode_CheckExact(texts[i]))
            Py_RETURN_NONE;
        if ((vb[at] = PyUnicode_AsUTF8AndSize(texts[i], &vn[at])) == NULL) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    Py_ssize_t en = 0;
    for (int i = 0; i < 4; i++)
        en += 6 + (Py_ssize_t)strlen(KEYS[i]) + vn[i];
    Py_ssize_t hlen = 21 + rn + en;
    if (hlen > 0xFFFFFF)
        Py_RETURN_NONE; /* encode_response raises LocalProtocolError */
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 + hlen);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    put_be32(w, (uint32_t)(4 + hlen));
    put_be32(w + 4, (uint32_t)((1u << 24) | (uint32_t)hlen)); /* SERIALIZE_ROCKETMQ */
    w += 8;
    memcpy(w, PyBytes_AS_STRING(a[0]), 5);
    put_be32(w + 5, (uint32_t)opaque);
    put_be32(w + 9, (uint32_t)flag);
    put_be32(w + 13, (uint32_t)rn);
    memcpy(w + 17, rb, (size_t)rn);
    put_be32(w + 17 + rn, (uint32_t)en);
    w += 21 + rn;
    for (int i = 0; i < 4; i++) {
        Py_ssize_t kn = (Py_ssize_t)strlen(KEYS[i]);
        w[0] = 0;
        w[1] = (char)kn;
        memcpy(w + 2, KEYS[i], (size_t)kn);
        put_be32(w + 2 + kn, (uint32_t)vn[i]);
        memcpy(w + 6 + kn, vb[i], (size_t)vn[i]);
        w += 6 + kn + vn[i];
    }
    return out;
}
