/* rocketrio.protocol._speedups: the method table and the module. */
#include "speedups.h"

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
    {"check_replicated", (PyCFunction)(void (*)(void))check_replicated, METH_FASTCALL,
     "Twin of rocketrio.storage.commitlog.records._check_replicated_py (None: not taken)."},
    {"replica_runs", (PyCFunction)(void (*)(void))replica_runs, METH_FASTCALL,
     "Twin of rocketrio.storage.dispatch_request.replica_runs_py (None: not taken)."},
    {"whole_records", (PyCFunction)(void (*)(void))whole_records, METH_FASTCALL,
     "Twin of rocketrio.actors.broker.ha.slave_core._whole_records_length_py (None: not "
     "taken)."},
    {"index_entries", (PyCFunction)(void (*)(void))index_entries, METH_FASTCALL,
     "Twin of rocketrio.storage.index_segment._index_entries_py (None: not taken)."},
    {"next_rocketmq_frame", (PyCFunction)(void (*)(void))next_rocketmq_frame, METH_FASTCALL,
     "The next whole ROCKETMQ frame of remoting.FrameDecoder's buffer."},
    {"next_direct_json", (PyCFunction)(void (*)(void))next_direct_json, METH_FASTCALL,
     "The next plain JSON request of a direct code of remoting.FrameDecoder's buffer."},
    {"send_answer_frame", (PyCFunction)(void (*)(void))send_answer_frame, METH_FASTCALL,
     "Twin of rocketrio.protocol.send_answer._send_answer_frame_py."},
    {"send_header_v2", (PyCFunction)(void (*)(void))send_header_v2, METH_FASTCALL,
     "Twin of rocketrio.actors.broker.send.handlers.parse_send_header_v2 (the plain case)."},
    {"wire_text_properties", (PyCFunction)(void (*)(void))wire_text_properties, METH_FASTCALL,
     "Twin of rocketrio.storage.dispatch_request.wire_properties (a text, no CRC pair)."},
    {"ack_request", (PyCFunction)(void (*)(void))ack_request, METH_FASTCALL,
     "Twin of rocketrio.protocol.pop_headers.ack_request_py (None: not taken)."},
    {"record_fields", (PyCFunction)(void (*)(void))record_fields, METH_FASTCALL,
     "Twin of rocketrio.storage.record_fields.record_fields_py."},
    {"configure_record_fields", configure_record_fields, METH_O, "(record_fields_py)"},
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
