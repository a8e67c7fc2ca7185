"""Mapping files of the static-topic admin commands (upstream's ``-mf`` / ``-fr`` of
updateStaticTopic and remappingStaticTopic, TopicQueueMappingUtils.writeToTemp).

Before a computed plan is sent, the mapping the brokers hold and the plan are written as
upstream's TopicRemappingDetailWrapper JSON to ``<dir>/<topic>-<epoch>.before`` and
``.after`` (`write_review_files`), so an operator can keep them, review them, or repair a
remapping that failed half-way. `apply_mapping_file` sends a (reviewed, possibly edited) file
instead of computing one: the file is checked as upstream checks it (names, epochs and queue
counts agree, every logic queue's generations are consistent and complete) and sent with the
create/update order or the remapping's five steps, by its ``type``. Editing one logic queue's
items in a file and applying it updates that logic queue alone. ``force`` (-fr true) makes the
brokers take it even when it is not newer than what they hold (upstream's force replace).
"""

from __future__ import annotations

from pathlib import Path

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.static_topic_admin import (
    StaticTopicResult,
    send_remapping,
    send_update,
)
from rocketrio.protocol import fastjson
from rocketrio.protocol.serde import HeaderError, from_json
from rocketrio.protocol.static_topic import (
    MappingError,
    build_mapping_ones,
    check_name_epoch_num,
)
from rocketrio.protocol.static_topic_alloc import (
    DEFAULT_BLOCK_SEQ_SIZE,
    TYPE_CREATE_OR_UPDATE,
    TYPE_REMAPPING,
    TopicRemappingDetailWrapper,
)

SUFFIX_BEFORE = ".before"
SUFFIX_AFTER = ".after"


def write_review_files(
    directory: Path, before: TopicRemappingDetailWrapper, after: TopicRemappingDetailWrapper
) -> tuple[Path, Path]:
    """Both as upstream names them; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = (
        directory / f"{before.topic}-{before.epoch}{SUFFIX_BEFORE}",
        directory / f"{after.topic}-{after.epoch}{SUFFIX_AFTER}",
    )
    for path, plan in zip(paths, (before, after), strict=True):
        path.write_bytes(fastjson.encode(plan))
    return paths


def read_mapping_file(topic: str, data: bytes) -> TopicRemappingDetailWrapper:
    """A mapping file checked as upstream's executeFromFile checks it."""
    try:
        plan = from_json(TopicRemappingDetailWrapper, data)
    except (HeaderError, ValueError) as e:
        raise MQClientError(f"the mapping file is not a TopicRemappingDetailWrapper: {e}") from None
    if plan.topic != topic:
        raise MQClientError(f"the mapping file is for topic {plan.topic}, not {topic}")
    if plan.type not in (TYPE_CREATE_OR_UPDATE, TYPE_REMAPPING):
        raise MQClientError(f"the mapping file's type {plan.type!r} is unknown")
    try:
        check_name_epoch_num(topic, plan.brokerConfigMap)
        details = [c.mappingDetail for c in plan.brokerConfigMap.values() if c.mappingDetail]
        build_mapping_ones(details, replace=False, check_complete=True)
    except MappingError as e:
        raise MQClientError(f"the mapping file of {topic} is inconsistent: {e}") from None
    return plan


async def apply_mapping_file(
    admin: MQAdmin,
    topic: str,
    data: bytes,
    *,
    force: bool = False,
    block_seq_size: int = DEFAULT_BLOCK_SEQ_SIZE,
) -> StaticTopicResult:
    """Send the plan in ``data`` (module docstring)."""
    plan = read_mapping_file(topic, data)
    info = await admin.cluster_info()
    if plan.type == TYPE_REMAPPING:
        return await send_remapping(admin, plan, info, block_seq_size, force)
    return await send_update(admin, plan, info, force)
