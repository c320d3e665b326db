"""The S3 RemoteStorageManager against a real S3-protocol server: moto's server mode, started here
as a subprocess on a free port and killed at the end. Nothing is mocked inside the process: every
call crosses HTTP, is SigV4-signed and parsed as from AWS."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
import uuid

import pytest

from kafkapy.log.partition_metadata import topic_id_to_str
from kafkapy.testing import remote_segments
from kafkapy.testing.moto_server import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server, MotoUnavailable
from kafkapy.tiered.remote_metadata import RemoteLogSegmentId, TopicIdPartition
from kafkapy.tiered.storage import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    remote_storage_from_config,
)

try:
    import boto3
    import moto  # noqa: F401  (the server runs in a subprocess; this only proves it is installed)
    from botocore.exceptions import EndpointConnectionError
    from kafkapy.tiered.s3_storage import S3RemoteStorage
    _MISSING: ImportError | None = None
except ImportError as e:  # reported as a failure below, never a silent skip
    _MISSING = e

pytestmark = pytest.mark.timeout(180)

TOPIC_ID = uuid.UUID("7d0c6f1e-2b3a-4c5d-9e8f-a1b2c3d4e5f6")


@pytest.fixture(scope="module")
def endpoint():
    """A moto S3 server's URL, alive for this module."""
    if _MISSING is not None:
        pytest.fail(f"the S3 tests need boto3 and moto[server] installed ({_MISSING}); "
                    "pip install boto3 'moto[server]'", pytrace=False)
    server = MotoS3Server()
    try:
        server.start()
    except MotoUnavailable as e:
        server.cleanup()
        pytest.fail(str(e), pytrace=False)
    try:
        yield server.url
    finally:
        server.cleanup()


def _props(endpoint: str, bucket: str, prefix: str = "tiered/cluster-a") -> dict[str, str]:
    return {
        "s3.bucket": bucket,
        "s3.prefix": prefix,
        "s3.endpoint.url": endpoint,
        "s3.region": REGION,
        "s3.access.key.id": ACCESS_KEY,
        "s3.secret.access.key": SECRET_KEY,
    }


@pytest.fixture
def bucket(endpoint) -> str:
    name = f"kafkapy-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                          aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    client.create_bucket(Bucket=name)
    client.close()
    return name


@pytest.fixture
def store(endpoint, bucket):
    s = S3RemoteStorage(_props(endpoint, bucket))
    yield s
    s.close()


@pytest.fixture
def tmp_path():
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    d = tempfile.mkdtemp(prefix="kafkapy-s3-", dir=base)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


def make_segment(tmp_path: pathlib.Path, tag: str = "a", *, txn: bool = True,
                 log_size: int = 20_000) -> tuple[LogSegmentData, dict[str, bytes]]:
    return remote_segments.make_segment(tmp_path, tag, txn=txn, random_log=True, log_size=log_size)


def new_ref(partition: int = 0) -> RemoteLogSegmentId:
    return RemoteLogSegmentId(TopicIdPartition(TOPIC_ID, "payments", partition), uuid.uuid4())


def read_all(stream) -> bytes:
    with stream:
        return stream.read()


def segment_keys(ref: RemoteLogSegmentId, prefix: str = "tiered/cluster-a") -> list[str]:
    seg = topic_id_to_str(ref.id)
    root = f"{prefix}/" if prefix else ""
    return sorted(f"{root}payments-{ref.topic_id_partition.partition}-{topic_id_to_str(TOPIC_ID)}/{seg}.{kind}" for kind in
                  ("log", "index", "timeindex", "txnindex", "snapshot", "leader_epoch_checkpoint", "manifest"))


def test_round_trip_and_key_layout(store, tmp_path):
    data, contents = make_segment(tmp_path)
    ref = new_ref()
    assert store.copy_log_segment_data(ref, data) is None
    assert store.list_objects() == segment_keys(ref)
    assert read_all(store.fetch_log_segment(ref, 0)) == contents["log"]
    for index_type, key in [(IndexType.OFFSET, "index"), (IndexType.TIMESTAMP, "timeindex"),
                            (IndexType.TRANSACTION, "txnindex"), (IndexType.PRODUCER_SNAPSHOT, "snapshot"),
                            (IndexType.LEADER_EPOCH, "leader_epoch_checkpoint")]:
        assert read_all(store.fetch_index(ref, index_type)) == contents[key], index_type


def test_ranged_gets(store, tmp_path):
    data, contents = make_segment(tmp_path, log_size=4096)
    log = contents["log"]
    ref = new_ref()
    store.copy_log_segment_data(ref, data)
    assert read_all(store.fetch_log_segment(ref, 1000)) == log[1000:]
    assert read_all(store.fetch_log_segment(ref, 1000, 1999)) == log[1000:2000]  # inclusive end
    assert read_all(store.fetch_log_segment(ref, 0, 0)) == log[:1]
    assert read_all(store.fetch_log_segment(ref, 4000, 999_999)) == log[4000:]
    assert read_all(store.fetch_log_segment(ref, 4096)) == b""
    with pytest.raises(ValueError):
        store.fetch_log_segment(ref, 5, 4)


