// The Java 4.4 client in the new groups (KIP-848 consumer protocol, KIP-932 share groups), built
// against .tools/apache-kafka/libs/kafka-clients-4.4.0.jar by kafkapy.testing.java4.
//
// Every mode prints one JSON object per line on stdout ("t" is the wall clock in ms, so lines of
// several processes on one machine can be put in one order):
//
//   Groups4 member <bootstrap> <group> <topic> <consumer|classic> <name> [key=value ...]
//       subscribe and loop: {"event":"assigned","partitions":[p,...]} with the whole assignment
//       after every change, {"event":"record","p":..,"o":..,"v":..} per record, then commitSync()
//       of what it processed and {"event":"committed","offsets":{"p":next,...}}. "stop" on stdin:
//       commit, close (leave the group), {"event":"done"}. key=value are extra consumer configs.
//   Groups4 share <bootstrap> <group> <topic> <name> <ack|hold> [key=value ...]
//       a KafkaShareConsumer in explicit acknowledgement mode: {"event":"record","p","o","v","dc"}
//       per record (dc: the delivery count). "ack": a record whose value starts with "release" or
//       "reject" gets that acknowledgement, any other ACCEPT; "hold": none at all, it prints
//       {"event":"holding"} and waits to be killed, its records acquired.
//       After acknowledging a poll's records: commitSync() and {"event":"acked","n":..}.
//   Groups4 admin <bootstrap> <op> <group> [args]
//       set_group_config <group> key=value...   incrementalAlterConfigs(GROUP, SET)
//       describe_share <group>                  state, epoch, members and their partitions
//       share_offsets <group>                   {"p": start offset} per partition of the group
//       describe_consumer <group>               type, state, epochs and members
//       committed <group>                       {"p": committed offset}
//     one {"event":"result","ok":true,"result":...} line.

