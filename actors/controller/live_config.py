"""UPDATE_CONTROLLER_CONFIG (1009): which controller keys change live (the decision itself is
actors/kernel/live_update.py).

As upstream, the request changes the one replica it is sent to (nothing goes through Raft):
send it to every replica (``updateControllerConfig -a "a;b;c"`` does) for the group to agree.
Live: controllerRequestThreadPoolQueueCapacity, electMasterMaxRetryCount and
notifyBrokerRoleChanged (read from the config object at each request / election), and
enableElectUncleanMaster (copied into the replicas table at start: `apply_controller_changes`
sets it there; it decides the elections this replica computes while it leads). Every other key
needs a restart: the Raft group (controllerDLeger*, controllerStorePath, mappedFileSize), the
listener and its limits, the scan periods (loops started at boot), the ACL keys, logDir.
configBlackList, configStorePath and rocketmqHome are on upstream's black list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from rocketrio.actors.kernel.live_update import ConfigChange, UpdatePolicy

if TYPE_CHECKING:
    from rocketrio.actors.controller.controller import Controller

CONTROLLER_POLICY: Final = UpdatePolicy(
    role="controller",
    live_keys=frozenset(
        {
            "controllerRequestThreadPoolQueueCapacity",
            "electMasterMaxRetryCount",
            "notifyBrokerRoleChanged",
            "enableElectUncleanMaster",
        }
    ),
    # upstream ControllerRequestProcessor.initConfigBlackList
    always_black=frozenset({"configBlackList", "configStorePath", "rocketmqHome"}),
    restart_hint="change it in the controller's config file and restart this replica",
)


def apply_controller_changes(controller: Controller, changes: tuple[ConfigChange, ...]) -> None:
    """Tell the replicas table the value it copied at start (module docstring)."""
    if any(ch.key == "enableElectUncleanMaster" for ch in changes):
        controller.replicas.enable_elect_unclean_master = controller.config.enableElectUncleanMaster
