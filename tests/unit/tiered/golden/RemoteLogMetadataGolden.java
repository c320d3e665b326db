// Golden-byte generator for kafkapy's __remote_log_metadata values (KIP-405).
//
// Kafka's generated RemoteLogSegmentMetadataRecord & co. live in the kafka-storage jar, which
// .tools/java does not carry. kafka-clients does carry the runtime type system the generated
// classes describe themselves with (protocol.types: Schema, nested Schema fields, compact
// strings/arrays/bytes, Field.TaggedFieldsSection), so this program declares the three schemas of
// storage/src/main/resources/message/*.json in it, fills them, and frames each body as
// AbstractApiMessageSerde.write does (unsigned varints: frame version 1, api key, version 0).
// It also maps topic partitions to __remote_log_metadata partitions the way
// RemoteLogMetadataTopicPartitioner does: Utils.toPositive(Utils.murmur2(4 big-endian bytes of
// Objects.hash(topicId lsb, topicId msb, partition))) % partitions, with kafka-clients' Utils.
//
// Writes "<case> <hex>" and "partition <topic id> <partition> <count> <result>" lines to
// <out>/remote_log_metadata.txt; tests/unit/tiered/test_remote_metadata_serde.py rebuilds every
// case with kafkapy (the values are spelled out there too) and compares. Run through regenerate.sh.

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.TreeMap;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.Type;
import org.apache.kafka.common.utils.ByteUtils;
import org.apache.kafka.common.utils.Utils;

public class RemoteLogMetadataGolden {
    static final Schema TOPIC_ID_PARTITION = new Schema(
        new Field("name", Type.COMPACT_STRING),
        new Field("id", Type.UUID),
        new Field("partition", Type.INT32),
        Field.TaggedFieldsSection.of());
    static final Schema SEGMENT_ID = new Schema(
        new Field("topic_id_partition", TOPIC_ID_PARTITION),
        new Field("id", Type.UUID),
        Field.TaggedFieldsSection.of());
    static final Schema LEADER_EPOCH = new Schema(
        new Field("leader_epoch", Type.INT32),
        new Field("offset", Type.INT64),
        Field.TaggedFieldsSection.of());
    static final Schema SEGMENT_METADATA = new Schema(
        new Field("remote_log_segment_id", SEGMENT_ID),
        new Field("start_offset", Type.INT64),
        new Field("end_offset", Type.INT64),
        new Field("broker_id", Type.INT32),
        new Field("max_timestamp_ms", Type.INT64),
        new Field("event_timestamp_ms", Type.INT64),
        new Field("segment_leader_epochs", new CompactArrayOf(LEADER_EPOCH)),
        new Field("segment_size_in_bytes", Type.INT32),
        new Field("custom_metadata", Type.COMPACT_NULLABLE_BYTES),
        new Field("remote_log_segment_state", Type.INT8),
        Field.TaggedFieldsSection.of());
    static final Schema SEGMENT_UPDATE = new Schema(
        new Field("remote_log_segment_id", SEGMENT_ID),
        new Field("broker_id", Type.INT32),
        new Field("event_timestamp_ms", Type.INT64),
        new Field("custom_metadata", Type.COMPACT_NULLABLE_BYTES),
        new Field("remote_log_segment_state", Type.INT8),
        Field.TaggedFieldsSection.of());
    static final Schema PARTITION_DELETE = new Schema(
        new Field("topic_id_partition", TOPIC_ID_PARTITION),
        new Field("broker_id", Type.INT32),
        new Field("event_timestamp_ms", Type.INT64),
        new Field("remote_partition_delete_state", Type.INT8),
        Field.TaggedFieldsSection.of());

    static final Uuid TOPIC = new Uuid(0x0102030405060708L, 0x090a0b0c0d0e0f10L);
    static final Uuid SEGMENT = new Uuid(0x1112131415161718L, 0x191a1b1c1d1e1f20L);

    static Struct struct(Schema schema) {
        Struct s = new Struct(schema);
        s.set("_tagged_fields", new TreeMap<Integer, Object>());
        return s;
    }

    static Struct tip(String topic, int partition) {
        Struct s = struct(TOPIC_ID_PARTITION);
        s.set("name", topic);
        s.set("id", TOPIC);
        s.set("partition", partition);
        return s;
    }

    static Struct segmentId(String topic, int partition) {
        Struct s = struct(SEGMENT_ID);
        s.set("topic_id_partition", tip(topic, partition));
        s.set("id", SEGMENT);
        return s;
    }

