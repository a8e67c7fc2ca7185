"""RouteInfoManager: the NameServer's routing tables and every decision about them (pure).

Owns upstream's five tables: topicQueueTable (topic -> brokerName -> QueueData), brokerAddrTable
(brokerName -> BrokerData), clusterAddrTable (cluster -> brokerNames), brokerLiveTable
((cluster, brokerAddr) -> BrokerLiveInfo) and filterServerTable. It decides what a registration,
an unregistration, a heartbeat, an expiry or a closed connection does to them, and assembles
TopicRouteData / ClusterInfo / TopicList / BrokerMemberGroup answers.

No I/O, no trio, no clock: callers pass ``now_ms`` (the NameServer's own monotonic clock; it is
only ever compared with itself) and an opaque ``channel`` token (the broker's connection), which
comes back in `ExpiredBroker` so the shell can close it. Outputs the shell must carry out
(NOTIFY_MIN_BROKER_ID_CHANGE pushes, SPEC N3) queue up and are taken with `take_notifications`.

Rules follow upstream 5.x: only the master (brokerId 0) or, for brokers that announce
``enableActingMaster``, the smallest-id slave of a masterless group (the "prime slave", with write
permission wiped) create QueueData; one address holds one brokerId in a group (a slave promoted to
master re-registers as 0 from the same address); a registration for an id that another address
holds with a newer ``stateVersion`` is ignored; routes publish the smallest-id slave as brokerId 0
when ``supportActingMaster`` is on and the group has no master (SPEC N4).

The records it takes and returns are route_records.py's; the read-only answers (TopicRouteData,
ClusterInfo, topic lists, BrokerMemberGroup) are assembled in route_query.py.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import attrs

from rocketrio.actors.namesrv import route_query
from rocketrio.actors.namesrv.route_records import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
    MASTER_ID,
    BrokerAddrInfo,
    BrokerLiveInfo,
    ExpiredBroker,
    MinBrokerIdChange,
    RegisterBrokerResult,
    UnregisteredBroker,
    UnregisterRequest,
    copy_queue_data,
)
from rocketrio.protocol.bodies import (
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicQueueMappingInfo,
    TopicRouteData,
)


class RouteInfoManager:
    """The NameServer's routing state. Single-owner: the NameServer shell calls it, nobody else."""

    def __init__(
        self,
        *,
        default_timeout_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
        support_acting_master: bool = False,
        notify_min_broker_id_changed: bool = False,
    ) -> None:
        self.default_timeout_ms = default_timeout_ms
        self.support_acting_master = support_acting_master
        self.notify_min_broker_id_changed = notify_min_broker_id_changed
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[BrokerAddrInfo, BrokerLiveInfo] = {}
        self.filter_server_table: dict[BrokerAddrInfo, list[str]] = {}
        # static topics (RIP-21): topic -> brokerName -> what that broker registered of it
        self.topic_queue_mapping_info_table: dict[str, dict[str, TopicQueueMappingInfo]] = {}
        self._notifications: list[MinBrokerIdChange] = []

    # -- registration ---------------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        now_ms: int,
        timeout_ms: int | None = None,
        enable_acting_master: bool | None = None,
        zone_name: str | None = None,
        filter_server_list: list[str] | None = None,
        channel: Hashable | None = None,
    ) -> RegisterBrokerResult | None:
        """Record a broker and (for a master or prime slave) its topics' QueueData.

        ``enable_acting_master`` None means an old broker that does not send the field: it is never
        a prime slave. Returns None when the registration is refused: a one-topic registration
        (a broker announcing a single new topic) from an address that never registered in full.
        """
        wrapper = topic_config_wrapper or TopicConfigSerializeWrapper()
        bd = self.broker_addr_table.get(broker_name)
        if len(wrapper.topicConfigTable) == 1 and (bd is None or broker_id not in bd.brokerAddrs):
            # checked before any change, unlike upstream, which leaves an empty group behind
            return None
        register_first = bd is None
        bd = self._ensure_group(cluster_name, broker_name)
        old_version_broker = enable_acting_master is None
        bd.enableActingMaster = bool(enable_acting_master)
        bd.zoneName = zone_name
        addrs = bd.brokerAddrs
        # upstream compares with 0 for an empty group, so a first member never counts as a change
        min_id_changed = broker_id < (min(addrs) if addrs else MASTER_ID)
        # One address holds one id: a promoted slave comes back as 0 from the same address.
        for bid in [b for b, a in addrs.items() if a == broker_addr and b != broker_id]:
            del addrs[bid]
        ignored = self._stale_registration(cluster_name, addrs.get(broker_id), broker_addr, wrapper)
        if ignored is not None:
            self.broker_live_table.pop(BrokerAddrInfo(cluster_name, broker_addr), None)
            return RegisterBrokerResult(ignored=ignored)
        key = BrokerAddrInfo(cluster_name, broker_addr)
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        register_first = register_first or not old_addr
        is_master = broker_id == MASTER_ID
        is_prime_slave = not old_version_broker and not is_master and broker_id == min(addrs)
        if is_master or is_prime_slave:
            self._update_queue_datas(key, broker_name, wrapper, register_first, is_prime_slave)
            self._update_mapping_infos(broker_name, wrapper)
        prev_live = self.broker_live_table.get(key)
        self.broker_live_table[key] = BrokerLiveInfo(
            last_update_timestamp=now_ms,
            heartbeat_timeout_millis=timeout_ms if timeout_ms else self.default_timeout_ms,
            data_version=wrapper.dataVersion,
            ha_server_addr=ha_server_addr,
            channel=channel,
        )
        if filter_server_list is not None:
            self._set_filter_servers(key, filter_server_list)
        if min_id_changed and self.notify_min_broker_id_changed:
            self._queue_min_id_change(broker_name, dict(addrs), None, ha_server_addr)
        master_addr, master_ha = self._live_master(cluster_name, bd, broker_id)
        return RegisterBrokerResult(
            master_addr=master_addr,
            ha_server_addr=master_ha,
            new_broker=prev_live is None or old_addr != broker_addr,
        )

    def _ensure_group(self, cluster_name: str, broker_name: str) -> BrokerData:
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        bd = self.broker_addr_table.get(broker_name)
        if bd is None:
            bd = BrokerData(cluster=cluster_name, brokerName=broker_name)
            self.broker_addr_table[broker_name] = bd
        return bd

    def _set_filter_servers(self, key: BrokerAddrInfo, servers: list[str]) -> None:
        if servers:
            self.filter_server_table[key] = list(servers)
        else:
            self.filter_server_table.pop(key, None)

    def _stale_registration(
        self,
        cluster_name: str,
        old_addr: str | None,
        broker_addr: str,
        wrapper: TopicConfigSerializeWrapper,
    ) -> str | None:
        """Another live address holds this id with a newer stateVersion: keep it (#6316)."""
        if old_addr is None or old_addr == broker_addr:
            return None
        old_info = self.broker_live_table.get(BrokerAddrInfo(cluster_name, old_addr))
        if old_info is None:
            return None
        old_state = old_info.data_version.stateVersion
        new_state = wrapper.dataVersion.stateVersion
        if old_state > new_state:
            return (
                f"{old_addr} holds this brokerId with stateVersion {old_state} "
                f"> {new_state} of {broker_addr}"
            )
        return None

    def _update_queue_datas(
        self,
        key: BrokerAddrInfo,
        broker_name: str,
        wrapper: TopicConfigSerializeWrapper,
        register_first: bool,
        is_prime_slave: bool,
    ) -> None:
        version_changed = self._data_version_changed(key, wrapper.dataVersion)
        for tc in wrapper.topicConfigTable.values():
            if register_first or version_changed or self._topic_lacks(tc.topicName, broker_name):
                # a prime slave serves reads only: producers must not pick it
                perm = tc.perm & ~PERM_WRITE if is_prime_slave else tc.perm
                self._create_and_update_queue_data(broker_name, tc, perm)

    def _update_mapping_infos(self, broker_name: str, wrapper: TopicConfigSerializeWrapper) -> None:
        """Keep the static-topic mapping infos this broker registered (upstream keys them by
        the info's own ``bname``; a full registration also drops the topics it no longer
        holds a mapping of, which upstream never does)."""
        infos: dict[str, TopicQueueMappingInfo] = getattr(wrapper, "topicQueueMappingInfoMap", {})
        if len(wrapper.topicConfigTable) != 1:  # not a one-topic increment: the whole set
            for topic in list(self.topic_queue_mapping_info_table):
                if topic not in infos:
                    self._drop_mapping_info(topic, broker_name)
        for topic, info in infos.items():
            self.topic_queue_mapping_info_table.setdefault(topic, {})[info.bname] = attrs.evolve(
                info, currIdMap=dict(info.currIdMap)
            )

    def _drop_mapping_info(self, topic: str, broker_name: str) -> None:
        by_broker = self.topic_queue_mapping_info_table.get(topic)
        if by_broker is not None:
            by_broker.pop(broker_name, None)
            if not by_broker:
                del self.topic_queue_mapping_info_table[topic]

    def _topic_lacks(self, topic: str, broker_name: str) -> bool:
        qmap = self.topic_queue_table.get(topic)
        return not qmap or broker_name not in qmap

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfig, perm: int) -> None:
        qd = QueueData(
            brokerName=broker_name,
            readQueueNums=tc.readQueueNums,
            writeQueueNums=tc.writeQueueNums,
            perm=perm,
            topicSysFlag=tc.topicSysFlag,
        )
        qmap = self.topic_queue_table.setdefault(tc.topicName, {})
        if qmap.get(broker_name) != qd:
            qmap[broker_name] = qd

    def _live_master(
        self, cluster_name: str, bd: BrokerData, broker_id: int
    ) -> tuple[str | None, str | None]:
        """A slave learns its live master's address and HA address from the registration."""
        if broker_id == MASTER_ID:
            return None, None
        master_addr = bd.brokerAddrs.get(MASTER_ID)
        if master_addr is None:
            return None, None
        info = self.broker_live_table.get(BrokerAddrInfo(cluster_name, master_addr))
        if info is None:
            return None, None
        return master_addr, info.ha_server_addr

    # -- unregistration, liveness ---------------------------------------------------------------

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> UnregisteredBroker:
        return self.unregister_brokers(
            [UnregisterRequest(cluster_name, broker_addr, broker_name, broker_id)]
        )[0]

    def unregister_brokers(self, requests: Iterable[UnregisterRequest]) -> list[UnregisteredBroker]:
        """Remove addresses; drop groups left empty and their QueueData (upstream batch form)."""
        removed_names: set[str] = set()
        reduced_names: set[str] = set()
        out: list[UnregisteredBroker] = []
        for req in requests:
            key = BrokerAddrInfo(req.cluster_name, req.broker_addr)
            was_live = self.broker_live_table.pop(key, None) is not None
            self.filter_server_table.pop(key, None)
            group_removed = False
            bd = self.broker_addr_table.get(req.broker_name) if req.broker_name else None
            if bd is not None:
                addrs = bd.brokerAddrs
                prev_min = min(addrs) if addrs else None
                for bid in [b for b, a in addrs.items() if a == req.broker_addr]:
                    del addrs[bid]
                if not addrs:
                    group_removed = True
                    self._remove_group(req.cluster_name, bd.brokerName)
                    removed_names.add(bd.brokerName)
                else:
                    reduced_names.add(bd.brokerName)
                    if min(addrs) != prev_min and bd.enableActingMaster:
                        self._maybe_notify_offline(bd, req.broker_addr)
            out.append(
                UnregisteredBroker(
                    req.cluster_name,
                    req.broker_addr,
                    req.broker_name,
                    req.broker_id,
                    group_removed,
                    was_live,
                )
            )
        self._clean_topics(removed_names, reduced_names)
        return out

    def _remove_group(self, cluster_name: str, broker_name: str) -> None:
        del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(cluster_name)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster_name]

    def _maybe_notify_offline(self, bd: BrokerData, offline_addr: str) -> None:
        if self.notify_min_broker_id_changed:
            self._queue_min_id_change(bd.brokerName, dict(bd.brokerAddrs), offline_addr, None)

    def _clean_topics(self, removed_names: set[str], reduced_names: set[str]) -> None:
        if not removed_names and not reduced_names:
            return
        for topic in list(self.topic_queue_mapping_info_table):
            for name in removed_names:
                self._drop_mapping_info(topic, name)
        for topic in list(self.topic_queue_table):
            qmap = self.topic_queue_table[topic]
            for name in removed_names:
                qmap.pop(name, None)
            if not qmap:
                del self.topic_queue_table[topic]
                continue
            for name in reduced_names:
                qd = qmap.get(name)
                bd = self.broker_addr_table.get(name)
                # acting-master groups that lost their master stop taking writes at once
                if qd is not None and bd is not None and bd.enableActingMaster:
                    if self._no_master(bd):
                        qd.perm &= ~PERM_WRITE

    @staticmethod
    def _no_master(bd: BrokerData) -> bool:
        return not bd.brokerAddrs or min(bd.brokerAddrs) > MASTER_ID

    def heartbeat(self, cluster_name: str, broker_addr: str, now_ms: int) -> bool:
        """BROKER_HEARTBEAT: refresh liveness. False when the broker is not registered here."""
        info = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        if info is None:
            return False
        info.last_update_timestamp = now_ms
        return True

    def scan_not_active(self, now_ms: int) -> list[ExpiredBroker]:
        """Unregister every broker silent for longer than its timeout (strictly, like upstream)."""
        expired = [
            (key, info)
            for key, info in self.broker_live_table.items()
            if info.last_update_timestamp + info.heartbeat_timeout_millis < now_ms
        ]
        out: list[ExpiredBroker] = []
        for key, info in expired:
            name, bid = self._find_broker(key)
            self.unregister_brokers(
                [UnregisterRequest(key.cluster_name, key.broker_addr, name, bid)]
            )
            out.append(
                ExpiredBroker(
                    cluster_name=key.cluster_name,
                    broker_addr=key.broker_addr,
                    broker_name=name,
                    broker_id=bid,
                    silent_ms=now_ms - info.last_update_timestamp,
                    timeout_ms=info.heartbeat_timeout_millis,
                    channel=info.channel,
                )
            )
        return out

    def on_channel_destroy(self, channel: Hashable) -> list[UnregisteredBroker]:
        """A broker connection closed: unregister every address registered through it."""
        keys = [k for k, info in self.broker_live_table.items() if info.channel is channel]
        requests = [
            UnregisterRequest(k.cluster_name, k.broker_addr, *self._find_broker(k)) for k in keys
        ]
        return self.unregister_brokers(requests) if requests else []

    def _find_broker(self, key: BrokerAddrInfo) -> tuple[str | None, int | None]:
        for bd in self.broker_addr_table.values():
            if bd.cluster != key.cluster_name:
                continue
            for bid, addr in bd.brokerAddrs.items():
                if addr == key.broker_addr:
                    return bd.brokerName, bid
        return None, None

    # -- data versions --------------------------------------------------------------------------

    def _data_version_changed(self, key: BrokerAddrInfo, version: DataVersion) -> bool:
        info = self.broker_live_table.get(key)
        return info is None or info.data_version != version

    def query_data_version(
        self, cluster_name: str, broker_addr: str, version: DataVersion, now_ms: int
    ) -> tuple[bool, DataVersion | None]:
        """QUERY_DATA_VERSION: (changed?, our copy). Counts as a heartbeat, like upstream 5.x."""
        key = BrokerAddrInfo(cluster_name, broker_addr)
        changed = self._data_version_changed(key, version)
        info = self.broker_live_table.get(key)
        if info is None:
            return changed, None
        info.last_update_timestamp = now_ms
        return changed, info.data_version

    # -- topics ---------------------------------------------------------------------------------

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> bool:
        """REGISTER_TOPIC_IN_NAMESRV: only for a topic not known yet, on known brokers only."""
        if not queue_datas or topic in self.topic_queue_table:
            return False
        if any(qd.brokerName not in self.broker_addr_table for qd in queue_datas):
            return False
        self.topic_queue_table[topic] = {qd.brokerName: copy_queue_data(qd) for qd in queue_datas}
        return True

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> bool:
        """Forget a topic everywhere, or only on the brokers of ``cluster_name``."""
        if not cluster_name:
            self.topic_queue_mapping_info_table.pop(topic, None)
            return self.topic_queue_table.pop(topic, None) is not None
        qmap = self.topic_queue_table.get(topic)
        names = self.cluster_addr_table.get(cluster_name)
        if qmap is None or not names:
            return False
        removed = [n for n in names if qmap.pop(n, None) is not None]
        for name in names:
            self._drop_mapping_info(topic, name)
        if not qmap:
            del self.topic_queue_table[topic]
        return bool(removed)

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear the write bit of every QueueData of ``broker_name``; returns how many."""
        count = 0
        for qmap in self.topic_queue_table.values():
            qd = qmap.get(broker_name)
            if qd is not None:
                qd.perm &= ~PERM_WRITE
                count += 1
        return count

    def add_write_perm(self, broker_name: str) -> int:
        """Give every QueueData of ``broker_name`` read+write (upstream sets exactly 6)."""
        count = 0
        for qmap in self.topic_queue_table.values():
            qd = qmap.get(broker_name)
            if qd is not None:
                qd.perm = PERM_READ | PERM_WRITE
                count += 1
        return count

    # -- queries (assembled in route_query.py) ------------------------------------------------

    def get_route(self, topic: str) -> TopicRouteData | None:
        """TopicRouteData of ``topic`` (copies), or None when no live broker serves it."""
        return route_query.topic_route(self, topic)

    def cluster_info(self) -> ClusterInfo:
        return route_query.cluster_info(self)

    def all_topics(self) -> TopicList:
        return TopicList(topicList=sorted(self.topic_queue_table))

    def topics_by_cluster(self, cluster_name: str) -> TopicList:
        return route_query.topics_by_cluster(self, cluster_name)

    def system_topics(self) -> TopicList:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names are topics too (upstream)."""
        return route_query.system_topics(self)

    def broker_member_group(self, cluster_name: str, broker_name: str) -> BrokerMemberGroup:
        return route_query.broker_member_group(self, cluster_name, broker_name)

    def live_info(self, cluster_name: str, broker_addr: str) -> BrokerLiveInfo | None:
        return self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))

    # -- outputs for the shell ------------------------------------------------------------------

    def _queue_min_id_change(
        self,
        broker_name: str,
        addrs: dict[int, str],
        offline_addr: str | None,
        ha_addr: str | None,
    ) -> None:
        if not addrs:
            return
        min_id = min(addrs)
        if offline_addr is not None or len(addrs) == 1:
            targets = [addrs[b] for b in sorted(addrs)]
        else:
            # a new smallest member registered: tell the others; it knows already
            targets = [addrs[b] for b in sorted(addrs) if b != min_id]
        self._notifications.append(
            MinBrokerIdChange(
                broker_name=broker_name,
                min_broker_id=min_id,
                min_broker_addr=addrs[min_id],
                offline_broker_addr=offline_addr,
                ha_broker_addr=ha_addr,
                notify_addrs=tuple(targets),
            )
        )

    def take_notifications(self) -> list[MinBrokerIdChange]:
        out, self._notifications = self._notifications, []
        return out