import java.io.*;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Groups4 {
    static synchronized void emit(String json) {
        System.out.println(json.substring(0, json.length() - 1) + ",\"t\":" + System.currentTimeMillis() + "}");
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

    static String partitions(Collection<TopicPartition> parts) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : parts) ps.add(tp.partition());
        Collections.sort(ps);
        StringJoiner j = new StringJoiner(",", "[", "]");
        for (int p : ps) j.add(Integer.toString(p));
        return j.toString();
    }

    static String text(byte[] v) {
        return v == null ? null : new String(v, StandardCharsets.UTF_8);
    }

    public static void main(String[] a) throws Exception {
        try {
            switch (a[0]) {
                case "member" -> member(a);
                case "share" -> share(a);
                case "admin" -> admin(a);
                default -> throw new IllegalArgumentException(a[0]);
            }
        } catch (Exception e) {
            e.printStackTrace();
            emit("{\"event\":\"error\",\"ok\":false,\"error\":" + q(e.toString()) + "}");
            System.exit(1);
        }
        System.exit(0);
    }

    static void extras(Properties p, String[] a, int from) {
        for (int i = from; i < a.length; i++) {
            int eq = a[i].indexOf('=');
            p.put(a[i].substring(0, eq), a[i].substring(eq + 1));
        }
    }

    /** Set once "stop" arrives on stdin (or stdin closes: the test is gone). */
    static AtomicBoolean stopFlag() {
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
        return stop;
    }

    static void member(String[] a) throws Exception {
        String bootstrap = a[1], group = a[2], topic = a[3], protocol = a[4], name = a[5];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("client.id", name);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("max.poll.records", "50");
        p.put("metadata.max.age.ms", "1000");
        if (protocol.equals("classic")) {
            p.put("session.timeout.ms", "6000");
            p.put("heartbeat.interval.ms", "500");
        }
        extras(p, a, 6);
        AtomicBoolean stop = stopFlag();
        Set<TopicPartition> owned = new TreeSet<>(Comparator.comparingInt(TopicPartition::partition));
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    owned.removeAll(parts);
                    emit("{\"event\":\"assigned\",\"partitions\":" + partitions(owned) + "}");
                }

                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    owned.removeAll(parts);
                    emit("{\"event\":\"lost\",\"partitions\":" + partitions(parts) + "}");
                    emit("{\"event\":\"assigned\",\"partitions\":" + partitions(owned) + "}");
                }

                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    owned.addAll(parts);
                    emit("{\"event\":\"assigned\",\"partitions\":" + partitions(owned) + "}");
                }
            });
            emit("{\"event\":\"started\"}");
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    emit("{\"event\":\"record\",\"p\":" + r.partition() + ",\"o\":" + r.offset()
                            + ",\"v\":" + q(text(r.value())) + "}");
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                // Commit exactly what was processed: a commit the group refuses (the member was fenced
                // and its partitions moved) is reported, not retried.
                try {
                    c.commitSync(next);
                } catch (KafkaException e) {
                    emit("{\"event\":\"commit_failed\",\"error\":" + q(e.getClass().getSimpleName()) + "}");
                    continue;
                }
                StringJoiner j = new StringJoiner(",", "{", "}");
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : next.entrySet())
                    j.add(q(Integer.toString(e.getKey().partition())) + ":" + e.getValue().offset());
                emit("{\"event\":\"committed\",\"offsets\":" + j + "}");
            }
        }
        emit("{\"event\":\"done\"}");
    }

    static void share(String[] a) throws Exception {
        String bootstrap = a[1], group = a[2], topic = a[3], name = a[4], mode = a[5];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", name);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", "20");
        extras(p, a, 6);
        AtomicBoolean stop = stopFlag();
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(List.of(topic));
            emit("{\"event\":\"started\"}");
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String dc = r.deliveryCount().map(String::valueOf).orElse("null");
                    emit("{\"event\":\"record\",\"p\":" + r.partition() + ",\"o\":" + r.offset()
                            + ",\"v\":" + q(text(r.value())) + ",\"dc\":" + dc + "}");
                }
                if (mode.equals("hold")) {
                    emit("{\"event\":\"holding\"}");
                    while (true) Thread.sleep(1000);  // until killed: the records stay acquired
                }
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String v = text(r.value());
                    c.acknowledge(r, v == null ? AcknowledgeType.ACCEPT
                            : v.startsWith("release") ? AcknowledgeType.RELEASE
                            : v.startsWith("reject") ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT);
                }
                Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync(Duration.ofSeconds(30));
                for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : res.entrySet())
                    if (e.getValue().isPresent())
                        emit("{\"event\":\"ack_failed\",\"p\":" + e.getKey().partition() + ",\"error\":"
                                + q(e.getValue().get().getClass().getSimpleName()) + "}");
                emit("{\"event\":\"acked\",\"n\":" + recs.count() + "}");
            }
        }
        emit("{\"event\":\"done\"}");
    }

    static void admin(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[1]);
        String op = a[2], group = a[3];
        try (Admin admin = Admin.create(p)) {
            String result;
            switch (op) {
                case "set_group_config" -> {
                    List<AlterConfigOp> ops = new ArrayList<>();
                    for (int i = 4; i < a.length; i++) {
                        int eq = a[i].indexOf('=');
                        ops.add(new AlterConfigOp(new ConfigEntry(a[i].substring(0, eq), a[i].substring(eq + 1)),
                                AlterConfigOp.OpType.SET));
                    }
                    ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
                    admin.incrementalAlterConfigs(Map.of(res, ops)).all().get(30, TimeUnit.SECONDS);
                    Config got = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
                    StringJoiner j = new StringJoiner(",", "{", "}");
                    for (ConfigEntry e : got.entries()) j.add(q(e.name()) + ":" + q(e.value()));
                    result = j.toString();
                }
                case "describe_share" -> {
                    ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all()
                            .get(30, TimeUnit.SECONDS).get(group);
                    StringJoiner ms = new StringJoiner(",", "[", "]");
                    for (ShareMemberDescription m : d.members())
                        ms.add("{\"client_id\":" + q(m.clientId()) + ",\"epoch\":" + m.memberEpoch()
                                + ",\"partitions\":" + partitions(m.assignment().topicPartitions()) + "}");
                    result = "{\"state\":" + q(d.groupState().name()) + ",\"epoch\":" + d.groupEpoch()
                            + ",\"members\":" + ms + "}";
                }
                case "share_offsets" -> {
                    Map<TopicPartition, SharePartitionOffsetInfo> got = admin.listShareGroupOffsets(
                            Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group)
                            .get(30, TimeUnit.SECONDS);
                    StringJoiner j = new StringJoiner(",", "{", "}");
                    for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : got.entrySet()) {
                        SharePartitionOffsetInfo info = e.getValue();
                        j.add(q(Integer.toString(e.getKey().partition())) + ":{\"start\":"
                                + (info == null ? "null" : info.startOffset() + ",\"lag\":"
                                + info.lag().map(String::valueOf).orElse("null")) + "}");
                    }
                    result = j.toString();
                }
                case "describe_consumer" -> {
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                            .get(30, TimeUnit.SECONDS).get(group);
                    StringJoiner ms = new StringJoiner(",", "[", "]");
                    for (MemberDescription m : d.members())
                        ms.add("{\"client_id\":" + q(m.clientId()) + ",\"partitions\":"
                                + partitions(m.assignment().topicPartitions()) + "}");
                    result = "{\"type\":" + q(d.type().name()) + ",\"state\":" + q(d.groupState().name())
                            + ",\"group_epoch\":" + d.groupEpoch().map(String::valueOf).orElse("null")
                            + ",\"members\":" + ms + "}";
                }
                case "committed" -> {
                    Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(group)
                            .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                    StringJoiner j = new StringJoiner(",", "{", "}");
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : got.entrySet())
                        if (e.getValue() != null)
                            j.add(q(Integer.toString(e.getKey().partition())) + ":" + e.getValue().offset());
                    result = j.toString();
                }
                default -> throw new IllegalArgumentException(op);
            }
            emit("{\"event\":\"result\",\"ok\":true,\"result\":" + result + "}");
        }
    }
}