    static Struct segmentMetadata(String topic, int partition, long start, long end, int broker, long maxTs,
                                  long eventTs, long[][] epochs, int size, byte[] custom, byte state) {
        Struct s = struct(SEGMENT_METADATA);
        s.set("remote_log_segment_id", segmentId(topic, partition));
        s.set("start_offset", start);
        s.set("end_offset", end);
        s.set("broker_id", broker);
        s.set("max_timestamp_ms", maxTs);
        s.set("event_timestamp_ms", eventTs);
        Object[] entries = new Object[epochs.length];
        for (int i = 0; i < epochs.length; i++) {
            Struct e = struct(LEADER_EPOCH);
            e.set("leader_epoch", (int) epochs[i][0]);
            e.set("offset", epochs[i][1]);
            entries[i] = e;
        }
        s.set("segment_leader_epochs", entries);
        s.set("segment_size_in_bytes", size);
        s.set("custom_metadata", custom == null ? null : ByteBuffer.wrap(custom));
        s.set("remote_log_segment_state", state);
        return s;
    }

    static Struct segmentUpdate(String topic, int partition, int broker, long eventTs, byte[] custom, byte state) {
        Struct s = struct(SEGMENT_UPDATE);
        s.set("remote_log_segment_id", segmentId(topic, partition));
        s.set("broker_id", broker);
        s.set("event_timestamp_ms", eventTs);
        s.set("custom_metadata", custom == null ? null : ByteBuffer.wrap(custom));
        s.set("remote_log_segment_state", state);
        return s;
    }

    static Struct partitionDelete(String topic, int partition, int broker, long eventTs, byte state) {
        Struct s = struct(PARTITION_DELETE);
        s.set("topic_id_partition", tip(topic, partition));
        s.set("broker_id", broker);
        s.set("event_timestamp_ms", eventTs);
        s.set("remote_partition_delete_state", state);
        return s;
    }

    static String framed(int apiKey, Struct body) {
        int size = ByteUtils.sizeOfUnsignedVarint(1) + ByteUtils.sizeOfUnsignedVarint(apiKey)
            + ByteUtils.sizeOfUnsignedVarint(0) + body.sizeOf();
        ByteBuffer buf = ByteBuffer.allocate(size);
        ByteUtils.writeUnsignedVarint(1, buf);
        ByteUtils.writeUnsignedVarint(apiKey, buf);
        ByteUtils.writeUnsignedVarint(0, buf);
        body.writeTo(buf);
        if (buf.hasRemaining()) throw new IllegalStateException("size mismatch");
        StringBuilder hex = new StringBuilder();
        for (byte b : buf.array()) hex.append(String.format("%02x", b));
        return hex.toString();
    }

    static int metadataPartition(Uuid topicId, int partition, int count) {
        int hash = Objects.hash(topicId.getLeastSignificantBits(), topicId.getMostSignificantBits(), partition);
        byte[] bytes = {(byte) (hash >> 24), (byte) (hash >> 16), (byte) (hash >> 8), (byte) hash};
        return Utils.toPositive(Utils.murmur2(bytes)) % count;
    }

    public static void main(String[] args) throws Exception {
        List<String> out = new ArrayList<>();
        out.add("# Generated by RemoteLogMetadataGolden.java with kafka-clients " +
                org.apache.kafka.common.utils.AppInfoParser.getVersion() + "; do not edit.");
        // Values of each case: see test_remote_metadata_serde.py (GOLDEN_CASES).
        out.add("segment_started " + framed(0, segmentMetadata("orders", 3, 0L, 99L, 1, 1700000000123L,
            1700000000456L, new long[][]{{5, 0}}, 4096, null, (byte) 0)));
        out.add("segment_finished_custom " + framed(0, segmentMetadata("t\u00e9", 0, 1000L, 2999L, 2,
            1700000001000L, 1700000002000L, new long[][]{{1, 1000}, {2, 1500}, {7, 2500}}, 1048576,
            new byte[]{1, 2, 3}, (byte) 1)));
        out.add("update_finished " + framed(1, segmentUpdate("orders", 3, 1, 1700000000789L, null, (byte) 1)));
        out.add("update_delete_started_custom " + framed(1, segmentUpdate("orders", 3, 4, 1700000009999L,
            new byte[]{(byte) 0xca, (byte) 0xfe}, (byte) 2)));
        out.add("delete_marked " + framed(2, partitionDelete("orders", 3, 3000, 1700000010000L, (byte) 0)));
        out.add("delete_finished " + framed(2, partitionDelete("orders", 3, 1, 1700000020000L, (byte) 2)));

        Uuid[] ids = {TOPIC, SEGMENT, new Uuid(-1L, -2L), new Uuid(0x8000000000000000L, 0x7fffffffffffffffL),
                      Uuid.fromString("MdRgOsdvT7WpS9ovtM7hwQ"), Uuid.fromString("_3vL0tcTRNm4ipaMI14GvA")};
        int[] partitions = {0, 1, 7, 49, 1000, Integer.MAX_VALUE};
        int[] counts = {1, 7, 50};
        for (Uuid id : ids)
            for (int p : partitions)
                for (int n : counts)
                    out.add("partition " + id + " " + p + " " + n + " " + metadataPartition(id, p, n));
        Files.write(Paths.get(args[0], "remote_log_metadata.txt"),
                    (String.join("\n", out) + "\n").getBytes(StandardCharsets.UTF_8));
    }
}
