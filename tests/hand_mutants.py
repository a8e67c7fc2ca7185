"""Hand mutants: break one rule of the product at a time (a text replacement in one file), run
the tests named for it, restore the file. Prints one JSON line per mutant: its name, the tests,
`caught` (a test failed) and the seconds it took. Each replacement must match exactly once, so a
mutant whose code moved fails loudly instead of passing unnoticed.

    .venv/bin/python -m tests.hand_mutants            # every mutant
    .venv/bin/python -m tests.hand_mutants "store lock"  # the ones whose name holds the text

The cluster simulation's own mutants (tests/sim/mutants.py) are applied in-process instead:
`pytest tests/sim/test_cluster_sim.py --mutant NAME --seeds N` and the scenario test
`test_the_scenarios_catch_a_broken_product`. Run this on a clean working tree: it rewrites
product files while it runs (and restores them, even when interrupted).
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs

R = str(Path(__file__).resolve().parent.parent)


@attrs.frozen
class Mutant:
    """Replace ``text`` by ``replacement`` in ``path``; one of ``tests`` must then fail."""

    name: str
    path: str
    text: str
    replacement: str
    tests: list[str]


_AM = "tests/actor/broker/test_acting_master.py::"
_RT = "tests/actor/broker/test_replicated_turns.py::"
_HS = "tests/actor/broker/test_ha_shells.py::"
_GT = "tests/actor/broker/test_gate_timer.py::"
_GP = "tests/unit/actors/kernel/test_gc_policy.py::"
_WR = "tests/unit/actors/broker/ha/test_whole_records.py::"
_HA = "tests/unit/protocol/test_ha.py::"
_SR = "tests/unit/actors/broker/ha/test_slave_reads.py"
_SLR = _HS + "test_a_reads_packets_reach_the_slave_core_as_one_run"
_MC = "tests/unit/actors/broker/ha/test_master_core.py::"
_DG = "tests/unit/storage/test_dispatch_gate_replica.py::"
_SS = "tests/unit/actors/broker/ha/test_sync_state.py::"
_AC = "tests/unit/actors/broker/failover/test_acting_core.py::"
_AP = "tests/actor/broker/test_acting_master_pop.py::"
_PP = "tests/unit/actors/broker/failover/test_pop_pins.py::"
_PE = "tests/unit/actors/broker/failover/test_pop_escape.py::"
_SC = "tests/unit/actors/broker/store/test_scrub_service.py::"
_LR = "tests/actor/client/test_lite_pull_reply.py::"
_SQ = "tests/unit/protocol/test_sql92.py::"
_SB = "tests/actor/broker/test_sql92_filter.py::"
_BM = "tests/actor/broker/test_sql92_bitmap.py::"
_CX = "tests/unit/storage/test_cq_ext.py::"
_FD = "tests/unit/actors/broker/dispatch/test_filter_data.py::"
_RC = "tests/unit/protocol/test_request_code_census.py::"
_PU = "tests/unit/actors/broker/pop/test_probe.py::"
_RW = "tests/actor/client/test_stuck_sends_watch.py::"
_CR = (
    "tests/actor/client/test_client_remoting.py::"
    "test_a_request_in_flight_is_awaited_in_pieces_until_released"
)
_PA = "tests/actor/broker/test_pop_probe.py::"
_GD = "tests/actor/observe/test_grafana_dashboard.py::"
_QA = "tests/unit/actors/broker/assign/test_allocation.py::"
_QQ = "tests/unit/actors/broker/assign/test_queues.py::"
_QM = "tests/unit/actors/broker/tables/test_request_mode.py::"
_QT = "tests/actor/broker/test_assignment.py::"
_CD = "tests/actor/cli/test_consume_directly.py::"
_LP = "tests/actor/broker/test_lost_page_recovery.py::"
_LQ = "tests/unit/storage/test_lost_page_quarantine.py::"
_RP = "tests/unit/storage/test_replica_check.py::"
_RR = "tests/unit/storage/test_replica_runs.py::"
_IE = "tests/unit/storage/test_index_entries.py::"
_AF = "tests/actor/kernel/test_answer_flush.py::"
_DS = "tests/unit/actors/broker/send/test_direct_send.py::"
_GF = "tests/actor/broker/test_group_forbidden.py::"
_UGF = "tests/unit/actors/broker/tables/test_group_forbidden.py::"
_TR = "tests/actor/client/test_transaction_resume.py::"
_CU = "tests/actor/broker/test_clean_unused_topic.py::"
_SD = "tests/system/test_chaos_slow_disk.py::"
_DA = "tests/unit/actors/broker/pop/test_direct_ack.py::"
_PN = "tests/actor/broker/test_pop_nowait.py::"
_BK = "tests/unit/cli/chaos/test_blkio.py::"
_SP = "tests/unit/protocol/test_speedups.py::"
_AK = "tests/unit/actors/broker/pop/test_ack_path.py::"
_AR = "tests/actor/broker/test_pop_ack_range.py::"
_OC = "tests/unit/actors/broker/pop/test_ack_offset_check.py::"
_PR = "tests/unit/protocol/test_pop_records.py::"
_SS2 = "tests/unit/protocol/test_speedups_send.py::"
_DJ = "tests/unit/protocol/test_speedups_direct_json.py::"
_RF = "tests/unit/storage/test_record_fields.py"
_PBU = "tests/unit/actors/broker/pop/test_buffer_merge.py::"
_PBS = "tests/unit/actors/broker/pop/test_buffer_service.py::"
_PBA = "tests/actor/broker/test_pop_buffer.py::"
_PBF = "tests/actor/client/test_pop_buffer_failover.py::"
_LATEST = (
    "        if buf is not None and (latest := buf.latest(topic, group, queue_id)) is not None:"
)

# put_and_wait, from a module that does not import it (the confirmed-put mutants' old calls)
_PAW = '__import__("rocketrio.actors.broker.store.messages", fromlist=["x"]).put_and_wait'

MUTANTS: list[Mutant] = [
    Mutant(
        "END_TRANSACTION without a task writes the op of a commit the store refused",
        "actors/broker/transaction/end_path.py",
        "        if results and status.stored:\n            self.write_op()",
        "        if True:  # MUTANT\n            self.write_op()",
        [
            "tests/actor/broker/test_transaction_op_batch.py::test_a_commit_the_store_refused_gets_no_op_and_is_committed_by_the_check",
        ],
    ),
    Mutant(
        "an END whose commit met a full store inbox is dropped, not waited for",
        "actors/broker/transaction/end_path.py",
        "        return _put_waiting(end, [msg])  # the inbox is full: backpressure",
        "        return None  # MUTANT",
        [
            "tests/actor/broker/test_transaction_op_batch.py::test_an_end_whose_commit_meets_a_full_store_inbox_waits_and_commits_once",
        ],
    ),
    Mutant(
        "txn half cache: a cached half served after the CommitLog was truncated below it",
        "actors/broker/transaction/half_cache.py",
        "        if offset < log_min or offset + put.size > log_max:",
        "        if False:  # MUTANT",
        [
            "tests/unit/actors/broker/transaction/test_half_cache.py::test_a_half_is_served_once_and_only_while_the_commitlog_spans_it"
        ],
    ),
    Mutant(
        "txn half cache: a role change keeps the cached halves",
        "actors/broker/transaction/service.py",
        "        self.loaded = False\n        self.halves.clear()",
        "        self.loaded = False  # MUTANT",
        [
            "tests/actor/broker/test_transaction_half_cache.py::test_a_role_change_empties_the_cache_and_the_end_reads_its_half_back"
        ],
    ),
    Mutant(
        "txn half cache: a half cached before the store answered it stored",
        "actors/broker/transaction/half_cache.py",
        "        if results and status.stored:\n            self.cache.add",
        "        if True:  # MUTANT\n            self.cache.add",
        [
            "tests/unit/actors/broker/transaction/test_half_cache.py::test_only_a_stored_half_is_cached_and_the_send_is_answered_either_way"
        ],
    ),
    Mutant(
        "txn half keys: written out even with a separator inside (encode_properties refuses)",
        "actors/broker/transaction/policy.py",
        """    if "\\x01" in topic or "\\x02" in topic or (uniq and""",
        """    if False and "\\x01" in topic or (uniq and""",  # the topic not checked
        [
            "tests/unit/actors/broker/transaction/test_half_cache.py::test_the_half_keys_are_written_as_encode_properties_writes_them",
        ],
    ),
    Mutant(
        "txn half cache: a commit built with the half's TRAN_MSG left in",
        "actors/broker/transaction/policy.py",
        "    props.pop(PROPERTY_TRANSACTION_PREPARED, None)\n    props.pop(PROPERTY_CRC32",
        "    props.pop(PROPERTY_CRC32",
        [
            "tests/unit/actors/broker/transaction/test_half_cache.py::test_a_commit_from_a_cached_half_is_the_commit_from_the_disk",
            "tests/actor/broker/test_transaction_half_cache.py::test_every_end_of_a_burst_takes_its_half_from_the_cache_and_commits_it_once",
        ],
    ),
    Mutant(
        "an ACK the batcher cannot take is never written nor answered",
        "actors/broker/pop/ack.py",
        "        return self._put([msg], lambda: on_done(DONE), on_done)",
        "        return None  # MUTANT",
        [
            "tests/actor/broker/test_pop_ack_batch.py::test_an_ack_the_batcher_cannot_take_is_written_alone_before_its_answer",
        ],
    ),
    Mutant(
        "ACK_MESSAGE skips its offset check (an ACK outside the queue's range is taken)",
        "actors/broker/pop/ack.py",
        "        if not inside:\n",
        "        if False:  # MUTANT\n",
        [
            _AK + "test_every_refusal_keeps_its_code",
            _AR + "test_an_ack_is_judged_by_the_range_its_queue_has_now",
        ],
    ),
    Mutant(
        "ACK_MESSAGE takes a receipt naming no revive queue (the check inlined in ack_nowait)",
        "actors/broker/pop/ack.py",
        "        if not 0 <= qid < self.config.revive_queue_num"
        " and qid != POP_ORDER_REVIVE_QUEUE:\n",
        "        if False:  # MUTANT\n",
        [_AK + "test_every_refusal_keeps_its_code"],
    ),
    Mutant(
        "BATCH_ACK's one range read per CK takes an offset above the queue's max",
        "actors/broker/pop/ack.py",
        "            offsets = [o for o in b.ack_offsets() if lo <= o <= hi]",
        "            offsets = [o for o in b.ack_offsets() if lo <= o]  # MUTANT",
        [
            _AK + "test_a_batch_ack_takes_exactly_the_offsets_ack_message_takes",
            _AK + "test_a_batch_ack_reads_the_range_the_queue_has_now",
        ],
    ),
    Mutant(
        "put_and_wait(nowait_first) drops a put the full inbox refused",
        "actors/broker/store/messages.py",
        "            except trio.WouldBlock:\n                await writer.put(messages, on_done)",
        "            except trio.WouldBlock:\n                pass  # MUTANT",
        ["tests/unit/actors/broker/store/test_put_and_wait.py"],
    ),
    Mutant(
        "a POP ACK put the full inbox refused is never written",
        "actors/broker/pop/ack.py",
        "            except trio.WouldBlock:\n                await self.writer.put(msgs, done)",
        "            except trio.WouldBlock:\n                pass  # MUTANT",
        [_AK + "test_a_batch_ack_put_waits_for_inbox_space_only_when_the_inbox_is_full"],
    ),
    Mutant(
        "the revive's offset -> bit map keeps offsets below the CK's start",
        "protocol/pop_checkpoint.py",
        "        if min(diffs) < 0:",
        "        if min(diffs) < -100:  # MUTANT",
        [
            "tests/unit/actors/broker/pop/test_revive.py::test_a_cks_ack_bits_are_index_of_ack_of_every_offset"
        ],
    ),
    Mutant(
        "the revive's ACK match drops the CK's first message (bit 0)",
        "actors/broker/pop/revive.py",
        "            if i is not None and not acked >> i & 1:",
        "            if i and not acked >> i & 1:  # MUTANT",
        ["tests/unit/actors/broker/pop/test_revive.py"],
    ),
    Mutant(
        "a record body read through orjson even with an integer beyond 64 bits",
        "protocol/pop_checkpoint.py",
        "        if _LONG_NUMBER.search(body) is not None:",
        "        if False:  # MUTANT",
        [_PR + "test_record_bodies_read_as_the_standard_decoder_reads_them"],
    ),
    Mutant(
        "a CK's queue offset diffs taken from the wrong start",
        "actors/broker/pop/processor.py",
        "queue_offset_diff=tuple(map(operator.sub, qoffsets, repeat(offset))),",
        "queue_offset_diff=tuple(map(operator.sub, qoffsets, repeat(offset - 1))),  # MUTANT",
        ["tests/actor/broker/test_pop.py"],
    ),
    Mutant(
        "a CK's queue offsets read one record off",
        "actors/broker/pop/processor.py",
        "return list(chain.from_iterable(map(_queue_offset_of, buffers)))",
        "return list(chain.from_iterable(map(_queue_offset_of, buffers)))[1:]  # MUTANT",
        ["tests/actor/broker/test_pop.py"],
    ),
    Mutant(
        "a stored BATCH_ACK never answered",
        "actors/broker/pop/handlers.py",
        "        refusal = await acks.batch_ack(body, partial(_answer_ack, ctx))",
        "        refusal = await acks.batch_ack(body, lambda outcome: None)  # MUTANT",
        ["tests/actor/broker/test_pop.py::test_batch_ack"],
    ),
    Mutant(
        "ACK_MESSAGE answered before the put carrying its record is stored",
        "actors/broker/pop/ack.py",
        "        if self.batcher.queue((qid, key, offset, on_done)):",
        "        if self.batcher.queue((qid, key, offset, lambda o: None)):\n"
        "            on_done(DONE)  # MUTANT",
        [_AK + "test_an_ack_is_answered_only_once_its_record_is_stored"],
    ),
    Mutant(
        "a plain topic's queue range read once and kept (a cut or deleted queue still takes ACKs)",
        "actors/broker/static_topic/logic_store.py",
        "            return self._plain_range(topic, queue_id)\n        if not self.valid_queue",
        "            return self.__dict__.setdefault(  # MUTANT\n"
        "                (topic, queue_id), self._plain_range(topic, queue_id)\n"
        "            )\n        if not self.valid_queue",
        [_AR + "test_an_ack_is_judged_by_the_range_its_queue_has_now"],
    ),
    Mutant(
        "the view's kept queue range reader caches each queue's range (the ACK's offset check)",
        "actors/broker/store/view.py",
        "        return self._store.queue_range_reader()\n",
        "        import functools  # MUTANT\n\n"
        "        return functools.cache(self._store.queue_range_reader())\n",
        [
            "tests/unit/actors/broker/store/test_view.py::"
            "test_the_kept_queue_range_reader_reads_the_range_live",
            _AR + "test_an_ack_is_judged_by_the_range_its_queue_has_now",
        ],
    ),
    Mutant(
        "the queue range of a queue the store does not have takes any offset",
        "storage/consume_queue_store.py",
        "return cq.offset_range() if cq else (0, 0)",
        "return cq.offset_range() if cq else (0, 1 << 62)  # MUTANT",
        [_AR + "test_an_ack_is_judged_by_the_range_its_queue_has_now"],
    ),
    Mutant(
        "the ACK header read straight from extFields takes a negative queueId as positive",
        "protocol/pop_headers.py",
        "return group, topic, int(queue_id), extra_info, int(offset)",
        "return group, topic, abs(int(queue_id)), extra_info, int(offset)  # MUTANT",
        [_PR + "test_ack_fields_are_from_ext_or_step_aside"],
    ),
    Mutant(
        "CK / ACK record JSON through orjson with its keys unsorted",
        "protocol/pop_checkpoint.py",
        "        return orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)",
        "        return orjson.dumps(kept)  # MUTANT",
        [_PR + "test_record_json_is_byte_for_byte_the_standard_encoders_for_printable_text"],
    ),
    Mutant(
        "a turn's batcher task not woken by the first item queued",
        "actors/broker/store/turn_puts.py",
        "        if len(queued) == 1:",
        "        if len(queued) == 0:  # MUTANT",
        [
            "tests/unit/actors/broker/pop/test_ack_batch.py::test_one_turn_one_put_answered_only_once_stored",
        ],
    ),
    Mutant(
        "the revive's offset -> bit map keeps a repeated offset's last bit, not its first",
        "protocol/pop_checkpoint.py",
        "bits = dict(zip(map(start.__add__, reversed(diffs)), range(n - 1, -1, -1), strict=True))",
        "bits = dict(zip(map(start.__add__, diffs), range(n), strict=True))  # MUTANT",
        [
            "tests/unit/actors/broker/pop/test_revive.py::test_a_cks_ack_bits_are_index_of_ack_of_every_offset"
        ],
    ),
    Mutant(
        "a batched transaction op names only the first END of its turn",
        "actors/broker/transaction/op_batch.py",
        "msg = self.make_op([o for q in batch for o in q.offsets])",
        "msg = self.make_op(batch[0].offsets)  # MUTANT",
        [
            "tests/unit/actors/broker/transaction/test_op_batch.py::test_the_ops_of_one_turn_are_one_op_answered_once_stored",
            "tests/actor/broker/test_transaction_op_batch.py::test_ops_of_many_ends_batched_name_every_half_and_survive_a_restart",
        ],
    ),
    Mutant(
        "POP ACKs of one turn merged across checkpoints of one queue",
        "actors/broker/pop/ack_batch.py",
        "groups.setdefault((qid, key), []).append(i)",
        "groups.setdefault((qid, key[:3]), []).append(i)  # MUTANT",
        [
            "tests/unit/actors/broker/pop/test_ack_batch.py::test_acks_of_two_checkpoints_are_never_merged",
            "tests/actor/broker/test_pop_ack_batch.py::test_acks_of_one_turn_survive_a_power_cut_and_only_the_unacked_come_back",
        ],
    ),
    Mutant(
        "look_message_by_offset never checks the CRC (an old damaged half read back)",
        "storage/store_read.py",
        "verify_crc=commitlog_offset < log.verified_from,",
        "verify_crc=False,  # MUTANT",
        [
            "tests/unit/storage/test_message_store_integrity.py::test_a_message_looked_up_by_offset_is_never_a_damaged_old_record",
        ],
    ),
    Mutant(
        "read_record trusts its first read of a record longer than the guess",
        "storage/commitlog/log.py",
        "        if total > len(data):\n            data = self.read(offset, total)",
        "        if False:  # MUTANT\n            data = self.read(offset, total)",
        [
            "tests/unit/storage/test_commitlog.py::test_read_record_of_a_record_longer_than_the_first_read",
        ],
    ),
    Mutant(
        "the compiled from_ext reads any bool text as true",
        "protocol/serde.py",
        'lines.append(f"    else: {v} = _B[x]")',
        'lines.append(f"    else: {v} = bool(x)")  # MUTANT',
        ["tests/unit/protocol/test_serde_from_ext.py"],
    ),
    Mutant(
        "an ACK's templated answer carries the marker opaque, not the request's",
        "protocol/answer_frames.py",
        'digits = b"%d" % opaque',
        'digits = b"%d" % _MARK  # MUTANT',
        [
            "tests/unit/protocol/test_answer_frames.py",
            "tests/actor/kernel/test_rpc_latency.py::test_an_answer_given_as_a_frame_arrives_and_is_timed_once",
        ],
    ),
    Mutant(
        "a stuck broker set is not avoided by new sends",
        "actors/client/stuck_sends.py",
        "        if available(broker_name):\n",
        "        if False:  # MUTANT\n",
        [
            "tests/actor/client/test_stuck_sends_watch.py::test_a_stuck_set_is_avoided_while_it_is_stuck",
        ],
    ),
    Mutant(
        "controller stall taken for broker silence (no stall compensation)",
        "actors/controller/heartbeat_manager.py",
        "        if stall <= period_ms:  # late by less than a period: ordinary scheduling jitter",
        "        if True:  # MUTANT",
        [
            "tests/unit/actors/controller/test_heartbeat_manager.py::test_a_stall_of_the_controller_is_not_silence_of_the_brokers",
        ],
    ),
    Mutant(
        "an unanswered send is never given up when its master changes",
        "actors/client/stuck_sends.py",
        "        for p, master in moved:\n",
        "        for p, master in moved[:0]:  # MUTANT\n",
        [
            "tests/actor/client/test_stuck_sends_watch.py::test_the_watch_abandons_the_hung_call_once_the_route_moves",
        ],
    ),
    Mutant(
        "a watched request whose master moved is waited out",
        "actors/client/stuck_sends.py",
        "                raise master_moved(pending, now)\n",
        "                pass  # MUTANT\n",
        [
            "tests/actor/client/test_stuck_sends_watch.py::test_a_watched_long_poll_is_given_up_once_the_route_moves_after_its_await"
        ],
    ),
    Mutant(
        "a watched request given up or answered stays pending on its connection",
        "actors/client/stuck_sends.py",
        "        if call is not None:\n            call.release()\n",
        "        pass  # MUTANT\n",
        [
            "tests/actor/client/test_stuck_sends_watch.py::test_a_watched_long_poll_is_given_up_once_the_route_moves_after_its_await",
            "tests/actor/client/test_stuck_sends_watch.py::test_a_watched_call_returns_its_answer_or_raises_its_own_error_unwrapped",
        ],
    ),
    Mutant(
        "a watched request's timeout waits for the next look at the route",
        "actors/client/stuck_sends.py",
        "            look_at = min(now + poll_s, deadline)\n",
        "            look_at = now + poll_s  # MUTANT\n",
        [
            "tests/actor/client/test_stuck_sends_watch.py::test_a_watched_call_unanswered_by_its_deadline_times_out_there"
        ],
    ),
    Mutant(
        "a watched request's connect is not watched",
        "actors/client/stuck_sends.py",
        "            with aio.move_on_at(look_at):  # the one timeout scope of each piece\n",
        "            with aio.move_on_at(deadline + 60):  # MUTANT\n",
        ["tests/actor/client/test_stuck_sends_watch.py::test_a_hung_connect_is_watched_too"],
    ),
    Mutant(
        "a watched request answered as its wait ended is given up",
        "actors/client/stuck_sends.py",
        "            if call is not None and call.done:  # answered as the scope ended\n",
        "            if False:  # MUTANT\n",
        [
            "tests/actor/client/test_stuck_sends_watch.py::test_an_answer_there_as_the_wait_ends_wins"
        ],
    ),
    Mutant(
        "shared watch: a request whose master moved is waited out",
        "actors/client/stuck_sends.py",
        "                w.call.fail(master_moved(w.pending, now))\n",
        "                pass  # MUTANT\n",
        [_RW + "test_the_shared_watch_gives_a_hung_request_up_once_the_route_moves"],
    ),
    Mutant(
        "shared watch: a request past its deadline is waited out",
        "actors/client/stuck_sends.py",
        "                w.call.fail(timed_out(w.cmd, w.pending, w.timeout_s))\n",
        "                pass  # MUTANT\n",
        [_RW + "test_the_shared_watch_times_a_request_out_within_a_poll_of_its_deadline"],
    ),
    Mutant(
        "shared watch: a request ended stays pending on its connection",
        "actors/client/stuck_sends.py",
        "            del self._watched[key]\n            call.release()\n",
        "            del self._watched[key]  # MUTANT\n",
        [_RW + "test_the_shared_watch_gives_a_hung_request_up_once_the_route_moves"],
    ),
    Mutant(
        "shared watch: a request ended stays in the watch",
        "actors/client/stuck_sends.py",
        "            del self._watched[key]\n",
        "            pass  # MUTANT\n",
        [_RW + "test_the_shared_watch_gives_a_hung_request_up_once_the_route_moves"],
    ),
    Mutant(
        "shared watch: its loop is never started",
        "actors/client/stuck_sends.py",
        "            self._spawn(self.run)\n",
        "            pass  # MUTANT\n",
        [_RW + "test_the_shared_watch_gives_a_hung_request_up_once_the_route_moves"],
    ),
    Mutant(
        "shared watch: an idle loop is not woken by a new request",
        "actors/client/stuck_sends.py",
        "            self._wake.set()\n            self._wake = None\n",
        "            self._wake = None  # MUTANT\n",
        [_RW + "test_an_answer_is_returned_and_the_idle_shared_watch_wakes_for_the_next"],
    ),
    Mutant(
        "shared watch: a stuck request asks for no route",
        "actors/client/stuck_sends.py",
        "            topics |= t\n",
        "            pass  # MUTANT\n",
        [_RW + "test_the_shared_watch_gives_a_hung_request_up_once_the_route_moves"],
    ),
    Mutant(
        "shared watch: a request that cannot be written at once is never sent",
        "actors/client/stuck_sends.py",
        "        if call is None:\n            return await invoke_watched(\n",
        "        if call is None:\n"
        "            raise RemotingError('no connection')  # MUTANT\n"
        "            return await invoke_watched(\n",
        [_RW + "test_without_an_open_connection_the_request_takes_the_scoped_path"],
    ),
    Mutant(
        "producer watch, a send written at once: its master moved, it is waited out",
        "actors/client/stuck_sends.py",
        '                p.call.fail(master_moved(p, now, "send", "; re-sending"))\n',
        "                pass  # MUTANT\n",
        [_RW + "test_a_send_written_at_once_is_failed_once_the_route_moves"],
    ),
    Mutant(
        "producer watch, a send written at once: its deadline is waited out",
        "actors/client/stuck_sends.py",
        "            if p.call is not None and now >= p.deadline and p.moved_to is None:\n",
        "            if False:  # MUTANT\n",
        [_RW + "test_a_send_written_at_once_times_out_within_a_poll_of_its_deadline"],
    ),
    Mutant(
        "producer watch, a send written at once: it stays pending on its connection",
        "actors/client/stuck_sends.py",
        "            del self._pending[key]\n"
        "            if call is not None:\n"
        "                call.release()\n",
        "            del self._pending[key]  # MUTANT\n",
        [_RW + "test_a_slow_answer_to_a_send_written_at_once_is_awaited"],
    ),
    Mutant(
        "a released request stays pending on the client connection",
        "actors/client/remoting.py",
        "        self._conn._pending.pop(self._opaque, None)\n",
        "        pass  # MUTANT\n",
        [_CR],
    ),
    Mutant(
        "a request in flight is forgotten by its first wait",
        "actors/client/remoting.py",
        "        return await self._reply.wait(timeout)\n",
        "        self.release()  # MUTANT\n        return await self._reply.wait(timeout)\n",
        [_CR],
    ),
    Mutant(
        "a POP parked at a hung master is waited out, not given up when the route moves",
        "actors/client/simple_consumer.py",
        "        stuck_after_s = wait + STUCK_AFTER_S\n",
        "        stuck_after_s = math.inf  # MUTANT\n",
        [
            "tests/actor/client/test_pop_failover.py::test_pop_resumes_soon_after_a_frozen_master_is_replaced",
        ],
    ),
    Mutant(
        "a POP given up at a hung master is not re-sent to the new master at once",
        "actors/client/simple_consumer.py",
        "        except MasterChanged:\n            pass\n",
        "        except MasterChanged:\n            raise  # MUTANT\n",
        [
            "tests/actor/client/test_pop_failover.py::test_pop_resumes_soon_after_a_frozen_master_is_replaced",
        ],
    ),
    Mutant(
        "a POP whose connection failed (killed master) is raised, not re-sent to the new master",
        "actors/client/simple_consumer.py",
        "            if self.client.find_master_addr(broker_name) == addr:\n",
        "            if True:  # MUTANT\n",
        [
            "tests/actor/client/test_pop_failover.py::test_pop_resumes_soon_after_a_dead_master_is_replaced",
        ],
    ),
    Mutant(
        "an empty long poll never looks at the route (a deposed master the clients reach)",
        "actors/client/simple_consumer.py",
        "            if wait > 0:\n",
        "            if False:  # MUTANT\n",
        [
            "tests/actor/client/test_pop_failover.py::test_pop_leaves_a_deposed_master_the_clients_still_reach",
        ],
    ),
    Mutant(
        "master acknowledges before its slave has the data (allAckInSyncStateSet on)",
        "actors/broker/ha/sync_state.py",
        '        """Writes ending at or below this offset may be acknowledged to clients now."""\n',
        '        """Writes ending at or below this offset may be acknowledged to clients now."""\n'
        "        return self.local_max  # MUTANT\n",
        [
            "tests/system/test_chaos_processes.py::test_a_clean_cluster_under_chaos_loses_nothing_acknowledged",
        ],
    ),
    Mutant(
        "chaos slowdisk heal forgets to move the broker's threads back (issue 26)",
        "cli/chaos/faults.py",
        "            _move(slow.hierarchy, tid, slow.origins.get(tid, home))\n",
        "            pass  # MUTANT\n",
        [_SD + "test_a_slow_disk_slows_synced_sends_and_healing_restores_them"],
    ),
    Mutant(
        "chaos slowdisk writes the throttle for another device (issue 26)",
        "cli/chaos/blkio.py",
        'return {f: f"{dev} {getattr(t, field)}"',
        'return {f: f"{dev.major}:{dev.minor + 1} {getattr(t, field)}"',
        [
            _BK + "test_the_throttle_lines_name_the_device_and_each_limit",
            _SD + "test_a_slow_disk_slows_synced_sends_and_healing_restores_them",
        ],
    ),
    Mutant(
        "chaos slowdisk throttles a partition instead of its disk (issue 26)",
        "cli/chaos/blkio.py",
        "        return _whole_disk(sys_, dev)\n    m = mount_of",
        "        return dev  # MUTANT\n    m = mount_of",
        [_BK + "test_a_store_maps_to_its_whole_disk"],
    ),
    Mutant(
        "CommitLog flush without fsync",
        "storage/commitlog/log.py",
        "            segments.sync(fds, dir_dirty)",
        "            pass  # MUTANT",
        [
            "tests/unit/storage/test_power_cuts.py::test_message_store_survives_power_cuts",
        ],
    ),
    Mutant(
        "Raft log sync without fsync",
        "storage/raft_log.py",
        ("            self._fs.fsync(self._fd)\n        self._unsynced = False"),
        "            pass  # MUTANT\n        self._unsynced = False",
        [
            "tests/unit/storage/test_power_cuts.py::test_raft_log_survives_power_cuts",
        ],
    ),
    Mutant(
        "Raft leader counts its own unsynced entries",
        "actors/raft/replication.py",
        "matches.append(self._stable_index)",
        "matches.append(self.last_index)",
        [
            "tests/unit/actors/raft/test_core.py::test_commit_needs_a_majority_of_durable_copies",
        ],
    ),
    Mutant(
        "signature check skipped",
        "actors/auth/gate.py",
        "user.status is UserStatus.ENABLE and verify(cmd, user.password)",
        "user.status is UserStatus.ENABLE",
        [
            "tests/unit/actors/auth/test_gate.py::test_wrong_signature_refused",
        ],
    ),
    Mutant(
        "broker ACL gate not installed",
        "actors/broker/auth/feature.py",
        ("        self.gate = AuthGate(gate_settings(config), table) if on else None"),
        "        self.gate = None  # MUTANT",
        [
            "tests/actor/broker/test_auth.py",
        ],
    ),
    Mutant(
        "no per-connection held-pull bound",
        "actors/broker/pull/hold.py",
        "        if mine >= self.limits.per_owner or self.count >= self.limits.total:",
        "        if self.count >= self.limits.total:",
        [
            "tests/unit/actors/broker/pull/test_processor.py::test_held_pulls_are_bounded_per_connection_and_in_all",
        ],
    ),
    Mutant(
        "CRC compare skipped on recovery",
        "storage/commitlog/recovery.py",
        ("            scan = scan_segment(data, base, size, check_crc=check_crc, start=at)"),
        ("            scan = scan_segment(data, base, size, check_crc=False, start=at)"),
        [
            "tests/unit/storage/test_message_store_integrity.py::test_flipped_byte_above_the_checkpoint_is_found_after_unclean_shutdown",
        ],
    ),
    Mutant(
        "retention deletes the current segment",
        "actors/broker/store/clean_policy.py",
        (
            "    for seg in segments[:-1]:  # never the last (current) segment\n"
            "        if seg.closed_ms is None:\n            break\n     "
            "   expired = now_ms >= seg.closed_ms + config.file_reserved_ms"
        ),
        (
            "    for seg in segments:  # MUTANT\n        expired = seg.closed_ms "
            "is None or now_ms >= seg.closed_ms + config.file_reserved_ms"
        ),
        [
            "tests/unit/actors/broker/store/test_clean_policy.py::test_at_the_delete_hour_expired_segments_go_oldest_first_and_never_the_last",
        ],
    ),
    Mutant(
        "pull-path CRC check skipped",
        "storage/commitlog/read_check.py",
        "        if crc_intact(data, pos, offset, pos + size) == size:",
        "        if True:  # MUTANT",
        [
            "tests/actor/broker/test_store_integrity.py::test_a_damaged_record_in_an_old_segment_is_never_delivered",
        ],
    ),
    Mutant(
        "store lock not taken",
        "actors/broker/boot/store_open.py",
        ("    lock = StoreLock.acquire(config.storePathRootDir, owner, fs=fs)"),
        (
            "    lock = StoreLock.acquire(config.storePathRootDir + '-mutant-' "
            "+ str(id(store)), owner, fs=fs)"
        ),
        [
            "tests/actor/broker/test_store_integrity.py::test_a_second_broker_on_the_same_store_is_refused",
        ],
    ),
    Mutant(
        "CLI: failed sends exit 0",
        "cli/tools.py",
        "    return EXIT_OK if tally.sent == a.count else EXIT_FAILED",
        "    return EXIT_OK  # MUTANT",
        [
            "tests/actor/cli/test_tools.py",
        ],
    ),
    Mutant(
        "schedule service runs on a slave",
        "actors/broker/schedule/service.py",
        "                if self.is_master():\n                    self._become_active()",
        "                if True:  # MUTANT\n                    self._become_active()",
        [
            "tests/actor/broker/test_delay_messages.py",
        ],
    ),
    Mutant(
        "POP revive ignores ACKs",
        "actors/broker/pop/revive.py",
        "                acked |= 1 << i",
        "                pass  # MUTANT",
        [
            "tests/unit/actors/broker/pop/test_revive.py",
        ],
    ),
    Mutant(
        "static topic: the old leader takes sends",
        "actors/broker/static_topic/send.py",
        "    if not items or items[-1].bname != detail.bname:",
        "    if not items:",
        [
            "tests/unit/actors/broker/static_topic/test_send.py",
        ],
    ),
    Mutant(
        "static topic POP: the new leader does not find the group's offset on the old one",
        "actors/broker/static_topic/pop.py",
        "            refusal = await offsets.prime(h.consumerGroup, topic, gid)",
        "            refusal = None  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_pop.py",
        ],
    ),
    Mutant(
        "static topic POP: a sealed generation's end does not lead into the next one",
        "actors/broker/static_topic/logic_store.py",
        "            return GetResult(_S.OFFSET_FOUND_NULL, nxt.logicOffset, item.logicOffset, "
        "max_logic)",
        "            return GetResult(_S.OFFSET_OVERFLOW_ONE, logic_offset, item.logicOffset, "
        "max_logic)",
        [
            "tests/unit/actors/broker/static_topic/test_logic_store.py",
        ],
    ),
    Mutant(
        "static topic POP: records keep their physical queue offsets",
        "actors/broker/static_topic/logic_store.py",
        "    _I64.pack_into(buf, QUEUE_OFFSET_POSITION, physical + offset_delta)",
        "    _I64.pack_into(buf, QUEUE_OFFSET_POSITION, physical)  # MUTANT",
        [
            "tests/unit/actors/broker/static_topic/test_logic_store.py",
        ],
    ),
    Mutant(
        "static topic offset tools: a reset computes the logic targets but commits nothing",
        "actors/broker/static_topic/offset_tools.py",
        "                body = await self.apply_reset(h, body, cmd.language, True)",
        "                pass  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_offset_tools.py",
        ],
    ),
    Mutant(
        "static topic offset tools: consumerProgress reports the physical queues",
        "actors/broker/static_topic/offset_tools.py",
        "            table = {mq: w for mq, w in stats.offsetTable.items() if mq.topic not in "
        "static}",
        "            table = dict(stats.offsetTable)  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_offset_tools.py",
        ],
    ),
    Mutant(
        "static topic: a due or committed message of a moved logic queue stays on the old broker",
        "actors/broker/static_topic/forward.py",
        "            if bname == detail.bname:\n",
        "            if True:  # MUTANT\n",
        [
            "tests/actor/broker/test_static_topic_delay_tx.py",
        ],
    ),
    Mutant(
        "static topic -fr: the force flag does not reach the brokers",
        "actors/client/static_topic_admin.py",
        "        await send_mapping(admin, masters[broker], cfg, force)",
        "        await send_mapping(admin, masters[broker], cfg)  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_mapfile.py",
        ],
    ),
    Mutant(
        "static topic: a plan over a Java broker is sent",
        "actors/client/static_topic_mixed.py",
        "        if resp.language != ROCKETRIO_LANGUAGE:",
        "        if False:  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_mixed.py",
        ],
    ),
    Mutant(
        "static topic: a logic pull never suggests the slave",
        "actors/broker/static_topic/pull.py",
        '        int(ext.get("suggestWhichBrokerId", 0)) if local else 0,',
        "        0,  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_failover.py",
        ],
    ),
    Mutant(
        "static topic: a broker without the mapping serves the physical queue of a logic id",
        "actors/broker/static_topic/pull.py",
        '            if is_logic_broker_name(ext.get("bname") or ""):',
        "            if False:  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_failover.py",
        ],
    ),
    Mutant(
        "static topic offset tools: the console's group view keeps the physical queues",
        "actors/broker/static_topic/offset_tools.py",
        "                        await self._to_logic(group, stats)\n",
        "                        pass  # MUTANT\n",
        [
            "tests/actor/broker/test_static_topic_offset_tools.py",
        ],
    ),
    Mutant(
        "request table: a code claimed twice is not refused",
        "actors/broker/dispatch/table.py",
        "            if code in table:",
        "            if False:  # MUTANT",
        [
            "tests/unit/actors/broker/dispatch/test_table.py",
        ],
    ),
    Mutant(
        "live config: the send path does not hear maxMessageSize",
        "actors/broker/send/processor.py",
        ("        if changed & SEND_KEYS:\n            self.config = SendConfig.of(config)"),
        "        if False:  # MUTANT\n            self.config = SendConfig.of(config)",
        [
            "tests/actor/cli/test_admin_config.py",
        ],
    ),
    Mutant(
        "one long-poll loop: a held pull is never woken by an arrival",
        "actors/broker/dispatch/long_poll.py",
        ("            if key in by_key:\n                self._grown[key] = max_offset"),
        ("            if False:  # MUTANT\n                self._grown[key] = max_offset"),
        [
            "tests/actor/broker/test_messaging.py::test_long_poll_answered_when_message_arrives",
        ],
    ),
    Mutant(
        "turn arrivals: a turn's arrivals are dropped when the loop holds nothing (i28 turn)",
        "actors/broker/dispatch/long_poll.py",
        "        if not by_key:\n            return\n",
        "        if by_key:  # MUTANT\n            return\n",
        [
            "tests/actor/broker/test_turn_arrivals.py",
            "tests/actor/broker/test_messaging.py::test_long_poll_answered_when_message_arrives",
        ],
    ),
    Mutant(
        "turn arrivals: the pop hold counts one arrival per turn, not per queue (i28 turn)",
        "actors/broker/pop/hold.py",
        "        self.arrivals += len(arrived)\n",
        "        self.arrivals += 1  # MUTANT\n",
        ["tests/actor/broker/test_turn_arrivals.py"],
    ),
    Mutant(
        "turn arrivals: the store tells only the first queue of a turn (i28 turn)",
        "actors/broker/store/actor.py",
        "            self.on_arrival(arrived)\n",
        "            self.on_arrival(dict([next(iter(arrived.items()))]))  # MUTANT\n",
        ["tests/actor/broker/test_turn_arrivals.py"],
    ),
    Mutant(
        "turn arrivals: the schedule service is not woken by a turn's delayed message (i28 turn)",
        "actors/broker/schedule/service.py",
        "        for topic, queue_id in arrived:\n            if topic in _TOPICS:\n",
        "        for topic, queue_id in arrived:\n            if False:  # MUTANT\n",
        ["tests/actor/broker/test_delay_messages.py", "tests/actor/broker/test_turn_arrivals.py"],
    ),
    Mutant(
        "metadata journal not written (issue 26: the promoted slave adopts the topic)",
        "actors/broker/broker.py",
        "        self.tables.topics.journal = self.tables.groups.journal = self.journal.record\n",
        "        pass  # MUTANT\n",
        [
            "tests/sim/test_metadata_failover.py::test_metadata_survives",
            "tests/system/test_metadata_failover_process.py",
        ],
    ),
    Mutant(
        "metadata journal not replayed by a new master",
        "actors/broker/tables/meta_journal.py",
        "        state = meta_log.fold(self._read(view))",
        "        state = meta_log.fold([])  # MUTANT",
        [
            "tests/unit/actors/broker/tables/test_meta_journal.py",
            "tests/sim/test_metadata_failover.py::test_metadata_survives",
        ],
    ),
    Mutant(
        "makedirs_synced skips directories that exist",
        "storage/durable.py",
        "    if not sync_existing:",
        "    if True:  # MUTANT",
        [
            "tests/unit/storage/test_durable_dirs.py",
        ],
    ),
    Mutant(
        "controller grace window fixed at the default timeout",
        "actors/controller/heartbeat_manager.py",
        "        return max(self._timeouts.values(), default=self._default_timeout_ms)",
        "        return self._default_timeout_ms  # MUTANT",
        [
            "tests/unit/actors/controller/test_heartbeat_manager.py",
            "tests/actor/controller/test_master_death_check.py::"
            "test_a_new_leader_listens_one_broker_heartbeat_timeout_not_ten_seconds",
            "tests/actor/controller/test_master_death_check.py::"
            "test_after_every_controller_restarts_verdicts_are_unknown_one_timeout_only",
        ],
    ),
    Mutant(
        "replication speed: a replicated master takes a client's whole window in one turn",
        "actors/broker/store/replication_state.py",
        "        if gate is None or not gate.has_replicas():",
        "        if True:  # MUTANT",
        [_RT + "test_a_master_with_a_slave_writes_bounded_turns_and_answers_in_order_once_acked"],
    ),
    Mutant(
        "replication speed: a burst labels its later packets with the first one's epoch",
        "actors/broker/ha/master_core.py",
        "            out.append(nxt)",
        "            out.append(attrs.evolve(nxt, epoch=first.epoch))  # MUTANT",
        [
            _MC + "test_a_burst_is_every_ready_batch_each_within_the_wire_limits",
            _MC + "test_master_and_slave_cores_converge_byte_identical",
        ],
    ),
    Mutant(
        "replication speed: a turn is acked at once while an earlier one still waits",
        "actors/broker/ha/sync_state.py",
        "        if self._pending or end_offset > self.ack_bound(lease_valid=lease_valid):",
        "        if end_offset > self.ack_bound(lease_valid=lease_valid):  # MUTANT",
        [_SS + "test_ack_now_only_when_nothing_waits_and_every_needed_copy_holds_it"],
    ),
    Mutant(
        "replication speed: the lone-master shortcut of the ack bound taken with slaves too",
        "actors/broker/ha/sync_state.py",
        "        if len(members) == 1:  # the master alone (possible always holds it)",
        "        if True:  # MUTANT",
        [_SS + "test_every_controller_member_holds_every_acknowledged_write"],
    ),
    Mutant(
        "replication speed: the slave's confirm rides on whatever action ends a read",
        "actors/broker/ha/slave_client.py",
        "        if isinstance(last, Append):",
        "        if last is not None and not isinstance(last, Confirm):  # MUTANT",
        ["tests/actor/broker/test_ha_shells.py"],
    ),
    Mutant(
        "replication speed: a replicated master dispatches before its HA writer ships the turn",
        "actors/broker/store/actor.py",
        "                await self.replication.let_replicas_ship()",
        "                self.replication.ship_first = False  # MUTANT",
        [_RT + "test_a_master_with_a_slave_wakes_its_ha_writer_before_it_dispatches"],
    ),
    Mutant(
        "replication speed: a master alone in its set yields before it dispatches",
        "actors/broker/store/replication_state.py",
        "        self.ship_first = replicated",
        "        self.ship_first = True  # MUTANT",
        [_RT + "test_a_master_alone_in_its_set_does_not_yield_before_it_dispatches"],
    ),
    Mutant(
        "replication speed: the slave asks for dispatch before it acks the append",
        "actors/broker/ha/slave_client.py",
        "                    new_max = await store.append_replicated(a.offset, a.data)",
        "                    new_max = await store.append_replicated(a.offset, a.data, a.confirm)"
        "  # MUTANT",
        [
            "tests/actor/broker/test_ha_shells.py::test_a_slave_acks_an_append_before_it_asks_for_its_dispatch"
        ],
    ),
    Mutant(
        "replication speed: a SYNC_FLUSH master ships a turn only after its fsync",
        "actors/broker/store/actor.py",
        "            if not after_flush:\n"
        "                self.written.advance(store.get_commitlog_max_offset())  # shipped as it"
        " syncs\n            status, remark = PutStatus.PUT_OK, None\n"
        "            if self.sync_flush:\n                flushed = await self._sync_flush(done)\n",
        "            status, remark = PutStatus.PUT_OK, None\n"
        "            if self.sync_flush:\n                flushed = await self._sync_flush(done)\n"
        "                self.written.advance(store.get_commitlog_max_offset())  # MUTANT\n",
        [_RT + "test_a_sync_flush_master_ships_a_turn_while_it_syncs_it"],
    ),
    Mutant(
        "master shipping: a store turn's bytes wait for the HA writer task (no inline send)",
        "actors/broker/ha/master_service.py",
        "        stop = self.store.written.listen(self._on_written)",
        "        stop = lambda: None  # noqa: E731  MUTANT",
        [_HS + "test_a_turn_is_on_the_wire_before_the_store_turn_yields"],
    ),
    Mutant(
        "master shipping: an inline send goes out while the writer task is writing",
        "actors/broker/ha/master_service.py",
        "        if send is None or self.writing or self.reply_handshake or self.s.gate",
        "        if send is None or self.reply_handshake or self.s.gate",
        [_HS + "test_partial_and_refused_inline_sends_keep_the_stream_in_order"],
    ),
    Mutant(
        "master shipping: what the socket did not take of an inline send is dropped",
        "actors/broker/ha/master_service.py",
        "        if taken < size:",
        "        if False:  # MUTANT",
        [_HS + "test_partial_and_refused_inline_sends_keep_the_stream_in_order"],
    ),
    Mutant(
        "master shipping: a master that stepped down still ships turns inline",
        "actors/broker/ha/master_service.py",
        " or self.s.gate is not self.gate:",
        ":  # MUTANT",
        [_HS + "test_a_master_that_steps_down_mid_ship_sends_nothing_more"],
    ),
    Mutant(
        "master shipping: a write shipped counts as acked by the slave (answered unheld)",
        "actors/broker/ha/master_service.py",
        "            self.gate.on_sent(self.core.slave_id)",
        "            self.gate.on_ack(self.core.slave_id, self.core.next_offset)  # MUTANT",
        [_HS + "test_answers_wait_for_the_in_sync_offset_and_a_silent_slave_holds_them"],
    ),
    Mutant(
        "master wake-ups: an advance wakes a writer whose bytes were shipped inline",
        "actors/broker/ha/ports.py",
        "            if everyone or value > entry[0]():",
        "            if True:  # MUTANT",
        [
            "tests/unit/actors/broker/ha/test_watermark.py",
            _HS + "test_a_turn_is_on_the_wire_before_the_store_turn_yields",
        ],
    ),
    Mutant(
        "master wake-ups: wait_above returns at a kick before the value is past its offset",
        "actors/broker/ha/ports.py",
        "        while self.value <= offset:\n            await self.wait_past",
        "        if True:  # MUTANT\n            await self.wait_past",
        ["tests/unit/actors/broker/ha/test_watermark.py"],
    ),
    Mutant(
        "master wake-ups: a kick does not say it woke a waiter",
        "actors/broker/ha/ports.py",
        "        if woken:\n            self.woke = True",
        "        if False:  # MUTANT\n            self.woke = True",
        ["tests/unit/actors/broker/ha/test_watermark.py"],
    ),
    Mutant(
        "server gc: the young generation's threshold is not raised",
        "actors/kernel/gc_policy.py",
        "    control.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)",
        "    control.set_threshold(young, middle, old)  # MUTANT",
        [_GP + "test_the_boot_heap_is_collected_then_frozen_and_the_young_threshold_raised"],
    ),
    Mutant(
        "server gc: the boot heap is not frozen",
        "actors/kernel/gc_policy.py",
        "    control.freeze()",
        "    pass  # MUTANT",
        [_GP + "test_the_boot_heap_is_collected_then_frozen_and_the_young_threshold_raised"],
    ),
    Mutant(
        "server gc: a young threshold set higher already is lowered",
        "actors/kernel/gc_policy.py",
        "    control.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)",
        "    control.set_threshold(YOUNG_THRESHOLD, middle, old)  # MUTANT",
        [_GP + "test_a_young_threshold_set_higher_already_is_kept"],
    ),
    Mutant(
        "server gc: the launcher does not apply the policy to a broker",
        "cli/main.py",
        "            if role in GC_TUNED_ROLES:",
        "            if False:  # MUTANT",
        [_GP + "test_the_launcher_tunes_a_broker_once_it_serves"],
    ),
    Mutant(
        "gate timer: a write due before the timer task's wake-up does not wake it",
        "actors/broker/ha/group_transfer.py",
        "        if deadline < self._timer_wake_ms:",
        "        if False:  # MUTANT",
        [_GT + "test_a_write_due_before_the_next_check_times_out_at_its_own_deadline"],
    ),
    Mutant(
        "gate timer: every write into an empty queue wakes the timer task",
        "actors/broker/ha/group_transfer.py",
        "        if deadline < self._timer_wake_ms:",
        "        if self.core.pending_count == 1:  # MUTANT",
        [_GT + "test_writes_due_after_the_timer_tasks_wake_up_do_not_wake_it"],
    ),
    Mutant(
        "compiled whole records: a record one byte short of all there is taken",
        "protocol/speedups/whole_records.c",
        "        if ((Py_ssize_t)total > n - pos)",
        "        if ((Py_ssize_t)total > n - pos + 1)",
        [_WR + "test_a_stream_of_1_kib_records_cut_mid_record_is_taken_up_to_the_cut"],
    ),
    Mutant(
        "compiled whole records: a BLANK record of the wrong size is taken",
        "protocol/speedups/whole_records.c",
        "            if ((long long)total != seg - at % seg) {",
        "            if (0) {",
        [_WR + "test_whole_records_twins_agree"],
    ),
    Mutant(
        "compiled whole records: the slave walks every packet in Python",
        "actors/broker/ha/slave_core.py",
        "    if _speedups is not None:\n        n = _speedups.whole_records(",
        "    if False:\n        n = _speedups.whole_records(",
        [_WR + "test_sound_data_never_reaches_the_python_twin"],
    ),
    Mutant(
        "merged transfers: a packet after a gap joins the run",
        "protocol/ha.py",
        "                or off != end\n",
        "",
        [_HA + "test_merged_transfers_are_runs_of_the_packets_in_order"],
    ),
    Mutant(
        "merged transfers: a packet of another epoch joins the run",
        "protocol/ha.py",
        "                or ep != epoch\n                or start != epoch_start\n",
        "",
        [_HA + "test_merged_transfers_are_runs_of_the_packets_in_order", _SR],
    ),
    Mutant(
        "merged transfers: a lower confirmOffset joins the run",
        "protocol/ha.py",
        "                or conf < confirm\n",
        "",
        [_HA + "test_merged_transfers_are_runs_of_the_packets_in_order", _SR],
    ),
    Mutant(
        "merged transfers: the run keeps its first packet's confirmOffset",
        "protocol/ha.py",
        "            confirm = conf\n",
        "",
        [_HA + "test_merged_transfers_are_runs_of_the_packets_in_order", _SR],
    ),
    Mutant(
        "merged transfers: a packet not all buffered joins the run",
        "protocol/ha.py",
        "                or whole - at - _MT.size < n\n",
        "",
        [_HA + "test_a_packet_not_all_buffered_waits_and_joins_the_next_read"],
    ),
    Mutant(
        "merged transfers: the slave decodes packet by packet",
        "actors/broker/ha/slave_client.py",
        "MasterStreamDecoder(merge_transfers=True)",
        "MasterStreamDecoder()",
        [_SLR],
    ),
    Mutant(
        "bulk reads: a read returns the reused buffer itself",
        "actors/kernel/stream_read.py",
        "        return bytes(view[:n])",
        "        return view[:n]  # type: ignore[return-value]",
        ["tests/unit/actors/kernel/test_stream_read.py"],
    ),
    Mutant(
        "bulk reads: the slave reads through receive_some",
        "actors/broker/ha/slave_client.py",
        "        receive = bulk_receiver(stream, READ_SIZE)",
        "        receive = lambda: stream.receive_some(READ_SIZE)  # noqa: E731",
        [_SLR],
    ),
    Mutant(
        "role service: a slave is taken for master",
        "actors/broker/roles/replicas_manager.py",
        "        return self.core is not None and self.core.is_master",
        ("        return self.core is not None and self.core.role is not None  # MUTANT"),
        [
            "tests/actor/broker/test_ha_replication.py",
        ],
    ),
    Mutant(
        "acting master: a masterless group's slave never acts",
        "actors/broker/failover/acting_core.py",
        "return self.enabled and self.min_broker_id == self.my_id",
        "return False  # MUTANT",
        [_AM + "test_slave_acts_within_the_bound_and_stops_when_the_master_returns"],
    ),
    Mutant(
        "escape: the dead master's own group is a target (upstream #7923)",
        "actors/broker/failover/escape.py",
        "if bd.brokerName == own_broker_name or qd is None or addr is None:",
        "if qd is None or addr is None:  # MUTANT",
        [_AC + "test_escape_never_targets_its_own_group_even_on_a_stale_route"],
    ),
    Mutant(
        "escape: a due delay/timer message is skipped after a failed escape (upstream #9249)",
        "actors/broker/schedule/service.py",
        "                    return now + RETRY_MS\n",
        "                    self._set_offset(topic, queue_id, first + count)  # MUTANT\n"
        "                    return now + RETRY_MS\n",
        [_AM + "test_due_delay_and_timer_messages_escape_to_another_master_none_early_none_lost"],
    ),
    Mutant(
        "escape: an unresolved half is skipped after a failed escape (upstream's 10-failure skip)",
        "actors/broker/transaction/service.py",
        "                    break\n                self.decided.add(uniq, end)",
        "                    pass  # MUTANT\n                self.decided.add(uniq, end)",
        [_AM + "test_pending_transactions_of_a_dead_master_are_checked_through_escape"],
    ),
    Mutant(
        "escape: the acting slave re-puts POP revives into its own store",
        "actors/broker/pop/revive_service.py",
        "        if bridge is not None:\n            if await bridge",
        "        if False:  # MUTANT\n            if await bridge",
        [_AM + "test_a_message_popped_from_the_dead_master_is_revived_once_through_escape"],
    ),
    Mutant(
        "strict locks: partial locks are leaked (upstream)",
        "actors/broker/failover/lock_quorum.py",
        "        if partial:\n            await self._release(req, partial, granted, quorum)",
        "        if False:  # MUTANT\n"
        "            await self._release(req, partial, granted, quorum)",
        [_AM + "test_one_queue_one_holder_across_the_switch_only_with_strict_locks"],
    ),
    Mutant(
        "strict locks: one member's lock counts",
        "actors/broker/failover/lock_quorum.py",
        "    return total_replicas // 2 + 1",
        "    return 1  # MUTANT",
        [
            "tests/unit/actors/broker/failover/test_lock_quorum.py",
            _AM + "test_one_queue_one_holder_across_the_switch_only_with_strict_locks",
        ],
    ),
    Mutant(
        "pre-online: a returning master registers at once",
        "actors/broker/roles/classic.py",
        "            and deps.pre_online is not None\n",
        "            and deps.pre_online is None  # MUTANT\n",
        [_AM + "test_a_returning_master_goes_online_only_with_the_slaves_newer_offsets"],
    ),
    Mutant(
        "pre-online: a returning slave skips it (registers and acts at once)",
        "actors/broker/roles/classic.py",
        "            config.enableSlaveActingMaster\n",
        "            config.enableSlaveActingMaster and self.serving_as_master()  # MUTANT\n",
        [
            _AM + "test_a_returning_slave_acts_only_after_taking_the_acting_slaves_offsets",
            _AM + "test_a_returning_slave_with_its_master_alive_goes_online_after_the_ha_handshake",
        ],
    ),
    Mutant(
        "pre-online: a returning slave goes online before the master's HA handshake",
        "actors/broker/failover/slave_pre_online.py",
        'return GoOnline("master handshake done") if handshake_done else FollowMaster(master)',
        'return GoOnline("master handshake done")  # MUTANT',
        [_AM + "test_a_returning_slave_with_its_master_alive_goes_online_after_the_ha_handshake"],
    ),
    Mutant(
        "pre-online: a returning slave goes online without the acting slave's offsets",
        "actors/broker/failover/slave_pre_online.py",
        "    if acting_addr in pulled:",
        "    if True:  # MUTANT",
        [
            "tests/unit/actors/broker/failover/test_slave_pre_online.py",
            _AM + "test_a_returning_slave_acts_only_after_taking_the_acting_slaves_offsets",
        ],
    ),
    Mutant(
        "pre-online: the slave's whole table is adopted, not per-queue maxima (upstream)",
        "actors/broker/failover/pre_online.py",
        "            if offset > ours.get(qid, -1):",
        "            if offset != ours.get(qid):  # MUTANT",
        [_AM + "test_a_returning_master_goes_online_only_with_the_slaves_newer_offsets"],
    ),
    Mutant(
        "pre-online: the slave copies the master's tables before the NameServers list it",
        "actors/broker/roles/classic.py",
        "        if self.acting.enabled and not self.acting.master_listed():",
        "        if False:  # MUTANT",
        [_AM + "test_a_returning_master_goes_online_only_with_the_slaves_newer_offsets"],
    ),
    Mutant(
        "slave sync's watcher wakes both loops at every poll, moved or not",
        "actors/broker/roles/slave_sync.py",
        "            if now != seen:\n",
        "            if True:  # MUTANT\n",
        [
            "tests/actor/broker/test_slave_sync.py::"
            "test_an_idle_broker_polls_once_a_poll_not_once_a_loop"
        ],
    ),
    Mutant(
        "slave sync's watcher does not see the master change",
        "actors/broker/roles/slave_sync.py",
        "        return addr, -1 if addr is None else self.queue_count()\n",
        "        return None, -1 if addr is None else self.queue_count()  # MUTANT\n",
        [
            "tests/actor/broker/test_slave_sync.py::"
            "test_a_new_master_is_synced_within_one_poll_by_both_loops"
        ],
    ),
    Mutant(
        "a classic master runs the slave sync's poll (may follow a master)",
        "actors/broker/roles/classic.py",
        "        return self.config.brokerRole is BrokerRole.SLAVE  # fixed in classic mode",
        "        return True  # MUTANT",
        [_AM + "test_slave_acts_within_the_bound_and_stops_when_the_master_returns"],
    ),
    Mutant(
        "slave sync polls on a broker that can never follow a master",
        "actors/broker/roles/slave_sync.py",
        "        if not self.may_follow:\n",
        "        if False:  # MUTANT\n",
        [
            "tests/actor/broker/test_slave_sync.py::"
            "test_a_broker_that_never_follows_a_master_does_not_poll"
        ],
    ),
    Mutant(
        "slave sync moves a consumer offset backwards after the master's return",
        "actors/broker/roles/slave_sync.py",
        "not (keep_higher and table.get(qid, -1) > offset):",
        "True:  # MUTANT",
        [_AM + "test_a_returning_master_goes_online_only_with_the_slaves_newer_offsets"],
    ),
    Mutant(
        "compatibleWithOldNameSrv: the QUERY_DATA_VERSION heartbeat is not sent",
        "actors/broker/boot/outer_api.py",
        "            await self._heartbeat_via_data_version(topics_version)\n",
        "            pass  # MUTANT\n",
        [_AM + "test_slave_acts_within_the_bound_and_stops_when_the_master_returns"],
    ),
    Mutant(
        "container: a member's failure takes the container and its other members down",
        "actors/broker/container/container.py",
        '            return f"{type(why).__name__}: {why}"',
        "            raise  # MUTANT",
        [
            "tests/actor/broker/test_container.py"
            "::test_a_member_that_keeps_failing_is_given_up_and_the_others_serve",
        ],
    ),
    Mutant(
        "container: a crashed member is never restarted",
        "actors/broker/container/container.py",
        '        return None if slot.stopping else "stopped on its own (crashed)"',
        "        return None  # MUTANT",
        [
            "tests/actor/broker/test_container.py::test_a_crashed_member_is_restarted_alone",
        ],
    ),
    Mutant(
        "container: a restarting master is still the in-process escape target",
        "actors/broker/container/registry.py",
        "if m.is_master and m.serving)",
        "if m.is_master)  # MUTANT",
        [
            "tests/actor/broker/test_container.py::test_a_crashed_member_is_restarted_alone",
        ],
    ),
    Mutant(
        "container: a broker may take a port another member listens on",
        "actors/broker/container/registry.py",
        "        self._check_ports(config, identity)\n",
        "        pass  # MUTANT\n",
        [
            "tests/unit/actors/broker/container/test_registry.py",
        ],
    ),
    Mutant(
        "escape: the container's acting slave does not escape in-process",
        "actors/broker/container/container.py",
        "            broker.use_local_escape(self.escape_targets)\n",
        "            pass  # MUTANT\n",
        [
            "tests/actor/broker/test_acting_master_container.py"
            "::test_the_acting_slave_escapes_in_process_to_its_containers_other_master",
        ],
    ),
    Mutant(
        "escape: in-process escape to the dead master's own group (#7923)",
        "actors/broker/failover/escape.py",
        "            if target.broker_name == self.own:\n                continue",
        "            if False:  # MUTANT\n                continue",
        [_AC + "test_local_escape_skips_its_own_group_then_falls_back_to_remote"],
    ),
    Mutant(
        "POP: an ACK sent to the acting slave is not applied (the message is revived again)",
        "actors/broker/pop/feature.py",
        "            acting_ack=lambda qid, ack: acting() and self.revive.apply_ack(qid, ack),",
        "            acting_ack=None,  # MUTANT",
        [_AM + "test_a_message_popped_from_the_dead_master_is_revived_once_through_escape"],
    ),
    # POP on an acting slave (issue 27, docs/acting-master.md)
    Mutant(
        "POP escape: an ACK goes to a different master than its CK (they never cancel)",
        "actors/broker/failover/pop_escape.py",
        "        master = self.pins.target(key, list(writers))\n",
        "        master = self.pins.target(key, list(writers))\n"
        "        if master == self.pins.pinned(key):  # MUTANT\n"
        "            master = next((n for n in sorted(writers) if n != master), master)\n",
        [_AP + "test_pop_ack_and_change_invisible_on_the_acting_slave_cancel_on_one_pinned_master"],
    ),
    Mutant(
        "POP escape: a CK may be pinned to the dead master's own group (#7923)",
        "actors/broker/failover/pop_pins.py",
        "    names = sorted({c for c in candidates if c != own_group})",
        "    names = sorted(set(candidates))  # MUTANT",
        [_PP + "test_never_the_own_group_whatever_the_candidates_say"],
    ),
    Mutant(
        "POP escape: the pin is not remembered (rehashed over the current route, as upstream)",
        "actors/broker/failover/pop_pins.py",
        "        if pinned is not None:\n            return pinned",
        "        if False:  # MUTANT\n            return pinned",
        [_PP + "test_a_pinned_key_keeps_its_master_when_the_route_changes"],
    ),
    Mutant(
        "POP escape: an ACK whose master is away is dropped, not retried",
        "actors/broker/failover/pop_escape.py",
        "            job.attempts += 1\n            self._jobs.append(job)",
        "            job.attempts += 1\n            job.on_stored()  # MUTANT",
        [_AP + "test_an_unacked_pop_on_the_acting_slave_is_revived_once_when_its_master_is_away"],
    ),
    Mutant(
        "POP escape: the pinned master revives an escaped CK from its own store",
        "actors/broker/pop/revive_service.py",
        "        if self.read_foreign is not None and bn != self.config.broker_name:",
        "        if False:  # MUTANT",
        [_AP + "test_pop_ack_and_change_invisible_on_the_acting_slave_cancel_on_one_pinned_master"],
    ),
    Mutant(
        "POP escape: the acting slave's POP writes its CK to its own store (gets nothing)",
        "actors/broker/pop/processor.py",
        "        escape = self.record_escape()\n",
        "        escape = None  # MUTANT\n",
        [_AP + "test_pop_ack_and_change_invisible_on_the_acting_slave_cancel_on_one_pinned_master"],
    ),
    Mutant(
        "POP escape: a slave that stopped acting drops the ACKs of what it popped",
        "actors/broker/failover/feature.py",
        "        return PinnedOnly(escaper) if len(escaper.pins) else None",
        "        return None  # MUTANT",
        [_AP + "test_the_master_returns_mid_way_nothing_lost_reconsumption_counted"],
    ),
    Mutant(
        "POP revive: a CK whose messages cannot be read holds up the rest of its revive queue",
        "actors/broker/pop/revive_service.py",
        "held up behind it\n                    continue\n",
        "held up behind it\n                    break  # MUTANT\n",
        [_AP + "test_a_gone_acting_group_does_not_stall_the_pinned_masters_own_revives"],
    ),
    Mutant(
        "POP escape: the read-back takes whatever message the other group answers",
        "actors/broker/failover/pop_escape.py",
        "            return [r for r in records if decode_stored(r)[0].queue_offset == offset]",
        "            return records  # MUTANT",
        [_PE + "test_another_offset_is_no_answer_and_not_found_is_gone"],
    ),
    Mutant(
        "POP escape: a failed read-back counts as gone (#8460)",
        "actors/broker/failover/pop_escape.py",
        "        if isinstance(resp, str):\n            raise QueueReadUnavailable(resp)",
        "        if isinstance(resp, str):\n            return []  # MUTANT",
        [_PE + "test_a_call_that_failed_or_an_odd_answer_is_tried_again"],
    ),
    Mutant(
        "container: UPDATE_BROKER_CONFIG may change a black-listed key",
        "actors/broker/container/live_config.py",
        '    always_black=frozenset({"brokerConfigPaths", "rocketmqHome", "configBlackList"}),',
        "    always_black=frozenset(),  # MUTANT",
        [
            "tests/actor/broker/test_container.py"
            "::test_the_container_port_updates_and_answers_its_own_config"
        ],
    ),
    Mutant(
        "container: a new containerMaxRestarts is not applied to running members",
        "actors/broker/container/container.py",
        "        tracker.policy = self.policy  # the container's keys may have changed",
        "        pass  # MUTANT",
        [
            "tests/actor/broker/test_container.py"
            "::test_the_container_port_updates_and_answers_its_own_config"
        ],
    ),
    Mutant(
        "scrub: the background scrub skips the record CRC compare",
        "storage/scrub.py",
        "        if crc_intact(data, pos, start + pos, limit) != total or total <= 8:",
        "        if total <= 8:  # MUTANT",
        [_SC + "test_scrub_finds_a_flipped_byte_below_the_checkpoint_within_its_rate"],
    ),
    Mutant(
        "scrub: a finding does not reach the read check (damage a read vouched for is served)",
        "actors/broker/store/scrub_service.py",
        "            self.view.distrust(finding.offset)",
        "            pass  # MUTANT",
        [_SC + "test_damage_after_a_read_vouched_for_it_is_never_served_once_scrubbed"],
    ),
    # SQL92 filtering (issue 29 item 2, docs/sql92-filter.md)
    Mutant(
        "SQL92: a missing property on the left of = is FALSE instead of NULL",
        "protocol/sql92_tree.py",
        "        return None if lv is None else False\n",
        "        return False  # MUTANT\n",
        [_SQ + "test_table"],
    ),
    Mutant(
        "SQL92: two string properties compared as text instead of as numbers",
        "protocol/sql92_tree.py",
        "    if isinstance(lv, str) and isinstance(rv, str):\n        try:",
        "    if isinstance(lv, str) and isinstance(rv, str) and False:  # MUTANT\n        try:",
        [_SQ + "test_table"],
    ),
    Mutant(
        "SQL92: the compiled fast path forgets Integer.valueOf (a property '5.5' > 5 matches)",
        "protocol/sql92_compile.py",
        "            n = java_int(v, bits)\n",
        "            n = float(v)  # MUTANT\n",
        [_SQ + "test_compiled_table"],
    ),
    Mutant(
        "SQL92: the broker hands out records the selector rejects",
        "actors/broker/dispatch/message_filter.py",
        "        if keep is None or not result.buffers:\n",
        "        if True:  # MUTANT\n",
        [_SB + "test_pull_with_sql92_subscription"],
    ),
    Mutant(
        "SQL92: enablePropertyFilter=false does not refuse SQL92 pulls",
        "actors/broker/dispatch/message_filter.py",
        "        if not self.config.enable_property_filter:\n",
        "        if False:  # MUTANT\n",
        [_SB + "test_property_filter_off_and_live"],
    ),
    Mutant(
        "SQL92: CHECK_CLIENT_CONFIG accepts a selector that does not compile",
        "actors/broker/filter/feature.py",
        '        parse_sql92(sub.subString or "")\n',
        "        pass  # MUTANT\n",
        [_SB + "test_check_client_config"],
    ),
    Mutant(
        "SQL92: a held pull is answered by a message the selector rejects",
        "actors/broker/pull/processor.py",
        "        if not final and status is not _P.FOUND:\n",
        "        if not final and status is not _P.FOUND and False:  # MUTANT\n",
        [_SB + "test_held_pull_wakes_only_for_a_match"],
    ),
    Mutant(
        "SQL92 bit-map: a filter registered after dispatch is refused on maps without its bits",
        "storage/cq_ext.py",
        "            if unit_phy == phys[i] and calc_ms > born and bits == bit_count:\n",
        "            if unit_phy == phys[i] and bits == bit_count:  # MUTANT\n",
        [
            _BM + "test_a_filter_registered_after_dispatch_judges_the_older_records",
            _CX + "test_a_probe_says_no_only_on_a_unit_computed_after_its_filter_was_born",
        ],
    ),
    Mutant(
        "SQL92 bit-map: the map says matched for a record the filter rejected (nothing skipped)",
        "storage/cq_ext.py",
        "                out[i] = crc == crc32(body[at + 4 : at + size])\n",
        "                out[i] = False  # MUTANT\n",
        [_BM + "test_pulls_skip_what_the_bit_map_rejects"],
    ),
    Mutant(
        "SQL92 bit-map: the map says not matched for a record the filter matched",
        "actors/broker/dispatch/filter_data.py",
        "                    set_bits(bits, data.positions)\n",
        "                    pass  # MUTANT\n",
        [_BM + "test_pulls_skip_what_the_bit_map_rejects"],
    ),
    Mutant(
        "SQL92 bit-map: a POP probes its group's filter bits whatever its own expression",
        "actors/broker/dispatch/message_filter.py",
        "        probe = self._probe(known) if known and known.expression == sub.subString else"
        " None\n",
        "        probe = self._probe(known) if known else None  # MUTANT\n",
        [_BM + "test_a_pop_with_another_expression_than_its_groups_filter_is_judged"],
    ),
    Mutant(
        "SQL92 bit-map: maps of an earlier run count for filters born after a clock step back",
        "storage/consume_queue_store.py",
        "            self.ext_floor_ms = max(self.ext_floor_ms, ext.find_last_calc())\n",
        "            pass  # MUTANT\n",
        [
            _FD + "test_maps_of_an_earlier_run_are_not_used_after_the_clock_went_back",
            _CX + "test_open_finds_the_latest_map_time_past_holes_and_torn_units",
        ],
    ),
    Mutant(
        "SQL92 bit-map: a stale unit outlives a ConsumeQueue cut",
        "storage/consume_queue_store.py",
        "            dropped += cq.truncate_by_phy(offset)\n        self._fit_exts()\n",
        "            dropped += cq.truncate_by_phy(offset)\n",
        [_CX + "test_a_cut_queue_takes_its_units_along"],
    ),
    Mutant(
        "SQL92 bit-map: the ext is not flushed with its ConsumeQueue",
        "storage/consume_queue_store.py",
        "        for ext in list(self._exts.values()):\n            ext.flush()\n",
        "        for ext in list(self._exts.values())[:0]:  # MUTANT\n            ext.flush()\n",
        [_CX + "test_ext_and_consume_queue_agree_after_power_cuts"],
    ),
    Mutant(
        "SQL92 filters: a departed group's filter is never dropped",
        "actors/broker/dispatch/filter_data.py",
        "            elif now - data.dead_ms >= self.clean_span_ms:\n",
        "            elif False:  # MUTANT\n",
        [
            _BM + "test_a_departed_groups_filter_is_dropped_and_a_returning_group_works",
            _FD + "test_a_departed_groups_filter_is_dropped_after_the_clean_span",
        ],
    ),
    Mutant(
        "request-reply: the reply is never pushed (requester's connection not looked up)",
        "actors/broker/reply/processor.py",
        "    info = producers.find_channel(sender)\n",
        "    info = None  # MUTANT\n",
        [_LR + "test_request_gets_its_reply_pushed_and_stored"],
    ),
    Mutant(
        "request-reply: a reply wakes whichever request waits, not its CORRELATION_ID's",
        "actors/client/request_reply.py",
        "        pending = self.table.pop(correlation_id, None)\n",
        "        pending = next(iter(self.table.values()), None)  # MUTANT\n",
        [_LR + "test_request_gets_its_reply_pushed_and_stored"],
    ),
    Mutant(
        "request-reply: only the request topic's brokers know the requester (upstream's gap)",
        "actors/client/request_reply.py",
        "        await client.update_route(reply_topic(cluster))\n",
        "        pass  # MUTANT\n",
        [_LR + "test_replies_reach_the_requester_through_either_broker"],
    ),
    Mutant(
        "request-reply: storeReplyMessageEnable=false still stores the reply",
        "actors/broker/reply/processor.py",
        "        if not self.config.store_reply:\n",
        "        if False:  # MUTANT\n",
        [_LR + "test_reply_not_stored_when_disabled"],
    ),
    Mutant(
        "lite pull: litePullMessageEnable=false does not refuse LITE_PULL_MESSAGE",
        "actors/broker/pull/handlers.py",
        "        if not enabled():\n",
        "        if False:  # MUTANT\n",
        [_LR + "test_lite_pull_refused_when_disabled_and_the_consumer_gets_nothing"],
    ),
    Mutant(
        "lite pull: the project's lite pull consumer pulls with PULL_MESSAGE, not upstream's 361",
        "actors/client/api.py",
        "        code = RequestCode.LITE_PULL_MESSAGE if lite else RequestCode.PULL_MESSAGE\n",
        "        code = RequestCode.PULL_MESSAGE  # MUTANT\n",
        [_LR + "test_lite_pull_refused_when_disabled_and_the_consumer_gets_nothing"],
    ),
    Mutant(
        "lite pull: 361 served by the plain pull handler, not the static-topic wrapped one",
        "actors/broker/broker.py",
        '            ("pull", self.pull.wrap_lite_pull),\n',
        "",
        [_LR + "test_lite_pull_reads_a_static_topics_logic_queues"],
    ),
    Mutant(
        "lite pull: a paused queue keeps being pulled",
        "actors/client/pull_consumer.py",
        "            st.mq in self._paused\n",
        "            False  # MUTANT\n",
        [_LR + "test_lite_pull_pause_resume_commit_offsets_and_offset_for_timestamp"],
    ),
    Mutant(
        "census: a broker request code dropped while docs/request-codes.md still says served",
        "actors/broker/admin/handlers.py",
        "        rc.VIEW_MESSAGE_BY_ID: on_ext(ViewMessageRequestHeader, a.view_message, "
        "answer_record),\n",
        "",
        [_RC + "test_the_page_and_the_request_tables_agree"],
    ),
    Mutant(
        "census: a client refuses an unserved code without naming it",
        "actors/client/mq_client.py",
        'not_supported_remark(cmd.code, f"client {self.client_id}"),',
        'f"client {self.client_id} does not serve {cmd.code}",  # MUTANT',
        [_RC + "test_every_unserved_code_is_refused_by_number_and_name[client]"],
    ),
    Mutant(
        "census: a deliberately refused code is answered without its reason",
        "protocol/codes.py",
        '    return f"{remark}: {reason}" if reason else remark',
        "    return remark  # MUTANT",
        [_RC + "test_every_unserved_code_is_refused_by_number_and_name[broker]"],
    ),
    Mutant(
        "dashboard: a broker metric renamed under the Grafana dashboard (confirmOffset)",
        "actors/broker/stats/metrics.py",
        '            "rocketmq_confirm_offset",',
        '            "rocketmq_confirm_offset_bytes",  # MUTANT',
        [_GD + "test_every_dashboard_query_names_an_exported_metric"],
    ),
    Mutant(
        "dashboard: the consumer lag's group label renamed under the dashboard",
        "actors/broker/stats/metrics.py",
        '            labels=[*NODE_LABELS, "consumer_group", "topic", "is_retry", "is_system"],',
        '            labels=[*NODE_LABELS, "group", "topic", "is_retry", "is_system"],  # MUTANT',
        [_GD + "test_every_dashboard_query_names_an_exported_metric"],
    ),
    Mutant(
        "dashboard: the controller's election counter renamed",
        "actors/controller/metrics.py",
        '            "election",',
        '            "elections",  # MUTANT',
        [_GD + "test_every_dashboard_query_names_an_exported_metric"],
    ),
    Mutant(
        "consume directly: the broker forwards the admin's request without the stored message",
        "actors/broker/clients/consume_directly.py",
        "        request = RemotingCommand(cmd.code, ext_fields=ext, body=record)",
        "        request = RemotingCommand(cmd.code, ext_fields=ext)  # MUTANT",
        [_CD + "test_a_push_consumer_consumes_a_message_directly"],
    ),
    Mutant(
        "consume directly: the client reports RECONSUME_LATER as success",
        "actors/client/consume_directly.py",
        "    ConsumeStatus.RECONSUME_LATER: CMResult.CR_LATER,",
        "    ConsumeStatus.RECONSUME_LATER: CMResult.CR_SUCCESS,  # MUTANT",
        [_CD + "test_a_push_consumer_consumes_a_message_directly"],
    ),
    Mutant(
        "producer: GET_ALL_PRODUCER_INFO answers one group only",
        "actors/broker/clients/producer_info.py",
        "            for group, members in producers.groups.items()",
        "            for group, members in list(producers.groups.items())[:1]  # MUTANT",
        [
            "tests/actor/cli/test_admin_producer.py::"
            "test_producer_lists_every_connected_producer_by_group"
        ],
    ),
    Mutant(
        "proxy: rocketMQClusterName ignored (metadata read from every cluster's masters)",
        "actors/proxy/service.py",
        "        names = info.clusterAddrTable.get(self.config.rocketmq_cluster_name, [])",
        "        names = list(table := info.brokerAddrTable)  # MUTANT",
        [
            "tests/actor/proxy/test_cluster_name.py::"
            "test_metadata_reads_go_to_the_proxys_cluster_only"
        ],
    ),
    Mutant(
        "ROCKETMQ header: non-ASCII ext value kept as latin-1",
        "protocol/remoting.py",
        "        if not ascii_only and not (key.isascii() and value.isascii()):",
        "        if False:  # MUTANT",
        [
            "tests/unit/protocol/test_remoting.py::test_rocketmq_header_matches_upstream_layout_both_ways",
        ],
    ),
    Mutant(
        "proxy: an AckMessage of many entries answers OK but its BATCH_ACK is never sent",
        "actors/proxy/service.py",
        "                await consumer.ack_batch(batch)",
        "                pass  # MUTANT",
        ["tests/actor/proxy/test_rpcs.py::test_many_entries_one_batch_each_entry_its_own_status"],
    ),
    Mutant(
        "proxy fast path: a group under auto renewal acked on the gRPC loop (original handle)",
        "actors/proxy/loop_remoting.py",
        "or group in self.renewing_groups():",
        "or False:  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_remoting.py::"
            "test_sends_and_acks_on_the_loop_answer_as_the_trio_path"
        ],
    ),
    Mutant(
        "proxy grpcio environment: the EventEngine listener left on",
        "actors/proxy/grpc_env.py",
        "    return {EXPERIMENTS_VAR: PROXY_EXPERIMENTS}",
        "    return {}  # MUTANT",
        [
            "tests/unit/actors/proxy/test_grpc_env.py::"
            "test_the_listener_experiment_is_turned_off_unless_the_operator_set_experiments"
        ],
    ),
    Mutant(
        "proxy grpcio environment: an operator's own GRPC_EXPERIMENTS overwritten",
        "actors/proxy/grpc_env.py",
        "    if EXPERIMENTS_VAR in environ:",
        "    if False:  # MUTANT",
        [
            "tests/unit/actors/proxy/test_grpc_env.py::"
            "test_the_listener_experiment_is_turned_off_unless_the_operator_set_experiments"
        ],
    ),
    Mutant(
        "proxy grpcio environment: set although grpcio is loaded already",
        "actors/proxy/grpc_env.py",
        '    if "grpc" in loaded:',
        "    if False:  # MUTANT",
        [
            "tests/unit/actors/proxy/test_grpc_env.py::test_it_is_set_only_while_grpcio_is_not_loaded"
        ],
    ),
    Mutant(
        "rocketrio proxy: grpcio loaded before the proxy's grpcio environment is set",
        "cli/main.py",
        "    prepare_grpc_environment()  # before grpcio loads (grpc_env.py)\n"
        "    from rocketrio.actors.proxy.proxy import run_proxy\n",
        "    from rocketrio.actors.proxy.proxy import run_proxy\n\n"
        "    prepare_grpc_environment()  # MUTANT\n",
        [
            "tests/unit/actors/proxy/test_grpc_env.py::test_the_command_sets_it_before_grpcio_loads[proxy]"
        ],
    ),
    Mutant(
        "broker --enable-proxy: grpcio loaded before the proxy's grpcio environment is set",
        "cli/main.py",
        "        prepare_grpc_environment()  # before grpcio loads (grpc_env.py)\n"
        "        from rocketrio.actors.proxy.local import run_broker_with_proxy\n",
        "        from rocketrio.actors.proxy.local import run_broker_with_proxy\n\n"
        "        prepare_grpc_environment()  # MUTANT\n",
        [
            "tests/unit/actors/proxy/test_grpc_env.py::test_the_command_sets_it_before_grpcio_loads[broker-enable-proxy]"
        ],
    ),
    Mutant(
        "proxy fast path: an ack at a hung master waits its deadline though the master moved",
        "actors/proxy/loop_remoting.py",
        "if view.masters.get(n, a) != a]",
        "if False]  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_remoting.py::"
            "test_an_ack_at_a_hung_master_asks_for_the_route_and_is_given_up_at_a_new_master"
        ],
    ),
    Mutant(
        "recovery: a persisted confirmOffset above the recovered log left as it was",
        "storage/store_dispatch.py",
        "        if gate.gated and (stored_confirm is None or stored_confirm > limit):",
        "        if False:  # MUTANT",
        [
            "tests/unit/storage/test_message_store_replication.py::"
            "test_a_recovery_lowers_a_persisted_confirm_offset_above_its_log"
        ],
    ),
    Mutant(
        "quorum acks: a learner master counts its own copy",
        "actors/broker/ha/sync_state.py",
        "        counted = members - {self.self_id} if self.policy.learner else members",
        "        counted = members  # MUTANT",
        [
            "tests/unit/actors/broker/ha/test_sync_state.py::"
            "test_a_learner_master_does_not_count_its_own_copy"
        ],
    ),
    Mutant(
        "recovery: ConsumeQueue entries cut below a dispatch checkpoint left as it was",
        "storage/store_dispatch.py",
        "        self.lower_checkpoint(start)\n        dropped = queues.truncate_and_correct(",
        "        dropped = queues.truncate_and_correct(  # MUTANT",
        [
            "tests/unit/storage/test_message_store_replication.py::"
            "test_a_recovery_that_cuts_the_queues_lowers_the_dispatch_checkpoint_first"
        ],
    ),
    Mutant(
        "revive feed: catch_up feeds a written record past a gap (the gap is never read)",
        "actors/broker/pop/revive.py",
        "            if offset > self.read_offset:\n                return  # a gap",
        "            if False:  # MUTANT\n                return  # a gap",
        [
            "tests/unit/actors/broker/pop/test_revive.py::"
            "test_catch_up_stops_at_an_offset_not_written_here_and_drops_what_was_read",
            "tests/actor/broker/test_pop.py::"
            "test_the_revive_rounds_are_fed_what_the_broker_wrote_as_a_read_back_would_be",
        ],
    ),
    Mutant(
        "revive feed: a record read back already is fed again",
        "actors/broker/pop/revive.py",
        "            if offset < self.read_offset:\n                continue",
        "            if False:  # MUTANT\n                continue",
        [
            "tests/unit/actors/broker/pop/test_revive.py::"
            "test_catch_up_stops_at_an_offset_not_written_here_and_drops_what_was_read"
        ],
    ),
    Mutant(
        "revive feed: the stored records are never handed to the revive rounds",
        "actors/broker/pop/revive_feed.py",
        "                    if type(m) is ReviveMessage:",
        "                    if False:  # MUTANT",
        [
            "tests/unit/actors/broker/pop/test_revive_feed.py",
            "tests/actor/broker/test_pop.py::"
            "test_the_revive_rounds_are_fed_what_the_broker_wrote_as_a_read_back_would_be",
        ],
    ),
    Mutant(
        "proxy loop batch ack: a refused batch answers every entry OK",
        "actors/proxy/loop_remoting.py",
        "            if resp.code == ResponseCode.SUCCESS:\n                return ack_results(",
        "            if True:  # MUTANT\n                return ack_results(",
        [
            "tests/unit/actors/proxy/test_loop_remoting.py::"
            "test_an_ack_of_many_entries_is_one_batch_on_the_loop_and_each_entry_alone_when_refused"
        ],
    ),
    Mutant(
        "proxy loop batch ack: entries of two broker sets in one batch",
        "actors/proxy/loop_remoting.py",
        "if any(r.extra.broker_name != broker for r in receipts):",
        "if False:  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_remoting.py::"
            "test_an_ack_of_many_entries_is_one_batch_on_the_loop_and_each_entry_alone_when_refused"
        ],
    ),
    Mutant(
        "proxy loop batch ack: an ordered pop's entry, or one before its checkpoint, batched",
        "actors/proxy/loop_remoting.py",
        "if not all(batch_ackable(extra, offset) for _, extra, offset in acked):",
        "if False:  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_remoting.py::"
            "test_an_ack_of_many_entries_is_one_batch_on_the_loop_and_each_entry_alone_when_refused"
        ],
    ),
    Mutant(
        "proxy loop batch ack: a refused batch's entries keep no status of their own",
        "actors/proxy/loop_remoting.py",
        "                statuses.append(ack_status(resp, addr))",
        "                statuses.append(None)  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_remoting.py::"
            "test_an_ack_of_many_entries_is_one_batch_on_the_loop_and_each_entry_alone_when_refused"
        ],
    ),
    Mutant(
        "proxy fast path: the gRPC loop writes only the first frame of a turn",
        "actors/proxy/loop_remoting.py",
        'self._transport.write(out[0] if len(out) == 1 else b"".join(out))',
        "self._transport.write(out[0])  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_remoting.py::"
            "test_sends_and_acks_on_the_loop_answer_as_the_trio_path"
        ],
    ),
    Mutant(
        "proxy receipt: a seven-field extraInfo's handle misses the message's queue offset",
        "actors/proxy/receipt.py",
        'return f"{extra_info}{KEY_SEPARATOR}{queue_offset}{KEY_SEPARATOR}{commit_log_offset}"',
        'return f"{extra_info}{KEY_SEPARATOR}{commit_log_offset}"  # MUTANT',
        [
            "tests/unit/actors/proxy/test_mapping.py::"
            "test_receipt_handle_from_the_brokers_text_is_the_parsed_and_rebuilt_one"
        ],
    ),
    Mutant(
        "client pop: the written-out receipt gives every topic the normal retry mark",
        "actors/client/simple_consumer.py",
        "retry, qid, offset = retry_flag(m.topic), m.queue_id",
        'retry, qid, offset = "0", m.queue_id',
        ["tests/unit/client/test_popped_messages.py::test_each_receipt_is_the_built_extra_info"],
    ),
    Mutant(
        "client pop: an unordered pop's messages take the order counts as delivery counts",
        "actors/client/simple_consumer.py",
        "counts = parse_order_count_info(rh.orderCountInfo) if order else {}",
        "counts = parse_order_count_info(rh.orderCountInfo)  # MUTANT",
        [
            "tests/unit/client/test_popped_messages.py::"
            "test_popped_messages_receipts_first_pop_time_and_delivery_counts"
        ],
    ),
    Mutant(
        "proxy loop receive: an expired allowance still takes receives on the loop (FIFO unseen)",
        "actors/proxy/loop_receive.py",
        "if invisible_ms <= 0 or not broker or now >= until:",
        "if invisible_ms <= 0 or not broker:  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_receive.py::"
            "test_receives_go_to_trio_until_allowed_then_are_answered_as_the_trio_path"
        ],
    ),
    Mutant(
        "proxy loop receive: an auto-renew receive is taken on the loop (never renewed)",
        "actors/proxy/loop_receive.py",
        "if until is None or masters is None or req.auto_renew:",
        "if until is None or masters is None:  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_receive.py::"
            "test_receives_go_to_trio_until_allowed_then_are_answered_as_the_trio_path"
        ],
    ),
    Mutant(
        "proxy loop receive: a POP given up at a moved master answers an error (no re-POP)",
        "actors/proxy/loop_receive.py",
        "            return TO_TRIO  # Trio POPs at the master the route names now",
        '            return self.error_answer("ReceiveMessage", RemotingError("moved"))  # MUTANT',
        [
            "tests/unit/actors/proxy/test_loop_receive.py::"
            "test_a_pop_at_a_hung_master_asks_for_the_route_and_goes_to_trio_when_it_moved"
        ],
    ),
    Mutant(
        "proxy loop receive: a POP parked at a hung master never asks for the route",
        "actors/proxy/loop_receive.py",
        "        self.refresh(topic)\n        watch[:] =",
        "        watch[:] =",
        [
            "tests/unit/actors/proxy/test_loop_receive.py::"
            "test_a_pop_at_a_hung_master_asks_for_the_route_and_goes_to_trio_when_it_moved"
        ],
    ),
    Mutant(
        "proxy loop receive: an empty long poll does not look at the route (deposed master)",
        "actors/proxy/loop_receive.py",
        "                if wait_s > 0:  # a deposed master answers so forever: look at the route",
        "                if False:  # MUTANT",
        [
            "tests/unit/actors/proxy/test_loop_receive.py::"
            "test_receives_go_to_trio_until_allowed_then_are_answered_as_the_trio_path"
        ],
    ),
    Mutant(
        "proxy: Trio never allows the gRPC loop a receive (always the Trio path)",
        "actors/proxy/service.py",
        "self.loop_receivable(consumer.group, topic, self.now_ms() + round(TTL_S * 1000))",
        "pass  # MUTANT",
        ["tests/actor/proxy/test_loop_receivable.py"],
    ),
    Mutant(
        "proxy: Trio allows the gRPC loop a FIFO group's receives (unordered POPs)",
        "actors/proxy/service.py",
        "if broker and not (fifo or auto_renew or sql) and self.loop_receivable is not None:",
        "if broker and not (auto_renew or sql) and self.loop_receivable is not None:  # MUTANT",
        ["tests/actor/proxy/test_loop_receivable.py"],
    ),
    Mutant(
        "proxy bridge: a call the gRPC loop gives back is answered with the marker",
        "actors/proxy/grpc_bridge.py",
        "                if result is not TO_TRIO:",
        "                if True:  # MUTANT",
        ["tests/actor/proxy/test_bridge.py::test_a_call_the_loop_gives_back_is_answered_by_trio"],
    ),
    Mutant(
        "proxy fast path: task-free sends never expire (an unanswered send hangs)",
        "actors/proxy/send.py",
        "            self.requests.expire(trio.current_time())",
        "            pass  # MUTANT",
        [
            "tests/actor/proxy/test_task_free_calls.py::"
            "test_an_unanswered_send_fails_at_its_deadline_and_the_proxy_goes_on"
        ],
    ),
    Mutant(
        "client module imports trio directly (not through the backend door)",
        "actors/client/producer.py",
        "from rocketrio.actors.client import backend as aio\n",
        "import trio  # MUTANT\n\nfrom rocketrio.actors.client import backend as aio\n",
        [
            "tests/unit/client/test_backend_rule.py::"
            "test_client_modules_do_not_import_an_event_loop_directly"
        ],
    ),
    Mutant(
        "a public client name disappears",
        "client/__init__.py",
        '    "SimpleConsumer",\n',
        "",
        ["tests/unit/client/test_public_api.py::test_every_public_name_is_exported_and_importable"],
    ),
    Mutant(
        "a broker under its catch-up fence is electable (lost page, issue 26)",
        "actors/controller/replicas_info.py",
        "                and electable(live_info(cluster, name, broker_id))\n",
        "",
        [_LP + "test_a_lone_replica_stays_out_of_service_and_says_so"],
    ),
    Mutant(
        "a fenced broker's heartbeats say it is electable (lost page, issue 26)",
        "actors/broker/roles/replicas_manager.py",
        "            notElectable=not self.electable,\n        )\n        await",
        "            notElectable=False,\n        )\n        await",
        [_LP + "test_a_lone_replica_stays_out_of_service_and_says_so"],
    ),
    Mutant(
        "a lost page's tail is cut without its quarantine copy (lost page, issue 26)",
        "storage/commitlog/quarantine.py",
        "            copied = _copy_tail(segments, bases, offset, fd, fs)\n",
        "            copied = 0\n",
        [
            _LQ + "test_recovery_names_the_lost_record_and_the_quarantine_keeps_every_byte",
            _LP + "test_the_old_master_comes_back_as_a_slave_and_nothing_acknowledged_is_lost",
        ],
    ),
    Mutant(
        "the catch-up fence lifts in the SyncStateSet of the epoch before the cut (lost page)",
        "actors/broker/store/lost_page.py",
        "    if master_epoch > fence.epoch and me in set(sync_state_set or ()):\n",
        "    if me in set(sync_state_set or ()):\n",
        [
            "tests/unit/actors/broker/store/test_lost_page.py::"
            "test_the_sync_state_set_of_the_epoch_before_the_cut_lifts_nothing"
        ],
    ),
    Mutant(
        "a put staged after a store call joins the puts before it (send CPU, issue 28)",
        "actors/broker/store/actor.py",
        "        self.stage.seal()  # what comes after this message cannot join a put before it\n",
        "",
        [
            "tests/actor/broker/test_put_stage.py::test_staged_puts_keep_the_inbox_order_around_a_call"
        ],
    ),
    Mutant(
        "a staged slot grows past its byte bound (a replicated turn can no longer be bounded)",
        "actors/broker/store/put_stage.py",
        "        if self._open_bytes + size > self.per_slot_bytes:\n",
        "        if False:  # MUTANT\n",
        [
            "tests/actor/broker/test_put_stage.py::test_a_slot_holds_at_most_per_slot_bytes_of_bodies",
            "tests/actor/broker/test_replicated_turns.py",
        ],
    ),
    Mutant(
        "a put joins a stage the store actor already took (send CPU, issue 28)",
        "actors/broker/store/actor.py",
        "                self.stage.seal()  # taken (or behind the taken ones): no more joins\n",
        "",
        [
            "tests/actor/broker/test_put_stage.py::test_a_put_after_the_actor_took_the_stage_is_stored_and_answered"
        ],
    ),
    Mutant(
        "the busy read waits for input budget instead of reading less (send CPU, issue 28)",
        "actors/kernel/remoting_connection.py",
        "if want == chunk > READ_CHUNK:  # no room to read more: read less",
        "if False:  # MUTANT",
        ["tests/actor/kernel/test_busy_read.py"],
    ),
    Mutant(
        "a send's answer encoded straight from the request is not a response (issue 28)",
        "protocol/remoting.py",
        '            "flag": RPC_TYPE_RESPONSE,\n            "language": "PYTHON",\n'
        '            "opaque": request.opaque,',
        '            "flag": 0,\n            "language": "PYTHON",\n'
        '            "opaque": request.opaque,',
        [
            "tests/unit/protocol/test_remoting.py::test_encode_response_is_the_frame_of_make_response"
        ],
    ),
    Mutant(
        "a single record's CRC combined over a wrong body length (send CPU, issue 28)",
        "protocol/message_build.py",
        "_COMBINE(crc32(head), body_crc, len(body))",
        "_COMBINE(crc32(head), body_crc, len(body) - 1)",
        ["tests/unit/protocol/test_record_crc_paths.py"],
    ),
    Mutant(
        "a batch record's CRC combined over a wrong body length (send CPU, issue 28)",
        "protocol/message_build.py",
        "combine(crc(head), body_crc, body_len)",
        "combine(crc(head), body_crc, body_len + 1)",
        ["tests/unit/protocol/test_record_crc_paths.py"],
    ),
    Mutant(
        "a compiled extFields shape takes any byte as a value character (issue 28)",
        "protocol/ext_layouts.py",
        r'parts.append(f"([\\x00-\\x7f]{{{n}}})")',
        r'parts.append(f"(.{{{n}}})")',
        ["tests/unit/protocol/test_ext_layouts.py"],
    ),
    Mutant(
        "a compiled extFields shape matches a prefix of the header (issue 28)",
        "protocol/ext_layouts.py",
        "m = pattern.fullmatch(text, pos, end)",
        "m = pattern.match(text, pos, end)",
        ["tests/unit/protocol/test_ext_layouts.py"],
    ),
    # the compiled twins (protocol/speedups/*.c): each run rebuilds the extension
    Mutant(
        "the compiled record CRC covers one byte too few",
        "protocol/speedups/common.c",
        "return crc_of(rec, size - 20, 0);",
        "return crc_of(rec, size - 21, 0);",
        [_SP + "test_build_records_twins_agree"],
    ),
    Mutant(
        "the compiled batch build forgets the UNIQ_KEY it generated",
        "protocol/speedups/batch.c",
        "            gen = 1;",
        "            gen = 0;",
        [_SP + "test_build_records_twins_agree"],
    ),
    Mutant(
        "the compiled batch build does not check that a message's properties end it",
        "protocol/speedups/batch.c",
        "    if (q + 2 + (((Py_ssize_t)d[q] << 8) | d[q + 1]) != end)\n        return 1;",
        "",
        [_SP + "test_build_records_twins_agree"],
    ),
    Mutant(
        "the compiled append_record marks an IPv6 born host as an IPv6 store host",
        "protocol/speedups/record.c",
        "        sys_flag |= 0x10; /* BORNHOST_V6_FLAG */",
        "        sys_flag |= 0x20; /* BORNHOST_V6_FLAG */",
        [_SP + "test_append_record_twins_agree"],
    ),
    Mutant(
        "the compiled header decode reads the opaque one byte off",
        "protocol/speedups/header.c",
        "call[2] = PyLong_FromLong(get_be32(raw + 5));",
        "call[2] = PyLong_FromLong(get_be32(raw + 6));",
        [_SP + "test_decode_rocketmq_header_twins_agree"],
    ),
    Mutant(
        "the compiled header decode does not bounds-check an extFields value",
        "protocol/speedups/header.c",
        "        if (vlen < 0 || vlen > n - vpos)",
        "        if (vlen < 0)",
        [_SP + "test_decode_rocketmq_header_twins_agree"],
    ),
    Mutant(
        "the compiled header encode writes a key length one too long",
        "protocol/speedups/header.c",
        "            w[1] = (char)kn;",
        "            w[1] = (char)(kn + 1);",
        [_SP + "test_rocketmq_header_twins_agree"],
    ),
    # the compiled replica check (protocol/speedups/replica.c, issue 28 item 3)
    Mutant(
        "the compiled replica check skips the CRC compare",
        "protocol/speedups/replica.c",
        "    if ((crc & 0x7FFFFFFF) != stated)\n        return 0;\n",
        "",
        [_RP + "test_every_single_byte_flip_agrees", _RP + "test_check_replicated_twins_agree"],
    ),
    Mutant(
        "the compiled replica check skips the physical-offset check",
        "protocol/speedups/replica.c",
        "get_be64(r + 28) != at ||",
        "",
        [_RP + "test_a_chunk_meant_for_another_offset_is_refused"],
    ),
    Mutant(
        "the compiled replica check leaves a record one byte less room for a BLANK record",
        "protocol/speedups/replica.c",
        "long long fit = room - MIN_BLANK;",
        "long long fit = room - MIN_BLANK + 1;",
        [_RP + "test_a_record_must_leave_room_for_a_blank_record"],
    ),
    Mutant(
        "the compiled replica check takes a BLANK record of any size",
        "protocol/speedups/replica.c",
        "if (total != room || total > n - pos) {",
        "if (total <= 0 || total > n - pos) {",
        [_RP + "test_a_blank_record_must_fill_its_segment"],
    ),
    Mutant(
        "the compiled replica check does not match the properties length to totalSize",
        "protocol/speedups/replica.c",
        "t + 2 + props_len != end || ",
        "",
        [_RP + "test_a_length_rewritten_under_a_valid_crc_is_refused"],
    ),
    Mutant(
        "the compiled replica runs do not check that a queue's offsets follow each other",
        "protocol/speedups/replica_runs.c",
        " || qo != g->first + g->count)",
        ")",
        [_RR + "test_a_queue_offset_jump_is_the_references_error"],
    ),
    Mutant(
        "the compiled replica runs give a rolled-back transaction a ConsumeQueue entry",
        "protocol/speedups/replica_runs.c",
        "if (tran != TRAN_PREPARED && tran != TRAN_ROLLBACK) {",
        "if (tran != TRAN_PREPARED) {",
        [_RR + "test_a_run_keeps_its_queues_in_order_of_first_appearance"],
    ),
    # a slave's held records released by bisection (storage/dispatch_gate.py)
    Mutant(
        "a partial release drops the first record it keeps",
        "storage/dispatch_gate.py",
        "replica[0] = records[n:]",
        "replica[0] = records[n + 1 :]",
        [_DG + "test_release_takes_exactly_the_records_that_end_at_or_below_the_limit"],
    ),
    Mutant(
        "a partial release keeps the record that ends at the limit",
        "storage/dispatch_gate.py",
        "bisect_right(records, limit, key=_record_end)",
        "bisect_right(records, limit - 1, key=_record_end)",
        [_DG + "test_release_takes_exactly_the_records_that_end_at_or_below_the_limit"],
    ),
    Mutant(
        "released records still count against the bound",
        "storage/dispatch_gate.py",
        "        self.replica_held -= len(out)\n",
        "",
        [_DG + "test_the_bound_counts_records_not_appends"],
    ),
    Mutant(
        "the compiled replica runs seed a key's Adler-32 from 0",
        "protocol/speedups/replica_runs.c",
        "key_adler32(key_adler32(1, ",
        "key_adler32(key_adler32(0, ",
        [_RR + "test_a_run_keeps_its_queues_in_order_of_first_appearance"],
    ),
    Mutant(
        "the compiled index entries leave a changed slot's page clean",
        "protocol/speedups/index_append.c",
        "        dirty[s >> PAGE_SHIFT] = 1;\n",
        "",
        [_IE + "test_index_entries_twins_agree"],
    ),
    Mutant(
        "the compiled index entries link each entry to itself, not to the slot's previous one",
        "protocol/speedups/index_append.c",
        "put_le32(out + 16, slots[s]);",
        "put_le32(out + 16, (uint32_t)count);",
        [_IE + "test_an_index_finds_its_keys_on_each_path"],
    ),
    # issue 28 item 1, fifth pass: a Java send's frame and answer (frame.c, answer.c, handlers)
    Mutant(
        "the compiled frame call takes a frame one byte short of whole",
        "protocol/speedups/common.c",
        "n - pos < 4 + t)",
        "n - pos < 3 + t)",
        [
            _SS2 + "test_the_frame_decoder_agrees_on_both_paths",
            _SS2 + "test_the_compiled_frame_call_takes_every_whole_frame_the_reference_decodes",
            _DJ + "test_a_client_ack_is_read_by_the_compiled_reader",
        ],
    ),
    Mutant(
        "the compiled frame call ignores the frame size limit",
        "protocol/speedups/common.c",
        "t < MIN_FRAME || t > max_frame ||",
        "t < MIN_FRAME ||",
        [
            _SS2 + "test_the_frame_decoder_agrees_on_both_paths",
            _SS2 + "test_the_compiled_frame_call_takes_every_whole_frame_the_reference_decodes",
        ],
    ),
    # issue 28 item 5, ninth pass: a POP consumer's ACK_MESSAGE frame read compiled (direct_json.c)
    Mutant(
        "the compiled JSON reader takes a code not among the direct ones",
        "protocol/speedups/direct_json.c",
        "if (key == K_CODE && one_of(num[K_CODE], codes) <= 0)",
        "if (0)",
        [
            _DJ + "test_the_decoder_agrees_on_both_paths",
            _DJ + "test_each_refusal_is_the_python_paths",
        ],
    ),
    Mutant(
        "the compiled JSON reader takes a flag that is not 0",
        "protocol/speedups/direct_json.c",
        " || num[K_FLAG] != 0)",
        ")",
        [
            _DJ + "test_the_decoder_agrees_on_both_paths",
            _DJ + "test_each_refusal_is_the_python_paths",
        ],
    ),
    Mutant(
        "the compiled JSON reader takes an escaped string as written",
        "protocol/speedups/direct_json.c",
        "if (*q == '\\\\' || *q < 0x20)",
        "if (*q < 0x20)",
        [
            _DJ + "test_the_decoder_agrees_on_both_paths",
            _DJ + "test_each_refusal_is_the_python_paths",
        ],
    ),
    Mutant(
        "the compiled JSON reader takes a number with a leading zero",
        "protocol/speedups/direct_json.c",
        "(nd > 1 && *digits == '0') || ",
        "",
        [
            _DJ + "test_the_decoder_agrees_on_both_paths",
            _DJ + "test_each_refusal_is_the_python_paths",
        ],
    ),
    Mutant(
        "the compiled JSON reader takes a control character in a string",
        "protocol/speedups/direct_json.c",
        "if (*q == '\\\\' || *q < 0x20)",
        "if (*q == '\\\\')",
        [
            _DJ + "test_the_decoder_agrees_on_both_paths",
            _DJ + "test_each_refusal_is_the_python_paths",
        ],
    ),
    Mutant(
        "the compiled JSON reader takes a key not its own that is not UTF-8",
        "protocol/speedups/direct_json.c",
        "            if (skip_string(c) < 0)\n                return -1;",
        "            skip_string(c);",
        [
            _DJ + "test_the_decoder_agrees_on_both_paths",
            _DJ + "test_each_refusal_is_the_python_paths",
        ],
    ),
    Mutant(
        "a DirectRequest the compiled JSON reader made is rebuilt without its header",
        "protocol/remoting.py",
        "        return _json_command(_loads_header(source), request[3])",
        "        return _json_command({}, request[3])",
        [
            _DJ + "test_the_decoder_agrees_on_both_paths",
            _DJ + "test_each_refusal_is_the_python_paths",
        ],
    ),
    Mutant(
        "the compiled send answer swaps queueId and queueOffset",
        "protocol/speedups/answer.c",
        "    vb[1] = nums[0];\n    vb[2] = nums[1];",
        "    vb[1] = nums[1];\n    vb[2] = nums[0];",
        [_SS2 + "test_the_send_answer_twins_agree_with_the_generic_encoder"],
    ),
    Mutant(
        "the compiled send answer writes the remark's length but not the remark",
        "protocol/speedups/answer.c",
        "    memcpy(w + 17, rb, (size_t)rn);",
        "    memset(w + 17, 0, (size_t)rn);",
        [_SS2 + "test_the_send_answer_twins_agree_with_the_generic_encoder"],
    ),
    Mutant(
        "the direct send answer names the queue the message went to, not the one asked for",
        "actors/broker/send/handlers.py",
        "_HEAD, cmd.opaque, _RESPONSE, remark, r.msg_id, self.queue_id,",
        "_HEAD, cmd.opaque, _RESPONSE, remark, r.msg_id, r.commitlog_offset % 8,",
        ["tests/unit/actors/broker/send/test_direct_answer.py"],
    ),
    Mutant(
        "the direct send answer answers a put the store refused as stored",
        "actors/broker/send/handlers.py",
        "        if status is _PUT_OK and results:",
        "        if results:",
        ["tests/unit/actors/broker/send/test_direct_answer.py"],
    ),
    Mutant(
        "the compiled send header reads unitMode from the batch flag",
        "protocol/speedups/send_header.c",
        '"h", "i", "j", "k", "m", "l", "n"};',
        '"h", "i", "j", "m", "m", "l", "n"};',
        [_SS2 + "test_the_send_header_twins_agree"],
    ),
    Mutant(
        "the compiled send header reads a leading space as a minus sign",
        "protocol/speedups/send_header.c",
        "    Py_ssize_t i = b[0] == '-' ? 1 : 0;",
        "    Py_ssize_t i = b[0] == '-' || b[0] == ' ' ? 1 : 0;",
        [_SS2 + "test_the_send_header_twins_agree"],
    ),
    Mutant(
        "the compiled wire properties keeps a stale __CRC32# pair",
        "protocol/speedups/props.c",
        '    if (contains(b, n, "__CRC32#", 8))',
        "    if (0)",
        [_SS2 + "test_the_wire_properties_twins_agree"],
    ),
    Mutant(
        "the compiled wire properties looks TAGS up without its separator",
        "protocol/speedups/props.c",
        '{"TAGS\\x01", "KEYS\\x01", "UNIQ_KEY\\x01"}',
        '{"TAGS", "KEYS\\x01", "UNIQ_KEY\\x01"}',
        [_SS2 + "test_the_wire_properties_twins_agree"],
    ),
    Mutant(
        "the compiled ACK read takes a receipt of six fields",
        "protocol/speedups/ack_request.c",
        "    if (count != 7 && count != 8)\n",
        "    if (count != 7 && count != 8 && count != 6) /* MUTANT */\n",
        ["tests/unit/protocol/test_speedups_ack_request.py"],
    ),
    Mutant(
        "the compiled ACK read takes any character as a digit",
        "protocol/speedups/ack_request.c",
        "        if (b[j] < '0' || b[j] > '9')\n",
        "        if (b[j] < '0' && b[j] > '9') /* MUTANT */\n",
        [
            "tests/unit/protocol/test_speedups_ack_request.py::test_the_compiled_read_agrees_with_its_twin"
        ],
    ),
    Mutant(
        "the compiled ACK read gives the receipt's invisible time as its revive queue",
        "protocol/speedups/ack_request.c",
        "        PyLong_FromLongLong(num[3]),\n",
        "        PyLong_FromLongLong(num[2]), /* MUTANT */\n",
        [
            "tests/unit/protocol/test_speedups_ack_request.py::test_the_compiled_read_agrees_with_its_twin"
        ],
    ),
    Mutant(
        "the direct ACK path answers before the ACK's record is stored",
        "actors/broker/pop/direct_ack.py",
        "        if result is None:\n            return None\n"
        "        if isinstance(result, Refusal):",
        "        if result is None:\n            _answer(conn, req[1], req[4], Done())  # MUTANT\n"
        "            return None\n        if isinstance(result, Refusal):",
        [_DA + "test_the_direct_path_answers_the_generic_paths_bytes"],
    ),
    Mutant(
        "the decoder hands a oneway ACK to the direct path (it answers it)",
        "protocol/remoting.py",
        "        and not flag\n",
        "        and True  # MUTANT\n",
        [_DA + "test_the_direct_path_answers_the_generic_paths_bytes"],
    ),
    Mutant(
        "the direct ACK path serves a stopping broker's ACK",
        "actors/broker/pop/direct_ack.py",
        "        if self.requests.stopping:",
        "        if False:  # MUTANT",
        [_DA + "test_the_direct_path_answers_the_generic_paths_bytes"],
    ),
    Mutant(
        "a direct ACK's refusal answers another opaque",
        "actors/broker/pop/direct_ack.py",
        "    return RemotingCommand(req[0], opaque=req[1], serialize_type=req[4])",
        "    return RemotingCommand(req[0], opaque=0, serialize_type=req[4])  # MUTANT",
        [_DA + "test_the_direct_path_answers_the_generic_paths_bytes"],
    ),
    Mutant(
        "the direct ACK path installed in front of an ACL gate",
        "actors/broker/pop/direct_ack.py",
        "    if gated or table.get(",
        "    if False or table.get(",
        [_DA + "test_installed_only_where_the_generic_path_adds_nothing"],
    ),
    Mutant(
        "answer flush: an inner block flushes before the outermost ends (issue 28)",
        "actors/kernel/answer_flush.py",
        "        if self.depth:\n            return\n",
        "        if False:  # MUTANT\n            return\n",
        [_AF + "test_blocks_nest_and_the_outermost_one_flushes"],
    ),
    Mutant(
        "answer flush: what the socket did not take of an inline send is dropped (issue 28)",
        "actors/kernel/remoting_connection.py",
        "                out.append(data[sent:])",
        "                pass  # MUTANT",
        [_AF + "test_what_the_socket_does_not_take_the_writer_sends_after_it"],
    ),
    Mutant(
        "answer flush: what the socket did not take is not handed to the writer (issue 28)",
        "actors/kernel/remoting_connection.py",
        "        if out:\n            self._writer_lot.unpark()\n",
        "        if False:  # MUTANT\n            self._writer_lot.unpark()\n",
        [_AF + "test_what_the_socket_does_not_take_the_writer_sends_after_it"],
    ),
    Mutant(
        "answer flush: an inline send goes out while the writer is writing (issue 28)",
        "actors/kernel/remoting_connection.py",
        "            self._sending = True\n",
        "            pass  # MUTANT\n",
        [_AF + "test_a_writer_in_the_middle_of_a_write_keeps_the_later_answers"],
    ),
    Mutant(
        "answer flush: the socket's descriptor number kept past the stream's close (issue 28)",
        "actors/kernel/answer_flush.py",
        "    sock = stream.socket\n",
        "    sock = stream.socket\n    sock = os.fdopen(sock.fileno(), closefd=False)  # MUTANT\n",
        [_AF + "test_a_stream_closed_under_the_connection_is_never_written_through_its_old_number"],
    ),
    Mutant(
        "answer flush: the store turn's answers wait for each connection's writer (issue 28)",
        "actors/broker/store/ack_log.py",
        "        with ANSWERS:\n",
        "        if True:  # MUTANT\n",
        [_AF + "test_the_store_s_answers_are_given_inside_a_block_and_flushed_after"],
    ),
    Mutant(
        "send frame path: installed although an ACL gate judges requests (issue 28)",
        "actors/broker/send/direct.py",
        "    if gated or not isinstance(handler, DirectSendHandler):",
        "    if not isinstance(handler, DirectSendHandler):  # MUTANT",
        [_DS + "test_the_frame_path_is_installed_only_where_it_skips_nothing"],
    ),
    Mutant(
        "send frame path: a stopping broker's send is served (issue 28)",
        "actors/broker/send/direct.py",
        "        if self.requests.stopping:\n",
        "        if False:  # MUTANT\n",
        [
            _DS
            + "test_the_frame_path_takes_a_plain_send_without_the_table_and_declines_when_stopping"
        ],
    ),
    Mutant(
        "send frame path: a static topic's send served as a plain one (issue 28)",
        "actors/broker/send/direct.py",
        "        if h is None or h.batch or (mappings is not None and h.topic in mappings.table):\n"
        "            return NOT_DIRECT",
        "        if h is None or h.batch:  # MUTANT\n            return NOT_DIRECT",
        [_DS + "test_the_direct_handler_answers_every_request_as_the_generic_path"],
    ),
    Mutant(
        "send frame path: a batch taken as a single message (issue 28)",
        "actors/broker/send/direct.py",
        "        if h is None or h.batch or (mappings is not None and h.topic in mappings.table):\n"
        "            return NOT_DIRECT",
        "        if h is None or (mappings is not None and h.topic in mappings.table):  # MUTANT\n"
        "            return NOT_DIRECT",
        [_DS + "test_the_direct_handler_answers_every_request_as_the_generic_path"],
    ),
    Mutant(
        "send frame path: a full store inbox answered by nothing instead of waiting (issue 28)",
        "actors/broker/send/direct.py",
        "            return _blocked_direct(self.send, conn, cmd, r)",
        "            return None  # MUTANT",
        [_DS + "test_the_direct_handler_answers_every_request_as_the_generic_path"],
    ),
    Mutant(
        "send frame path: a put stored but not PUT_OK answered as a plain success (issue 28)",
        "actors/broker/send/direct.py",
        "        if status is _PUT_OK and results:",
        "        if results:  # MUTANT",
        [_DS + "test_every_store_answer_is_the_same_bytes_all_three_ways"],
    ),
    Mutant(
        "a connection takes direct paths while its answers are timed",
        "actors/kernel/remoting_connection.py",
        "        self.direct = direct if direct and rpc_latency is None else None",
        "        self.direct = direct  # MUTANT",
        [_DA + "test_installed_only_where_the_generic_path_adds_nothing"],
    ),
    Mutant(
        "a direct path's exception closes the connection instead of a SYSTEM_ERROR answer",
        "actors/kernel/remoting_connection.py",
        "                    served = direct[req[0]](self, req)\n"
        "                except Exception as e:",
        "                    served = direct[req[0]](self, req)\n"
        "                except ZeroDivisionError as e:  # MUTANT",
        [_DA + "test_the_direct_path_answers_the_generic_paths_bytes"],
    ),
    Mutant(
        "a POP served without a task hands out messages whose CK the store refused",
        "actors/broker/pop/pop_nowait.py",
        "            if results and status.kept_by_failover:",
        "            if True:  # MUTANT",
        [_PN + "test_a_pop_with_messages_is_answered_without_a_task_once_its_ck_is_stored"],
    ),
    Mutant(
        "a POP served without a task moves the offset before its CK is stored",
        "actors/broker/pop/pop_nowait.py",
        "            taken.append(_Taken(key, nxt, max(0, top - nxt), top - offset, record))",
        "            taken.append(_Taken(key, nxt, max(0, top - nxt), top - offset, record))\n"
        "            offsets.commit(group, topic, queue_id, nxt)  # MUTANT",
        [_PN + "test_a_pop_with_messages_is_answered_without_a_task_once_its_ck_is_stored"],
    ),
    Mutant(
        "a POP served without a task leaves its queue free for another pop before the CK is stored",
        "actors/broker/pop/pop_nowait.py",
        "            proc.busy.add(key)\n",
        "            pass  # MUTANT\n",
        [_PN + "test_a_pop_with_messages_is_answered_without_a_task_once_its_ck_is_stored"],
    ),
    Mutant(
        "an ordered POP served without a task (CKs written, the order state skipped)",
        "actors/broker/pop/pop_nowait.py",
        "        if h.order or sel.keep is not None",
        "        if sel.keep is not None",
        ["tests/actor/broker/test_pop_order.py"],
    ),
    Mutant(
        "a SQL92 POP served without a task (its selector not applied)",
        "actors/broker/pop/pop_nowait.py",
        "        if h.order or sel.keep is not None",
        "        if h.order",
        ["tests/actor/broker/test_sql92_filter.py"],
    ),
    Mutant(
        "an ACK on a broker that may act never asks whether it acts (the acting slave's ACK lost)",
        "actors/broker/pop/feature.py",
        "            may_act=config.enableSlaveActingMaster,",
        "            may_act=False,  # MUTANT",
        [_AP + "test_pop_ack_and_change_invisible_on_the_acting_slave_cancel_on_one_pinned_master"],
    ),
    Mutant(
        "the direct send skips the static-topic test (a logic queue sent as a physical one)",
        "actors/broker/send/direct.py",
        " or (mappings is not None and h.topic in mappings.table):\n"
        "            return self.generic(ctx)",
        ":\n            return self.generic(ctx)  # MUTANT",
        [_DS + "test_the_direct_handler_answers_every_request_as_the_generic_path"],
    ),
    Mutant(
        "the direct send reads the static topics known at registration (a cache never invalidated)",
        "actors/broker/send/direct.py",
        "        self.mappings = mappings\n",
        "        self.mappings = mappings\n"
        "        if mappings is not None:  # MUTANT\n"
        "            self.mappings = type(mappings)(mappings.bname, mappings.now_ms)\n",
        [_DS + "test_a_topic_made_static_after_its_first_send_is_rerouted"],
    ),
    Mutant(
        "the direct send takes a batch as a single message",
        "actors/broker/send/direct.py",
        "if h is None or h.batch or (mappings is not None and h.topic in mappings.table):\n"
        "            return self.generic(ctx)",
        "if h is None or (mappings is not None and h.topic in mappings.table):  # MUTANT\n"
        "            return self.generic(ctx)",
        [_DS + "test_the_direct_handler_answers_every_request_as_the_generic_path"],
    ),
    Mutant(
        "the direct send answers a full store inbox as refused instead of waiting",
        "actors/broker/send/direct.py",
        "            return _blocked(self.send, cmd, r)",
        "            return None  # MUTANT",
        [_DS + "test_the_direct_handler_answers_every_request_as_the_generic_path"],
    ),
    Mutant(
        "a send to queue -1 skips the queue pick",
        "actors/broker/send/processor.py",
        '        if queue_id < 0 or "DELAY" in props',
        '        if "DELAY" in props',
        [_DS + "test_the_direct_path_routes_what_the_processor_routes"],
    ),
    Mutant(
        "a delay send skips the delay route",
        "actors/broker/send/processor.py",
        ' or "DELAY" in props or "TIMER_" in props or',
        ' or "TIMER_" in props or',
        [_DS + "test_the_direct_path_routes_what_the_processor_routes"],
    ),
    Mutant(
        "a retry send skips the retry route (no DLQ)",
        "actors/broker/send/processor.py",
        " or topic.startswith(_RETRY):",
        ":",
        [_DS + "test_the_direct_path_routes_what_the_processor_routes"],
    ),
    Mutant(
        "the processor does not recognise a direct answer (its MRO check)",
        "actors/broker/send/processor.py",
        "        if DirectAnswer in type(on_done).__mro__:",
        "        if False:  # MUTANT",
        [
            "tests/unit/actors/broker/send/test_processor.py::test_a_direct_answer_is_the_put_callback_itself"
        ],
    ),
    Mutant(
        "the store turn answers every single put of a run with the first one's result",
        "actors/broker/store/appender.py",
        "            out = [(put, [r]) for put, r in zip(puts, results, strict=True)]",
        "            out = [(put, [results[0]]) for put in puts]",
        ["tests/actor/broker/test_put_stage.py", "tests/actor/broker/test_messaging.py"],
    ),
    Mutant(
        "a staged single put's body is not counted against the slot's byte bound",
        "actors/broker/store/put_stage.py",
        "        size = len(msgs[0].body) if len(msgs) == 1 else _bytes(put)",
        "        size = 0 if len(msgs) == 1 else _bytes(put)",
        ["tests/actor/broker/test_put_stage.py"],
    ),
    Mutant(
        "the UNIQ_KEY's index hash swaps its CRC32 and Adler-32 seeds",
        "storage/dispatch_request.py",
        "hashes.append((_crc32(u, seed[0]) << 32) | _adler32(u, seed[1]))",
        "hashes.append((_crc32(u, seed[1]) << 32) | _adler32(u, seed[0]))",
        ["tests/unit/storage/test_message_store.py", "tests/unit/storage/test_index_file.py"],
    ),
    Mutant(
        "the direct send answer's JSON fallback names the queue the message went to",
        "actors/broker/send/handlers.py",
        "cmd, remark, r.msg_id, self.queue_id, r.queue_offset, self.uniq",
        "cmd, remark, r.msg_id, r.commitlog_offset % 8, r.queue_offset, self.uniq",
        ["tests/unit/actors/broker/send/test_direct_answer.py"],
    ),
    Mutant(
        "the disk guard's write refusal ignores a store fault",
        "actors/broker/store/disk_guard.py",
        "        if not self.above_limit and self.store_fault is None:",
        "        if not self.above_limit:",
        [
            "tests/unit/actors/broker/store/test_disk_guard.py",
            "tests/actor/broker/test_disk_full.py",
        ],
    ),
    Mutant(
        "a send whose UNIQ_KEY is not its first property gets a new one",
        "actors/broker/send/message_props.py",
        '        i = props.find("\\x02UNIQ_KEY\\x01")',
        "        i = -1  # MUTANT",
        ["tests/unit/actors/broker/send/test_message_props.py"],
    ),
    Mutant(
        "a send's properties lose the separator before the broker's CLUSTER pair",
        "actors/broker/send/message_props.py",
        '    if props and not props.endswith("\\x02"):\n        props += "\\x02"\n    if uniq:',
        "    if uniq:",
        ["tests/unit/actors/broker/send/test_message_props.py"],
    ),
    # issue 28 item 1, seventh pass: a plain message's record and dispatch fields in one call
    Mutant(
        "the compiled record fields hash TAGS with the wrong multiplier",
        "protocol/speedups/record_fields.c",
        "        h = 31 * h + c;\n    }\n    return (int32_t)h;",
        "        h = 37 * h + c;\n    }\n    return (int32_t)h;",
        [_RF],
    ),
    Mutant(
        "the compiled record fields hash the index keys without the topic's '#'",
        "protocol/speedups/record_fields.c",
        '    uint32_t crc = key_crc32(key_crc32(0, t, tn), (const unsigned char *)"#", 1);',
        "    uint32_t crc = key_crc32(0, t, tn);",
        [_RF],
    ),
    Mutant(
        "the compiled record fields hash KEYS as one key (split on ',' not ' ')",
        "protocol/speedups/record_fields.c",
        "find_byte(b, i, k + klen, ' ')",
        "find_byte(b, i, k + klen, ',')",
        [_RF],
    ),
    Mutant(
        "the compiled record fields store the properties one byte short",
        "protocol/speedups/record_fields.c",
        "    PyObject *raw = PyBytes_FromStringAndSize(b, n);",
        "    PyObject *raw = PyBytes_FromStringAndSize(b, n > 0 ? n - 1 : 0);",
        [_RF],
    ),
    Mutant(
        "the compiled record fields index a transaction ROLLBACK",
        "protocol/speedups/record_fields.c",
        "index && (sys_flag & TRAN_ROLLBACK) != TRAN_ROLLBACK",
        "index",
        [_RF],
    ),
    Mutant(
        "the compiled record fields keep a stale __CRC32# pair",
        "protocol/speedups/record_fields.c",
        '    if (contains(b, n, "__CRC32#", 8))\n        return declined(a, nargs);\n    int index',
        "    int index",
        [_RF],
    ),
    Mutant(
        "send path: the queue id bound ignores readQueueNums (issue 28, send9)",
        "actors/broker/send/processor.py",
        "        if tc.readQueueNums > limit:  # max(write, read) without the builtin's call",
        "        if False:  # MUTANT",
        [
            "tests/unit/actors/broker/send/test_processor.py::"
            "test_the_queue_bound_is_the_larger_of_the_write_and_read_queue_counts"
        ],
    ),
    Mutant(
        "inline put encode: every message of a queue gets the same queue offset (send9)",
        "storage/store_put.py",
        "                next_qo[key] = qo + 1\n"
        "                req = (key, qo, code, hashes, True)",
        "                req = (key, qo, code, hashes, True)  # MUTANT",
        ["tests/unit/storage/test_put_inline.py"],
    ),
    Mutant(
        "inline put encode: a body over maxMessageSize is stored (send9)",
        "storage/store_put.py",
        "                or len(m.body) > max_body\n",
        "",
        ["tests/unit/storage/test_put_inline.py"],
    ),
    Mutant(
        "inline put encode: PREPARED and ROLLBACK records get ConsumeQueue entries (send9)",
        "storage/store_put.py",
        "                m.sys_flag & TRANSACTION_ROLLBACK_TYPE\n                or ",
        "                False\n                or ",
        ["tests/unit/storage/test_put_inline.py"],
    ),
    Mutant(
        "inline put encode: the timer topic's queue is not the wheel's (send9)",
        "storage/store_put.py",
        "                or topic == TIMER_TOPIC\n",
        "",
        ["tests/unit/storage/test_put_inline.py"],
    ),
    Mutant(
        "inline put encode: a record over a segment is written (send9)",
        "storage/store_put.py",
        "                if size > max_record:  # `_encode` raises MessageTooLarge for it",
        "                if False:  # MUTANT",
        ["tests/unit/storage/test_put_inline.py"],
    ),
    Mutant(
        "store turn stats: a run's topic change is not noticed (send9)",
        "actors/broker/store/appender.py",
        "                    if t != topic:",
        "                    if False:  # MUTANT",
        ["tests/unit/actors/broker/store/test_appender_stats.py"],
    ),
    Mutant(
        "store turn stats: the last run of sends counted as one request (send9)",
        "actors/broker/store/appender.py",
        "                stats.on_topic_put(topic, n, size, n)\n            return out",
        "                stats.on_topic_put(topic, n, size)\n            return out",
        ["tests/unit/actors/broker/store/test_appender_stats.py"],
    ),
    Mutant(
        "the store's live table of queues handed out as a copy (an ACK judged by a stale range)",
        "storage/consume_queue_store.py",
        "        return self._cqs\n",
        "        return dict(self._cqs)  # MUTANT\n",
        [_OC + "test_the_offset_check_never_goes_stale"],
    ),
    Mutant(
        "the view's live table of queues handed out as a copy taken when asked",
        "actors/broker/store/view.py",
        "        return self._store.live_queues()\n",
        "        return dict(self._store.live_queues())  # MUTANT\n",
        [
            "tests/unit/actors/broker/store/test_view.py::"
            "test_the_kept_live_queues_table_is_the_stores_own"
        ],
    ),
    Mutant(
        "an ACK's offset check keeps each queue's range from its first ACK",
        "actors/broker/pop/ack.py",
        "            inside = cq.min_offset <= offset <= cq.max_offset\n",
        "            lo, hi = self.__dict__.setdefault(  # MUTANT\n"
        "                (topic, queue_id), (cq.min_offset, cq.max_offset)\n"
        "            )\n"
        "            inside = lo <= offset <= hi\n",
        [_OC + "test_the_offset_check_never_goes_stale"],
    ),
    Mutant(
        "an ACK's offset check reads a static topic's own queue, not its logic range",
        "actors/broker/pop/ack.py",
        "            or plain.statics.table.get(topic) is not None\n",
        "            or False  # MUTANT\n",
        [_OC + "test_the_offset_check_never_goes_stale"],
    ),
    Mutant(
        "an ACK's offset check takes a queue the topic does not have",
        "actors/broker/pop/ack.py",
        "            or not 0 <= queue_id < tc.readQueueNums\n",
        "            or False  # MUTANT\n",
        [_OC + "test_the_offset_check_never_goes_stale"],
    ),
    Mutant(
        "an ACK's offset check takes any offset of a queue the store does not have",
        "actors/broker/pop/ack.py",
        "            inside = offset == 0  # a queue the store does not have: [0, 0]\n",
        "            inside = True  # MUTANT\n",
        [_OC + "test_the_offset_check_never_goes_stale"],
    ),
    Mutant(
        "an ACK's offset check takes an offset above the queue's max",
        "actors/broker/pop/ack.py",
        "            inside = cq.min_offset <= offset <= cq.max_offset\n",
        "            inside = cq.min_offset <= offset  # MUTANT\n",
        [_OC + "test_the_offset_check_never_goes_stale"],
    ),
    Mutant(
        "an ACK's offset check keeps the topic table it first read (a reload not seen)",
        "actors/broker/pop/ack.py",
        "        tc = self.topics.table.get(topic)\n",
        '        tc = self.__dict__.setdefault("_t", self.topics.table).get(topic)  # MUTANT\n',
        [_OC + "test_the_offset_check_never_goes_stale"],
    ),
    Mutant(
        "a direct ACK's inline JSON SUCCESS answer gets a header length without the opaque",
        "actors/broker/pop/direct_ack.py",
        "            hlen = _OK_FIXED + len(digits)\n",
        "            hlen = _OK_FIXED  # MUTANT\n",
        [_DA + "test_the_direct_path_answers_the_generic_paths_bytes"],
    ),
    Mutant(
        "assignment: AVG starts a short block without the extra queues before it",
        "protocol/allocation.py",
        "    start = index * average if (mod > 0 and index < mod) else index * average + mod\n",
        "    start = index * average  # MUTANT\n",
        [_QA + "test_every_queue_goes_to_exactly_one_consumer"],
    ),
    Mutant(
        "assignment: AVG_BY_CIRCLE deals from the first queue for every consumer",
        "protocol/allocation.py",
        "    return [mq_all[i] for i in range(index, len(mq_all)) if i % len(cid_all) == index]\n",
        "    return [mq_all[i] for i in range(len(mq_all)) if i <= index]  # MUTANT\n",
        [_QA + "test_by_circle_deals_the_queues_round_robin"],
    ),
    Mutant(
        "assignment: a POP share of consumers - 1 is taken as a share, not as every broker",
        "actors/broker/assign/allocation.py",
        "    if share <= 0 or share >= len(cid_all) - 1:\n",
        "    if share <= 0 or share > len(cid_all) - 1:  # MUTANT\n",
        [_QA + "test_pop_without_a_share_gives_every_consumer_every_broker"],
    ),
    Mutant(
        "assignment: the POP share does not wrap around to the first consumers",
        "actors/broker/assign/allocation.py",
        "            result += strategy(cid_all[(index + step) % len(cid_all)], mq_all, cid_all)\n",
        "            result += strategy("
        "cid_all[min(index + step, len(cid_all) - 1)], mq_all, cid_all)  # MUTANT\n",
        [_QA + "test_pop_share_adds_the_next_consumers_queues_wrapping_around"],
    ),
    Mutant(
        "assignment: more POP consumers than queues still use the strategy (some get none)",
        "actors/broker/assign/allocation.py",
        "    if len(cid_all) > len(mq_all):\n",
        "    if False:  # MUTANT\n",
        [_QA + "test_pop_with_more_consumers_than_queues_gives_each_one_queue"],
    ),
    Mutant(
        "assignment: a retry topic never set takes the broker's default mode, not PULL",
        "actors/broker/assign/allocation.py",
        "    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):\n",
        "    if False:  # MUTANT\n",
        [_QA + "test_the_mode_set_wins_then_pull_for_retry_topics_then_the_default"],
    ),
    Mutant(
        "assignment: the default POP share also applies to the default PULL mode",
        "actors/broker/assign/allocation.py",
        "    share = defaults.pop_share if defaults.mode == POP else 0\n",
        "    share = defaults.pop_share  # MUTANT\n",
        [_QA + "test_the_mode_set_wins_then_pull_for_retry_topics_then_the_default"],
    ),
    Mutant(
        "assignment: BROADCASTING consumers are split like CLUSTERING ones",
        "actors/broker/assign/allocation.py",
        "    if req.messageModel == BROADCASTING or not server_balance:\n",
        "    if not server_balance:  # MUTANT\n",
        [_QA + "test_broadcasting_and_no_server_balance_give_every_queue"],
    ),
    Mutant(
        "assignment: an unknown strategy name falls back to AVG instead of no answer",
        "actors/broker/assign/allocation.py",
        '    strategy = STRATEGIES.get(req.strategyName or "")\n',
        '    strategy = STRATEGIES.get(req.strategyName or "", allocate_averagely)  # MUTANT\n',
        [
            _QA + "test_no_answer_cases",
            _QT + "test_set_pop_mode_query_as_two_consumers_and_restart",
        ],
    ),
    Mutant(
        "assignment: the consumers are taken in join order, not sorted",
        "actors/broker/assign/allocation.py",
        "    cids = sorted(consumers)\n",
        "    cids = list(consumers)  # MUTANT\n",
        [_QA + "test_assign_answers_the_sorted_queues_with_the_mode"],
    ),
    Mutant(
        "assignment: an LMQ topic is looked up in the route instead of being its one queue",
        "actors/broker/assign/allocation.py",
        "        queues = [MessageQueue(req.topic, broker_name, LMQ_QUEUE_ID)]\n",
        "        pass  # MUTANT\n",
        [_QA + "test_an_lmq_topic_is_its_one_queue_on_this_broker"],
    ),
    Mutant(
        "assignment: a write-only broker set's queues are assigned",
        "actors/broker/assign/queues.py",
        "        if qd.perm & PERM_READ\n",
        "        if True  # MUTANT\n",
        [_QQ + "test_the_routes_readable_queues_of_every_broker"],
    ),
    Mutant(
        "assignment: the route is cached forever",
        "actors/broker/assign/queues.py",
        "        if hit is not None and now - hit[0] < CACHE_S:\n",
        "        if hit is not None:  # MUTANT\n",
        [_QQ + "test_the_route_is_cached_then_asked_again"],
    ),
    Mutant(
        "request modes: the first mode set for a (topic, group) wins",
        "actors/broker/tables/request_mode.py",
        "        self.modes.setdefault(body.topic, {})[body.consumerGroup] = attrs.evolve(body)\n",
        "        self.modes.setdefault(body.topic, {}).setdefault(body.consumerGroup, body)"
        "  # MUTANT\n",
        [_QM + "test_unset_is_none_and_the_last_set_wins"],
    ),
    Mutant(
        "request modes: adopting says changed even when nothing changed (a write every round)",
        "actors/broker/tables/request_mode.py",
        "        changed, self.modes = modes != self.modes, modes\n",
        "        changed, self.modes = True, modes  # MUTANT\n",
        [_QM + "test_adopting_a_snapshot_gives_the_same_modes"],
    ),
    Mutant(
        "request modes: SET_MESSAGE_REQUEST_MODE answers before the file is written",
        "actors/broker/assign/feature.py",
        "        await self.modes.persist()\n",
        "        pass  # MUTANT\n",
        [_QT + "test_set_pop_mode_query_as_two_consumers_and_restart"],
    ),
    Mutant(
        "request modes: a retry topic's mode may be set",
        "actors/broker/assign/feature.py",
        '        if body.topic.startswith("%RETRY%"):\n',
        "        if False:  # MUTANT\n",
        [_QT + "test_modes_for_retry_and_unknown_topics_are_refused"],
    ),
    Mutant(
        "request modes: a slave adopts its master's modes but does not write them",
        "actors/broker/roles/slave_sync.py",
        "                await self.request_modes.persist()\n",
        "                pass  # MUTANT\n",
        [_QT + "test_a_slave_copies_and_persists_its_masters_modes"],
    ),
    Mutant(
        "POP probes: the broker's read permission not checked",
        "actors/broker/pop/probe.py",
        "        if not self.config.broker_permission & PERM_READ:\n",
        "        if False:  # MUTANT\n",
        [_PU + "test_checks_in_upstreams_order_with_its_codes"],
    ),
    Mutant(
        "POP probes: the topic's read permission not checked",
        "actors/broker/pop/probe.py",
        "        if not tc.perm & PERM_READ:\n",
        "        if False:  # MUTANT\n",
        [_PU + "test_checks_in_upstreams_order_with_its_codes"],
    ),
    Mutant(
        "POP probes: a queueId beyond the read queues accepted",
        "actors/broker/pop/probe.py",
        "        if h.queueId >= 0 and not self.store.valid_queue(",
        "        if False and not self.store.valid_queue(  # MUTANT",
        [
            _PU + "test_checks_in_upstreams_order_with_its_codes",
            _PA + "test_bad_probes_get_upstreams_codes",
        ],
    ),
    Mutant(
        "POP probes: a group that may not consume is served",
        "actors/broker/pop/probe.py",
        "        if not sgc.consumeEnable:\n",
        "        if False:  # MUTANT\n",
        [_PU + "test_checks_in_upstreams_order_with_its_codes"],
    ),
    Mutant(
        "POP probes: a queue without the group's offset read from 0, not from its min",
        "actors/broker/pop/probe.py",
        "        return offset if offset >= 0 else self.store.get_min_offset(topic, queue_id)\n",
        "        return offset if offset >= 0 else 0  # MUTANT\n",
        [_PU + "test_peek_reads_and_commits_nothing"],
    ),
    Mutant(
        "NOTIFICATION: the pop retry topics not looked at",
        "actors/broker/pop/probe.py",
        "        retry = self._retry_topics(h)\n",
        "        retry: list[str] = []  # MUTANT\n",
        [_PU + "test_has_message_in_the_pop_retry_topic"],
    ),
    Mutant(
        "NOTIFICATION: the v1 pop retry topic not looked at when v2 is on",
        "actors/broker/pop/probe.py",
        "        if self.config.enable_retry_topic_v2 and self.config.retrieve_from_retry_v1:\n",
        "        if False:  # MUTANT\n",
        [_PU + "test_has_message_in_the_pop_retry_topic"],
    ),
    Mutant(
        "NOTIFICATION: an ordered request's blocked queue counts as having messages",
        "actors/broker/pop/probe.py",
        "            if h.order and self.order.blocked(",
        "            if False and self.order.blocked(  # MUTANT",
        [_PU + "test_an_ordered_requests_blocked_queue_counts_as_empty"],
    ),
    Mutant(
        "NOTIFICATION: a held request answered false at the first arrival",
        "actors/broker/pop/probe.py",
        "        return False if final else None\n",
        "        return False  # MUTANT\n",
        [_PU + "test_held_notification_answered_true_on_arrival"],
    ),
    Mutant(
        "NOTIFICATION: never held (answered false at once)",
        "actors/broker/pop/probe.py",
        "        return None if self.notifications.suspend(held) else False\n",
        "        return False  # MUTANT\n",
        [_PA + "test_notification_at_once_and_held_until_arrival"],
    ),
    Mutant(
        "NOTIFICATION: held for pollTime from now, not until bornTime + pollTime",
        "actors/broker/pop/probe.py",
        "        left_ms = (h.bornTime or now) + h.pollTime - now",
        "        left_ms = h.pollTime  # MUTANT",
        [_PU + "test_held_notification_answered_false_at_born_plus_poll"],
    ),
    Mutant(
        "NOTIFICATION: a held request not woken by its v1 pop retry topic",
        "actors/broker/pop/probe.py",
        "            h.topic,\n            pop_retry_topic_v1(h.topic, h.consumerGroup),\n",
        "            h.topic,  # MUTANT\n",
        [_PU + "test_held_notification_woken_by_its_retry_topic"],
    ),
    Mutant(
        "NOTIFICATION: the held requests not told of arrivals",
        "actors/broker/pop/feature.py",
        "        self.notifications.notify_arrivals(arrived)\n",
        "        pass  # MUTANT\n",
        [_PA + "test_notification_at_once_and_held_until_arrival"],
    ),
    Mutant(
        "NOTIFICATION: held requests not answered at shutdown",
        "actors/broker/pop/feature.py",
        "        await self.notifications.answer_all()\n",
        "        pass  # MUTANT\n",
        [_PA + "test_notification_bounded_and_answered_at_shutdown"],
    ),
    Mutant(
        "PEEK_MESSAGE: the pop retry topic never read first",
        "actors/broker/pop/probe.py",
        "        retry_first = rand_q % 5 == 0\n",
        "        retry_first = False  # MUTANT\n",
        [_PU + "test_peek_reads_the_retry_topic_first_on_a_multiple_of_5"],
    ),
    Mutant(
        "PEEK_MESSAGE: no read again after OFFSET_TOO_SMALL",
        "actors/broker/pop/probe.py",
        "            if result.status in _REREAD:\n",
        "            if False:  # MUTANT\n",
        [_PU + "test_peek_reads_again_from_the_next_offset_and_refuses_as_upstream"],
    ),
    Mutant(
        "PEEK_MESSAGE: restNum not counted",
        "actors/broker/pop/probe.py",
        "            acc.rest += self.store.get_max_offset(topic, qid) - offset\n",
        "            acc.rest += 0  # MUTANT\n",
        [_PU + "test_peek_reads_and_commits_nothing"],
    ),
    Mutant(
        "PEEK_MESSAGE: nothing found answered POLLING_TIMEOUT, not PULL_NOT_FOUND",
        "actors/broker/pop/probe_handlers.py",
        'RC.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE"',
        'RC.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE"',
        [_PA + "test_peek_reads_without_popping"],
    ),
    Mutant(
        "POLLING_INFO: a released pop still counted",
        "actors/broker/pop/hold.py",
        "        key = self._keys.pop(held, None)\n",
        "        key = None  # MUTANT\n",
        [_PU + "test_polling_info_counts_held_pops_per_key"],
    ),
    Mutant(
        "POLLING_INFO: held pops parked without their polling key",
        "actors/broker/pop/processor.py",
        "self.hold.suspend(held, (h.topic, h.consumerGroup, h.queueId))",
        "self.hold.suspend(held)  # MUTANT",
        [_PA + "test_polling_info_counts_held_pops"],
    ),
    Mutant(
        "POLLING_INFO: counts the held notifications, not the held pops",
        "actors/broker/pop/feature.py",
        "            pops=self.hold,\n",
        "            pops=self.notifications,  # MUTANT\n",
        [_PA + "test_polling_info_counts_held_pops"],
    ),
    Mutant(
        "ACL: PEEK_MESSAGE needs no rights (reads messages unchecked)",
        "actors/auth/rights.py",
        "    RC.PEEK_MESSAGE: _peek,\n",
        "",
        ["tests/unit/actors/auth/test_gate.py::test_pop_probes_need_upstreams_rights"],
    ),
    Mutant(
        "ACL: POLLING_INFO needs Sub, not Get",
        "actors/auth/rights.py",
        "    RC.POLLING_INFO: _group_topic(GET),\n",
        "    RC.POLLING_INFO: _group_topic(SUB),  # MUTANT\n",
        ["tests/unit/actors/auth/test_gate.py::test_pop_probes_need_upstreams_rights"],
    ),
    Mutant(
        "NOTIFICATION: an ordered block's end does not wake the held notifications",
        "actors/broker/pop/order_service.py",
        "            self.also_wake.notify_message_arriving(topic, queue_id, -1)\n",
        "            pass  # MUTANT\n",
        [_PA + "test_ordered_notification_waits_for_the_block_to_end"],
    ),
    Mutant(
        "admin queries: filter groups count in the correction offsets",
        "actors/broker/query/answers.py",
        "        if t != topic or group in excluded:\n",
        "        if t != topic:  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_answers.py::test_filter_groups_are_left_out_and_the_table_is_untouched"
        ],
    ),
    Mutant(
        "admin queries: an offset below the queue minimum counts in the correction offsets",
        "actors/broker/query/answers.py",
        "            if offset >= min_offset(topic, queue_id):\n",
        "            if True:  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_answers.py::test_an_offset_below_the_queue_minimum_does_not_count"
        ],
    ),
    Mutant(
        "admin queries: a compare group behind the least offset is not Long.MAX_VALUE",
        "actors/broker/query/answers.py",
        "            least[queue_id] = LONG_MAX if known > offset else known\n",
        "            least[queue_id] = known  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_answers.py::test_the_compare_group_behind_the_least_offset_is_long_max"
        ],
    ),
    Mutant(
        "admin queries: a filtered compare group is still compared",
        "actors/broker/query/answers.py",
        "    compare = None if compare_group in excluded"
        " else table.get(offset_key(topic, compare_group))\n",
        "    compare = table.get(offset_key(topic, compare_group))  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_answers.py::test_a_filtered_compare_group_is_not_compared"
        ],
    ),
    Mutant(
        "admin queries: blank filterGroups is a group named blank",
        "actors/broker/query/answers.py",
        "    if text is None or not text.strip():\n",
        "    if text is None:  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_answers.py::test_filter_groups_split_on_commas_and_blank_is_none"
        ],
    ),
    Mutant(
        "admin queries: the index equal to the queue's max is readable",
        "actors/broker/query/answers.py",
        "    if not low <= h.index < high:\n",
        "    if not low <= h.index <= high:  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_answers.py::test_an_index_outside_min_max_is_missing"
        ],
    ),
    Mutant(
        "admin queries: the consume queue window is not capped at one mapped file",
        "actors/broker/query/answers.py",
        "    return max(0, min(h.count, high - h.index, MAX_CQ_ENTRIES))\n",
        "    return max(0, min(h.count, high - h.index))  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_answers.py::test_the_window_is_count_at_most_and_never_negative"
        ],
    ),
    Mutant(
        "admin queries: queue data goes one past count",
        "actors/broker/query/answers.py",
        "        if offset - index >= count:\n",
        "        if offset - index > count:  # MUTANT\n",
        ["tests/unit/actors/broker/query/test_answers.py::test_queue_data_stops_at_count"],
    ),
    Mutant(
        "admin queries: an offline group's filter data is not the not-online remark",
        "actors/broker/query/answers.py",
        '        return None, f"{group}@{topic} is not online!"\n',
        '        return None, "null"  # MUTANT\n',
        ["tests/unit/actors/broker/query/test_answers.py::test_group_view_of_an_offline_group"],
    ),
    Mutant(
        "admin queries: topics by consumer without the broker address",
        "actors/broker/query/feature.py",
        "        return TopicList(topicList=topics, brokerAddr=self.addr())\n",
        "        return TopicList(topicList=topics)  # MUTANT\n",
        ["tests/actor/broker/test_admin_queries.py::test_the_read_only_queries_of_a_broker"],
    ),
    Mutant(
        "admin queries: topic sets sorted, not in HashSet order",
        "actors/broker/query/feature.py",
        "    return java_hashmap_order(sorted(names), java_string_hash)\n",
        "    return sorted(names)  # MUTANT\n",
        ["tests/unit/protocol/test_query_bodies.py::test_topic_sets_in_java_hashset_order"],
    ),
    Mutant(
        "admin queries: an index out of range is SYSTEM_ERROR, not SUCCESS without a body",
        "actors/broker/query/feature.py",
        "                    return ctx.cmd.make_response(ResponseCode.SUCCESS, remark)\n",
        "                    return ctx.cmd.make_response("
        "ResponseCode.SYSTEM_ERROR, remark)  # MUTANT\n",
        ["tests/actor/broker/test_admin_queries.py::test_the_read_only_queries_of_a_broker"],
    ),
    Mutant(
        "queryCq: a null field prints as None",
        "cli/admin_query_cq.py",
        '    return "null" if text is None else text\n',
        "    return str(text)  # MUTANT\n",
        ["tests/unit/protocol/test_query_bodies.py::test_entry_line_is_upstream_to_string"],
    ),
    Mutant(
        "consumer status: an old client is asked, not refused",
        "actors/broker/query/consumer_status.py",
        "        if m.version < V3_0_7_SNAPSHOT:\n",
        "        if False:  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_consumer_status.py::test_an_old_member_met_first_is_refused_with_its_version_name"
        ],
    ),
    Mutant(
        "consumer status: a blank clientAddr asks only a client named blank",
        "actors/broker/query/consumer_status.py",
        "    one = origin if origin is not None and origin.strip() else None\n",
        "    one = origin  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_consumer_status.py::test_every_member_in_join_order_or_the_one_asked"
        ],
    ),
    Mutant(
        "consumer status: the asked client does not stop the round",
        "actors/broker/query/consumer_status.py",
        "            if one is not None:\n                break\n",
        "            if False:  # MUTANT\n                break\n",
        [
            "tests/unit/actors/broker/query/test_consumer_status.py::test_an_old_member_met_first_is_refused_with_its_version_name"
        ],
    ),
    Mutant(
        "consumer status: the broker's clients in sorted, not HashMap, order",
        "actors/broker/query/consumer_status.py",
        "    order = fastjson.java_hashmap_order(list(table), fastjson.java_string_hash)\n",
        "    order = sorted(table)  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_consumer_status.py::test_the_broker_body_lists_clients_in_hashmap_order"
        ],
    ),
    Mutant(
        "consumer status: a refused member answer is kept",
        "actors/broker/query/consumer_status.py",
        "    if isinstance(resp, RemotingError)"
        " or resp.code != ResponseCode.SUCCESS or not resp.body:\n",
        "    if isinstance(resp, RemotingError) or not resp.body:  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_consumer_status.py::test_a_failed_or_empty_answer_is_left_out"
        ],
    ),
    Mutant(
        "consumer status: a lite pull consumer answers its offsets",
        "actors/client/consumer_status_reply.py",
        "    if consumer is None or consumer.consume_type != PUSH or store is None:\n",
        "    if consumer is None or store is None:  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_consumer_status.py::test_a_push_consumer_answers_its_offsets_of_the_topic"
        ],
    ),
    Mutant(
        "consumer status: a client answers every topic's offsets",
        "actors/client/consumer_status_reply.py",
        "    return {mq: off for mq, off in store.table.items() if every or mq.topic == topic}\n",
        "    return dict(store.table.items())  # MUTANT\n",
        [
            "tests/unit/actors/broker/query/test_consumer_status.py::test_a_push_consumer_answers_its_offsets_of_the_topic"
        ],
    ),
    Mutant(
        "getConsumerStatus: a long client id is not cut at 50",
        "cli/admin_get_consumer_status.py",
        '                f"{client_id[:50]:<50}  {mq.brokerName:<15}'
        '  {mq.queueId:<15}  {offset:<20}"\n',
        '                f"{client_id:<50}  {mq.brokerName:<15}'
        '  {mq.queueId:<15}  {offset:<20}"  # MUTANT\n',
        ["tests/unit/actors/broker/query/test_consumer_status.py::test_status_lines_are_mqadmins"],
    ),
    Mutant(
        "consumer status: the client does not answer 221",
        "actors/client/mq_client.py",
        "        if cmd.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:\n",
        "        if False:  # MUTANT\n",
        [
            "tests/actor/cli/test_get_consumer_status.py::test_get_consumer_status_of_a_push_consumer"
        ],
    ),
    Mutant(
        "admin queries: a dead SQL92 filter is shown alive",
        "actors/broker/query/feature.py",
        '        "dead": dead_time >= data.born_ms,\n',
        '        "dead": False,  # MUTANT\n',
        [
            "tests/unit/protocol/test_query_bodies.py::test_sql92_filter_data_is_upstreams_bean_in_the_pretty_layout"
        ],
    ),
    Mutant(
        "admin queries: the filter's bloom bits are left out",
        "actors/broker/query/feature.py",
        "    if data.positions:\n",
        "    if False:  # MUTANT\n",
        [
            "tests/unit/protocol/test_query_bodies.py::test_sql92_filter_data_is_upstreams_bean_in_the_pretty_layout"
        ],
    ),
    # --- m11-ops: UPDATE_AND_GET_GROUP_FORBIDDEN (353) ---
    Mutant(
        "group forbidden: a read-forbidden group may still pull",
        "actors/broker/pull/processor.py",
        "        if self.groups.is_forbidden(sgc.groupName, h.topic, PERM_INDEX_READ):\n",
        "        if False:  # MUTANT\n",
        [_GF + "test_forbid_read_refuses_pull_and_persists"],
    ),
    Mutant(
        "group forbidden: the change is not persisted before the answer",
        "actors/broker/admin/processor.py",
        "            h.group, h.topic, PERM_INDEX_READ, not h.readable\n        ):\n"
        "            await self.groups.persist()\n",
        "            h.group, h.topic, PERM_INDEX_READ, not h.readable\n        ):\n"
        "            pass  # MUTANT\n",
        [_GF + "test_forbid_read_refuses_pull_and_persists"],
    ),
    Mutant(
        "group forbidden: readable=true sets the bit instead of clearing it",
        "actors/broker/admin/processor.py",
        "            h.group, h.topic, PERM_INDEX_READ, not h.readable\n",
        "            h.group, h.topic, PERM_INDEX_READ, True  # MUTANT\n",
        [_GF + "test_forbid_read_refuses_pull_and_persists"],
    ),
    Mutant(
        "group forbidden: a clear to 0 keeps the group's other topics (not upstream's rule)",
        "actors/broker/tables/subscription_group.py",
        "            if self.forbidden.pop(group, None) is None:\n",
        "            if self.forbidden.get(group, {}).pop(topic, None) is None:  # MUTANT\n",
        [_UGF + "test_bits_follow_upstreams_rule"],
    ),
    Mutant(
        "group forbidden: the bits are not loaded from subscriptionGroup.json",
        "actors/broker/tables/subscription_group.py",
        "        self.forbidden = {g: dict(topics) for g, topics in "
        "wrapper.forbiddenTable.items()}\n",
        "        self.forbidden = {}  # MUTANT\n",
        [_GF + "test_forbid_read_refuses_pull_and_persists"],
    ),
    Mutant(
        "group forbidden: deleting a group keeps its bits",
        "actors/broker/tables/subscription_group.py",
        "        had_bits = self.forbidden.pop(group, None) is not None\n",
        "        had_bits = False  # MUTANT\n",
        [_GF + "test_clear_drops_the_groups_whole_entry_and_delete_group_drops_it"],
    ),
    Mutant(
        "group forbidden: a slave takes its master's forbidden bits",
        "actors/broker/roles/slave_sync.py",
        "            self.groups.load(attrs.evolve(gw, forbiddenTable=self.groups.forbidden))\n",
        "            self.groups.load(gw)  # MUTANT\n",
        ["tests/actor/broker/test_slave_sync.py::test_a_slave_keeps_its_own_forbidden_bits"],
    ),
    # --- m11-ops: RESUME_CHECK_HALF_MESSAGE (323) ---
    Mutant(
        "resume half: the check count is kept instead of reset to 0",
        "actors/broker/transaction/resume.py",
        "    return renewed_half(msg, 0, born_host_of(msg))\n",
        "    return renewed_half(msg, 1, born_host_of(msg))  # MUTANT\n",
        [_TR + "test_a_discarded_half_is_checked_again_and_committed_once"],
    ),
    Mutant(
        "resume half: a message that is not a half is put into the half queue",
        "actors/broker/transaction/resume.py",
        "    if PROPERTY_REAL_TOPIC not in msg.properties:\n",
        "    if False:  # MUTANT\n",
        [_TR + "test_bad_ids_non_halves_and_a_slave_are_refused_with_nothing_written"],
    ),
    Mutant(
        "resume half: a slave writes the half",
        "actors/broker/transaction/resume.py",
        "    if not is_master():\n",
        "    if False:  # MUTANT\n",
        [_TR + "test_bad_ids_non_halves_and_a_slave_are_refused_with_nothing_written"],
    ),
    # --- m11-ops: CLEAN_UNUSED_TOPIC (316) ---
    Mutant(
        "unused topics: a system topic loses its queues",
        "actors/broker/admin/unused_topics.py",
        "    return not in_table and not is_system and not topic.startswith(LMQ_PREFIX)\n",
        "    return not in_table and not topic.startswith(LMQ_PREFIX)  # MUTANT\n",
        [_CU + "test_only_topics_without_config_lose_their_queues"],
    ),
    Mutant(
        "unused topics: an LMQ loses its queues",
        "actors/broker/admin/unused_topics.py",
        "    return not in_table and not is_system and not topic.startswith(LMQ_PREFIX)\n",
        "    return not in_table and not is_system  # MUTANT\n",
        ["tests/unit/actors/broker/admin/test_unused_topics.py::test_the_rule"],
    ),
    Mutant(
        "unused topics: a configured topic loses its queues",
        "actors/broker/admin/unused_topics.py",
        "        used = topics.select(topic) is not None\n",
        "        used = False  # MUTANT\n",
        [_CU + "test_only_topics_without_config_lose_their_queues"],
    ),
    Mutant(
        "unused topics: a broker not serving as master cleans",
        "actors/broker/admin/unused_topics.py",
        "    if not is_master():\n",
        "    if False:  # MUTANT\n",
        [_CU + "test_a_broker_not_serving_as_master_removes_nothing"],
    ),
    Mutant(
        "classic SYNC_FLUSH: a put dispatched before its fsync",
        "storage/store_put.py",
        "        if self._gate.holds:",
        "        if self._gate.gated:  # MUTANT",
        [
            "tests/unit/storage/test_message_store_replication.py::"
            "test_a_classic_sync_flush_store_dispatches_a_put_once_its_fsync_passes_it"
        ],
    ),
    Mutant(
        "classic SYNC_FLUSH: the HA port offers a slave what is not fsynced",
        "actors/broker/store/actor.py",
        "        if store.dispatch_after_flush:\n            return store.flushed_offset",
        "        if False:  # MUTANT\n            return store.flushed_offset",
        [
            "tests/actor/broker/test_replicated_turns.py::"
            "test_a_classic_sync_flush_master_neither_ships_nor_dispatches_a_turn_before_its_fsync"
        ],
    ),
    Mutant(
        "classic SYNC_FLUSH: recovery makes what a kill -9 left visible unsynced",
        "storage/store_dispatch.py",
        "            self._commitlog.flush_recovered()",
        "            pass  # MUTANT",
        [
            "tests/unit/storage/test_message_store_replication.py::"
            "test_a_classic_sync_flush_store_fsyncs_what_a_kill_left_before_it_dispatches_it"
        ],
    ),
    Mutant(
        "confirmed put: a put only the master holds counts as done",
        "actors/broker/store/confirmed_put.py",
        "    if answer.status.acknowledged:",
        "    if answer.status.stored:  # MUTANT",
        [
            "tests/unit/actors/broker/store/test_confirmed_put.py::"
            "test_a_put_only_the_master_holds_waits_for_confirm_offset"
        ],
    ),
    Mutant(
        "confirmed put: the next mastership's confirmOffset vouches for the put",
        "actors/broker/store/confirmed_put.py",
        "        if epoch is None or now != epoch:",
        "        if now is None:  # MUTANT",
        [
            "tests/unit/actors/broker/store/test_confirmed_put.py::"
            "test_a_mastership_that_ends_first_leaves_the_put_not_done"
        ],
    ),
    Mutant(
        "schedule service: a re-put only the master holds moves the delay offset",
        "actors/broker/schedule/service.py",
        "        got = await put_confirmed(self.writer, here, give_up=self._giving_up)",
        "        got = await " + _PAW + "(self.writer, here)\n"
        '        got = None if got.stored else "refused"  # MUTANT',
        [
            "tests/actor/broker/test_delay_failover.py::"
            "test_a_reput_only_the_master_holds_moves_no_delay_offset"
        ],
    ),
    Mutant(
        "POP revive: a re-put only the master holds forgets its CK",
        "actors/broker/pop/revive_service.py",
        "isinstance(await put_confirmed(self.writer, msgs, give_up=self._giving_up), str):",
        'isinstance((lambda a: None if a.stored else "refused")(  # MUTANT\n'
        "            await " + _PAW + "(self.writer, msgs)), str):",
        [
            "tests/actor/broker/test_pop_revive_replicated.py::"
            "test_a_revive_reput_only_the_master_holds_keeps_its_ck"
        ],
    ),
    Mutant(
        "transaction check: a renewed half only the master holds moves the half offset",
        "actors/broker/transaction/half_store.py",
        "        got = await put_confirmed(self.writer, [msg])",
        "        got = await " + _PAW + "(self.writer, [msg])  # MUTANT",
        [
            "tests/actor/broker/test_transaction_check_confirmed.py::"
            "test_a_renewed_half_only_the_master_holds_keeps_the_half_offset"
        ],
    ),
    Mutant(
        "POP (no task): messages handed out on a CK only the master holds",
        "actors/broker/pop/pop_nowait.py",
        "            if results and status.kept_by_failover:",
        "            if results and status.stored:  # MUTANT",
        [
            "tests/actor/broker/test_pop_revive_replicated.py::"
            "test_a_pop_whose_ck_only_the_master_holds_hands_nothing_out"
        ],
    ),
    Mutant(
        "POP (task): messages handed out on a CK only the master holds",
        "actors/broker/pop/processor.py",
        "        return bool(answer.results) and answer.status.kept_by_failover",
        "        return bool(answer.results) and answer.status.stored  # MUTANT",
        [
            "tests/actor/broker/test_pop_revive_replicated.py::"
            "test_a_pop_whose_ck_only_the_master_holds_hands_nothing_out"
        ],
    ),
    Mutant(
        "POP: a classic SYNC_MASTER without its slave hands nothing out",
        "actors/broker/dispatch/outcomes.py",
        "        return self.acknowledged or self is PutStatus.SLAVE_NOT_AVAILABLE",
        "        return self.acknowledged  # MUTANT",
        [
            "tests/actor/broker/test_ha_classic.py::"
            "test_a_sync_master_without_its_slave_still_hands_out_pops"
        ],
    ),
    Mutant(
        "POP buffer: a buffered pop's offset committed at once",
        "actors/broker/pop/processor.py",
        "            and buf.add_ck(ck, p.revive_qid, next_offset, self.now_ms())\n        )",
        "            and buf.add_ck(ck, p.revive_qid, next_offset, self.now_ms())\n"
        "            and (self.offsets.commit(ck.cid, ck.topic, ck.queue_id, next_offset) or True)"
        "\n        )  # MUTANT",
        [_PBF + "test_nothing_popped_is_lost_when_the_master_dies_with_cks_in_its_buffer[1]"],
    ),
    Mutant(
        "POP buffer: an entry whose CK is only being written is committable",
        "actors/broker/pop/buffer_merge.py",
        "        return self.ck is None or self.bits == self.full or self.ck_state == STORED",
        "        return self.ck is None or self.bits == self.full or self.ck_state != NOT_STORED",
        [_PBU + "test_a_ck_not_all_acknowledged_is_written_when_it_stayed_too_long_then_its_acks"],
    ),
    Mutant(
        "POP buffer: a queue's entries committed out of pop order",
        "actors/broker/pop/buffer_merge.py",
        "            while entries and entries[0].committable:",
        "            while entries and entries[-1].committable:  # MUTANT",
        [_PBU + "test_a_queues_offset_moves_only_past_done_entries_in_pop_order"],
    ),
    Mutant(
        "POP buffer: an offset someone else moved is overwritten",
        "actors/broker/pop/buffer_merge.py",
        "                if offsets.query(group, topic, queue_id) != q.expected:",
        "                if False:  # MUTANT",
        [_PBU + "test_an_offset_someone_else_moved_wins_over_the_pending_ones"],
    ),
    Mutant(
        "POP buffer: a CK only the master holds counts as stored",
        "actors/broker/pop/buffer_service.py",
        "        self.buffer.ck_stored(e, bool(results) and status.kept_by_failover)",
        "        self.buffer.ck_stored(e, bool(results) and status.stored)  # MUTANT",
        [_PBS + "test_a_ck_only_the_master_holds_is_written_again"],
    ),
    Mutant(
        "POP buffer: a slave keeps and uses its buffer",
        "actors/broker/pop/buffer_service.py",
        "        if not self.serving():",
        "        if False:  # MUTANT",
        [_PBS + "test_anything_but_a_serving_master_empties_the_buffer_and_turns_it_off"],
    ),
    Mutant(
        "POP buffer: a pop's skip commits past a buffered pop",
        "actors/broker/pop/processor.py",
        "        if buf is None or not buf.defer_offset(topic, group, queue_id, offset):",
        "        if True:  # MUTANT",
        [_PBA + "test_a_pops_skip_past_filtered_messages_waits_behind_a_buffered_pop"],
    ),
    Mutant(
        "POP buffer: a declined pop leaves the buffer its CKs",
        "actors/broker/pop/pop_nowait.py",
        "                buf.withdraw(ck)",
        "                pass  # MUTANT",
        [_PBA + "test_a_pop_declined_half_way_takes_back_what_the_buffer_kept"],
    ),
    Mutant(
        "POP buffer: an ACK of a buffered CK is written",
        "actors/broker/pop/ack.py",
        "        if buf is not None and buf.ack(key, offset):  # its CK is in memory: nothing to",
        "        if False:  # MUTANT",
        [_PBA + "test_pops_all_acknowledged_write_nothing_and_move_the_offset"],
    ),
    Mutant(
        "POP buffer: a batch ACK of buffered CKs is written",
        "actors/broker/pop/ack.py",
        "                offsets = [o for o in offsets if not buf.ack(key, o)]",
        "                pass  # MUTANT",
        [_PBA + "test_a_batch_ack_of_buffered_pops_writes_nothing"],
    ),
    Mutant(
        "POP buffer: a notification reads the committed offset",
        "actors/broker/pop/probe.py",
        _LATEST,
        "        if False:  # MUTANT",
        [_PBA + "test_a_notification_reads_the_offset_the_buffer_holds_back"],
    ),
    Mutant(
        "POP buffer: a pop reads from the committed offset",
        "actors/broker/pop/processor.py",
        _LATEST,
        "        if False:  # MUTANT",
        [_PBA + "test_a_pop_not_all_acknowledged_is_written_and_revived_at_its_invisible_time"],
    ),
    Mutant(
        "POP buffer: a change sets the old CK's bit before its new CK is stored",
        "actors/broker/pop/ack.py",
        "        if buf is not None and buf.holds(old.merge_key, h.offset):",
        "        if buf is not None and buf.ack(old.merge_key, h.offset):  # MUTANT",
        [_PBA + "test_a_change_whose_new_ck_is_refused_leaves_the_message_to_its_old_ck"],
    ),
    Mutant(
        "POP buffer: a change after its old CK was written records no ACK",
        "actors/broker/pop/ack.py",
        "        if not self.batcher.submit(qid, key, offset, answer):",
        "        if True:  # MUTANT",
        [_PBA + "test_a_change_stored_after_the_old_ck_was_written_acks_it_in_the_revive_log"],
    ),
    Mutant(
        "a pull parked at a hung master asks for no route",
        "actors/client/stuck_pulls.py",
        "            consumer.client.request_route_refresh(topic)",
        "            pass  # MUTANT",
        [
            "tests/actor/client/test_stuck_pulls.py::"
            "test_a_push_consumer_leaves_a_frozen_master_within_the_pull_hold[1]"
        ],
    ),
    Mutant(
        "a pull in flight is stuck before the broker's hold ends",
        "actors/client/stuck_pulls.py",
        "    late = now - hold_s - STUCK_AFTER_S",
        "    late = now - STUCK_AFTER_S  # MUTANT",
        [
            "tests/actor/client/test_stuck_pulls.py::"
            "test_only_pulls_in_flight_past_the_hold_are_stuck"
        ],
    ),
    Mutant(
        "POP buffer: a graceful shutdown leaves the buffer unwritten",
        "actors/broker/pop/buffer_service.py",
        "        self.buffer.flush_all()",
        "        pass  # MUTANT",
        [_PBA + "test_a_graceful_restart_writes_the_buffer_out_first"],
    ),
    Mutant(
        "POP buffer: popProgress leaves out the buffer's messages in flight",
        "actors/broker/pop/handlers.py",
        "        if counts is not None and buffer is not None:",
        "        if False:  # MUTANT",
        [_PBA + "test_pop_progress_counts_the_buffers_messages_in_flight"],
    ),
    Mutant(
        "POP buffer: a stored CK counted in flight twice",
        "actors/broker/pop/buffer_merge.py",
        "            if ck is None or ck.cid != group or entry.ck_state == STORED:",
        "            if ck is None or ck.cid != group:  # MUTANT",
        [
            "tests/unit/actors/broker/pop/test_buffer_merge.py::"
            "test_inflight_counts_the_unacknowledged_messages_of_cks_not_yet_stored",
            _PBA + "test_pop_progress_counts_the_buffers_messages_in_flight",
        ],
    ),
    Mutant(
        "a live transactionCheckInterval waits for the sleep in progress",
        "actors/broker/broker.py",
        "        parts += [self.transactions.check_timer, self.registration]",
        "        parts += [self.registration]  # MUTANT",
        [
            "tests/actor/client/test_transactions.py::"
            "test_a_shorter_check_interval_applies_to_the_sleep_in_progress"
        ],
    ),
    Mutant(
        "a changed interval ends the sleep in progress at once",
        "actors/kernel/live_interval.py",
        "                continue  # re-aimed: the period changed",
        "                return  # MUTANT",
        [
            "tests/unit/actors/kernel/test_live_interval.py::"
            "test_a_sleep_follows_a_period_changed_while_asleep"
        ],
    ),
    Mutant(
        "a live registerNameServerPeriod waits for the period in progress",
        "actors/broker/boot/registration.py",
        '        if "registerNameServerPeriod" in changed:\n            self.request()',
        '        if "registerNameServerPeriod" in changed:\n            pass  # MUTANT',
        ["tests/actor/cli/test_admin_config.py::test_register_period_applies_at_once"],
    ),
    Mutant(
        "a static topic's old leader keeps the pulls held on a moved queue",
        "actors/broker/static_topic/admin.py",
        "        self.release_held(mapping.topic, [moved[gid] for gid in released])",
        "        pass  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_held_pull.py::"
            "test_a_held_pull_ends_when_its_queue_moves"
        ],
    ),
    Mutant(
        "a slave keeps the pulls held on a logic queue its synced mapping moved",
        "actors/broker/roles/slave_sync.py",
        "                    self.release_held(topic, sorted(moved.values()))",
        "                    pass  # MUTANT",
        [
            "tests/actor/broker/test_static_topic_slave_sync.py::"
            "test_a_logic_queue_moved_away_releases_its_held_pulls"
        ],
    ),
    Mutant(
        "a broker's slave sync is not given the pull hold service",
        "actors/broker/broker.py",
        "            release_held=self.pull.hold.release_queues,\n        )  # fmt: skip",
        "        )  # fmt: skip  MUTANT",
        [
            "tests/actor/broker/test_static_topic_slave_read.py::"
            "test_a_pull_held_at_the_slave_ends_when_the_synced_mapping_moves_its_queue"
        ],
    ),
    Mutant(
        "a released key's held pulls wait for their deadline",
        "actors/broker/dispatch/long_poll.py",
        "                    await self._answer(held, final=True)\n"
        "        self._forget_done(released)",
        "                    await self._answer(held, final=False)  # MUTANT\n"
        "        self._forget_done(released)",
        [
            "tests/unit/actors/broker/dispatch/test_long_poll.py::"
            "test_release_answers_a_keys_held_requests_now",
            "tests/actor/broker/test_static_topic_held_pull.py::"
            "test_a_held_pull_ends_when_its_queue_moves",
        ],
    ),
]


def main() -> None:
    # a SIGTERM (kill, timeout) ends the run through `run_one`'s finally, which puts the file
    # back: without this the mutant stayed in the tree
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    only = sys.argv[1:]
    for m in MUTANTS:
        if not only or any(o in m.name for o in only):
            run_one(m)


def run_one(m: Mutant) -> None:
    name, old, new, tests = m.name, m.text, m.replacement, m.tests
    f = f"{R}/{m.path}"
    src = open(f).read()
    assert src.count(old) == 1, (name, src.count(old))
    open(f, "w").write(src.replace(old, new))
    t = time.time()
    rebuild = m.path.endswith(".c")  # the compiled twins: build the mutant, later the original
    try:
        if rebuild:
            _build_extension()
        r = subprocess.run(
            [f"{R}/.venv/bin/pytest", "-q", "-p", "no:randomly", "-x", *tests],
            cwd=R,
            capture_output=True,
            text=True,
            timeout=900,
        )
        tail = [line for line in r.stdout.splitlines() if " passed" in line or " failed" in line]
        caught = r.returncode != 0
    finally:
        open(f, "w").write(src)
        if rebuild:
            _build_extension()
    row = {"mutant": name, "tests": tests, "caught": caught, "summary": tail[-1:]}
    print(json.dumps({**row, "s": round(time.time() - t)}), flush=True)


def _build_extension() -> None:
    """Rebuild rocketrio.protocol._speedups in place from protocol/speedups/*.c."""
    cmd = [f"{R}/.venv/bin/python", "setup.py", "-q", "build_ext", "--inplace", "--force"]
    subprocess.run(cmd, cwd=R, check=True, capture_output=True, timeout=300)


if __name__ == "__main__":
    main()
