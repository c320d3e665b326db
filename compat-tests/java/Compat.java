// The Java client driver for the compat tests: one JSON job on stdin, one JSON result line on stdout
// ({"ok": true, "result": ...} or {"ok": false, "error": {...}}), like the Python drivers.
//
// Ops: produce (KafkaProducer with DEFAULT settings: idempotence on, acks=all; plus compression),
//      consume (KafkaConsumer without a group: assign/seek/poll),
//      spark-pattern (what Spark's Kafka source does: AdminClient describeTopics + listOffsets
//        earliest/latest/by-timestamp, then a consumer with a generated group.id that never joins:
//        assign, seekToBeginning/seekToEnd + position, seek, poll exactly [earliest, latest); optionally
//        from a timestamp, read_committed, and records deleted between planning and reading),
//      admin (createTopics with configs, describeConfigs),
//      alter-configs (incrementalAlterConfigs on topics and brokers, then describeConfigs with
//        synonyms and documentation; "broker" "" is the cluster default),
//      list-offsets (AdminClient listOffsets of one partition for each named OffsetSpec: earliest,
//        latest, max-timestamp, earliest-local and latest-tiered (KIP-405/KIP-1005); null for -1),
//      metadata-quorum (what kafka-metadata-quorum describe --status/--replication asks:
//        describeCluster and describeMetadataQuorum, through bootstrap.servers or, with
//        "controllers": true, bootstrap.controllers).
// Bytes travel as base64. No dependencies beyond kafka-clients (so: a small JSON reader below).

