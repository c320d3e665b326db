// Golden-byte generator for kafkapy's KRaft snapshot batches (KIP-630).
//
// Builds the batches a Kafka 3.9 snapshot file is made of with Apache Kafka's own classes from the
// kafka-clients jar, the same way the raft module's writer builds them:
//
//   header   RecordsSnapshotWriter.Builder.build: a MemoryRecordsBuilder (magic 2, no compression,
//            CreateTime, no producer id, control batch, the snapshot epoch as partition leader
//            epoch) holding one SnapshotHeaderRecord; kraft.version 0 adds nothing else.
//            Also MemoryRecords.withSnapshotHeaderRecord, which must give the same bytes.
//   data     BatchAccumulator/BatchBuilder: a plain CreateTime batch whose records have a null key,
//            timestamp delta 0 and the framed metadata record as value. BatchBuilder is in the raft
//            jar, not kafka-clients, so a MemoryRecordsBuilder with the same header fields stands in.
//   footer   BatchAccumulator.appendSnapshotFooterRecord: MemoryRecords.withSnapshotFooterRecord.
//
// and writes "<name> <hex>" lines to <out>/snapshot_batches.txt. The unit test rebuilds each line
// with kafkapy and compares bytes; it never needs Java. Run through regenerate.sh.

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.message.SnapshotFooterRecord;
import org.apache.kafka.common.message.SnapshotHeaderRecord;
import org.apache.kafka.common.record.ControlRecordUtils;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

public class SnapshotGolden {
    // FeatureLevelRecord{name=metadata.version, featureLevel=21} v0 in Kafka's metadata record frame
    // (frame version 1, api key 12, version 0, flexible body), as MetadataRecordSerde writes it.
    // The metadata record codec itself is held to Kafka by tests/unit/metadata/test_codec_parity.py.
    static final String FEATURE_LEVEL_MV21 = "010c00116d657461646174612e76657273696f6e001500";

    static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String hex(ByteBuffer buf) {
        ByteBuffer b = buf.duplicate();
        StringBuilder sb = new StringBuilder();
        while (b.hasRemaining()) {
            sb.append(String.format("%02x", b.get() & 0xff));
        }
        return sb.toString();
    }

    static ByteBuffer header(long baseOffset, int epoch, long now, long lastContained) {
        ByteBuffer buffer = ByteBuffer.allocate(1024);
        try (MemoryRecordsBuilder builder = new MemoryRecordsBuilder(
                buffer, RecordBatch.CURRENT_MAGIC_VALUE, Compression.NONE, TimestampType.CREATE_TIME,
                baseOffset, now, RecordBatch.NO_PRODUCER_ID, RecordBatch.NO_PRODUCER_EPOCH,
                RecordBatch.NO_SEQUENCE, false, true, epoch, buffer.capacity())) {
            builder.appendSnapshotHeaderMessage(now, new SnapshotHeaderRecord()
                .setVersion(ControlRecordUtils.SNAPSHOT_HEADER_CURRENT_VERSION)
                .setLastContainedLogTimestamp(lastContained));
            return builder.build().buffer();
        }
    }

    static ByteBuffer headerViaMemoryRecords(long baseOffset, int epoch, long now, long lastContained) {
        return MemoryRecords.withSnapshotHeaderRecord(baseOffset, now, epoch, ByteBuffer.allocate(1024),
            new SnapshotHeaderRecord()
                .setVersion(ControlRecordUtils.SNAPSHOT_HEADER_CURRENT_VERSION)
                .setLastContainedLogTimestamp(lastContained)).buffer();
    }

    static ByteBuffer footer(long baseOffset, int epoch, long now) {
        return MemoryRecords.withSnapshotFooterRecord(baseOffset, now, epoch, ByteBuffer.allocate(1024),
            new SnapshotFooterRecord().setVersion(ControlRecordUtils.SNAPSHOT_FOOTER_CURRENT_VERSION)).buffer();
    }

    static ByteBuffer data(long baseOffset, int epoch, long now, byte[]... values) {
        ByteBuffer buffer = ByteBuffer.allocate(4096);
        try (MemoryRecordsBuilder builder = new MemoryRecordsBuilder(
                buffer, RecordBatch.CURRENT_MAGIC_VALUE, Compression.NONE, TimestampType.CREATE_TIME,
                baseOffset, now, RecordBatch.NO_PRODUCER_ID, RecordBatch.NO_PRODUCER_EPOCH,
                RecordBatch.NO_SEQUENCE, false, false, epoch, buffer.capacity())) {
            long offset = baseOffset;
            for (byte[] value : values) {
                builder.appendWithOffset(offset++, now, (byte[]) null, value);
            }
            return builder.build().buffer();
        }
    }

    public static void main(String[] args) throws Exception {
        Path out = Paths.get(args.length > 0 ? args[0] : ".");
        List<String> lines = new ArrayList<>();
        lines.add("# Generated by SnapshotGolden.java via regenerate.sh from kafka-clients "
            + org.apache.kafka.common.utils.AppInfoParser.getVersion() + "; do not edit.");
        lines.add("# name base_offset epoch now_ms last_contained_log_timestamp hex");
        long[][] headers = {
            {0, 7, 1700000000123L, 1699999999000L},
            {0, 0, 0L, 0L},
            {0, Integer.MAX_VALUE, Long.MAX_VALUE / 2, -1L},
        };
        for (long[] h : headers) {
            String a = hex(header(h[0], (int) h[1], h[2], h[3]));
            String b = hex(headerViaMemoryRecords(h[0], (int) h[1], h[2], h[3]));
            if (!a.equals(b)) {
                throw new IllegalStateException("MemoryRecords.withSnapshotHeaderRecord differs: " + a + " " + b);
            }
            lines.add(String.format("header %d %d %d %d %s", h[0], h[1], h[2], h[3], a));
        }
        long[][] footers = {{2, 7, 1700000000123L}, {12345, 3, 0L}};
        for (long[] f : footers) {
            lines.add(String.format("footer %d %d %d - %s", f[0], f[1], f[2], hex(footer(f[0], (int) f[1], f[2]))));
        }
        byte[] mv21 = unhex(FEATURE_LEVEL_MV21);
        lines.add(String.format("data 1 7 1700000000123 - %s", hex(data(1, 7, 1700000000123L, mv21))));
        // A whole snapshot of the image {metadata.version=21} as snapshot (end offset, epoch 7):
        // header at offset 0, the FeatureLevelRecord at 1, the footer at 2.
        String whole = hex(header(0, 7, 1700000000123L, 1699999999000L))
            + hex(data(1, 7, 1700000000123L, mv21))
            + hex(footer(2, 7, 1700000000123L));
        lines.add(String.format("snapshot_mv21 0 7 1700000000123 1699999999000 %s", whole));
        Files.write(out.resolve("snapshot_batches.txt"), lines, StandardCharsets.UTF_8);
    }
}
