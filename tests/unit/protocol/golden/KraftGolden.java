// Golden-byte generator for kafkapy's KRaft-internal message schemas.
//
// Fills Apache Kafka's own generated message classes (from the kafka-clients jar) with distinctive,
// non-default values at every version the jar supports, serializes each with Kafka's
// ObjectSerializationCache/Writable machinery, and writes:
//
//   <out>/kraft_messages.txt   "Name version hex" lines (the bytes Kafka puts on the wire)
//   <out>/kraft_defaults.txt   the same for freshly constructed messages (every field at its default)
//   <out>/kraft_values.json    {"Name": {"apiKey": n, "versions": {"v": {field: value, ...}}}} - the
//                              values each message was filled with, read back from the Java objects
//                              by reflection, so the Python test builds its messages from exactly
//                              the same table.
//
// Run it through regenerate.sh; the unit tests only read the two output files and never need Java.
// Field names in kraft_values.json are the Java field names (camelCase); uuids are printed in the
// usual 8-4-4-4-12 hex form, records/bytes as hex strings.

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Function;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.AddRaftVoterRequestData;
import org.apache.kafka.common.message.AddRaftVoterResponseData;
import org.apache.kafka.common.message.AllocateProducerIdsRequestData;
import org.apache.kafka.common.message.EnvelopeRequestData;
import org.apache.kafka.common.message.EnvelopeResponseData;
import org.apache.kafka.common.message.RemoveRaftVoterRequestData;
import org.apache.kafka.common.message.RemoveRaftVoterResponseData;
import org.apache.kafka.common.message.UpdateRaftVoterRequestData;
import org.apache.kafka.common.message.UpdateRaftVoterResponseData;
import org.apache.kafka.common.message.AllocateProducerIdsResponseData;
import org.apache.kafka.common.message.AlterPartitionRequestData;
import org.apache.kafka.common.message.AlterPartitionResponseData;
import org.apache.kafka.common.message.BeginQuorumEpochRequestData;
import org.apache.kafka.common.message.BeginQuorumEpochResponseData;
import org.apache.kafka.common.message.BrokerHeartbeatRequestData;
import org.apache.kafka.common.message.BrokerHeartbeatResponseData;
import org.apache.kafka.common.message.BrokerRegistrationRequestData;
import org.apache.kafka.common.message.BrokerRegistrationResponseData;
import org.apache.kafka.common.message.ControllerRegistrationRequestData;
import org.apache.kafka.common.message.ControllerRegistrationResponseData;
import org.apache.kafka.common.message.DescribeQuorumRequestData;
import org.apache.kafka.common.message.DescribeQuorumResponseData;
import org.apache.kafka.common.message.EndQuorumEpochRequestData;
import org.apache.kafka.common.message.EndQuorumEpochResponseData;
import org.apache.kafka.common.message.FetchRequestData;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.FetchSnapshotRequestData;
import org.apache.kafka.common.message.FetchSnapshotResponseData;
import org.apache.kafka.common.message.UnregisterBrokerRequestData;
import org.apache.kafka.common.message.UnregisterBrokerResponseData;
import org.apache.kafka.common.message.VoteRequestData;
import org.apache.kafka.common.message.VoteResponseData;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.record.BaseRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.utils.AppInfoParser;

public final class KraftGolden {

    private KraftGolden() { }

    // ---------------------------------------------------------------------------------------------
    // Value helpers: every value says where it came from, so a misplaced field shows up in a hex dump.
    // ---------------------------------------------------------------------------------------------

    /** A uuid that shows n twice in its hex (0a0b0c0d-0000-00nn-1020-304050nn..), never the zero uuid. */
    static Uuid uuid(int n) {
        return new Uuid(0x0a0b0c0d00000000L | n, 0x1020304050000000L | ((long) n << 8) | 0x77);
    }

    static List<Integer> ints(int... xs) {
        List<Integer> out = new ArrayList<>();
        for (int x : xs) out.add(x);
        return out;
    }

