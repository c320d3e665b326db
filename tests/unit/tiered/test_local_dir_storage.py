"""The local-directory RemoteStorageManager: what the broker (and an operator looking at the
directory) sees after copies, fetches, deletes and crashes."""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tempfile
import types
import uuid

import pytest

from kafkapy.log.partition_metadata import topic_id_to_str
from kafkapy.tiered import local_dir_storage
from kafkapy.tiered.local_dir_storage import LocalDirRemoteStorage
from kafkapy.testing import remote_segments
from kafkapy.tiered.remote_metadata import RemoteLogSegmentId, TopicIdPartition
from kafkapy.tiered.storage import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    remote_storage_from_config,
)

TOPIC_ID = uuid.UUID("0f6a2b7e-3c1d-4e5f-8a9b-0c1d2e3f4a5b")


@pytest.fixture
def tmp_path():
    """On tmpfs when there is one: the backend fsyncs every object, and on a busy disk the waits,
    not the code, would dominate. The semantics are the same."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    d = tempfile.mkdtemp(prefix="kafkapy-rsm-", dir=base)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def store(tmp_path) -> LocalDirRemoteStorage:
    return LocalDirRemoteStorage.at(tmp_path / "remote")


def make_segment(tmp_path: pathlib.Path, tag: str = "a", *, txn: bool = True,
                 log_size: int = 10_000) -> tuple[LogSegmentData, dict[str, bytes]]:
    return remote_segments.make_segment(tmp_path, tag, txn=txn, log_size=log_size)


def new_ref(topic: str = "orders.v1", partition: int = 3) -> RemoteLogSegmentId:
    return RemoteLogSegmentId(TopicIdPartition(TOPIC_ID, topic, partition), uuid.uuid4())


def read_all(stream) -> bytes:
    with stream:
        return stream.read()


INDEX_CONTENT_KEY = {
    IndexType.OFFSET: "index",
    IndexType.TIMESTAMP: "timeindex",
    IndexType.TRANSACTION: "txnindex",
    IndexType.PRODUCER_SNAPSHOT: "snapshot",
    IndexType.LEADER_EPOCH: "leader_epoch_checkpoint",
}


def test_round_trip_of_every_kind(store, tmp_path):
    data, contents = make_segment(tmp_path)
    ref = new_ref()
    assert store.copy_log_segment_data(ref, data) is None
    assert read_all(store.fetch_log_segment(ref, 0)) == contents["log"]
    for index_type, key in INDEX_CONTENT_KEY.items():
        assert read_all(store.fetch_index(ref, index_type)) == contents[key], index_type


def test_objects_are_laid_out_by_partition_and_segment_id(store, tmp_path):
    data, _ = make_segment(tmp_path)
    ref = new_ref()
    store.copy_log_segment_data(ref, data)
    partition_dir = pathlib.Path(store.root) / f"orders.v1-3-{topic_id_to_str(TOPIC_ID)}"
    seg = topic_id_to_str(ref.id)
    assert sorted(p.name for p in partition_dir.iterdir()) == sorted(
        f"{seg}.{kind}" for kind in
        ("log", "index", "timeindex", "txnindex", "snapshot", "leader_epoch_checkpoint", "manifest"))


def test_segment_without_transaction_index(store, tmp_path):
    data, contents = make_segment(tmp_path, txn=False)
    ref = new_ref()
    store.copy_log_segment_data(ref, data)
    # Kafka: a missing transaction index is RemoteResourceNotFoundException, never an empty stream.
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_index(ref, IndexType.TRANSACTION)
    assert read_all(store.fetch_index(ref, IndexType.OFFSET)) == contents["index"]


def test_ranged_reads_of_the_log(store, tmp_path):
    data, contents = make_segment(tmp_path, log_size=5000)
    log = contents["log"]
    ref = new_ref()
    store.copy_log_segment_data(ref, data)
    assert read_all(store.fetch_log_segment(ref, 1234)) == log[1234:]
    # The end position is inclusive, as in Kafka's RemoteStorageManager.
    assert read_all(store.fetch_log_segment(ref, 100, 199)) == log[100:200]
    assert read_all(store.fetch_log_segment(ref, 7, 7)) == log[7:8]
    assert read_all(store.fetch_log_segment(ref, 4990, 10_000_000)) == log[4990:]
    assert read_all(store.fetch_log_segment(ref, 4999)) == log[-1:]
    assert read_all(store.fetch_log_segment(ref, 5000)) == b""
    # Chunked reads of a window stop exactly at its end.
    with store.fetch_log_segment(ref, 10, 2009) as stream:
        chunks = []
        while chunk := stream.read(333):
            chunks.append(chunk)
    assert b"".join(chunks) == log[10:2010]
    with pytest.raises(ValueError):
        store.fetch_log_segment(ref, -1)
    with pytest.raises(ValueError):
        store.fetch_log_segment(ref, 10, 9)


def test_unknown_segment_is_not_found(store):
    ref = new_ref()
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_log_segment(ref, 0)
    for index_type in IndexType:
        with pytest.raises(RemoteResourceNotFoundError):
            store.fetch_index(ref, index_type)
    assert issubclass(RemoteResourceNotFoundError, RemoteStorageError)


def test_copying_again_overwrites_and_stays_consistent(store, tmp_path):
    first, _ = make_segment(tmp_path, "first")
    second, contents = make_segment(tmp_path, "second", log_size=3000)
    ref = new_ref()
    store.copy_log_segment_data(ref, first)
    store.copy_log_segment_data(ref, first)
    store.copy_log_segment_data(ref, second)
    assert read_all(store.fetch_log_segment(ref, 0)) == contents["log"]
    assert read_all(store.fetch_index(ref, IndexType.TIMESTAMP)) == contents["timeindex"]
    assert not [p for p in pathlib.Path(store.partition_path(ref)).iterdir() if p.name.endswith(".tmp")]


def test_delete_is_idempotent_and_spares_other_segments(store, tmp_path):
    data, contents = make_segment(tmp_path)
    doomed, kept = new_ref(), new_ref()
    store.copy_log_segment_data(doomed, data)
    store.copy_log_segment_data(kept, data)
    store.delete_log_segment_data(doomed)
    store.delete_log_segment_data(doomed)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_log_segment(doomed, 0)
    prefix = topic_id_to_str(doomed.id)
    assert not [p for p in pathlib.Path(store.partition_path(kept)).iterdir() if p.name.startswith(prefix)]
    assert read_all(store.fetch_log_segment(kept, 0)) == contents["log"]
    store.delete_log_segment_data(kept)
    # The partition's last segment gone: no empty folder is left behind.
    assert not os.path.exists(store.partition_path(kept))
    store.delete_log_segment_data(new_ref(topic="never-written"))


def test_a_crash_before_the_manifest_leaves_no_visible_segment(store, tmp_path, monkeypatch):
    data, contents = make_segment(tmp_path)
    ref = new_ref()
    real_put_bytes = LocalDirRemoteStorage._put_bytes

    def dying_put_bytes(target, payload):
        if target.endswith(".manifest"):
            # What a crash between the last object and the manifest leaves: a temp, no manifest.
            with open(target + local_dir_storage.TEMP_SUFFIX, "wb") as f:
                f.write(payload[: len(payload) // 2])
            raise OSError("power lost")
        return real_put_bytes(target, payload)

    monkeypatch.setattr(LocalDirRemoteStorage, "_put_bytes", staticmethod(dying_put_bytes))
    with pytest.raises(RemoteStorageError):
        store.copy_log_segment_data(ref, data)
    monkeypatch.undo()

    # Every object is on disk, yet a fresh store (the broker after restart) sees no segment.
    on_disk = {p.name.split(".", 1)[1] for p in pathlib.Path(store.partition_path(ref)).iterdir()}
    assert {"log", "index", "timeindex", "txnindex", "snapshot", "manifest.tmp"} <= on_disk
    restarted = LocalDirRemoteStorage.at(store.root)
    with pytest.raises(RemoteResourceNotFoundError):
        restarted.fetch_log_segment(ref, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        restarted.fetch_index(ref, IndexType.OFFSET)

    # The retry completes the upload over the leftovers.
    restarted.copy_log_segment_data(ref, data)
    assert read_all(restarted.fetch_log_segment(ref, 0)) == contents["log"]
    assert not [p for p in pathlib.Path(store.partition_path(ref)).iterdir() if p.name.endswith(".tmp")]


def test_a_crash_mid_object_then_delete_sweeps_the_leftovers(store, tmp_path, monkeypatch):
    data, _ = make_segment(tmp_path)
    ref = new_ref()
    real_replace = os.replace
    calls = []

    def dying_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the offset index: its temp is written, never renamed
            raise OSError("killed")
        return real_replace(src, dst)

    monkeypatch.setattr(local_dir_storage.os, "replace", dying_replace)
    with pytest.raises(RemoteStorageError):
        store.copy_log_segment_data(ref, data)
    monkeypatch.undo()
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_index(ref, IndexType.OFFSET)
    assert any(p.name.endswith(".index.tmp") for p in pathlib.Path(store.partition_path(ref)).iterdir())
    # Abandoning the attempt (the broker deletes the segment id it gave up on) removes it all.
    store.delete_log_segment_data(ref)
    assert not os.path.exists(store.partition_path(ref))


def test_missing_source_file_is_a_storage_error(store, tmp_path):
    data, _ = make_segment(tmp_path)
    os.unlink(data.time_index)
    ref = new_ref()
    with pytest.raises(RemoteStorageError) as info:
        store.copy_log_segment_data(ref, data)
    assert not isinstance(info.value, RemoteResourceNotFoundError)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_log_segment(ref, 0)


# -- remote_storage_from_config -------------------------------------------------------------


class RecordingStorage(RemoteStorageManager):
    """A plugin stand-in that remembers the props the factory gave it."""

    def __init__(self, props):
        self.props = dict(props)

    def copy_log_segment_data(self, segment, data):
        return None

    def fetch_log_segment(self, segment, start_position, end_position=None):
        raise RemoteResourceNotFoundError("empty")

    def fetch_index(self, segment, index_type):
        raise RemoteResourceNotFoundError("empty")

    def delete_log_segment_data(self, segment):
        pass


class NotAStorage:
    def __init__(self, props):
        pass


PLUGIN_MODULE = "kafkapy_test_rsm_plugin"


@pytest.fixture(autouse=True)
def plugin_module(monkeypatch):
    """The plugin classes importable by name, as a third-party RSM package would be."""
    module = types.ModuleType(PLUGIN_MODULE)
    module.RecordingStorage = RecordingStorage
    module.NotAStorage = NotAStorage
    monkeypatch.setitem(sys.modules, PLUGIN_MODULE, module)


def test_factory_is_off_unless_the_system_is_enabled(tmp_path):
    log_dir = str(tmp_path / "logs")
    assert remote_storage_from_config({}, [log_dir]) is None
    assert remote_storage_from_config({"remote.log.storage.system.enable": "false",
                                       "remote.log.storage.manager.class.name": f"{PLUGIN_MODULE}:RecordingStorage"},
                                      [log_dir]) is None


def test_factory_defaults_to_a_directory_beside_the_first_log_dir(tmp_path):
    props = {"remote.log.storage.system.enable": "true"}
    rsm = remote_storage_from_config(props, [str(tmp_path / "logs-1"), str(tmp_path / "logs-2")])
    assert isinstance(rsm, LocalDirRemoteStorage)
    assert rsm.root == str(tmp_path / "kafkapy-remote-storage")
    rsm = remote_storage_from_config(props, f"{tmp_path / 'a'},{tmp_path / 'b'}")
    assert rsm.root == str(tmp_path / "kafkapy-remote-storage")
    rsm = remote_storage_from_config({**props, "rsm.config.dir": str(tmp_path / "elsewhere")}, [str(tmp_path)])
    assert rsm.root == str(tmp_path / "elsewhere")
    assert os.path.isdir(rsm.root)


@pytest.mark.parametrize("sep", [":", "."])
def test_factory_loads_the_named_class_with_its_prefixed_props(tmp_path, sep):
    props = {
        "remote.log.storage.system.enable": "TRUE",
        "remote.log.storage.manager.class.name": f"{PLUGIN_MODULE}{sep}RecordingStorage",
        "rsm.config.s3.bucket": "b",
        "rsm.config.custom.thing": "x",
        "log.retention.ms": "1",
        "node.id": "7",
    }
    rsm = remote_storage_from_config(props, [str(tmp_path)])
    assert isinstance(rsm, RecordingStorage)
    assert rsm.props == {"s3.bucket": "b", "custom.thing": "x", "broker.id": "7"}
    # remote.log.storage.manager.impl.prefix moves the namespace, as in Kafka.
    rsm = remote_storage_from_config({**props, "remote.log.storage.manager.impl.prefix": "rsm.config.custom."},
                                     [str(tmp_path)])
    assert rsm.props == {"thing": "x", "broker.id": "7"}


@pytest.mark.parametrize("name", ["no_such_module_xyz:Thing", f"{PLUGIN_MODULE}:Missing", "justaname",
                                  f"{PLUGIN_MODULE}:NotAStorage"])
def test_factory_rejects_what_is_not_a_storage_class(tmp_path, name):
    props = {"remote.log.storage.system.enable": "true", "remote.log.storage.manager.class.name": name}
    with pytest.raises(ValueError):
        remote_storage_from_config(props, [str(tmp_path)])
