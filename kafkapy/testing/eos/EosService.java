// The consume-transform-produce service with the Java client: the same arguments, behaviour and
// JSON lines as kafkapy/testing/eos/service.py (read that docstring first).
//
//   java -cp <classes>:<kafka-clients jars> EosService --bootstrap B --input IN --input-partitions P
//       --output OUT --group G --transactional-id T [--group-instance I] [--txn-size 100]
//       [--linger-ms 200] [--pause-ms 0] [--transaction-timeout-ms 30000]
//
// Each poll's records (at most --txn-size, max.poll.records) become one transaction: the
// transform of each record goes to the same partition of OUT, then the consumer's positions go
// in with sendOffsetsToTransaction and the transaction commits. A fenced producer (or any error
// the producer cannot abort from) ends this incarnation with exit code 3; any other error aborts
// and rewinds to the group's committed offsets.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;

import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class EosService {
    static final int FATAL_EXIT = 3;

    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : String.valueOf(s).toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    final Map<String, String> opt;
    final String input, output;
    final int inputPartitions, txnSize, pauseMs;
    final KafkaConsumer<byte[], byte[]> consumer;
    final KafkaProducer<byte[], byte[]> producer;
    final Map<Integer, Long> endOffsets = new HashMap<>();
    int txns = 0;
    long total = 0;

    EosService(Map<String, String> opt) {
        this.opt = opt;
        input = opt.get("input");
        output = opt.get("output");
        inputPartitions = Integer.parseInt(opt.get("input-partitions"));
        txnSize = Integer.parseInt(opt.getOrDefault("txn-size", "100"));
        pauseMs = Integer.parseInt(opt.getOrDefault("pause-ms", "0"));
        Properties c = new Properties();
        c.put("bootstrap.servers", opt.get("bootstrap"));
        c.put("group.id", opt.get("group"));
        c.put("group.instance.id", opt.getOrDefault("group-instance", "eos-service-0"));
        c.put("session.timeout.ms", "30000");  // outlives a broker restart (see service.py)
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("max.poll.records", String.valueOf(txnSize));
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        consumer = new KafkaConsumer<>(c);
        Properties p = new Properties();
        p.put("bootstrap.servers", opt.get("bootstrap"));
        p.put("transactional.id", opt.get("transactional-id"));
        p.put("transaction.timeout.ms", opt.getOrDefault("transaction-timeout-ms", "30000"));
        p.put("linger.ms", "5");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        producer = new KafkaProducer<>(p);
    }

    static byte[] transform(int partition, long offset, byte[] value) {
        long n = Long.parseLong(new String(value, StandardCharsets.UTF_8));
        return (partition + ":" + offset + ":" + (2 * n)).getBytes(StandardCharsets.UTF_8);
    }

    void run() {
        producer.initTransactions();
        emit("{\"event\":\"started\"}");
        consumer.subscribe(List.of(input), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {}
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                for (Map.Entry<TopicPartition, Long> e : consumer.endOffsets(parts).entrySet())
                    endOffsets.put(e.getKey().partition(), e.getValue());
                StringJoiner j = new StringJoiner(",", "[", "]");
                parts.stream().map(TopicPartition::partition).sorted().forEach(x -> j.add(String.valueOf(x)));
                emit("{\"event\":\"assigned\",\"partitions\":" + j + "}");
            }
        });
        long linger = Long.parseLong(opt.getOrDefault("linger-ms", "200"));
        while (!done()) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(linger));
            if (records.isEmpty()) continue;
            try {
                transaction(records);
            } catch (ProducerFencedException | InvalidProducerEpochException | OutOfOrderSequenceException
                     | AuthorizationException | UnsupportedVersionException e) {
                throw e;
            } catch (KafkaException e) {
                abort(e);
            }
        }
        emit("{\"event\":\"done\",\"txns\":" + txns + ",\"total\":" + total + "}");
    }

    boolean done() {
        Set<TopicPartition> assignment = consumer.assignment();
        if (assignment.isEmpty() || endOffsets.size() < inputPartitions) return false;
        for (TopicPartition tp : assignment) {
            long end = endOffsets.getOrDefault(tp.partition(), 0L);
            if (end > 0 && consumer.position(tp) < end) return false;
        }
        return true;
    }

    void transaction(ConsumerRecords<byte[], byte[]> records) {
        producer.beginTransaction();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            ProducerRecord<byte[], byte[]> out = new ProducerRecord<>(output, r.partition(), r.key(),
                    transform(r.partition(), r.offset(), r.value()));
            out.headers().add(new RecordHeader("in-offset", String.valueOf(r.offset()).getBytes(StandardCharsets.UTF_8)));
            producer.send(out);
        }
        producer.flush();  // on the brokers before the pause (see service.py)
        emit("{\"event\":\"produced\",\"records\":" + records.count() + "}");
        if (pauseMs > 0) {
            try { Thread.sleep(pauseMs); } catch (InterruptedException e) { Thread.currentThread().interrupt(); }
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : consumer.assignment()) offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
        for (int attempt = 1; ; attempt++) {
            try {
                producer.commitTransaction();
                break;
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                // A timed-out commit must be retried, not aborted: it may have reached the coordinator.
                if (attempt >= 3) throw e;
                emit("{\"event\":\"retry\",\"call\":\"commitTransaction\",\"error\":" + q(e.toString()) + "}");
            }
        }
        txns++;
        total += records.count();
        emit("{\"event\":\"committed\",\"txn\":" + txns + ",\"records\":" + records.count() + ",\"total\":" + total + "}");
    }

    void abort(KafkaException cause) {
        producer.abortTransaction();  // throws when the producer cannot abort: main() then exits 3
        // The group's offsets, not our positions, say where to go on (see service.py).
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
        for (TopicPartition tp : consumer.assignment()) {
            OffsetAndMetadata om = committed.get(tp);
            if (om == null) consumer.seekToBeginning(List.of(tp));
            else consumer.seek(tp, om.offset());
        }
        emit("{\"event\":\"aborted\",\"error\":" + q(cause.toString()) + "}");
    }

    void close() {
        try { consumer.close(Duration.ofSeconds(5)); } catch (Exception e) { e.printStackTrace(); }
        try { producer.close(Duration.ofSeconds(5)); } catch (Exception e) { e.printStackTrace(); }
    }

    public static void main(String[] args) {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opt.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        EosService service = new EosService(opt);
        int code = 0;
        try {
            service.run();
        } catch (Exception e) {
            e.printStackTrace();
            emit("{\"event\":\"fatal\",\"error\":" + q(e.toString()) + "}");
            code = FATAL_EXIT;
        }
        service.close();
        System.exit(code);
    }
}
