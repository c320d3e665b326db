"""A RemoteStorageManager over the S3 protocol (AWS S3, MinIO, Ceph RGW, R2, ...).

Keys: ``<prefix>/<topic>-<partition>-<topic id>/<segment id>.<kind>``. A PUT is all-or-nothing on
S3, so objects need no temp names; the segment's manifest is still PUT last, and a segment whose
manifest is missing is invisible, so a crash mid-upload exposes nothing and a retry overwrites.

We talk S3 through boto3: it is AWS's own SDK, released every few days and kept in step with the
service, and it carries what a hand-rolled client would get wrong - SigV4 signing, credential
chains (env, profiles, instance roles), retries with backoff, and multipart upload for segments
over the single-PUT sweet spot. It is imported lazily so brokers without tiered storage need not
install it (``pip install kafkapy[s3]``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO, cast

from kafkapy.tiered.remote_metadata import RemoteLogSegmentId
from kafkapy.tiered.storage import (
    INDEX_OBJECT_KIND,
    IndexType,
    LogSegmentData,
    ObjectKind,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    check_range,
    decode_manifest,
    encode_manifest,
    object_name,
    object_prefix,
    partition_dir,
)

# RSM props (shown without the ``rsm.config.`` prefix the broker strips).
S3_BUCKET = "s3.bucket"
S3_PREFIX = "s3.prefix"
S3_ENDPOINT_URL = "s3.endpoint.url"
S3_REGION = "s3.region"
S3_ACCESS_KEY_ID = "s3.access.key.id"
S3_SECRET_ACCESS_KEY = "s3.secret.access.key"
# MinIO and most self-hosted servers want ``host/bucket/key`` rather than ``bucket.host/key``.
S3_PATH_STYLE_ACCESS = "s3.path.style.access.enabled"

# The most keys one DeleteObjects call takes.
_DELETE_BATCH = 1000
_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}


def _client_error_code(e: Exception) -> str:
    response = getattr(e, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class S3RemoteStorage(RemoteStorageManager):
    """Remote segments as objects in one S3 bucket, under an optional key prefix."""

    def __init__(self, props: Mapping[str, str]) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as e:
            raise RemoteStorageError("the S3 remote storage needs boto3: pip install 'kafkapy[s3]'") from e
        bucket = props.get(S3_BUCKET)
        if not bucket:
            raise ValueError(f"the S3 remote storage needs rsm.config.{S3_BUCKET}")
        self._bucket = bucket
        self._prefix = (props.get(S3_PREFIX) or "").strip("/")
        kwargs: dict[str, Any] = {}
        if props.get(S3_ENDPOINT_URL):
            kwargs["endpoint_url"] = props[S3_ENDPOINT_URL]
        if props.get(S3_REGION):
            kwargs["region_name"] = props[S3_REGION]
        # Without explicit keys boto3 walks its usual chain (env vars, profile, instance role).
        if props.get(S3_ACCESS_KEY_ID):
            kwargs["aws_access_key_id"] = props[S3_ACCESS_KEY_ID]
            kwargs["aws_secret_access_key"] = props.get(S3_SECRET_ACCESS_KEY, "")
        addressing = "path" if str(props.get(S3_PATH_STYLE_ACCESS, "")).lower() == "true" else "auto"
        kwargs["config"] = Config(s3={"addressing_style": addressing}, retries={"mode": "standard"})
        from botocore.exceptions import BotoCoreError, ClientError

        self._errors: tuple[type[Exception], ...] = (BotoCoreError, ClientError)
        self._client = boto3.client("s3", **kwargs)

    @property
    def bucket(self) -> str:
        return self._bucket

    def key(self, segment: RemoteLogSegmentId, kind: ObjectKind) -> str:
        return self._full(f"{partition_dir(segment)}/{object_name(segment, kind)}")

    def _full(self, relative: str) -> str:
        return f"{self._prefix}/{relative}" if self._prefix else relative

    def _fail(self, what: str, e: Exception) -> RemoteStorageError:
        if _client_error_code(e) in _NOT_FOUND_CODES:
            return RemoteResourceNotFoundError(f"{what}: not found ({e})")
        return RemoteStorageError(f"{what}: {e}")

    # -- copy -------------------------------------------------------------------------------

    def copy_log_segment_data(self, segment: RemoteLogSegmentId, data: LogSegmentData) -> bytes | None:
        manifest_key = self.key(segment, ObjectKind.MANIFEST)
        try:
            # A re-copy hides the segment first so no reader mixes old and new objects.
            self._client.delete_object(Bucket=self._bucket, Key=manifest_key)
            sizes: dict[ObjectKind, int] = {}
            for kind, source in data.files():
                try:
                    f = open(source, "rb")
                    sizes[kind] = os.fstat(f.fileno()).st_size
                except OSError as e:
                    raise RemoteStorageError(f"reading {kind.value} of {segment} at {source} failed: {e}") from e
                with f:
                    # upload_fileobj switches to multipart for big segments, part by part retried.
                    self._client.upload_fileobj(f, self._bucket, self.key(segment, kind))
            epochs = bytes(data.leader_epoch_index)
            self._client.put_object(Bucket=self._bucket, Key=self.key(segment, ObjectKind.LEADER_EPOCH_CHECKPOINT),
                                    Body=epochs)
            sizes[ObjectKind.LEADER_EPOCH_CHECKPOINT] = len(epochs)
            self._client.put_object(Bucket=self._bucket, Key=manifest_key, Body=encode_manifest(segment, sizes))
        except (OSError, *self._errors) as e:  # type: ignore[misc]  # mypy cannot read a starred tuple here
            raise RemoteStorageError(f"copying segment {segment} to s3://{self._bucket} failed: {e}") from e
        return None

    # -- fetch ------------------------------------------------------------------------------

    def _manifest(self, segment: RemoteLogSegmentId) -> dict[ObjectKind, int]:
        # One GET per fetch: the manifest is the proof the upload finished (and knows the sizes).
        try:
            body = self._client.get_object(Bucket=self._bucket, Key=self.key(segment, ObjectKind.MANIFEST))["Body"]
            try:
                raw = body.read()
            finally:
                body.close()
        except self._errors as e:
            raise self._fail(f"segment {segment}", e) from e
        return decode_manifest(raw)

    def _get(self, segment: RemoteLogSegmentId, kind: ObjectKind, byte_range: str | None = None) -> BinaryIO:
        args: dict[str, Any] = {"Bucket": self._bucket, "Key": self.key(segment, kind)}
        if byte_range is not None:
            args["Range"] = byte_range
        try:
            body = self._client.get_object(**args)["Body"]
        except self._errors as e:
            raise self._fail(f"{kind.value} of segment {segment}", e) from e
        return cast(BinaryIO, io.BufferedReader(_Body(body, self._errors)))

    def fetch_log_segment(self, segment: RemoteLogSegmentId, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        check_range(start_position, end_position)
        size = self._manifest(segment)[ObjectKind.LOG]
        if start_position >= size:
            # S3 answers 416 for a range wholly past the end; Kafka's contract is an empty stream.
            return cast(BinaryIO, io.BytesIO(b""))
        last = size - 1 if end_position is None else min(end_position, size - 1)
        # HTTP ranges are inclusive at both ends, like Kafka's endPosition.
        return self._get(segment, ObjectKind.LOG, f"bytes={start_position}-{last}")

    def fetch_index(self, segment: RemoteLogSegmentId, index_type: IndexType) -> BinaryIO:
        kind = INDEX_OBJECT_KIND[index_type]
        if kind not in self._manifest(segment):
            raise RemoteResourceNotFoundError(f"segment {segment} has no {index_type.name} index")
        return self._get(segment, kind)

    # -- delete -----------------------------------------------------------------------------

    def delete_log_segment_data(self, segment: RemoteLogSegmentId) -> None:
        try:
            # Manifest first: a delete interrupted halfway leaves an invisible segment, not a torn one.
            self._client.delete_object(Bucket=self._bucket, Key=self.key(segment, ObjectKind.MANIFEST))
            prefix = self._full(f"{partition_dir(segment)}/{object_prefix(segment)}")
            # Listing, not the known kinds, so objects of an older layout or a torn upload go too.
            keys = list(self._keys(prefix))
            for i in range(0, len(keys), _DELETE_BATCH):
                batch = [{"Key": k} for k in keys[i:i + _DELETE_BATCH]]
                result = self._client.delete_objects(Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True})
                errors = result.get("Errors") or []
                if errors:
                    raise RemoteStorageError(f"deleting segment {segment}: {len(errors)} objects failed, "
                                             f"first {errors[0].get('Key')}: {errors[0].get('Code')}")
        except self._errors as e:
            raise RemoteStorageError(f"deleting segment {segment} failed: {e}") from e

    # -- listing ----------------------------------------------------------------------------

    def _keys(self, full_prefix: str) -> Iterator[str]:
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=full_prefix):
            for item in page.get("Contents") or []:
                yield item["Key"]

    def list_objects(self, prefix: str = "") -> list[str]:
        """Full keys under ``<s3.prefix>/<prefix>``, sorted (for tests and operator tools)."""
        full = self._full(prefix) if prefix else (self._prefix + "/" if self._prefix else "")
        try:
            return sorted(self._keys(full))
        except self._errors as e:
            raise RemoteStorageError(f"listing s3://{self._bucket}/{full} failed: {e}") from e

    def close(self) -> None:
        self._client.close()


class _Body(io.RawIOBase):
    """A botocore streaming body as a raw stream, its errors turned into RemoteStorageError."""

    def __init__(self, body: Any, errors: tuple[type[Exception], ...]) -> None:
        self._body = body
        self._errors = errors

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        view = memoryview(buffer).cast("B")
        try:
            chunk = self._body.read(len(view))
        except self._errors as e:
            raise RemoteStorageError(f"reading from S3 failed: {e}") from e
        view[: len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()


__all__ = ["S3RemoteStorage"]