    static BaseRecords records(String text) {
        return MemoryRecords.readableRecords(ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8)));
    }

    // ---------------------------------------------------------------------------------------------
    // One builder per message: version -> filled message. Non-ignorable fields are only set at
    // versions that have them (Kafka refuses to write them elsewhere); ignorable ones are always set,
    // so a schema that wrongly includes them at some version is caught by the byte comparison.
    // ---------------------------------------------------------------------------------------------

    static ApiMessage voteRequest(short v) {
        List<VoteRequestData.PartitionData> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new VoteRequestData.PartitionData()
                .setPartitionIndex(i)
                .setCandidateEpoch(70 + v + i)
                .setCandidateId(3 + i)
                .setCandidateDirectoryId(uuid(0x11 + i))
                .setVoterDirectoryId(uuid(0x21 + i))
                .setLastOffsetEpoch(65 + i)
                .setLastOffset(123456789012L + i));
        }
        return new VoteRequestData()
            .setClusterId("vote-cluster-" + v)
            .setVoterId(9)
            .setTopics(Arrays.asList(
                new VoteRequestData.TopicData().setTopicName("__cluster_metadata").setPartitions(parts),
                new VoteRequestData.TopicData().setTopicName("other").setPartitions(new ArrayList<>())));
    }

    static ApiMessage voteResponse(short v) {
        List<VoteResponseData.PartitionData> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new VoteResponseData.PartitionData()
                .setPartitionIndex(i).setErrorCode((short) (48 + i)).setLeaderId(5 + i)
                .setLeaderEpoch(71 + v + i).setVoteGranted(i == 0));
        }
        VoteResponseData d = new VoteResponseData()
            .setErrorCode((short) 37)
            .setTopics(Arrays.asList(
                new VoteResponseData.TopicData().setTopicName("__cluster_metadata").setPartitions(parts),
                new VoteResponseData.TopicData().setTopicName("t2").setPartitions(new ArrayList<>())));
        if (v >= 1) {
            VoteResponseData.NodeEndpointCollection eps = new VoteResponseData.NodeEndpointCollection();
            eps.add(new VoteResponseData.NodeEndpoint().setNodeId(5).setHost("ctrl-5.example").setPort(9093));
            eps.add(new VoteResponseData.NodeEndpoint().setNodeId(6).setHost("ctrl-6.example").setPort(65000));
            d.setNodeEndpoints(eps);
        }
        return d;
    }

    static ApiMessage beginQuorumEpochRequest(short v) {
        List<BeginQuorumEpochRequestData.PartitionData> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new BeginQuorumEpochRequestData.PartitionData()
                .setPartitionIndex(i).setVoterDirectoryId(uuid(0x31 + i)).setLeaderId(7 + i)
                .setLeaderEpoch(80 + v + i));
        }
        BeginQuorumEpochRequestData.LeaderEndpointCollection eps = new BeginQuorumEpochRequestData.LeaderEndpointCollection();
        eps.add(new BeginQuorumEpochRequestData.LeaderEndpoint().setName("CONTROLLER").setHost("leader.example").setPort(9093));
        eps.add(new BeginQuorumEpochRequestData.LeaderEndpoint().setName("CTRL_SSL").setHost("leader.example").setPort(9094));
        return new BeginQuorumEpochRequestData()
            .setClusterId(v == 0 ? null : "bqe-cluster")
            .setVoterId(11)
            .setTopics(Arrays.asList(
                new BeginQuorumEpochRequestData.TopicData().setTopicName("__cluster_metadata").setPartitions(parts),
                new BeginQuorumEpochRequestData.TopicData().setTopicName("x").setPartitions(new ArrayList<>())))
            .setLeaderEndpoints(eps);
    }

    static ApiMessage beginQuorumEpochResponse(short v) {
        List<BeginQuorumEpochResponseData.PartitionData> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new BeginQuorumEpochResponseData.PartitionData()
                .setPartitionIndex(i).setErrorCode((short) (6 + i)).setLeaderId(12 + i).setLeaderEpoch(90 + v + i));
        }
        BeginQuorumEpochResponseData d = new BeginQuorumEpochResponseData()
            .setErrorCode((short) 58)
            .setTopics(Arrays.asList(
                new BeginQuorumEpochResponseData.TopicData().setTopicName("__cluster_metadata").setPartitions(parts),
                new BeginQuorumEpochResponseData.TopicData().setTopicName("y").setPartitions(new ArrayList<>())));
        if (v >= 1) {
            BeginQuorumEpochResponseData.NodeEndpointCollection eps = new BeginQuorumEpochResponseData.NodeEndpointCollection();
            eps.add(new BeginQuorumEpochResponseData.NodeEndpoint().setNodeId(12).setHost("n12").setPort(1));
            eps.add(new BeginQuorumEpochResponseData.NodeEndpoint().setNodeId(13).setHost("n13.example").setPort(40000));
            d.setNodeEndpoints(eps);
        }
        return d;
    }

    static ApiMessage endQuorumEpochRequest(short v) {
        List<EndQuorumEpochRequestData.PartitionData> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new EndQuorumEpochRequestData.PartitionData()
                .setPartitionIndex(i).setLeaderId(14 + i).setLeaderEpoch(100 + v + i)
                .setPreferredSuccessors(ints(15 + i, 16 + i))
                .setPreferredCandidates(Arrays.asList(
                    new EndQuorumEpochRequestData.ReplicaInfo().setCandidateId(15 + i).setCandidateDirectoryId(uuid(0x41 + i)),
                    new EndQuorumEpochRequestData.ReplicaInfo().setCandidateId(16 + i).setCandidateDirectoryId(uuid(0x51 + i)))));
        }
        EndQuorumEpochRequestData.LeaderEndpointCollection eps = new EndQuorumEpochRequestData.LeaderEndpointCollection();
        eps.add(new EndQuorumEpochRequestData.LeaderEndpoint().setName("CONTROLLER").setHost("old-leader").setPort(19093));
        eps.add(new EndQuorumEpochRequestData.LeaderEndpoint().setName("INTERNAL").setHost("old-leader.internal").setPort(29093));
        return new EndQuorumEpochRequestData()
            .setClusterId("eqe-cluster-" + v)
            .setTopics(Arrays.asList(
                new EndQuorumEpochRequestData.TopicData().setTopicName("__cluster_metadata").setPartitions(parts),
                new EndQuorumEpochRequestData.TopicData().setTopicName("z").setPartitions(new ArrayList<>())))
            .setLeaderEndpoints(eps);
    }

    static ApiMessage endQuorumEpochResponse(short v) {
        List<EndQuorumEpochResponseData.PartitionData> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new EndQuorumEpochResponseData.PartitionData()
                .setPartitionIndex(i).setErrorCode((short) (102 + i)).setLeaderId(-1 + 20 * i).setLeaderEpoch(110 + v + i));
        }
        EndQuorumEpochResponseData d = new EndQuorumEpochResponseData()
            .setErrorCode((short) 93)
            .setTopics(Arrays.asList(
                new EndQuorumEpochResponseData.TopicData().setTopicName("__cluster_metadata").setPartitions(parts),
                new EndQuorumEpochResponseData.TopicData().setTopicName("w").setPartitions(new ArrayList<>())));
        if (v >= 1) {
            EndQuorumEpochResponseData.NodeEndpointCollection eps = new EndQuorumEpochResponseData.NodeEndpointCollection();
            eps.add(new EndQuorumEpochResponseData.NodeEndpoint().setNodeId(19).setHost("h19").setPort(9019));
            eps.add(new EndQuorumEpochResponseData.NodeEndpoint().setNodeId(20).setHost("h20").setPort(9020));
            d.setNodeEndpoints(eps);
        }
        return d;
    }

    static ApiMessage fetchSnapshotRequest(short v) {
        List<FetchSnapshotRequestData.PartitionSnapshot> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new FetchSnapshotRequestData.PartitionSnapshot()
                .setPartition(i).setCurrentLeaderEpoch(120 + v + i)
                .setSnapshotId(new FetchSnapshotRequestData.SnapshotId().setEndOffset(555000L + i).setEpoch(44 + i))
                .setPosition(4096L * (i + 1))
                .setReplicaDirectoryId(uuid(0x61 + i)));
        }
        return new FetchSnapshotRequestData()
            .setClusterId("fs-cluster-" + v)
            .setReplicaId(21)
            .setMaxBytes(1048576 + v)
            .setTopics(Arrays.asList(
                new FetchSnapshotRequestData.TopicSnapshot().setName("__cluster_metadata").setPartitions(parts),
                new FetchSnapshotRequestData.TopicSnapshot().setName("v").setPartitions(new ArrayList<>())));
    }

    static ApiMessage fetchSnapshotResponse(short v) {
        List<FetchSnapshotResponseData.PartitionSnapshot> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new FetchSnapshotResponseData.PartitionSnapshot()
                .setIndex(i).setErrorCode((short) (i == 0 ? 0 : 98))
                .setSnapshotId(new FetchSnapshotResponseData.SnapshotId().setEndOffset(777000L + i).setEpoch(55 + i))
                .setCurrentLeader(new FetchSnapshotResponseData.LeaderIdAndEpoch().setLeaderId(22 + i).setLeaderEpoch(130 + v + i))
                .setSize(1_000_000_000_000L + i)
                .setPosition(8192L * (i + 1))
                .setUnalignedRecords(records("snapshot-chunk-" + i + "-v" + v)));
        }
        FetchSnapshotResponseData d = new FetchSnapshotResponseData()
            .setThrottleTimeMs(250 + v)
            .setErrorCode((short) 0)
            .setTopics(Arrays.asList(
                new FetchSnapshotResponseData.TopicSnapshot().setName("__cluster_metadata").setPartitions(parts),
                new FetchSnapshotResponseData.TopicSnapshot().setName("u").setPartitions(new ArrayList<>())));
        if (v >= 1) {
            FetchSnapshotResponseData.NodeEndpointCollection eps = new FetchSnapshotResponseData.NodeEndpointCollection();
            eps.add(new FetchSnapshotResponseData.NodeEndpoint().setNodeId(22).setHost("leader-22").setPort(9092));
            eps.add(new FetchSnapshotResponseData.NodeEndpoint().setNodeId(23).setHost("leader-23").setPort(9093));
            d.setNodeEndpoints(eps);
        }
        return d;
    }

    static ApiMessage brokerRegistrationRequest(short v) {
        BrokerRegistrationRequestData.ListenerCollection ls = new BrokerRegistrationRequestData.ListenerCollection();
        ls.add(new BrokerRegistrationRequestData.Listener().setName("PLAINTEXT").setHost("b1.example").setPort(9092).setSecurityProtocol((short) 0));
        ls.add(new BrokerRegistrationRequestData.Listener().setName("SASL_SSL").setHost("b1.example").setPort(9095).setSecurityProtocol((short) 3));
        BrokerRegistrationRequestData.FeatureCollection fs = new BrokerRegistrationRequestData.FeatureCollection();
        fs.add(new BrokerRegistrationRequestData.Feature().setName("metadata.version").setMinSupportedVersion((short) 1).setMaxSupportedVersion((short) 21));
        fs.add(new BrokerRegistrationRequestData.Feature().setName("kraft.version").setMinSupportedVersion((short) 0).setMaxSupportedVersion((short) 1));
        BrokerRegistrationRequestData d = new BrokerRegistrationRequestData()
            .setBrokerId(1001)
            .setClusterId("MkU3OEVBNTcwNTJENDM2Qk")
            .setIncarnationId(uuid(0x71))
            .setListeners(ls)
            .setFeatures(fs)
            .setRack(v % 2 == 0 ? "rack-a" : null)
            .setLogDirs(Arrays.asList(uuid(0x72), uuid(0x73)))
            .setPreviousBrokerEpoch(4242L + v);
        if (v >= 1) d.setIsMigratingZkBroker(true);
        return d;
    }

    static ApiMessage brokerRegistrationResponse(short v) {
        return new BrokerRegistrationResponseData().setThrottleTimeMs(17 + v).setErrorCode((short) 101).setBrokerEpoch(9_000_000_001L + v);
    }

    static ApiMessage brokerHeartbeatRequest(short v) {
        BrokerHeartbeatRequestData d = new BrokerHeartbeatRequestData()
            .setBrokerId(1002).setBrokerEpoch(31L + v).setCurrentMetadataOffset(65536L + v)
            .setWantFence(true).setWantShutDown(true);
        if (v >= 1) d.setOfflineLogDirs(Arrays.asList(uuid(0x81), uuid(0x82)));
        return d;
    }

    static ApiMessage brokerHeartbeatResponse(short v) {
        return new BrokerHeartbeatResponseData().setThrottleTimeMs(3 + v).setErrorCode((short) 89)
            .setIsCaughtUp(true).setIsFenced(false).setShouldShutDown(true);
    }

    static ApiMessage unregisterBrokerRequest(short v) {
        return new UnregisterBrokerRequestData().setBrokerId(1003 + v);
    }

    static ApiMessage unregisterBrokerResponse(short v) {
        return new UnregisterBrokerResponseData().setThrottleTimeMs(29).setErrorCode((short) 69)
            .setErrorMessage("broker 1003 is still registered");
    }

    static ApiMessage alterPartitionRequest(short v) {
        List<AlterPartitionRequestData.TopicData> topics = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            List<AlterPartitionRequestData.PartitionData> parts = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                AlterPartitionRequestData.PartitionData p = new AlterPartitionRequestData.PartitionData()
                    .setPartitionIndex(10 * t + i).setLeaderEpoch(140 + v + i).setPartitionEpoch(150 + i);
                if (v <= 2) p.setNewIsr(ints(1, 2 + i, 3));
                if (v >= 3) p.setNewIsrWithEpochs(Arrays.asList(
                    new AlterPartitionRequestData.BrokerState().setBrokerId(1).setBrokerEpoch(501L + i),
                    new AlterPartitionRequestData.BrokerState().setBrokerId(2 + i).setBrokerEpoch(-1L)));
                if (v >= 1) p.setLeaderRecoveryState((byte) 1);
                parts.add(p);
            }
            topics.add(new AlterPartitionRequestData.TopicData()
                .setTopicName("topic-" + t).setTopicId(uuid(0x91 + t)).setPartitions(parts));
        }
        return new AlterPartitionRequestData().setBrokerId(1004).setBrokerEpoch(160L + v).setTopics(topics);
    }

    static ApiMessage alterPartitionResponse(short v) {
        List<AlterPartitionResponseData.TopicData> topics = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            List<AlterPartitionResponseData.PartitionData> parts = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                parts.add(new AlterPartitionResponseData.PartitionData()
                    .setPartitionIndex(10 * t + i).setErrorCode((short) (i == 0 ? 0 : 107))
                    .setLeaderId(1004).setLeaderEpoch(170 + v + i).setIsr(ints(1004, 2 + i))
                    .setLeaderRecoveryState((byte) 1).setPartitionEpoch(180 + i));
            }
            topics.add(new AlterPartitionResponseData.TopicData()
                .setTopicName("topic-" + t).setTopicId(uuid(0xa1 + t)).setPartitions(parts));
        }
        return new AlterPartitionResponseData().setThrottleTimeMs(190 + v).setErrorCode((short) 0).setTopics(topics);
    }

    static ApiMessage controllerRegistrationRequest(short v) {
        ControllerRegistrationRequestData.ListenerCollection ls = new ControllerRegistrationRequestData.ListenerCollection();
        ls.add(new ControllerRegistrationRequestData.Listener().setName("CONTROLLER").setHost("c3000.example").setPort(9093).setSecurityProtocol((short) 1));
        ls.add(new ControllerRegistrationRequestData.Listener().setName("CONTROLLER2").setHost("c3000.example").setPort(9097).setSecurityProtocol((short) 2));
        ControllerRegistrationRequestData.FeatureCollection fs = new ControllerRegistrationRequestData.FeatureCollection();
        fs.add(new ControllerRegistrationRequestData.Feature().setName("metadata.version").setMinSupportedVersion((short) 7).setMaxSupportedVersion((short) 21));
        fs.add(new ControllerRegistrationRequestData.Feature().setName("group.version").setMinSupportedVersion((short) 0).setMaxSupportedVersion((short) 1));
        return new ControllerRegistrationRequestData().setControllerId(3000).setIncarnationId(uuid(0xb1))
            .setZkMigrationReady(true).setListeners(ls).setFeatures(fs);
    }

    static ApiMessage controllerRegistrationResponse(short v) {
        return new ControllerRegistrationResponseData().setThrottleTimeMs(7).setErrorCode((short) 41).setErrorMessage(null);
    }

    static ApiMessage allocateProducerIdsRequest(short v) {
        return new AllocateProducerIdsRequestData().setBrokerId(1005 + v).setBrokerEpoch(7_000_000_123L + v);
    }

    static ApiMessage allocateProducerIdsResponse(short v) {
        return new AllocateProducerIdsResponseData().setThrottleTimeMs(41 + v).setErrorCode((short) 41)
            .setProducerIdStart(5_000_000_000L + v).setProducerIdLen(1000 + v);
    }

    static ApiMessage envelopeRequest(short v) {
        return new EnvelopeRequestData()
            .setRequestData(ByteBuffer.wrap("forwarded-request".getBytes(StandardCharsets.UTF_8)))
            .setRequestPrincipal("principal-bytes".getBytes(StandardCharsets.UTF_8))
            .setClientHostAddress(new byte[] {10, 0, 0, (byte) (7 + v)});
    }

    static ApiMessage envelopeResponse(short v) {
        return new EnvelopeResponseData()
            .setResponseData(ByteBuffer.wrap("forwarded-response".getBytes(StandardCharsets.UTF_8)))
            .setErrorCode((short) 31);
    }

    static ApiMessage addRaftVoterRequest(short v) {
        AddRaftVoterRequestData.ListenerCollection listeners = new AddRaftVoterRequestData.ListenerCollection();
        listeners.add(new AddRaftVoterRequestData.Listener().setName("CONTROLLER").setHost("ctrl-4.example").setPort(9093));
        listeners.add(new AddRaftVoterRequestData.Listener().setName("SECURE").setHost("10.0.0.4").setPort(65001));
        return new AddRaftVoterRequestData().setClusterId("golden-cluster").setTimeoutMs(30_000 + v)
            .setVoterId(1004 + v).setVoterDirectoryId(uuid(0x44)).setListeners(listeners);
    }

    static ApiMessage addRaftVoterResponse(short v) {
        return new AddRaftVoterResponseData().setThrottleTimeMs(42 + v).setErrorCode((short) 126)
            .setErrorMessage("already a voter");
    }

    static ApiMessage removeRaftVoterRequest(short v) {
        return new RemoveRaftVoterRequestData().setClusterId("golden-cluster").setVoterId(1003 + v)
            .setVoterDirectoryId(uuid(0x33));
    }

    static ApiMessage removeRaftVoterResponse(short v) {
        return new RemoveRaftVoterResponseData().setThrottleTimeMs(43 + v).setErrorCode((short) 127)
            .setErrorMessage(null);
    }

    static ApiMessage updateRaftVoterRequest(short v) {
        UpdateRaftVoterRequestData.ListenerCollection listeners = new UpdateRaftVoterRequestData.ListenerCollection();
        listeners.add(new UpdateRaftVoterRequestData.Listener().setName("CONTROLLER").setHost("ctrl-2.example").setPort(9095));
        return new UpdateRaftVoterRequestData().setClusterId("golden-cluster").setCurrentLeaderEpoch(17 + v)
            .setVoterId(1002 + v).setVoterDirectoryId(uuid(0x22)).setListeners(listeners)
            .setKRaftVersionFeature(new UpdateRaftVoterRequestData.KRaftVersionFeature()
                .setMinSupportedVersion((short) 0).setMaxSupportedVersion((short) 1));
    }

    static ApiMessage updateRaftVoterResponse(short v) {
        return new UpdateRaftVoterResponseData().setThrottleTimeMs(44 + v).setErrorCode((short) 6)
            .setCurrentLeader(new UpdateRaftVoterResponseData.CurrentLeader().setLeaderId(3).setLeaderEpoch(18)
                .setHost("ctrl-3.example").setPort(9096));
    }

    static ApiMessage describeQuorumRequest(short v) {
        return new DescribeQuorumRequestData().setTopics(Arrays.asList(
            new DescribeQuorumRequestData.TopicData().setTopicName("__cluster_metadata").setPartitions(Arrays.asList(
                new DescribeQuorumRequestData.PartitionData().setPartitionIndex(0),
                new DescribeQuorumRequestData.PartitionData().setPartitionIndex(1 + v))),
            new DescribeQuorumRequestData.TopicData().setTopicName("q").setPartitions(new ArrayList<>())));
    }

    static DescribeQuorumResponseData.ReplicaState replica(short v, int id) {
        DescribeQuorumResponseData.ReplicaState r = new DescribeQuorumResponseData.ReplicaState()
            .setReplicaId(id).setLogEndOffset(1000L * id + v)
            .setLastFetchTimestamp(1_700_000_000_000L + id).setLastCaughtUpTimestamp(1_700_000_000_500L + id);
        if (v >= 2) r.setReplicaDirectoryId(uuid(0xc0 + id));
        return r;
    }

    static ApiMessage describeQuorumResponse(short v) {
        List<DescribeQuorumResponseData.PartitionData> parts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            parts.add(new DescribeQuorumResponseData.PartitionData()
                .setPartitionIndex(i).setErrorCode((short) (i * 7)).setErrorMessage(i == 0 ? null : "not the leader")
                .setLeaderId(1).setLeaderEpoch(200 + v + i).setHighWatermark(123_456L + i)
                .setCurrentVoters(Arrays.asList(replica(v, 1), replica(v, 2)))
                .setObservers(Arrays.asList(replica(v, 4), replica(v, 5))));
        }
        DescribeQuorumResponseData d = new DescribeQuorumResponseData()
            .setErrorCode((short) 0).setErrorMessage("top-level note")
            .setTopics(Arrays.asList(
                new DescribeQuorumResponseData.TopicData().setTopicName("__cluster_metadata").setPartitions(parts),
                new DescribeQuorumResponseData.TopicData().setTopicName("q").setPartitions(new ArrayList<>())));
        if (v >= 2) {
            DescribeQuorumResponseData.NodeCollection nodes = new DescribeQuorumResponseData.NodeCollection();
            for (int id = 1; id <= 2; id++) {
                DescribeQuorumResponseData.ListenerCollection ls = new DescribeQuorumResponseData.ListenerCollection();
                ls.add(new DescribeQuorumResponseData.Listener().setName("CONTROLLER").setHost("c" + id).setPort(9093 + id));
                ls.add(new DescribeQuorumResponseData.Listener().setName("SSL").setHost("c" + id + ".ssl").setPort(9193 + id));
                nodes.add(new DescribeQuorumResponseData.Node().setNodeId(id).setListeners(ls));
            }
            d.setNodes(nodes);
        }
        return d;
    }

    static ApiMessage fetchRequest(short v) {
        List<FetchRequestData.FetchTopic> topics = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            List<FetchRequestData.FetchPartition> parts = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                FetchRequestData.FetchPartition p = new FetchRequestData.FetchPartition()
                    .setPartition(i).setCurrentLeaderEpoch(210 + i).setFetchOffset(300_000L + 10 * t + i)
                    .setLogStartOffset(17L + i).setPartitionMaxBytes(65536 + i)
                    .setReplicaDirectoryId(uuid(0xd1 + 2 * t + i));
                if (v >= 12) p.setLastFetchedEpoch(220 + i);
                parts.add(p);
            }
            topics.add(new FetchRequestData.FetchTopic().setTopic("fetch-" + t).setTopicId(uuid(0xe1 + t)).setPartitions(parts));
        }
        FetchRequestData d = new FetchRequestData()
            .setClusterId("fetch-cluster")
            .setMaxWaitMs(500 + v).setMinBytes(1).setMaxBytes(52428800).setIsolationLevel((byte) 1)
            .setSessionId(230).setSessionEpoch(231).setTopics(topics).setRackId("rack-" + v);
        if (v <= 14) d.setReplicaId(1 + v);
        if (v >= 15) d.setReplicaState(new FetchRequestData.ReplicaState().setReplicaId(2).setReplicaEpoch(232L));
        if (v >= 7) d.setForgottenTopicsData(Arrays.asList(
            new FetchRequestData.ForgottenTopic().setTopic("gone-0").setTopicId(uuid(0xf1)).setPartitions(ints(3, 4)),
            new FetchRequestData.ForgottenTopic().setTopic("gone-1").setTopicId(uuid(0xf2)).setPartitions(ints(5))));
        return d;
    }

    static ApiMessage fetchResponse(short v) {
        List<FetchResponseData.FetchableTopicResponse> topics = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            List<FetchResponseData.PartitionData> parts = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                FetchResponseData.PartitionData p = new FetchResponseData.PartitionData()
                    .setPartitionIndex(i).setErrorCode((short) (i == 0 ? 0 : 74)).setHighWatermark(400_000L + i)
                    .setLastStableOffset(399_000L + i).setLogStartOffset(12L + i)
                    .setAbortedTransactions(i == 0 ? null : Arrays.asList(
                        new FetchResponseData.AbortedTransaction().setProducerId(9001L).setFirstOffset(390_000L),
                        new FetchResponseData.AbortedTransaction().setProducerId(9002L).setFirstOffset(391_000L)))
                    .setRecords(i == 0 ? records("batch-bytes-" + t + "-v" + v) : null);
                if (v >= 11) p.setPreferredReadReplica(3 + i);
                if (v >= 12) {
                    p.setDivergingEpoch(new FetchResponseData.EpochEndOffset().setEpoch(240 + i).setEndOffset(241_000L + i));
                    p.setCurrentLeader(new FetchResponseData.LeaderIdAndEpoch().setLeaderId(6 + i).setLeaderEpoch(242 + i));
                    p.setSnapshotId(new FetchResponseData.SnapshotId().setEndOffset(243_000L + i).setEpoch(244 + i));
                }
                parts.add(p);
            }
            topics.add(new FetchResponseData.FetchableTopicResponse().setTopic("fetch-" + t).setTopicId(uuid(0xe1 + t)).setPartitions(parts));
        }
        FetchResponseData d = new FetchResponseData().setThrottleTimeMs(250).setErrorCode((short) 0).setResponses(topics);
        if (v >= 7) d.setSessionId(260 + v);
        if (v >= 16) {
            FetchResponseData.NodeEndpointCollection eps = new FetchResponseData.NodeEndpointCollection();
            eps.add(new FetchResponseData.NodeEndpoint().setNodeId(6).setHost("b6").setPort(9092).setRack("r6"));
            eps.add(new FetchResponseData.NodeEndpoint().setNodeId(7).setHost("b7").setPort(9092).setRack(null));
            d.setNodeEndpoints(eps);
        }
        return d;
    }

    // ---------------------------------------------------------------------------------------------
    // Serialization and the value dump
    // ---------------------------------------------------------------------------------------------

    static byte[] serialize(Message msg, short version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = msg.size(cache, version);
        ByteBuffer buf = ByteBuffer.allocate(size);
        msg.write(new ByteBufferAccessor(buf), cache, version);
        if (buf.hasRemaining()) throw new IllegalStateException("size() and write() disagree");
        byte[] out = buf.array();
        // Cross-checks: MessageUtil gives the same bytes, and Kafka reads them back to the same bytes.
        byte[] viaUtil = MessageUtil.byteBufferToArray(MessageUtil.toByteBuffer(msg, version));
        if (!Arrays.equals(out, viaUtil)) throw new IllegalStateException("MessageUtil disagrees");
        return out;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    static void jsonString(StringBuilder sb, String s) {
        sb.append('"');
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') sb.append('\\').append(c);
            else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
            else sb.append(c);
        }
        sb.append('"');
    }

    /** The message's field values as JSON, by reflection over the generated class's fields. */
    static void dump(StringBuilder sb, Object value) throws IllegalAccessException {
        if (value == null) {
            sb.append("null");
        } else if (value instanceof String) {
            jsonString(sb, (String) value);
        } else if (value instanceof Boolean || value instanceof Number) {
            sb.append(value);
        } else if (value instanceof Uuid) {
            Uuid u = (Uuid) value;
            sb.append('"').append(new UUID(u.getMostSignificantBits(), u.getLeastSignificantBits())).append('"');
        } else if (value instanceof MemoryRecords) {
            ByteBuffer b = ((MemoryRecords) value).buffer().duplicate();
            byte[] raw = new byte[b.remaining()];
            b.get(raw);
            sb.append('"').append(hex(raw)).append('"');
        } else if (value instanceof byte[]) {
            sb.append('"').append(hex((byte[]) value)).append('"');
        } else if (value instanceof ByteBuffer) {
            ByteBuffer b = ((ByteBuffer) value).duplicate();
            byte[] raw = new byte[b.remaining()];
            b.get(raw);
            sb.append('"').append(hex(raw)).append('"');
        } else if (value instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) value) {
                if (!first) sb.append(", ");
                first = false;
                dump(sb, o);
            }
            sb.append(']');
        } else if (value instanceof Message) {
            sb.append('{');
            boolean first = true;
            for (Field f : value.getClass().getDeclaredFields()) {
                int mod = f.getModifiers();
                String name = f.getName();
                if (Modifier.isStatic(mod) || name.startsWith("_") || name.equals("next") || name.equals("prev")) continue;
                f.setAccessible(true);
                if (!first) sb.append(", ");
                first = false;
                jsonString(sb, name);
                sb.append(": ");
                dump(sb, f.get(value));
            }
            sb.append('}');
        } else {
            throw new IllegalArgumentException("cannot dump " + value.getClass());
        }
    }

    public static void main(String[] args) throws Exception {
        Path outDir = Paths.get(args.length > 0 ? args[0] : ".");
        Map<String, Function<Short, ApiMessage>> builders = new LinkedHashMap<>();
        builders.put("VoteRequest", KraftGolden::voteRequest);
        builders.put("VoteResponse", KraftGolden::voteResponse);
        builders.put("BeginQuorumEpochRequest", KraftGolden::beginQuorumEpochRequest);
        builders.put("BeginQuorumEpochResponse", KraftGolden::beginQuorumEpochResponse);
        builders.put("EndQuorumEpochRequest", KraftGolden::endQuorumEpochRequest);
        builders.put("EndQuorumEpochResponse", KraftGolden::endQuorumEpochResponse);
        builders.put("FetchSnapshotRequest", KraftGolden::fetchSnapshotRequest);
        builders.put("FetchSnapshotResponse", KraftGolden::fetchSnapshotResponse);
        builders.put("BrokerRegistrationRequest", KraftGolden::brokerRegistrationRequest);
        builders.put("BrokerRegistrationResponse", KraftGolden::brokerRegistrationResponse);
        builders.put("BrokerHeartbeatRequest", KraftGolden::brokerHeartbeatRequest);
        builders.put("BrokerHeartbeatResponse", KraftGolden::brokerHeartbeatResponse);
        builders.put("UnregisterBrokerRequest", KraftGolden::unregisterBrokerRequest);
        builders.put("UnregisterBrokerResponse", KraftGolden::unregisterBrokerResponse);
        builders.put("AlterPartitionRequest", KraftGolden::alterPartitionRequest);
        builders.put("AlterPartitionResponse", KraftGolden::alterPartitionResponse);
        builders.put("ControllerRegistrationRequest", KraftGolden::controllerRegistrationRequest);
        builders.put("ControllerRegistrationResponse", KraftGolden::controllerRegistrationResponse);
        builders.put("AllocateProducerIdsRequest", KraftGolden::allocateProducerIdsRequest);
        builders.put("AllocateProducerIdsResponse", KraftGolden::allocateProducerIdsResponse);
        builders.put("EnvelopeRequest", KraftGolden::envelopeRequest);
        builders.put("EnvelopeResponse", KraftGolden::envelopeResponse);
        builders.put("AddRaftVoterRequest", KraftGolden::addRaftVoterRequest);
        builders.put("AddRaftVoterResponse", KraftGolden::addRaftVoterResponse);
        builders.put("RemoveRaftVoterRequest", KraftGolden::removeRaftVoterRequest);
        builders.put("RemoveRaftVoterResponse", KraftGolden::removeRaftVoterResponse);
        builders.put("UpdateRaftVoterRequest", KraftGolden::updateRaftVoterRequest);
        builders.put("UpdateRaftVoterResponse", KraftGolden::updateRaftVoterResponse);
        builders.put("DescribeQuorumRequest", KraftGolden::describeQuorumRequest);
        builders.put("DescribeQuorumResponse", KraftGolden::describeQuorumResponse);
        builders.put("FetchRequest", KraftGolden::fetchRequest);
        builders.put("FetchResponse", KraftGolden::fetchResponse);

        StringBuilder lines = new StringBuilder();
        StringBuilder defaults = new StringBuilder();
        defaults.append("# Generated by tests/unit/protocol/golden/regenerate.sh from Apache Kafka's kafka-clients ")
                .append(AppInfoParser.getVersion()).append(" message classes. Do not edit.\n");
        defaults.append("# Freshly constructed messages (every field at its default): name version hex\n");
        lines.append("# Generated by tests/unit/protocol/golden/regenerate.sh from Apache Kafka's kafka-clients ")
             .append(AppInfoParser.getVersion()).append(" message classes. Do not edit.\n");
        lines.append("# name version hex\n");
        StringBuilder json = new StringBuilder("{\n");
        boolean firstMsg = true;
        for (Map.Entry<String, Function<Short, ApiMessage>> e : builders.entrySet()) {
            ApiMessage probe = e.getValue().apply((short) 0);
            short lo = probe.lowestSupportedVersion();
            short hi = probe.highestSupportedVersion();
            if (!firstMsg) json.append(",\n");
            firstMsg = false;
            json.append("  ");
            jsonString(json, e.getKey());
            json.append(": {\"apiKey\": ").append(probe.apiKey()).append(", \"versions\": {");
            for (short v = lo; v <= hi; v++) {
                ApiMessage msg = e.getValue().apply(v);
                byte[] bytes = serialize(msg, v);
                lines.append(e.getKey()).append(' ').append(v).append(' ')
                     .append(hex(bytes)).append('\n');
                json.append(v == lo ? "\n" : ",\n").append("    \"").append(v).append("\": ");
                dump(json, msg);
                ApiMessage blank = (ApiMessage) probe.getClass().getConstructor().newInstance();
                defaults.append(e.getKey()).append(' ').append(v).append(' ').append(hex(serialize(blank, v))).append('\n');
            }
            json.append("\n  }}");
        }
        json.append("\n}\n");
        Files.write(outDir.resolve("kraft_messages.txt"), lines.toString().getBytes(StandardCharsets.UTF_8));
        Files.write(outDir.resolve("kraft_values.json"), json.toString().getBytes(StandardCharsets.UTF_8));
        Files.write(outDir.resolve("kraft_defaults.txt"), defaults.toString().getBytes(StandardCharsets.UTF_8));
    }
}
