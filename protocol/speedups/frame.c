/* rocketrio.protocol._speedups: the next whole ROCKETMQ frame of a reader's buffer
 * (remoting.FrameDecoder.next_command's Python path for that case, without its two slice
 * copies and its Python checks). */
#include "speedups.h"

#define SERIALIZE_ROCKETMQ 1
#define MIN_ROCKETMQ_HEADER 21 /* remoting._MIN_ROCKETMQ_HEADER */

/* next_rocketmq_frame(buf, pos, max_frame) -> (RemotingCommand, end) | None
 * The command of the whole ROCKETMQ frame at buf[pos:] and the offset after it, the same
 * command FrameDecoder.next_command's Python path decodes. None for everything else: fewer
 * than a whole frame buffered, a length or header word the Python path refuses, a JSON frame,
 * a header the compiled header decode declines; the caller then runs the Python path, which
 * keeps its errors, its reasons and its buffer compaction. */
PyObject *
next_rocketmq_frame(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    const unsigned char *p;
    Py_ssize_t pos, total, hlen;
    if (nargs != 3 || !whole_frame_at(a, SERIALIZE_ROCKETMQ, MIN_ROCKETMQ_HEADER, &p, &pos,
                                      &total, &hlen))
        Py_RETURN_NONE;
    PyObject *parts[2];
    parts[0] = PyBytes_FromStringAndSize((const char *)p + 8, hlen);
    if (parts[0] == NULL)
        return NULL;
    parts[1] = PyBytes_FromStringAndSize((const char *)p + 8 + hlen, total - 4 - hlen);
    if (parts[1] == NULL) {
        Py_DECREF(parts[0]);
        return NULL;
    }
    PyObject *cmd = decode_rocketmq_header(NULL, parts, 2);
    Py_DECREF(parts[0]);
    Py_DECREF(parts[1]);
    if (cmd == NULL || cmd == Py_None)
        return cmd;
    PyObject *end = PyLong_FromSsize_t(pos + 4 + total);
    if (end == NULL) {
        Py_DECREF(cmd);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, cmd, end);
    Py_DECREF(cmd);
    Py_DECREF(end);
    return out;
}
