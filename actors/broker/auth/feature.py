"""ACL 2.0 on the broker as it builds it: the gate every request passes first (when
authentication or authorization is on; remoting_gate.py) and the user and ACL admin calls,
request codes 3001-3010 (processor.py), over the users and ACLs table (tables/auth.py)."""

from __future__ import annotations

from rocketrio.actors.broker.auth.processor import AuthProcessor
from rocketrio.actors.broker.auth.remoting_gate import AuthGate, auth_handlers, gate_settings
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.tables.auth import AuthTable


class AuthFeature:
    def __init__(self, config: BrokerConfig, table: AuthTable) -> None:
        self.processor = AuthProcessor(table)
        on = config.authenticationEnabled or config.authorizationEnabled
        self.gate = AuthGate(gate_settings(config), table) if on else None

    def handlers(self) -> Handlers:
        return auth_handlers(self.processor)
