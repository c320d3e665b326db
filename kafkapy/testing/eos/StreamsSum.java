// A small stateful Kafka Streams app with processing.guarantee=exactly_once_v2, for the
// exactly-once harness (kafkapy/testing/eos/streams.py runs and checks it).
//
//   java -cp <classes>:<.tools/apache-kafka/libs/*> StreamsSum <bootstrap> <application.id>
//       <input> <output> <state dir> <buckets> <pause ms per record> [replication factor]
//
// Input records carry a number n as their value. The app re-keys each by bucket n % buckets
// (a repartition topic), keeps a running count and sum per bucket (a state store with its
// changelog topic) and writes "count:sum" under the bucket to the output after every record (no
// record cache). Its internal topics are <application.id>-by-bucket-repartition and
// <application.id>-sums-changelog; repartition records are never purged. Under exactly-once every bucket's output is then count 1, 2, ... c with no gap
// and no repeat, ending at the bucket's total. One JSON line per state change, and one per 250
// records aggregated by this process, on stdout; the app closes when its stdin ends.

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public class StreamsSum {
    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], appId = a[1], input = a[2], output = a[3], stateDir = a[4];
        long buckets = Long.parseLong(a[5]);
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // Transactions of ~half a second: a kill then mostly lands in one with records on the
        // brokers (100 ms transactions on a busy machine were mostly between commits).
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
        long pauseMs = Long.parseLong(a[6]);  // slows the app down so that a kill lands mid-run
        if (a.length > 7) {
            // Internal topics replicated like the test's own (on a 3-broker cluster: RF 3, min.insync 2).
            int rf = Integer.parseInt(a[7]);
            p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, rf);
            if (rf > 1) p.put(StreamsConfig.topicPrefix("min.insync.replicas"), rf - 1);
        }
        // Streams deletes consumed repartition records every 30 s by default; kept here, so the
        // check can count every committed record of the repartition topic.
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, Long.MAX_VALUE);
        // A killed instance's member leaves the group after this, so a restarted one rebalances soon.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        // Records go to the brokers at once (Streams' exactly-once default lingers 100 ms), so a
        // kill leaves an open transaction with data in the logs for read_uncommitted to see.
        p.put(StreamsConfig.producerPrefix("linger.ms"), 0);

        AtomicLong processed = new AtomicLong();
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
               .selectKey((k, v) -> String.valueOf(Long.parseLong(v) % buckets))
               .groupByKey(Grouped.with("by-bucket", Serdes.String(), Serdes.String()))
               .aggregate(() -> "0:0", (bucket, v, agg) -> {
                   if (pauseMs > 0) {
                       try { Thread.sleep(pauseMs); } catch (InterruptedException e) { Thread.currentThread().interrupt(); }
                   }
                   long done = processed.incrementAndGet();
                   if (done % 250 == 0) emit("{\"event\":\"processed\",\"count\":" + done + "}");
                   String[] cs = agg.split(":");
                   return (Long.parseLong(cs[0]) + 1) + ":" + (Long.parseLong(cs[1]) + Long.parseLong(v));
               }, Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("sums")
                       .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
               .toStream()
               .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> emit("{\"event\":\"state\",\"state\":\"" + now + "\"}"));
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        while (System.in.read() != -1) { }  // until the runner closes our stdin
        streams.close(Duration.ofSeconds(20));
        emit("{\"event\":\"done\"}");
        System.exit(0);
    }
}
