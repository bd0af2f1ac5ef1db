"""The two files Kafka's ``kafka-metadata-quorum add-controller`` reads to name the controller it adds, as a
node of this cluster: ``DATA_DIR/kafka/controller.properties`` (given as ``--command-config``: ``node.id``,
``process.roles``, ``controller.listener.names``, ``listeners``, ``metadata.log.dir``) and the
``meta.properties`` of that directory (``cluster.id``, ``node.id``, ``directory.id``), as Kafka 4.4's
``MetadataQuorumCommand.handleAddController`` reads them; and the directory id a node is named by
(``directory_id``, what DescribeQuorum, AddRaftVoter and RemoveRaftVoter name it by too). A node writes
the files once its Kafka listener is up (``raftlog serve --kafka``); raftlog reads neither, and they hold
nothing secret (the cluster id is any Kafka client's to see)."""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import uuid

from partitions.names import broker_id

FOLDER = "kafka"
LISTENER = "PLAINTEXT"  # the listener DescribeQuorum names a controller's endpoint by
HEADER = "# Written by raftlog serve for kafka-metadata-quorum add-controller; raftlog reads none of it.\n"


def write(data_dir: str, node_id: str, cluster_id: str, kafka_address: str) -> str:
    """Write both files (replaced whole: the same at every start unless the node's address changed); the
    path to give ``--command-config``."""
    folder = os.path.join(data_dir, FOLDER)
    os.makedirs(folder, exist_ok=True)
    number = broker_id(node_id)
    controller = {
        "node.id": str(number),
        "process.roles": "controller",
        "controller.listener.names": LISTENER,
        "listeners": f"{LISTENER}://{kafka_address}",
        "metadata.log.dir": folder,
    }
    meta = {
        "version": "1",
        "cluster.id": cluster_id,
        "node.id": str(number),
        "directory.id": kafka_uuid(directory_id(cluster_id, node_id)),
    }
    _replace(os.path.join(folder, "meta.properties"), meta)
    path = os.path.join(folder, "controller.properties")
    _replace(path, controller)
    return path


@functools.lru_cache(maxsize=1024)
def directory_id(cluster_id: str, node: str) -> uuid.UUID:
    """A node's directory id (what Kafka keeps in a log directory's ``meta.properties`` and names a
    controller by beside its id): the same on every node and across restarts, derived from the cluster id
    and the node id as topic ids are (``topics.kafka_topic_id``): never Kafka's reserved ids (a version 4
    UUID is none of them), never one whose base64 form begins with "-", which Kafka's tools would take
    for an option."""
    digest = bytearray(hashlib.sha256(f"{cluster_id}/directory/{node}".encode()).digest()[:16])
    digest[0] &= 0x7F
    return uuid.UUID(bytes=bytes(digest), version=4)


def kafka_uuid(value: uuid.UUID | None) -> str:
    """A UUID as Kafka's ``Uuid.toString`` writes it (URL-safe base64, no padding)."""
    raw = (value or uuid.UUID(int=0)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _replace(path: str, values: dict[str, str]) -> None:
    text = HEADER + "".join(f"{key}={value}\n" for key, value in values.items())
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, path)
