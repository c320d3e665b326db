// Java client throughput for benchmarks.run: one run per process, one JSON line on stdout
// ({"ok": true, "result": {...}} or {"ok": false, "error": "..."}); diagnostics on stderr.
//
//   java -cp <classes>:<jars> Bench produce <bootstrap> <topic> <partitions> <count> <size> <acks>
//   java -cp <classes>:<jars> Bench consume <bootstrap> <topic> <partitions> <count> <timeout_s>
//
// produce: KafkaProducer with its defaults (so idempotence on with acks=all) except what the issue
//          tunes: batch.size 1 MB, linger.ms 5, a large buffer.memory; records round-robin over the
//          partitions; timed from the first send() to flush() returning.
// consume: KafkaConsumer without a group (assign + seekToBeginning), large fetch sizes; timed from
//          assign() to the last of `count` records.

import java.util.*;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.time.Duration;

import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Bench {
    public static void main(String[] argv) {
        String out;
        int code = 0;
        try {
            switch (argv[0]) {
                case "produce": out = produce(argv); break;
                case "consume": out = consume(argv); break;
                default: throw new IllegalArgumentException("unknown op " + argv[0]);
            }
            out = "{\"ok\": true, \"result\": " + out + "}";
        } catch (Throwable t) {
            t.printStackTrace(System.err);
            out = "{\"ok\": false, \"error\": \"" + escape(t.toString()) + "\"}";
            code = 1;
        }
        System.out.println(out);
        System.out.flush();
        System.exit(code);  // don't wait for client threads
    }

    static String produce(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2];
        int partitions = Integer.parseInt(a[3]);
        long count = Long.parseLong(a[4]);
        int size = Integer.parseInt(a[5]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, a[6]);
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, 1_000_000);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, 512L << 20);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        byte[] value = new byte[size];
        new Random(42).nextBytes(value);
        AtomicLong errors = new AtomicLong();
        AtomicReference<Exception> first = new AtomicReference<>();
        Callback cb = (md, e) -> {
            if (e != null) {
                errors.incrementAndGet();
                first.compareAndSet(null, e);
            }
        };
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.partitionsFor(topic);  // connected, metadata known, before the clock starts
            long t0 = System.nanoTime();
            for (long i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, (int) (i % partitions), null, value), cb);
            }
            producer.flush();
            double secs = (System.nanoTime() - t0) / 1e9;
            if (errors.get() > 0) {
                throw new RuntimeException(errors.get() + " send errors, first: " + first.get());
            }
            return result(count, count * size, secs);
        }
    }

    static String consume(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2];
        int partitions = Integer.parseInt(a[3]);
        long count = Long.parseLong(a[4]);
        long deadline = System.nanoTime() + (long) (Double.parseDouble(a[5]) * 1e9);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, 52_428_800);
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 10_485_760);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 10_000);
        p.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, 4 << 20);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.partitionsFor(topic);
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            long t0 = System.nanoTime();
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long got = 0, bytes = 0;
            while (got < count) {
                if (System.nanoTime() > deadline) {
                    throw new RuntimeException("consumed " + got + " of " + count + " before the deadline");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    got++;
                    bytes += r.serializedValueSize();
                }
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            return result(got, bytes, secs);
        }
    }

    static String result(long messages, long bytes, double secs) {
        return String.format(Locale.ROOT,
            "{\"messages\": %d, \"bytes\": %d, \"seconds\": %.6f, \"mb_s\": %.3f, \"msgs_s\": %.1f}",
            messages, bytes, secs, bytes / secs / 1e6, messages / secs);
    }

    static String escape(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.toString();
    }
}
