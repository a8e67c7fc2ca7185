/* Shared declarations of rocketrio.protocol._speedups (the .c files of protocol/speedups/).
 *
 * Compiled twins of a few pure-Python hot loops of the send path. Every function has a Python
 * twin that stays the reference and the fallback (ROCKETRIO_PURE_PYTHON=1 or no compiler):
 * same bytes out, same exception class and message for bad input
 * (tests/unit/protocol/test_speedups.py proves it with Hypothesis).
 *
 * No library but Python's: CRC-32 is zlib-ng's, called through the Python objects that
 * `configure` receives (rocketrio.protocol.message_format.crc32 / crc32_combine), so the
 * values are the ones the pure path computes. Every read of input bytes is bounds-checked.
 *
 *   common.c   configuration, CRC calls, property look-ups, the growable buffer, record CRC
 *   batch.c    build_records (message_build._build_records_py)
 *   record.c   append_record (message_build._append_record_py)
 *   header.c   the ROCKETMQ header decode and encode (remoting._*_py)
 *   replica.c  check_replicated (storage.commitlog.records._check_replicated_py)
 *   replica_runs.c  replica_runs (storage.dispatch_request.replica_runs_py)
 *   index_append.c  index_entries (storage.index_segment._index_entries_py)
 *   whole_records.c  whole_records (actors.broker.ha.slave_core._whole_records_length_py)
 *   frame.c    the next whole ROCKETMQ frame of a reader's buffer (remoting.FrameDecoder)
 *   direct_json.c  the next plain JSON request of a direct code as a DirectRequest (the same)
 *   answer.c   a stored send's answer frame (send_answer._send_answer_frame_py)
 *   send_header.c  SEND_MESSAGE_V2's extFields to the send header (send/handlers.py)
 *   props.c    a message's properties text as the store writes it (dispatch_request.py)
 *   record_fields.c  a plain message's record and its dispatch fields (storage/record_fields.py)
 *   ack_request.c  an ACK_MESSAGE's extFields and receipt in one read (pop_headers.py)
 *   module.c   the method table
 */
#ifndef RR_SPEEDUPS_H
#define RR_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* What `configure` hands over once at import (rocketrio.protocol.compiled). */
extern PyObject *DecodeError;  /* MessageDecodeError */
extern PyObject *SizeError;    /* MessageSizeError */
extern PyObject *StructError;  /* struct.error */
extern PyObject *Crc32;        /* crc32(data, start=0) */
extern PyObject *Crc32Combine; /* crc32_combine(a, b, len_b), or None */
extern long long CombineMin;   /* from this body size on, combine instead of re-reading */

/* ------------------------------------------------------------------ big-endian bytes */

static inline void
put_be32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

static inline void
put_be64(char *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static inline int32_t
get_be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static inline int16_t
get_be16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

/* A growable byte buffer (PyMem). */
typedef struct {
    char *mem;
    Py_ssize_t len, cap;
} Buf;

/* ------------------------------------------------------------------ common.c */

int set_ref(PyObject **slot, PyObject *value);
long long crc_of(const char *mem, Py_ssize_t len, unsigned long start);
long long crc_combine(unsigned long a, unsigned long b, Py_ssize_t len_b);
int fits_ll(PyObject *o, long long lo, long long hi, long long *out);
#define MIN_FRAME 6 /* remoting.MIN_FRAME */
int whole_frame_at(PyObject *const *a, int serialize, Py_ssize_t min_header,
                   const unsigned char **frame, Py_ssize_t *pos, Py_ssize_t *total,
                   Py_ssize_t *hlen);
Py_ssize_t rfind_in(const char *data, Py_ssize_t start, Py_ssize_t end, const char *key,
                    Py_ssize_t klen);
Py_ssize_t find_byte(const char *data, Py_ssize_t start, Py_ssize_t end, char c);
Py_ssize_t find_prop(const char *data, Py_ssize_t n, const char *key, Py_ssize_t klen,
                     Py_ssize_t *vlen);
int buf_reserve(Buf *b, Py_ssize_t more);
void buf_put(Buf *b, const void *src, Py_ssize_t n);
int strip_crc(const char *p, Py_ssize_t n, Buf *out);
int contains(const char *p, Py_ssize_t n, const char *key, Py_ssize_t klen);
PyObject *struct_range_error(const char *fmt);
long long record_crc(Py_ssize_t head, const char *rec, Py_ssize_t size, Py_ssize_t body_len,
                     unsigned long body_crc);
void write_trailer(char *w, long long seal);
uint32_t key_crc32(uint32_t start, const unsigned char *p, Py_ssize_t n);
uint32_t key_adler32(uint32_t start, const unsigned char *p, Py_ssize_t n);

/* ------------------------------------------------------------------ the module's functions */

PyObject *configure(PyObject *self, PyObject *args);
PyObject *build_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *configure_record(PyObject *self, PyObject *twin);
PyObject *append_record(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *configure_remoting(PyObject *self, PyObject *args);
PyObject *decode_rocketmq_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *rocketmq_header(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *check_replicated(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *replica_runs(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *index_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *whole_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *next_rocketmq_frame(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
/* direct_json.c */
PyObject *next_direct_json(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *send_answer_frame(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *send_header_v2(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *wire_text_properties(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *record_fields(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
PyObject *configure_record_fields(PyObject *self, PyObject *twin);
PyObject *ack_request(PyObject *self, PyObject *const *a, Py_ssize_t nargs);

#endif
