"""GET_BROKER_HA_STATUS (907): the shell that collects the live HA state of one broker.

Every broker answers, in every mode (upstream's DefaultHAService / AutoSwitchHAService both
do): a broker serving as master (controller-mode master, classic master, or a standalone
broker, which is a master with no slaves) reports `HAMasterService.view()`; any other broker
(a slave, or a controller-mode broker whose role is not known yet) reports its HA client's
view, or an idle one when it follows nobody yet. `runtime_info.runtime_info` builds the body;
nothing here decides a value.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.ha.service import AutoSwitchHAService
from rocketrio.actors.broker.ha.status_body import HaView, SlaveView, runtime_info
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol import fastjson
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.ha_bodies import HARuntimeInfo
from rocketrio.protocol.remoting import RemotingCommand


class HAStatusService:
    """Answers GET_BROKER_HA_STATUS from the broker's HA shells."""

    def __init__(
        self,
        *,
        serving_as_master: Callable[[], bool],
        master: HAMasterService,
        ha: Callable[[], AutoSwitchHAService | None],
        store: StoreActor,
        wall_now_ms: Callable[[], int],
    ) -> None:
        self.serving_as_master = serving_as_master
        self.master = master
        self.ha = ha
        self.store = store
        self.wall_now_ms = wall_now_ms

    def view(self) -> HaView:
        if self.serving_as_master():
            return self.master.view()
        ha = self.ha()
        following = None if ha is None else ha.slave_view()
        if following is not None:
            return following
        return SlaveView(
            master_ha_addr=None,
            max_offset=self.store.log_end_offset(),
            connected=False,
            last_read_ms=None,
            last_write_ms=None,
            bytes_per_s=0,
            master_confirm_offset=-1,
        )

    def runtime_info(self) -> HARuntimeInfo:
        return runtime_info(self.view(), mono_now_ms=monotonic_ms(), wall_now_ms=self.wall_now_ms())

    async def handle(self, ctx: RequestContext) -> RemotingCommand:
        body = fastjson.encode(self.runtime_info())
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=body)

    def handlers(self) -> dict[int, Callable[[RequestContext], Awaitable[RemotingCommand]]]:
        """The remoting handler, for the adapter's ``extra_handlers``."""
        return {RequestCode.GET_BROKER_HA_STATUS: self.handle}