import java.io.*;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Compat {
    public static void main(String[] argv) throws Exception {
        String raw = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        Map<String, Object> job = asMap(new Json(raw).value());
        String op = (String) job.get("op");
        Object result;
        try {
            switch (op) {
                case "produce": result = produce(job); break;
                case "consume": result = consume(job); break;
                case "spark-pattern": result = sparkPattern(job); break;
                case "admin": result = admin(job); break;
                case "alter-configs": result = alterConfigs(job); break;
                case "list-offsets": result = listOffsetsOp(job); break;
                case "metadata-quorum": result = metadataQuorum(job); break;
                default: throw new IllegalArgumentException("unknown op " + op);
            }
        } catch (Throwable t) {
            t.printStackTrace(System.err);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("ok", false);
            out.put("error", errorInfo(t));
            System.out.println(toJson(out));
            System.out.flush();
            System.exit(1);
            return;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("ok", true);
        out.put("result", result);
        System.out.println(toJson(out));
        System.out.flush();
        System.exit(0);  // don't wait for client threads
    }

    // ---- ops ------------------------------------------------------------------------------------

    static Object produce(Map<String, Object> job) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, job.get("bootstrap"));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, str(job.getOrDefault("compression", "none")));
        p.put(ProducerConfig.LINGER_MS_CONFIG, str(job.getOrDefault("linger_ms", 20)));
        putAll(p, job.get("config"));
        String topic = (String) job.get("topic");
        long timeoutS = num(job.getOrDefault("timeout_s", 30));
        List<Map<String, Object>> out = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (Object o : asList(job.get("records"))) {
                Map<String, Object> r = asMap(o);
                List<Header> headers = new ArrayList<>();
                if (r.get("headers") != null) {
                    for (Object h : asList(r.get("headers"))) {
                        List<Object> kv = asList(h);
                        headers.add(new RecordHeader((String) kv.get(0), unb64(kv.get(1))));
                    }
                }
                Integer partition = r.get("partition") == null ? null : (int) num(r.get("partition"));
                Long ts = r.get("timestamp") == null ? null : num(r.get("timestamp"));
                futures.add(producer.send(new ProducerRecord<>(topic, partition, ts, unb64(r.get("key")),
                    unb64(r.get("value")), headers)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                Map<String, Object> d = new LinkedHashMap<>();
                try {
                    RecordMetadata md = f.get(timeoutS, TimeUnit.SECONDS);
                    d.put("partition", md.partition());
                    d.put("offset", md.offset());
                } catch (ExecutionException e) {
                    d.put("error", errorInfo(e.getCause()));
                }
                out.add(d);
            }
        }
        Map<String, Object> res = new LinkedHashMap<>();
        res.put("deliveries", out);
        return res;
    }

    static Properties consumerProps(Map<String, Object> job, String groupId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, job.get("bootstrap"));
        if (groupId != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, str(job.getOrDefault("auto_offset_reset", "earliest")));
        putAll(p, job.get("config"));
        return p;
    }

    static Map<String, Object> recordJson(ConsumerRecord<byte[], byte[]> rec) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("partition", rec.partition());
        m.put("offset", rec.offset());
        m.put("timestamp", rec.timestamp());
        m.put("timestamp_type", rec.timestampType() == org.apache.kafka.common.record.TimestampType.LOG_APPEND_TIME
            ? "log_append" : rec.timestampType() == org.apache.kafka.common.record.TimestampType.CREATE_TIME
            ? "create" : null);
        m.put("key", b64(rec.key()));
        m.put("value", b64(rec.value()));
        List<Object> hs = new ArrayList<>();
        for (Header h : rec.headers()) hs.add(Arrays.asList(h.key(), b64(h.value())));
        m.put("headers", hs);
        return m;
    }

    static Object consume(Map<String, Object> job) throws Exception {
        String topic = (String) job.get("topic");
        TopicPartition tp = new TopicPartition(topic, (int) num(job.getOrDefault("partition", 0)));
        long deadline = System.nanoTime() + num(job.getOrDefault("timeout_s", 20)) * 1_000_000_000L;
        long start = num(job.getOrDefault("offset", 0));
        Integer maxRecords = job.get("max_records") == null ? null : (int) num(job.get("max_records"));
        List<Object> out = new ArrayList<>();
        Long end;
        Long position;
        try (KafkaConsumer<byte[], byte[]> c =
                 new KafkaConsumer<>(consumerProps(job, null), new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            end = job.get("end_offset") == null ? null : num(job.get("end_offset"));
            if (end == null) end = c.endOffsets(List.of(tp), Duration.ofSeconds(10)).get(tp);
            c.assign(List.of(tp));
            c.seek(tp, start);
            long next = start;
            while (System.nanoTime() < deadline) {
                if (maxRecords != null && out.size() >= maxRecords) break;
                if (maxRecords == null && next >= end && (!out.isEmpty() || start <= end)) break;
                long leftMs = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(Math.min(500, leftMs)))) {
                    out.add(recordJson(rec));
                    next = rec.offset() + 1;
                }
                // A start past the end that was reset to the end (auto.offset.reset=latest) has
                // nothing to wait for; an earliest reset still reads its records first.
                if (start > end && out.isEmpty() && c.position(tp, Duration.ofMillis(leftMs)) == end) break;
            }
            position = c.position(tp, Duration.ofSeconds(10));
        }
        Map<String, Object> res = new LinkedHashMap<>();
        res.put("records", out);
        res.put("end_offset", end);
        res.put("position", position);
        res.put("timed_out", System.nanoTime() >= deadline);
        return res;
    }

    // Optional job fields, each replaying a Spark setting (absent: the plain [earliest, latest) read):
    //   start_timestamp: startingTimestamp / startingOffsetsByTimestamp, the range starts at
    //     listOffsets(forTimestamp); a null answer means no record at/after it, so the partition is skipped;
    //   isolation_level "read_committed": kafka.isolation.level, for the consumer and every listOffsets (it
    //     changes "latest": the last stable offset instead of the high watermark);
    //   delete_before {partition: offset}: DeleteRecords between planning and reading, as retention does
    //     under a running query; the reader then behaves as Spark with failOnDataLoss=false.
    static Object sparkPattern(Map<String, Object> job) throws Exception {
        String topic = (String) job.get("topic");
        List<Object> timestamps = job.get("timestamps") == null ? List.of() : asList(job.get("timestamps"));
        Long startTs = job.get("start_timestamp") == null ? null : num(job.get("start_timestamp"));
        String isolation = job.get("isolation_level") == null ? null : (String) job.get("isolation_level");
        boolean readCommitted = "read_committed".equals(isolation);
        if (isolation != null && !readCommitted && !"read_uncommitted".equals(isolation))
            throw new IllegalArgumentException("isolation_level " + isolation);
        Map<Integer, Long> deleteBefore = new LinkedHashMap<>();
        if (job.get("delete_before") != null)
            for (Map.Entry<String, Object> e : asMap(job.get("delete_before")).entrySet())
                deleteBefore.put(Integer.parseInt(e.getKey()), num(e.getValue()));
        long pollMs = num(job.getOrDefault("poll_timeout_ms", 2000));
        long deadline = System.nanoTime() + num(job.getOrDefault("timeout_s", 60)) * 1_000_000_000L;
        Map<String, Object> res = new LinkedHashMap<>();
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, job.get("bootstrap"));
        List<TopicPartition> tps = new ArrayList<>();
        Map<TopicPartition, Long> earliest = new HashMap<>(), latest = new HashMap<>(), from = new HashMap<>();
        Map<TopicPartition, Long> latestUncommitted = new HashMap<>(), lowWatermarks = new HashMap<>();
        List<Map<TopicPartition, Long>> byTs = new ArrayList<>();
        // Driver side (KafkaOffsetReaderAdmin): partitions and offset ranges through the AdminClient.
        try (Admin admin = Admin.create(ap)) {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            for (TopicPartitionInfo pi : d.partitions()) tps.add(new TopicPartition(topic, pi.partition()));
            // Spark (KafkaOffsetReaderAdmin) passes its isolation level to every listOffsets call.
            ListOffsetsOptions opts = new ListOffsetsOptions(
                readCommitted ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED);
            earliest.putAll(listOffsets(admin, tps, OffsetSpec.earliest(), opts));
            latest.putAll(listOffsets(admin, tps, OffsetSpec.latest(), opts));
            if (readCommitted)  // so a caller sees whether the last stable offset differs from the high watermark
                latestUncommitted.putAll(listOffsets(admin, tps, OffsetSpec.latest(), new ListOffsetsOptions()));
            for (Object ts : timestamps) byTs.add(listOffsets(admin, tps, OffsetSpec.forTimestamp(num(ts)), opts));
            from.putAll(startTs == null ? earliest : listOffsets(admin, tps, OffsetSpec.forTimestamp(startTs), opts));
            if (!deleteBefore.isEmpty()) {
                Map<TopicPartition, RecordsToDelete> del = new HashMap<>();
                for (Map.Entry<Integer, Long> e : deleteBefore.entrySet())
                    del.put(new TopicPartition(topic, e.getKey()), RecordsToDelete.beforeOffset(e.getValue()));
                for (Map.Entry<TopicPartition, KafkaFuture<DeletedRecords>> e : admin.deleteRecords(del).lowWatermarks().entrySet())
                    lowWatermarks.put(e.getKey(), e.getValue().get(30, TimeUnit.SECONDS).lowWatermark());
            }
        }
        // Executor side (KafkaDataConsumer): a generated group.id, never subscribes or commits.
        Properties cp = consumerProps(job, "spark-kafka-source-" + UUID.randomUUID() + "-executor");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        if (isolation != null) cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        List<Object> partitions = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c =
                 new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            for (TopicPartition tp : tps) {
                Map<String, Object> pj = new LinkedHashMap<>();
                pj.put("partition", tp.partition());
                pj.put("earliest", earliest.get(tp));
                pj.put("latest", latest.get(tp));
                if (readCommitted) pj.put("latest_read_uncommitted", latestUncommitted.get(tp));
                List<Object> bt = new ArrayList<>();
                for (Map<TopicPartition, Long> m : byTs) bt.add(m.get(tp));
                pj.put("by_timestamp", bt);
                if (lowWatermarks.containsKey(tp)) pj.put("deleted_low_watermark", lowWatermarks.get(tp));
                c.assign(List.of(tp));
                // getAvailableOffsetRange(): seekToBeginning/seekToEnd + position.
                c.seekToBeginning(List.of(tp));
                pj.put("position_beginning", c.position(tp, Duration.ofSeconds(10)));
                c.seekToEnd(List.of(tp));
                pj.put("position_end", c.position(tp, Duration.ofSeconds(10)));
                Long start = from.get(tp);
                long until = latest.get(tp);
                pj.put("from", start);
                pj.put("until", until);
                boolean outOfRange = false;
                Long availableFrom = null;
                List<Object> recs = new ArrayList<>();
                if (start != null) {
                    long next = start;
                    c.seek(tp, start);
                    while (next < until && System.nanoTime() < deadline) {
                        ConsumerRecords<byte[], byte[]> polled;
                        try {
                            polled = c.poll(Duration.ofMillis(pollMs));
                        } catch (OffsetOutOfRangeException e) {
                            // failOnDataLoss=false: skip what is gone, read the rest of the planned range.
                            outOfRange = true;
                            c.seekToBeginning(List.of(tp));
                            availableFrom = c.position(tp, Duration.ofSeconds(10));
                            if (availableFrom >= until) break;
                            next = availableFrom;
                            c.seek(tp, availableFrom);
                            continue;
                        }
                        for (ConsumerRecord<byte[], byte[]> rec : polled) {
                            if (rec.offset() >= until) break;
                            recs.add(recordJson(rec));
                            next = rec.offset() + 1;
                        }
                    }
                }
                pj.put("out_of_range", outOfRange);
                pj.put("available_from", availableFrom);
                pj.put("records", recs);
                partitions.add(pj);
            }
        }
        res.put("partitions", partitions);
        return res;
    }

    static Map<TopicPartition, Long> listOffsets(Admin admin, List<TopicPartition> tps, OffsetSpec spec,
            ListOffsetsOptions options) throws Exception {
        Map<TopicPartition, OffsetSpec> q = new HashMap<>();
        for (TopicPartition tp : tps) q.put(tp, spec);
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> got =
            admin.listOffsets(q, options).all().get(30, TimeUnit.SECONDS);
        Map<TopicPartition, Long> out = new HashMap<>();
        for (TopicPartition tp : tps) {
            long o = got.get(tp).offset();
            out.put(tp, o < 0 ? null : o);
        }
        return out;
    }

    // {"topic", "partition", "specs": ["earliest", "earliest-local", ...]} -> {"offsets": {spec: offset|null}}
    static Object listOffsetsOp(Map<String, Object> job) throws Exception {
        TopicPartition tp = new TopicPartition((String) job.get("topic"), (int) num(job.getOrDefault("partition", 0)));
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, job.get("bootstrap"));
        Map<String, Object> offsets = new LinkedHashMap<>();
        try (Admin admin = Admin.create(ap)) {
            for (Object o : asList(job.get("specs"))) {
                String name = (String) o;
                OffsetSpec spec;
                switch (name) {
                    case "earliest": spec = OffsetSpec.earliest(); break;
                    case "latest": spec = OffsetSpec.latest(); break;
                    case "max-timestamp": spec = OffsetSpec.maxTimestamp(); break;
                    case "earliest-local": spec = OffsetSpec.earliestLocal(); break;
                    case "latest-tiered": spec = OffsetSpec.latestTiered(); break;
                    default: throw new IllegalArgumentException("unknown offset spec " + name);
                }
                offsets.put(name, listOffsets(admin, List.of(tp), spec, new ListOffsetsOptions()).get(tp));
            }
        }
        Map<String, Object> res = new LinkedHashMap<>();
        res.put("offsets", offsets);
        return res;
    }

    static Object admin(Map<String, Object> job) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, job.get("bootstrap"));
        Map<String, Object> res = new LinkedHashMap<>();
        try (Admin admin = Admin.create(ap)) {
            if (job.get("create") != null) {
                List<NewTopic> topics = new ArrayList<>();
                for (Object o : asList(job.get("create"))) {
                    Map<String, Object> t = asMap(o);
                    NewTopic nt = new NewTopic((String) t.get("name"),
                        Optional.of((int) num(t.getOrDefault("num_partitions", 1))),
                        Optional.of((short) num(t.getOrDefault("replication_factor", 1))));
                    Map<String, String> cfg = new HashMap<>();
                    if (t.get("config") != null) for (Map.Entry<String, Object> e : asMap(t.get("config")).entrySet())
                        cfg.put(e.getKey(), str(e.getValue()));
                    topics.add(nt.configs(cfg));
                }
                CreateTopicsResult r = admin.createTopics(topics);
                List<Object> created = new ArrayList<>();
                for (Map.Entry<String, KafkaFuture<Void>> e : r.values().entrySet()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("name", e.getKey());
                    try {
                        e.getValue().get(30, TimeUnit.SECONDS);
                        m.put("error", null);
                    } catch (ExecutionException ex) {
                        m.put("error", errorInfo(ex.getCause()));
                    }
                    created.add(m);
                }
                res.put("topics", created);
            }
            if (job.get("describe_configs") != null) {
                List<ConfigResource> rs = new ArrayList<>();
                for (Object o : asList(job.get("describe_configs")))
                    rs.add(new ConfigResource(ConfigResource.Type.TOPIC, (String) o));
                Map<String, Object> configs = new LinkedHashMap<>();
                for (Map.Entry<ConfigResource, Config> e : admin.describeConfigs(rs).all().get(30, TimeUnit.SECONDS).entrySet()) {
                    Map<String, Object> entries = new TreeMap<>();
                    for (ConfigEntry ce : e.getValue().entries()) {
                        Map<String, Object> v = new LinkedHashMap<>();
                        v.put("value", ce.value());
                        v.put("source", ce.source() == null ? null : ce.source().name());
                        v.put("is_default", ce.isDefault());
                        entries.put(ce.name(), v);
                    }
                    configs.put(e.getKey().name(), entries);
                }
                res.put("configs", configs);
            }
        }
        return res;
    }

    // {"alter": [{"type": "topic"|"broker", "name", "ops": [{"op": "SET"|"DELETE"|"APPEND"|"SUBTRACT",
    //   "name", "value"}]}], "validate_only": bool, "describe": [{"type", "name"}]}
    // -> {"alter": [{"type", "name", "error"}], "configs": {"type:name": {config: {...}} or {"error"}}}
    static Object alterConfigs(Map<String, Object> job) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, job.get("bootstrap"));
        Map<String, Object> res = new LinkedHashMap<>();
        try (Admin admin = Admin.create(ap)) {
            if (job.get("alter") != null) {
                Map<ConfigResource, Collection<AlterConfigOp>> changes = new LinkedHashMap<>();
                for (Object o : asList(job.get("alter"))) {
                    Map<String, Object> r = asMap(o);
                    List<AlterConfigOp> ops = new ArrayList<>();
                    for (Object oo : asList(r.get("ops"))) {
                        Map<String, Object> op = asMap(oo);
                        Object v = op.get("value");
                        ops.add(new AlterConfigOp(new ConfigEntry((String) op.get("name"), v == null ? null : str(v)),
                            AlterConfigOp.OpType.valueOf((String) op.get("op"))));
                    }
                    changes.put(resource(r), ops);
                }
                boolean validateOnly = Boolean.TRUE.equals(job.get("validate_only"));
                AlterConfigsResult ar = admin.incrementalAlterConfigs(changes,
                    new AlterConfigsOptions().validateOnly(validateOnly));
                List<Object> out = new ArrayList<>();
                for (Map.Entry<ConfigResource, KafkaFuture<Void>> e : ar.values().entrySet()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("type", e.getKey().type().name().toLowerCase(Locale.ROOT));
                    m.put("name", e.getKey().name());
                    try {
                        e.getValue().get(30, TimeUnit.SECONDS);
                        m.put("error", null);
                    } catch (ExecutionException ex) {
                        m.put("error", errorInfo(ex.getCause()));
                    }
                    out.add(m);
                }
                res.put("alter", out);
            }
            if (job.get("describe") != null) {
                List<ConfigResource> rs = new ArrayList<>();
                for (Object o : asList(job.get("describe"))) rs.add(resource(asMap(o)));
                DescribeConfigsResult dr = admin.describeConfigs(rs,
                    new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true));
                Map<String, Object> configs = new LinkedHashMap<>();
                for (Map.Entry<ConfigResource, KafkaFuture<Config>> e : dr.values().entrySet()) {
                    String key = e.getKey().type().name().toLowerCase(Locale.ROOT) + ":" + e.getKey().name();
                    try {
                        Map<String, Object> entries = new TreeMap<>();
                        for (ConfigEntry ce : e.getValue().get(30, TimeUnit.SECONDS).entries()) {
                            Map<String, Object> v = new LinkedHashMap<>();
                            v.put("value", ce.value());
                            v.put("source", ce.source() == null ? null : ce.source().name());
                            v.put("read_only", ce.isReadOnly());
                            v.put("sensitive", ce.isSensitive());
                            v.put("type", ce.type() == null ? null : ce.type().name());
                            v.put("documentation", ce.documentation());
                            List<Object> syn = new ArrayList<>();
                            for (ConfigEntry.ConfigSynonym s : ce.synonyms())
                                syn.add(Arrays.asList(s.name(), s.value(), s.source().name()));
                            v.put("synonyms", syn);
                            entries.put(ce.name(), v);
                        }
                        configs.put(key, entries);
                    } catch (ExecutionException ex) {
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("error", errorInfo(ex.getCause()));
                        configs.put(key, m);
                    }
                }
                res.put("configs", configs);
            }
        }
        return res;
    }

    // -> {"cluster_id", "controller": id or null, "nodes": [id...], "leader", "epoch",
    //     "high_watermark", "voters": [{"id", "log_end_offset"}], "observers": [...]}
    static Object metadataQuorum(Map<String, Object> job) throws Exception {
        Properties ap = new Properties();
        if (Boolean.TRUE.equals(job.get("controllers")))
            ap.put(AdminClientConfig.BOOTSTRAP_CONTROLLERS_CONFIG, job.get("bootstrap"));
        else
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, job.get("bootstrap"));
        Map<String, Object> res = new LinkedHashMap<>();
        try (Admin admin = Admin.create(ap)) {
            DescribeClusterResult dc = admin.describeCluster();
            res.put("cluster_id", dc.clusterId().get(30, TimeUnit.SECONDS));
            Node controller = dc.controller().get(30, TimeUnit.SECONDS);
            res.put("controller", controller == null ? null : controller.id());
            List<Object> nodes = new ArrayList<>();
            for (Node n : dc.nodes().get(30, TimeUnit.SECONDS)) nodes.add(n.id());
            res.put("nodes", nodes);
            QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get(30, TimeUnit.SECONDS);
            res.put("leader", q.leaderId());
            res.put("epoch", q.leaderEpoch());
            res.put("high_watermark", q.highWatermark());
            res.put("voters", replicaStates(q.voters()));
            res.put("observers", replicaStates(q.observers()));
        }
        return res;
    }

    static List<Object> replicaStates(List<QuorumInfo.ReplicaState> states) {
        List<Object> out = new ArrayList<>();
        for (QuorumInfo.ReplicaState r : states) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("id", r.replicaId());
            m.put("log_end_offset", r.logEndOffset());
            out.add(m);
        }
        return out;
    }

    static ConfigResource resource(Map<String, Object> r) {
        ConfigResource.Type type = ConfigResource.Type.valueOf(((String) r.get("type")).toUpperCase(Locale.ROOT));
        return new ConfigResource(type, (String) r.get("name"));
    }

    // ---- helpers --------------------------------------------------------------------------------

    static Map<String, Object> errorInfo(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof KafkaException && !(t instanceof ApiException))
               && t.getCause() != null && t.getCause() != t) t = t.getCause();
        Map<String, Object> m = new LinkedHashMap<>();
        if (t instanceof ApiException) {
            Errors e = Errors.forException(t);
            m.put("code", (int) e.code());
            m.put("name", e.name());
        } else {
            m.put("code", null);
            m.put("name", t.getClass().getSimpleName());
        }
        m.put("message", String.valueOf(t.getMessage()));
        m.put("type", t.getClass().getName());
        return m;
    }

    static void putAll(Properties p, Object cfg) {
        if (cfg == null) return;
        for (Map.Entry<String, Object> e : asMap(cfg).entrySet()) p.put(e.getKey(), str(e.getValue()));
    }

    static String str(Object o) {
        if (o instanceof Double && ((Double) o) == Math.rint((Double) o)) return String.valueOf(((Double) o).longValue());
        return String.valueOf(o);
    }

    static long num(Object o) { return ((Number) o).longValue(); }

    static byte[] unb64(Object o) { return o == null ? null : Base64.getDecoder().decode((String) o); }

    static String b64(byte[] b) { return b == null ? null : Base64.getEncoder().encodeToString(b); }

    @SuppressWarnings("unchecked")
    static Map<String, Object> asMap(Object o) { return (Map<String, Object>) o; }

    @SuppressWarnings("unchecked")
    static List<Object> asList(Object o) { return (List<Object>) o; }

    static String toJson(Object o) {
        StringBuilder sb = new StringBuilder();
        writeJson(sb, o);
        return sb.toString();
    }

    static void writeJson(StringBuilder sb, Object o) {
        if (o == null) sb.append("null");
        else if (o instanceof String) {
            sb.append('"');
            for (char ch : ((String) o).toCharArray()) {
                switch (ch) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    default:
                        if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch)); else sb.append(ch);
                }
            }
            sb.append('"');
        } else if (o instanceof Number || o instanceof Boolean) sb.append(o);
        else if (o instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                writeJson(sb, String.valueOf(e.getKey()));
                sb.append(':');
                writeJson(sb, e.getValue());
            }
            sb.append('}');
        } else if (o instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object x : (Collection<?>) o) {
                if (!first) sb.append(',');
                first = false;
                writeJson(sb, x);
            }
            sb.append(']');
        } else writeJson(sb, String.valueOf(o));
    }

    /** Just enough JSON: objects, arrays, strings, numbers (Long or Double), true/false/null. */
    static final class Json {
        private final String s;
        private int i;

        Json(String s) { this.s = s; }

        Object value() {
            ws();
            char c = s.charAt(i);
            if (c == '{') {
                i++;
                Map<String, Object> m = new LinkedHashMap<>();
                ws();
                if (s.charAt(i) == '}') { i++; return m; }
                while (true) {
                    ws();
                    String k = string();
                    ws();
                    expect(':');
                    m.put(k, value());
                    ws();
                    if (s.charAt(i) == ',') { i++; continue; }
                    expect('}');
                    return m;
                }
            }
            if (c == '[') {
                i++;
                List<Object> l = new ArrayList<>();
                ws();
                if (s.charAt(i) == ']') { i++; return l; }
                while (true) {
                    l.add(value());
                    ws();
                    if (s.charAt(i) == ',') { i++; continue; }
                    expect(']');
                    return l;
                }
            }
            if (c == '"') return string();
            if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
            if (s.startsWith("null", i)) { i += 4; return null; }
            int st = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String n = s.substring(st, i);
            if (n.isEmpty()) throw new IllegalArgumentException("bad JSON at " + st);
            if (n.contains(".") || n.contains("e") || n.contains("E")) return Double.parseDouble(n);
            return Long.parseLong(n);
        }

        private String string() {
            expect('"');
            StringBuilder sb = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return sb.toString();
                if (c != '\\') { sb.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': sb.append('\n'); break;
                    case 't': sb.append('\t'); break;
                    case 'r': sb.append('\r'); break;
                    case 'b': sb.append('\b'); break;
                    case 'f': sb.append('\f'); break;
                    case 'u': sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: sb.append(e);
                }
            }
        }

        private void ws() { while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++; }

        private void expect(char c) {
            if (s.charAt(i) != c) throw new IllegalArgumentException("expected " + c + " at " + i);
            i++;
        }
    }
}