def test_large_segment_goes_multipart_and_reads_across_parts(store, tmp_path):
    # Over boto3's 8 MiB multipart threshold: the upload is split into parts server-side.
    size = 9 * 1024 * 1024 + 123
    data, contents = make_segment(tmp_path, log_size=size)
    log = contents["log"]
    ref = new_ref()
    store.copy_log_segment_data(ref, data)
    log_key = next(k for k in segment_keys(ref) if k.endswith(".log"))
    assert store._client.head_object(Bucket=store.bucket, Key=log_key)["ETag"].strip('"').endswith("-2")
    boundary = 8 * 1024 * 1024
    assert read_all(store.fetch_log_segment(ref, boundary - 10, boundary + 9)) == log[boundary - 10:boundary + 10]
    assert read_all(store.fetch_log_segment(ref, 0)) == log


def test_segment_without_transaction_index(store, tmp_path):
    data, _ = make_segment(tmp_path, txn=False)
    ref = new_ref()
    store.copy_log_segment_data(ref, data)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_index(ref, IndexType.TRANSACTION)


def test_unknown_segment_is_not_found(store):
    ref = new_ref()
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_log_segment(ref, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_index(ref, IndexType.OFFSET)


def test_a_crash_before_the_manifest_leaves_no_visible_segment(store, endpoint, bucket, tmp_path, monkeypatch):
    data, contents = make_segment(tmp_path)
    ref = new_ref()
    client = store._client
    real_put = client.put_object

    def dying_put(**kwargs):
        if kwargs["Key"].endswith(".manifest"):
            raise EndpointConnectionError(endpoint_url=endpoint)  # the network went with the broker
        return real_put(**kwargs)

    monkeypatch.setattr(client, "put_object", dying_put)
    with pytest.raises(RemoteStorageError):
        store.copy_log_segment_data(ref, data)
    monkeypatch.undo()

    # The objects are in the bucket, but a new broker process sees no segment.
    assert store.list_objects() == [k for k in segment_keys(ref) if not k.endswith(".manifest")]
    restarted = S3RemoteStorage(_props(endpoint, bucket))
    with pytest.raises(RemoteResourceNotFoundError):
        restarted.fetch_log_segment(ref, 0)
    restarted.copy_log_segment_data(ref, data)
    assert read_all(restarted.fetch_log_segment(ref, 0)) == contents["log"]
    assert restarted.list_objects() == segment_keys(ref)
    restarted.close()


def test_recopy_and_delete_are_idempotent(store, tmp_path):
    first, _ = make_segment(tmp_path, "first")
    second, contents = make_segment(tmp_path, "second", log_size=777)
    doomed, kept = new_ref(), new_ref()
    store.copy_log_segment_data(doomed, first)
    store.copy_log_segment_data(doomed, second)
    assert read_all(store.fetch_log_segment(doomed, 0)) == contents["log"]
    store.copy_log_segment_data(kept, first)
    # A stray object of the segment (an older layout, a torn upload) goes with it too.
    store._client.put_object(Bucket=store.bucket, Key=segment_keys(doomed)[0].rsplit(".", 1)[0] + ".orphan",
                             Body=b"x")
    store.delete_log_segment_data(doomed)
    store.delete_log_segment_data(doomed)
    assert store.list_objects() == segment_keys(kept)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_log_segment(doomed, 0)
    store.delete_log_segment_data(new_ref(partition=9))


def test_many_objects_delete_in_batches(store, tmp_path):
    ref = new_ref()
    data, _ = make_segment(tmp_path, log_size=10)
    store.copy_log_segment_data(ref, data)
    base = segment_keys(ref)[0].rsplit(".", 1)[0]
    for i in range(1005):  # more than one DeleteObjects call holds
        store._client.put_object(Bucket=store.bucket, Key=f"{base}.stray{i}", Body=b"")
    store.delete_log_segment_data(ref)
    assert store.list_objects() == []


def test_missing_bucket_is_a_storage_error_not_a_missing_segment(endpoint, tmp_path):
    s = S3RemoteStorage(_props(endpoint, f"absent-{uuid.uuid4().hex[:8]}"))
    data, _ = make_segment(tmp_path)
    with pytest.raises(RemoteStorageError) as info:
        s.copy_log_segment_data(new_ref(), data)
    assert not isinstance(info.value, RemoteResourceNotFoundError)
    s.close()


def test_factory_builds_the_s3_backend_from_broker_props(endpoint, bucket, tmp_path):
    broker_props = {"remote.log.storage.system.enable": "true",
                    "remote.log.storage.manager.class.name": "kafkapy.tiered.s3_storage:S3RemoteStorage",
                    "node.id": "1"}
    broker_props.update({f"rsm.config.{k}": v for k, v in _props(endpoint, bucket, prefix="").items()})
    rsm = remote_storage_from_config(broker_props, [str(tmp_path / "logs")])
    assert isinstance(rsm, S3RemoteStorage)
    data, contents = make_segment(tmp_path)
    ref = new_ref()
    rsm.copy_log_segment_data(ref, data)
    assert rsm.list_objects() == segment_keys(ref, prefix="")
    assert read_all(rsm.fetch_log_segment(ref, 5, 9)) == contents["log"][5:10]
    rsm.close()
