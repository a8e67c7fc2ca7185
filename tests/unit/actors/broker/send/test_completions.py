"""A send's completion (actors/broker/send/completions.py): the store actor's answer to a single
put or a batch becomes the send's outcome, stored or failed."""

from __future__ import annotations

from rocketrio.actors.broker.dispatch.outcomes import PutFailed, PutStatus, SendOutcome, SendStored
from rocketrio.actors.broker.send.completions import PendingSend, batch_done
from rocketrio.storage.message_store import BatchPutResult, PutResult


def test_a_stored_batch_answers_every_id_and_its_first_offset() -> None:
    got: list[SendOutcome] = []
    done = batch_done(got.append)
    stored = BatchPutResult("T", 2, 7, [100, 180], [80, 90], [b"U1", b"U2"], 5, "0A000001" + "2A9F")
    done(stored, PutStatus.PUT_OK, None)
    (outcome,) = got
    assert isinstance(outcome, SendStored) and outcome.status is PutStatus.PUT_OK
    assert (outcome.queue_id, outcome.queue_offset) == (2, 7)
    assert outcome.msg_id.count(",") == 1 and outcome.uniq_key == "U1,U2"


def test_a_batch_or_a_send_the_store_refused_is_put_failed() -> None:
    got: list[SendOutcome] = []
    batch_done(got.append)(None, PutStatus.SERVICE_NOT_AVAILABLE, "disk full")
    PendingSend(got.append, 3, "U")([], PutStatus.MESSAGE_ILLEGAL, "too big")
    assert got == [
        PutFailed(PutStatus.SERVICE_NOT_AVAILABLE, "disk full"),
        PutFailed(PutStatus.MESSAGE_ILLEGAL, "too big"),
    ]


def test_a_stored_send_names_the_queue_the_producer_asked_for() -> None:
    got: list[SendOutcome] = []
    offset_msg_id = "0A00000100002A9F0000000000000064"
    result = PutResult(100, 80, 12, offset_msg_id, 5)
    PendingSend(got.append, 5, "UNIQ")([result], PutStatus.FLUSH_DISK_TIMEOUT, "slow")
    assert got == [SendStored(PutStatus.FLUSH_DISK_TIMEOUT, "slow", offset_msg_id, 5, 12, "UNIQ")]
