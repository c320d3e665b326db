// Consumer-group driver for the Java client: the same events as compat-tests/drivers/group_driver.py.
//
//   GroupDriver member <bootstrap> <group> <topic> <sessionMs> <instanceId|-> <maxRecords|-1> <idleMs|-1> [assignor]
//       subscribe, print one JSON line per event (assigned / revoked / record / committed), commitSync
//       after every batch, stop after maxRecords, after idleMs without records, or on "stop" on stdin;
//       then close() and print {"event":"done"}. assignor "cooperative-sticky" selects KIP-429's
//       CooperativeStickyAssignor (events then carry only the partitions that moved).
//   GroupDriver admin <bootstrap> list_groups | describe_groups <group>... | delete_groups <group>...
//       one {"event":"result","ok":true,"result":...} line.

import java.io.*;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupDriver {
    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String q(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String tps(Collection<TopicPartition> parts) {
        List<TopicPartition> sorted = new ArrayList<>(parts);
        sorted.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        StringJoiner j = new StringJoiner(",", "[", "]");
        for (TopicPartition tp : sorted) j.add("[" + q(tp.topic()) + "," + tp.partition() + "]");
        return j.toString();
    }

    public static void main(String[] a) throws Exception {
        try {
            if (a[0].equals("member")) member(a);
            else admin(a);
        } catch (Exception e) {
            e.printStackTrace();
            emit("{\"event\":\"error\",\"ok\":false,\"error\":" + q(e.toString()) + "}");
            System.exit(1);
        }
        System.exit(0);
    }

    static void member(String[] a) throws Exception {
        String bootstrap = a[1], group = a[2], topic = a[3], instance = a[5];
        int session = Integer.parseInt(a[4]);
        long maxRecords = Long.parseLong(a[6]), idleMs = Long.parseLong(a[7]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("session.timeout.ms", String.valueOf(session));
        p.put("heartbeat.interval.ms", "300");
        p.put("metadata.max.age.ms", "1000");
        if (!instance.equals("-")) p.put("group.instance.id", instance);
        if (a.length > 8 && a[8].equals("cooperative-sticky"))
            p.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread reader = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line;
                while ((line = in.readLine()) != null) if (line.trim().equals("stop")) break;
            } catch (IOException ignored) {
            }
            stop.set(true);
        });
        reader.setDaemon(true);
        reader.start();
        long count = 0;
        // The idle clock restarts when partitions are assigned: a JVM client's start and first
        // join can take seconds on a loaded machine, and that is not idleness.
        final long[] last = {System.currentTimeMillis()};
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    emit("{\"event\":\"revoked\",\"partitions\":" + tps(parts) + "}");
                }

                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    last[0] = System.currentTimeMillis();
                    emit("{\"event\":\"assigned\",\"partitions\":" + tps(parts) + "}");
                }
            });
            while (!stop.get() && !(maxRecords >= 0 && count >= maxRecords)
                    && !(idleMs >= 0 && System.currentTimeMillis() - last[0] > idleMs)) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    count++;
                    last[0] = System.currentTimeMillis();
                    String v = r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8);
                    emit("{\"event\":\"record\",\"topic\":" + q(r.topic()) + ",\"partition\":" + r.partition()
                            + ",\"offset\":" + r.offset() + ",\"value\":" + q(v) + "}");
                }
                if (!recs.isEmpty()) {
                    c.commitSync();
                    emit("{\"event\":\"committed\"}");
                }
            }
        }
        emit("{\"event\":\"done\",\"count\":" + count + "}");
    }

    static void admin(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[1]);
        String action = a[2];
        List<String> groups = Arrays.asList(a).subList(3, a.length);
        try (Admin admin = Admin.create(p)) {
            String result;
            if (action.equals("list_groups")) {
                StringJoiner j = new StringJoiner(",", "[", "]");
                List<ConsumerGroupListing> all = new ArrayList<>(admin.listConsumerGroups().all().get());
                all.sort(Comparator.comparing(ConsumerGroupListing::groupId));
                for (ConsumerGroupListing g : all) {
                    String state = g.state().map(s -> s.toString().toLowerCase()).orElse("");
                    j.add("[" + q(g.groupId()) + "," + q(state) + "]");
                }
                result = "{\"groups\":" + j + "}";
            } else if (action.equals("describe_groups")) {
                StringJoiner j = new StringJoiner(",", "{", "}");
                for (Map.Entry<String, ConsumerGroupDescription> e : admin.describeConsumerGroups(groups).all().get().entrySet()) {
                    ConsumerGroupDescription d = e.getValue();
                    StringJoiner ms = new StringJoiner(",", "[", "]");
                    for (MemberDescription m : d.members())
                        ms.add("{\"client_id\":" + q(m.clientId()) + ",\"partitions\":" + tps(m.assignment().topicPartitions()) + "}");
                    j.add(q(e.getKey()) + ":{\"state\":" + q(d.state().toString().toLowerCase()) + ",\"assignor\":"
                            + q(d.partitionAssignor()) + ",\"members\":" + ms + "}");
                }
                result = j.toString();
            } else if (action.equals("delete_groups")) {
                StringJoiner j = new StringJoiner(",", "{", "}");
                for (Map.Entry<String, KafkaFuture<Void>> e : admin.deleteConsumerGroups(groups).deletedGroups().entrySet()) {
                    String err = null;
                    try {
                        e.getValue().get();
                    } catch (Exception ex) {
                        Throwable cause = ex.getCause() != null ? ex.getCause() : ex;
                        err = cause.getClass().getSimpleName();
                    }
                    j.add(q(e.getKey()) + ":" + q(err));
                }
                result = j.toString();
            } else {
                throw new IllegalArgumentException(action);
            }
            emit("{\"event\":\"result\",\"ok\":true,\"result\":" + result + "}");
        }
    }
}
