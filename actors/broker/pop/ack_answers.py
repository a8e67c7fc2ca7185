"""The answers of ACK_MESSAGEs served by the direct path (direct_ack.py), one ACK or a turn's.

`answer_one` is a direct ACK's ``on_done`` (bound with `functools.partial` to its connection,
opaque and serialize type): SUCCESS from its template (answer_frames.py) once the ACK's record is
stored, a refusal encoded as the generic path encodes it (`answer_done` of the request's
command).

`answer_stored` tells every ACK of a stored batch (ack_batch.py) its outcome, as calling each
one's ``on_done`` with `Done` would, but builds the direct ACKs' SUCCESS answers of one
connection as one run of frames (`answer_frames_of`) handed to the connection once: the same
bytes, queued at the same moment, in the same order on each connection (a run is handed over
before any other ``on_done`` of the batch is called, so an answer given through another path
keeps its place), without three calls per ACK. The connection writes what a turn queued as
the turn ends either way (answer_flush.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from rocketrio.actors.broker.dispatch.answers import answer_done
from rocketrio.actors.broker.dispatch.outcomes import Done, Refusal
from rocketrio.actors.kernel.remoting import Connection
from rocketrio.protocol.answer_frames import answer_frame_of, answer_frames_of
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand

_SUCCESS = int(ResponseCode.SUCCESS)
_DONE = Done()


def answer_one(conn: Connection, opaque: int, st: int, outcome: Done | Refusal) -> None:
    """One direct ACK's answer, given once its outcome is known (its ``on_done``)."""
    if outcome.__class__ is Done:  # nothing subclasses Done
        frame = answer_frame_of(st, opaque, _SUCCESS)
        if frame is not None:
            conn.send_frame_nowait(frame)
            return
    stub = RemotingCommand(RequestCode.ACK_MESSAGE, opaque=opaque, serialize_type=st)
    conn.send_nowait(answer_done(stub, outcome))


def _hand_over(runs: dict[Connection, tuple[int, list[int]]]) -> None:
    for conn, (st, opaques) in runs.items():
        frames = answer_frames_of(st, opaques, _SUCCESS)
        if frames is None:  # no template: each answered as `answer_one` answers it
            for opaque in opaques:
                answer_one(conn, opaque, st, _DONE)
        else:
            conn.send_frame_nowait(frames)
    runs.clear()


def answer_stored(on_dones: Iterable[Callable[[Done | Refusal], None]]) -> None:
    """``on_done(Done())`` for each, in order, the direct ACKs' answers per connection in one
    run (module docstring)."""
    runs: dict[Connection, tuple[int, list[int]]] = {}
    for on_done in on_dones:
        if on_done.__class__ is partial and on_done.func is answer_one:  # type: ignore[attr-defined]
            conn, opaque, st = on_done.args  # type: ignore[attr-defined]
            run = runs.get(conn)
            if run is None:
                runs[conn] = (st, [opaque])
                continue
            if run[0] == st:
                run[1].append(opaque)
                continue
        if runs:  # an answer of another kind (or serialize type): the runs before it first
            _hand_over(runs)
        on_done(_DONE)
    if runs:
        _hand_over(runs)
