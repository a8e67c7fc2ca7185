"""The persistent BrokerId flow (RIP-44; seeds/persistent-unique-broker-id.zh.md), with
`BrokerIdentityStore` at storePathBrokerIdentity (default storePathRootDir):

- ``broker.meta`` exists (normal restart): the id is known;
- no file: CONTROLLER_GET_NEXT_BROKER_ID -> write ``.broker.meta.temp`` (id + a fresh
  registerCheckCode) -> CONTROLLER_APPLY_BROKER_ID -> rename temp to ``broker.meta``;
- the temp file exists (crash before the rename): resend ApplyBrokerId from it; the controller
  accepts a resend with the same registerCheckCode;
- ApplyBrokerId refused (the id went to another broker): delete the temp file, start over;
- any other failure (controller down, no leader) raises `StepFailed`: the same step is retried
  later, so every crash point resumes from what is on disk and no id is ever held by two
  brokers.

Crash points: `FaultSites.reach(site)` is awaited at every step (sites in fault_sites.Fault).
Production passes `NO_FAULTS`; tests pass a hook that crashes the broker there.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.boot.fault_sites import Fault, FaultSites
from rocketrio.actors.broker.roles.controller_calls import ControllerCalls, StepFailed
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode, response_name
from rocketrio.protocol.controller_headers import (
    ApplyBrokerIdRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
)
from rocketrio.protocol.serde import from_ext
from rocketrio.storage.broker_identity import BrokerIdentityStore, BrokerMeta
from rocketrio.storage.fs import FileSystem

RC = ResponseCode
APPLY_RETRY_JITTER_S = 1.0


class BrokerIdFlow:
    """Obtains this broker's persistent id from its files and the controller."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        fs: FileSystem,
        run_blocking: RunBlocking,
        rng: random.Random,
        faults: FaultSites,
        wall_now_ms: Callable[[], int],
        addr: Callable[[], str],
    ) -> None:
        self.config = config
        self.identity = BrokerIdentityStore(config.broker_identity_dir, fs=fs)
        self.run_blocking = run_blocking
        self.rng = rng
        self.faults = faults
        self.wall_now_ms = wall_now_ms
        self.addr = addr
        self.log = structlog.get_logger("broker.replicas").bind(
            actor="replicas_manager", broker=config.brokerName
        )

    def _register_check_code(self) -> str:
        # upstream's "<brokerAddress>;<millis>" (the controller records the address part) plus
        # a random nonce: two incarnations on one address in one millisecond still differ
        return f"{self.addr()};{self.wall_now_ms()};{self.rng.getrandbits(32):08x}"

    async def obtain(self, calls: ControllerCalls) -> BrokerMeta:
        """Steps 1-4 of the seed, resumed from whatever the identity files say."""
        store, blocking = self.identity, self.run_blocking
        while True:
            meta = await blocking(store.read_meta)
            if meta is not None:
                return await self._known(meta)
            temp = await blocking(store.read_temp)
            if temp is None:
                temp = await self._new_temp(calls)
            else:
                store.check_owner(temp, self.config.brokerClusterName, self.config.brokerName)
                events.emit(self.log, events.BrokerIdResumeFromTemp(broker_id=temp.broker_id))
            if not await self.apply(calls, temp):
                await blocking(store.delete_temp)
                # seed: delete the temp file and go back to GetNextBrokerId; a random pause
                # keeps two brokers racing for the same id from colliding again
                await trio.sleep(self.rng.random() * APPLY_RETRY_JITTER_S)
                continue
            await self.faults.reach(Fault.APPLY_ANSWERED)
            meta = await blocking(store.commit_temp)
            events.emit(
                self.log, events.BrokerIdApplied(broker_id=meta.broker_id, addr=self.addr())
            )
            await self.faults.reach(Fault.META_COMMITTED)
            return meta

    async def _known(self, meta: BrokerMeta) -> BrokerMeta:
        store = self.identity
        store.check_owner(meta, self.config.brokerClusterName, self.config.brokerName)
        if await self.run_blocking(store.read_temp) is not None:
            await self.run_blocking(store.delete_temp)  # a leftover: broker.meta is the truth
        events.emit(self.log, events.BrokerIdLoaded(broker_id=meta.broker_id, path=store.directory))
        return meta

    async def _new_temp(self, calls: ControllerCalls) -> BrokerMeta:
        cfg = self.config
        next_id = await self._next_broker_id(calls)
        await self.faults.reach(Fault.NEXT_BROKER_ID_RECEIVED)
        temp = BrokerMeta(
            cfg.brokerClusterName, cfg.brokerName, next_id, self._register_check_code()
        )
        await self.run_blocking(partial(self.identity.write_temp, temp))
        events.emit(self.log, events.BrokerIdTempWritten(broker_id=next_id))
        await self.faults.reach(Fault.TEMP_WRITTEN)
        return temp

    async def _next_broker_id(self, calls: ControllerCalls) -> int:
        cfg = self.config
        resp = await calls.call(
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
            GetNextBrokerIdRequestHeader(cfg.brokerClusterName, cfg.brokerName),
        )
        if resp.code != RC.SUCCESS:
            raise StepFailed(f"GetNextBrokerId: {response_name(resp.code)}: {resp.remark}")
        next_id = from_ext(GetNextBrokerIdResponseHeader, resp.ext_fields).nextBrokerId
        if next_id is None:
            raise StepFailed("GetNextBrokerId: the answer carries no nextBrokerId")
        return next_id

    async def apply(self, calls: ControllerCalls, meta: BrokerMeta) -> bool:
        """True: the controller holds this id for us. False: refused (taken by another broker)."""
        resp = await calls.call(
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ApplyBrokerIdRequestHeader(
                meta.cluster_name, meta.broker_name, meta.broker_id, meta.register_check_code
            ),
        )
        if resp.code == RC.SUCCESS:
            return True
        if resp.code == RC.CONTROLLER_BROKER_ID_INVALID:
            events.emit(
                self.log, events.BrokerIdRefused(broker_id=meta.broker_id, remark=resp.remark)
            )
            return False
        raise StepFailed(
            f"ApplyBrokerId {meta.broker_id}: {response_name(resp.code)}: {resp.remark}"
        )

    async def reapply_from_meta(self, calls: ControllerCalls, remark: str | None) -> None:
        """The controller forgot our id (its store was wiped, or cleanBrokerMetadata): apply
        for the same id with the same registerCheckCode. This is a CAS, so it succeeds only if
        nobody else holds the id; otherwise say what the operator has to do."""
        meta = await self.run_blocking(self.identity.read_meta)
        if meta is None:
            raise StepFailed("broker.meta disappeared while the broker was running")
        if await self.apply(calls, meta):
            events.emit(self.log, events.BrokerIdReapplied(broker_id=meta.broker_id, remark=remark))
            return
        raise StepFailed(
            f"the controller does not know brokerId {meta.broker_id} of "
            f"{meta.broker_name} ({remark}) and will not give it back: if its metadata was "
            f"cleaned on purpose, delete {self.identity.directory}/broker.meta to join as a "
            f"new broker"
        )
