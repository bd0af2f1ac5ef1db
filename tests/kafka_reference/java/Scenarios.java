// The reference client's scenarios: Apache Kafka's own Java client (kafka-clients, from the jars
// scripts/kafka/install.sh brought from Maven Central) against whichever cluster the client settings
// name. Compiled once per run and run by tests/kafka_reference/java_client.py, as:
//
//     java -cp "CLASSES:.peers/kafka-<version>/libs/*" Scenarios SCENARIO SETTINGS TOPIC [ARGUMENT]
//
// SETTINGS is a properties file (bootstrap.servers, and the security settings and password, which
// never appear in argv). Each scenario prints one line "RESULT {json}" of what it observed, for the test
// to compare with what it expects and with what Apache Kafka answered; an exception the scenario does not
// expect ends the run with its stack trace and exit code 1.

import java.io.BufferedReader;
import java.io.FileReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Scenarios {
    static final Duration POLL = Duration.ofMillis(200);
    static final long PATIENCE_MS = 60_000;

    public static void main(String[] args) throws Exception {
        Properties settings = new Properties();
        try (FileReader reader = new FileReader(args[1])) {
            settings.load(reader);
        }
        String topic = args[2];
        String argument = args.length > 3 ? args[3] : "";
        Map<String, Object> result = switch (args[0]) {
            case "produce-consume" -> produceConsume(settings, topic, argument);
            case "group" -> group(settings, topic, argument);
            case "admin" -> admin(settings, topic);
            case "refused-topic" -> refusedTopic(settings, topic);
            case "login" -> login(settings);
            case "epoch-validation" -> epochValidation(settings, topic);
            case "transactions" -> transactions(settings, topic, argument);
            case "consume-transform-produce" -> consumeTransformProduce(settings, topic);
            case "transaction-timeout" -> transactionTimeout(settings, topic);
            case "commit-loop" -> commitLoop(settings, topic, argument);
            case "share" -> share(settings, topic);
            case "share-hold" -> shareHold(settings, topic);
            case "share-drain" -> shareDrain(settings, topic, Integer.parseInt(argument));
            default -> throw new IllegalArgumentException("unknown scenario " + args[0]);
        };
        System.out.println("RESULT " + json(result));
        System.out.flush();
        System.exit(0);  // the clients' threads are done; nothing else to wait for
    }

    // -- produce and consume ------------------------------------------------------------------------

    /** An idempotent acks=all producer with the codec, 300 keyed records with headers; read back whole. */
    static Map<String, Object> produceConsume(Properties settings, String topic, String codec) throws Exception {
        create(settings, topic, 1, Map.of());
        Properties producing = producer(settings);
        producing.put("compression.type", codec);
        producing.put("linger.ms", "5");
        List<Long> offsets = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producing)) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                RecordHeaders headers = new RecordHeaders();
                headers.add("i", Integer.toString(i).getBytes());
                sent.add(producer.send(new ProducerRecord<>(topic, 0, key(i), value(i), headers)));
            }
            for (var future : sent) {
                offsets.add(future.get(60, TimeUnit.SECONDS).offset());
            }
        }
        List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumer(settings, null))) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            while (read.size() < 300 && System.currentTimeMillis() < deadline) {
                consumer.poll(POLL).forEach(read::add);
            }
        }
        boolean same = read.size() == 300;
        for (int i = 0; same && i < 300; i++) {
            ConsumerRecord<byte[], byte[]> record = read.get(i);
            same = record.offset() == i
                && java.util.Arrays.equals(record.key(), key(i))
                && java.util.Arrays.equals(record.value(), value(i))
                && new String(record.headers().lastHeader("i").value()).equals(Integer.toString(i));
        }
        Map<String, Object> result = new TreeMap<>();
        result.put("dense_offsets_from_0", offsets.equals(range(300)));
        result.put("read", read.size());
        result.put("read_as_written", same);
        return result;
    }

    // -- commits across a node's kill -9 -------------------------------------------------------------

    /**
     * Group ARGUMENT commits offsets 1, 2, 3... of partition 0 (commitSync, the partition assigned: no
     * membership), printing "COMMITTED n" after each commit it was told succeeded, and every tenth reads
     * the committed offset back (committed()); until a line on stdin. RESULT: the last offset committed,
     * every commit or read that failed (its exception), and every read below the last commit.
     */
    static Map<String, Object> commitLoop(Properties settings, String topic, String group) throws Exception {
        TopicPartition partition = new TopicPartition(topic, 0);
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                new BufferedReader(new InputStreamReader(System.in)).readLine();
            } catch (java.io.IOException e) {
                // stdin closed: stop as asked
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        List<String> failures = new ArrayList<>();
        List<String> behind = new ArrayList<>();
        long last = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumer(settings, group))) {
            consumer.assign(List.of(partition));
            for (long n = 1; !stop.get(); n++) {
                try {
                    consumer.commitSync(Map.of(partition, new OffsetAndMetadata(n)));
                    last = n;
                    System.out.println("COMMITTED " + n);
                    System.out.flush();
                } catch (Exception e) {
                    failures.add("commit " + n + ": " + e);
                }
                if (n % 10 != 0) {
                    continue;
                }
                try {
                    OffsetAndMetadata read = consumer.committed(Set.of(partition)).get(partition);
                    long offset = read == null ? -1 : read.offset();
                    if (offset < last) {
                        behind.add("read " + offset + " after " + last);
                    }
                } catch (Exception e) {
                    failures.add("read after " + last + ": " + e);
                }
            }
        }
        Map<String, Object> result = new TreeMap<>();
        result.put("committed", last);
        result.put("failures", failures);
        result.put("behind", behind);
        return result;
    }

    // -- transactions (KIP-98, KIP-447) -------------------------------------------------------------

    /**
     * A transactional producer (id ARGUMENT) commits 100 records, aborts 50, then commits 20 more with the
     * offsets of a consumer group (sendOffsetsToTransaction); a read_committed consumer reads the 120
     * committed and none aborted, the group's offset is the one committed with the second commit; the admin
     * client describes and lists the transaction; a second producer of the id fences the first.
     */
    static Map<String, Object> transactions(Properties settings, String topic, String transactionalId)
        throws Exception {
        create(settings, topic, 2, Map.of());
        Properties producing = producer(settings);
        producing.put("transactional.id", transactionalId);
        String group = topic + "-group";
        Map<String, Object> result = new TreeMap<>();
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producing);
        producer.initTransactions();
        producer.beginTransaction();
        for (int i = 0; i < 100; i++) {
            producer.send(new ProducerRecord<>(topic, i % 2, key(i), "commit".getBytes()));
        }
        producer.commitTransaction();
        producer.beginTransaction();
        for (int i = 0; i < 50; i++) {
            producer.send(new ProducerRecord<>(topic, i % 2, key(i), "abort".getBytes()));
        }
        producer.flush();
        producer.abortTransaction();
        producer.beginTransaction();
        for (int i = 0; i < 20; i++) {
            producer.send(new ProducerRecord<>(topic, i % 2, key(i), "commit".getBytes()));
        }
        try (KafkaConsumer<byte[], byte[]> grouped = new KafkaConsumer<>(consumer(settings, group))) {
            producer.sendOffsetsToTransaction(
                Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(42)), grouped.groupMetadata());
        }
        producer.commitTransaction();
        try (Admin admin = Admin.create(settings)) {
            TransactionDescription described = admin.describeTransactions(List.of(transactionalId))
                .description(transactionalId).get(60, TimeUnit.SECONDS);
            result.put("described_state", described.state().toString());
            result.put("described_timeout_ms", described.transactionTimeoutMs());
            Collection<TransactionListing> listed = admin.listTransactions().all().get(60, TimeUnit.SECONDS);
            result.put("listed", listed.stream().anyMatch(t -> t.transactionalId().equals(transactionalId)));
            result.put("committed_offset", admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get(60, TimeUnit.SECONDS).get(new TopicPartition(topic, 0)).offset());
        }
        Properties reading = consumer(settings, null);
        reading.put("isolation.level", IsolationLevel.READ_COMMITTED.toString());
        List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(reading)) {
            List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            readUntil(consumer, read, 120);  // the aborted 50 lie before the last 20: read, they would be here
        }
        result.put("read_committed", read.size());
        result.put("aborted_read", read.stream().anyMatch(r -> new String(r.value()).equals("abort")));
        try (KafkaProducer<byte[], byte[]> successor = new KafkaProducer<>(producing)) {
            successor.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, key(0), "zombie".getBytes()));
            try {
                producer.commitTransaction();
                result.put("zombie", "committed");
            } catch (KafkaException refused) {  // fenced: how depends on the transaction version
                result.put("zombie", refused.getClass().getSimpleName());
            }
        }
        producer.close(Duration.ZERO);
        return result;
    }

    // -- leader epochs: a position validated after a leader change (KIP-320) --------------------------

    /**
     * A consumer by assignment reads 200 records written in the leader's epoch, then prints
     * "POSITIONED {leader, epoch}" and waits for a line on stdin: the test SIGKILLs that leader meanwhile.
     * After it, 200 more records go to the new leader and the consumer reads on: its position, carrying the
     * epoch of the last record it read, is validated with OffsetForLeaderEpoch against the new leader (the
     * epoch ends at 200, where it stands) and nothing is lost or read twice. Then it seeks to 250 claiming the
     * first epoch, which ended at 200: validation finds the log diverging, and with auto.offset.reset=none
     * the next poll throws LogTruncationException naming 200 and that epoch.
     */
    static Map<String, Object> epochValidation(Properties settings, String topic) throws Exception {
        create(settings, topic, 1, Map.of());
        TopicPartition partition = new TopicPartition(topic, 0);
        produceRange(settings, topic, 0, 200);
        Properties consuming = consumer(settings, null);
        consuming.put("auto.offset.reset", "none");
        consuming.put("metadata.max.age.ms", "500");
        Map<String, Object> result = new TreeMap<>();
        List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consuming)) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            readUntil(consumer, read, 200);
            int firstEpoch = read.get(199).leaderEpoch().orElse(-1);
            int leader;
            try (Admin admin = Admin.create(settings)) {
                leader = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
                    .get(topic).partitions().get(0).leader().id();
            }
            System.out.println("POSITIONED " + json(Map.of("leader", leader, "epoch", firstEpoch)));
            System.out.flush();
            String go = new BufferedReader(new InputStreamReader(System.in)).readLine();
            if (!"GO".equals(go)) {
                throw new IllegalStateException("expected GO on stdin, got " + go);
            }
            produceRange(settings, topic, 200, 400);
            readUntil(consumer, read, 400);
            List<Long> offsets = read.stream().map(ConsumerRecord::offset).collect(Collectors.toList());
            boolean valuesInOrder = true;
            for (int i = 0; i < read.size(); i++) {
                valuesInOrder &= new String(read.get(i).value()).equals("epoch-" + i);
            }
            int lastEpoch = read.get(read.size() - 1).leaderEpoch().orElse(-1);
            result.put("read", read.size());
            result.put("dense_once_in_order", offsets.equals(range(400)) && valuesInOrder);
            result.put("epoch_rose", lastEpoch > firstEpoch);
            result.put("position_after", consumer.position(partition));

            consumer.seek(partition, new OffsetAndMetadata(250, Optional.of(firstEpoch), ""));
            Object truncation = "none";
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            while (truncation.equals("none") && System.currentTimeMillis() < deadline) {
                try {
                    consumer.poll(POLL);
                } catch (LogTruncationException diverged) {
                    OffsetAndMetadata at = diverged.divergentOffsets().get(partition);
                    truncation = Map.of(
                        "offset", at.offset(),
                        "epoch_is_first", at.leaderEpoch().equals(Optional.of(firstEpoch)));
                }
            }
            result.put("stale_epoch_seek", truncation);
        }
        return result;
    }

    static void produceRange(Properties settings, String topic, int from, int to) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producer(settings))) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = from; i < to; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, null, ("epoch-" + i).getBytes())));
            }
            for (var future : sent) {
                future.get(120, TimeUnit.SECONDS);
            }
        }
    }

    static void readUntil(KafkaConsumer<byte[], byte[]> consumer, List<ConsumerRecord<byte[], byte[]>> read,
                          int count) {
        long deadline = System.currentTimeMillis() + 2 * PATIENCE_MS;
        while (read.size() < count && System.currentTimeMillis() < deadline) {
            consumer.poll(POLL).forEach(read::add);
        }
        if (read.size() < count) {
            throw new IllegalStateException(read.size() + " of " + count + " records read");
        }
    }

    // -- a consume-transform-produce loop and a timed-out transaction, beside Kafka ------------------------

    /**
     * A consume-transform-produce loop as kafka-clients' transactional producer runs it. A member of a group
     * reads 30 records of TOPIC-in (read_committed); the producer (transactional.id TOPIC-txn) writes one
     * record per input, alternating between TOPIC's two partitions, and commits the inputs' offsets with the
     * consumer's group metadata in the same transaction:
     *   1. inputs 0-9 as "commit-1-i", committed;
     *   2. inputs 10-19 as "abort-2-i", aborted (the group's offset stays at 10);
     *   3. inputs 10-19 again as "commit-3-i", committed;
     *   offsets with a generation the group is not at: refused (ILLEGAL_GENERATION), the transaction aborted;
     *   4. inputs 20-29 as "open-4-i", flushed but left open: the last stable offset stays below the end,
     *      and a read_committed reader stops at it, having read only commits 1 and 3;
     *   a second producer with the same transactional.id: its initTransactions aborts 4 and fences the first,
     *   whose commit is refused;
     *   5. by the second producer, inputs 20-29 as "commit-5-i", committed.
     * What read_committed and read_uncommitted readers see of TOPIC, and the group's offsets.
     */
    static Map<String, Object> consumeTransformProduce(Properties settings, String topic) throws Exception {
        String input = topic + "-in";
        String groupId = topic + "-group";
        String transactionalId = topic + "-txn";
        create(settings, topic, 2, Map.of());
        create(settings, input, 1, Map.of());
        TopicPartition source = new TopicPartition(input, 0);
        List<TopicPartition> outputs = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        try (KafkaProducer<byte[], byte[]> plain = new KafkaProducer<>(producer(settings))) {
            for (int i = 0; i < 30; i++) {
                plain.send(new ProducerRecord<>(input, 0, null, ("in-" + i).getBytes()));
            }
            plain.flush();
        }
        Map<String, Object> result = new TreeMap<>();
        Properties consuming = consumer(settings, groupId);
        consuming.put("isolation.level", "read_committed");
        try (KafkaConsumer<byte[], byte[]> member = new KafkaConsumer<>(consuming);
             KafkaProducer<byte[], byte[]> first = new KafkaProducer<>(transactional(settings, transactionalId));
             Admin admin = Admin.create(settings)) {
            member.subscribe(List.of(input));
            List<ConsumerRecord<byte[], byte[]>> inputs = new ArrayList<>();
            readUntil(member, inputs, 30);
            first.initTransactions();

            transform(first, member, topic, inputs, 0, 10, "commit-1");
            first.commitTransaction();
            transform(first, member, topic, inputs, 10, 20, "abort-2");
            first.flush();  // written to the partitions before the abort (else the client may drop them unsent)
            first.abortTransaction();
            result.put("group_offset_after_abort", groupOffset(admin, groupId, source));
            transform(first, member, topic, inputs, 10, 20, "commit-3");
            first.commitTransaction();

            first.beginTransaction();
            ConsumerGroupMetadata current = member.groupMetadata();
            ConsumerGroupMetadata stale = new ConsumerGroupMetadata(
                groupId, current.generationId() + 1, current.memberId(), current.groupInstanceId());
            result.put("offsets_of_another_generation", refusal(() -> {
                first.sendOffsetsToTransaction(Map.of(source, new OffsetAndMetadata(25)), stale);
                return null;
            }));
            first.abortTransaction();

            transform(first, member, topic, inputs, 20, 30, "open-4");
            first.flush();
            Map<TopicPartition, Long> stable = ends(admin, outputs, IsolationLevel.READ_COMMITTED);
            Map<TopicPartition, Long> logEnds = ends(admin, outputs, IsolationLevel.READ_UNCOMMITTED);
            result.put("stable_below_end_while_open", outputs.stream()
                .allMatch(p -> stable.get(p) < logEnds.get(p)));
            result.put("read_committed_while_open", prefixes(readToEnd(settings, outputs, "read_committed")));

            try (KafkaProducer<byte[], byte[]> second =
                     new KafkaProducer<>(transactional(settings, transactionalId))) {
                second.initTransactions();
                result.put("fenced_commit", refusal(() -> {
                    first.commitTransaction();
                    return null;
                }));
                transform(second, member, topic, inputs, 20, 30, "commit-5");
                second.commitTransaction();
            }
            result.put("group_offset_at_end", groupOffset(admin, groupId, source));
            // the commit is answered once decided; its markers follow, and the last stable offset with them
            result.put("stable_at_end", waitFor(() -> stable(admin, outputs)));
        }
        List<ConsumerRecord<byte[], byte[]>> committed = readToEnd(settings, outputs, "read_committed");
        result.put("read_committed", prefixes(committed));
        result.put("read_uncommitted", prefixes(readToEnd(settings, outputs, "read_uncommitted")));
        List<String> expected = new ArrayList<>();
        for (String prefix : List.of("commit-1", "commit-3", "commit-5")) {
            int from = prefix.equals("commit-1") ? 0 : prefix.equals("commit-3") ? 10 : 20;
            for (int i = from; i < from + 10; i++) {
                expected.add(prefix + "-" + i);
            }
        }
        result.put("read_committed_each_once_in_order", outputs.stream().allMatch(partition ->
            committed.stream().filter(r -> r.partition() == partition.partition())
                .map(r -> new String(r.value())).toList()
                .equals(expected.stream().filter(v -> outputOf(v) == partition.partition()).toList())));
        return result;
    }

    /**
     * A transaction left open past transaction.timeout.ms (5 s): the coordinator aborts it, the last stable
     * offset moves past its records, read_committed readers never see them, and the producer's late commit
     * is refused.
     */
    static Map<String, Object> transactionTimeout(Properties settings, String topic) throws Exception {
        create(settings, topic, 1, Map.of());
        List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0));
        Properties producing = transactional(settings, topic + "-txn");
        producing.put("transaction.timeout.ms", "5000");
        Map<String, Object> result = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producing);
             Admin admin = Admin.create(settings)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, ("expired-" + i).getBytes()));
            }
            producer.flush();
            result.put("stable_below_end_while_open",
                ends(admin, partitions, IsolationLevel.READ_COMMITTED).get(partitions.get(0)) == 0L);
            result.put("aborted_by_the_coordinator", waitFor(() -> stable(admin, partitions)));
            result.put("late_commit", refusal(() -> {
                producer.commitTransaction();
                return null;
            }));
        }
        result.put("read_committed", prefixes(readToEnd(settings, partitions, "read_committed")));
        result.put("read_uncommitted", prefixes(readToEnd(settings, partitions, "read_uncommitted")));
        return result;
    }

    /** One transaction begun: inputs [from, to) written as "PREFIX-i" to partition i % 2, and the offset
     *  after them sent with the member's group metadata. */
    static void transform(KafkaProducer<byte[], byte[]> producer, KafkaConsumer<byte[], byte[]> member,
                          String topic, List<ConsumerRecord<byte[], byte[]>> inputs, int from, int to,
                          String prefix) throws Exception {
        producer.beginTransaction();
        for (int i = from; i < to; i++) {
            String value = prefix + "-" + new String(inputs.get(i).value()).substring("in-".length());
            producer.send(new ProducerRecord<>(topic, outputOf(value), null, value.getBytes()));
        }
        ConsumerRecord<byte[], byte[]> last = inputs.get(to - 1);
        producer.sendOffsetsToTransaction(
            Map.of(new TopicPartition(last.topic(), last.partition()), new OffsetAndMetadata(last.offset() + 1)),
            member.groupMetadata());
    }

    /** The partition a "PREFIX-i" output goes to: i % 2. */
    static int outputOf(String value) {
        return Integer.parseInt(value.substring(value.lastIndexOf('-') + 1)) % 2;
    }

    static Properties transactional(Properties settings, String transactionalId) {
        Properties producing = producer(settings);
        producing.put("transactional.id", transactionalId);
        return producing;
    }

    /** The group's committed offset of the partition once no transaction's offset for it is pending (an
     *  OffsetFetch with require_stable, KIP-447, is answered UNSTABLE_OFFSET_COMMIT until the transaction's
     *  marker has reached the group's coordinator; the admin client then leaves the partition out). */
    static Object groupOffset(Admin admin, String groupId, TopicPartition partition) throws Exception {
        ListConsumerGroupOffsetsOptions stable = new ListConsumerGroupOffsetsOptions().requireStable(true);
        long deadline = System.currentTimeMillis() + PATIENCE_MS;
        while (true) {
            OffsetAndMetadata found = admin.listConsumerGroupOffsets(groupId, stable)
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS).get(partition);
            if (found != null) {
                return found.offset();
            }
            if (System.currentTimeMillis() > deadline) {
                return "none";
            }
            Thread.sleep(50);
        }
    }

    /** ListOffsets of the latest offset at an isolation level: the last stable offset for read_committed. */
    static Map<TopicPartition, Long> ends(Admin admin, List<TopicPartition> partitions, IsolationLevel isolation)
        throws Exception {
        Map<TopicPartition, OffsetSpec> latest = partitions.stream()
            .collect(Collectors.toMap(p -> p, p -> OffsetSpec.latest()));
        return admin.listOffsets(latest, new ListOffsetsOptions(isolation)).all().get(30, TimeUnit.SECONDS)
            .entrySet().stream().collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
    }

    /** Whether each partition's last stable offset is its end: no transaction open in it. */
    static boolean stable(Admin admin, List<TopicPartition> partitions) {
        try {
            return ends(admin, partitions, IsolationLevel.READ_COMMITTED)
                .equals(ends(admin, partitions, IsolationLevel.READ_UNCOMMITTED));
        } catch (Exception notAnswered) {  // asked again until PATIENCE_MS
            return false;
        }
    }

    /** Every record a reader at that isolation level reads of the partitions from their start until its
     *  position reaches the end it is shown (the last stable offset under read_committed). */
    static List<ConsumerRecord<byte[], byte[]>> readToEnd(Properties settings, List<TopicPartition> partitions,
                                                         String isolation) {
        Properties consuming = consumer(settings, null);
        consuming.put("isolation.level", isolation);
        List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> reader = new KafkaConsumer<>(consuming)) {
            reader.assign(partitions);
            reader.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = reader.endOffsets(partitions);
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            while (partitions.stream().anyMatch(p -> reader.position(p) < ends.get(p))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("not read to " + ends + " in " + PATIENCE_MS + " ms");
                }
                reader.poll(POLL).forEach(read::add);
            }
        }
        return read;
    }

    /** How many records of each "PREFIX-" the values hold, by prefix. */
    static Map<String, Long> prefixes(List<ConsumerRecord<byte[], byte[]>> records) {
        return records.stream().map(r -> new String(r.value()))
            .collect(Collectors.groupingBy(v -> v.substring(0, v.lastIndexOf('-')), TreeMap::new,
                Collectors.counting()));
    }

    // -- a consumer group with an assignor --------------------------------------------------------

    /**
     * Three members with the assignor read 600 records on 6 partitions, each once, committing as they go
     * and when a partition is taken from them (a consumer's usual at-least-once loop); once the three
     * share the partitions, one leaves, the two left are given its partitions and read 60 more. The
     * group's committed offsets are then the partitions' ends.
     */
    static Map<String, Object> group(Properties settings, String topic, String assignor) throws Exception {
        create(settings, topic, 6, Map.of());
        String groupId = topic + "-group";
        produceSpread(settings, topic, 6, 100, "a");
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        List<Member> members = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            members.add(new Member(consumer(settings, groupId, assignor), topic, seen));
        }
        members.forEach(Thread::start);
        boolean firstRead = waitFor(() -> seen.size() >= 600);
        waitFor(() -> members.stream().allMatch(m -> m.assigned.size() == 2));
        List<Integer> shares = members.stream().map(m -> m.assigned.size()).sorted().toList();
        Member leaving = members.remove(2);
        leaving.finish();
        produceSpread(settings, topic, 6, 10, "b");
        boolean secondRead = waitFor(() -> seen.size() >= 660);
        boolean rebalanced = waitFor(() -> members.stream().mapToInt(m -> m.assigned.size()).sum() == 6);
        for (Member member : members) {
            member.finish();
        }
        Map<String, Object> result = new TreeMap<>();
        result.put("first_600_read", firstRead);
        result.put("shares_of_three", shares);
        result.put("after_a_leave_660_read", secondRead);
        result.put("two_hold_all_six", rebalanced);
        result.put("read_twice", seen.values().stream().filter(n -> n > 1).count());
        result.put("member_failures", members.stream().filter(m -> m.failure != null).map(m -> m.failure).toList());
        try (Admin admin = Admin.create(settings)) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            result.put("committed", committed.entrySet().stream()
                .sorted(Map.Entry.comparingByKey((a, b) -> a.partition() - b.partition()))
                .map(e -> e.getValue().offset()).toList());
            result.put("group_state", admin.describeConsumerGroups(List.of(groupId)).all()
                .get(30, TimeUnit.SECONDS).get(groupId).groupState().toString());
        }
        return result;
    }

    static final class Member extends Thread {
        final KafkaConsumer<byte[], byte[]> consumer;
        final Set<TopicPartition> assigned = ConcurrentHashMap.newKeySet();
        final AtomicBoolean running = new AtomicBoolean(true);
        final String topic;
        final Map<String, Integer> seen;
        volatile String failure;

        Member(Properties settings, String topic, Map<String, Integer> seen) {
            this.consumer = new KafkaConsumer<>(settings);
            this.topic = topic;
            this.seen = seen;
            setDaemon(true);
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        consumer.commitSync();  // what was read of them, before another member takes them
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    }
                });
                while (running.get()) {
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                        seen.merge(new String(record.value()), 1, Integer::sum);
                    }
                    try {
                        consumer.commitSync();
                    } catch (RebalanceInProgressException | CommitFailedException rebalancing) {
                        // the next poll rejoins, and the revocation above commits first
                    }
                    assigned.clear();
                    assigned.addAll(consumer.assignment());
                }
            } catch (RuntimeException e) {
                failure = e.toString();
            } finally {
                consumer.close();
            }
        }

        void finish() throws InterruptedException {
            running.set(false);
            join(PATIENCE_MS);
        }
    }

    // -- administration ---------------------------------------------------------------------------

    /** Create with a config, describe and alter configs, grow, and the refusals Kafka's client names. */
    static Map<String, Object> admin(Properties settings, String topic) throws Exception {
        Map<String, Object> result = new TreeMap<>();
        try (Admin admin = Admin.create(settings)) {
            create(settings, topic, 2, Map.of("retention.ms", "3600000"));
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            // a broker learns a new topic's configs, and an alteration, from its metadata a moment later
            waitFor(() -> sourceOf(admin, resource, "retention.ms") == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            ConfigEntry retention = describe(admin, resource).get("retention.ms");
            result.put("retention_ms", retention.value() + " " + retention.source());
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("segment.bytes", "1048576"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE))))
                .all().get(30, TimeUnit.SECONDS);
            waitFor(() -> sourceOf(admin, resource, "segment.bytes") == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            Config altered = describe(admin, resource);
            result.put("after_alter", altered.get("segment.bytes").value() + " "
                + altered.get("segment.bytes").source() + ", retention.ms " + altered.get("retention.ms").source());
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get(60, TimeUnit.SECONDS);
            TopicDescription grown = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(30, TimeUnit.SECONDS).get(topic);
            result.put("partitions_after_growth", grown.partitions().size());
            result.put("replicas_each", grown.partitions().stream().map(p -> p.replicas().size()).distinct().toList());
            result.put("grow_to_3", refusal(() -> admin.createPartitions(
                Map.of(topic, NewPartitions.increaseTo(3))).all().get(30, TimeUnit.SECONDS)));
            result.put("create_again", refusal(() -> admin.createTopics(
                List.of(new NewTopic(topic, 1, (short) 3))).all().get(30, TimeUnit.SECONDS)));
            result.put("create_bad_name", refusal(() -> admin.createTopics(
                List.of(new NewTopic("bad name!", 1, (short) 3))).all().get(30, TimeUnit.SECONDS)));
            result.put("create_factor_5", refusal(() -> admin.createTopics(
                List.of(new NewTopic(topic + "-rf5", 1, (short) 5))).all().get(30, TimeUnit.SECONDS)));
            result.put("cluster_nodes", admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).size());
            Map<TopicPartition, OffsetSpec> ends = Map.of(new TopicPartition(topic, 3), OffsetSpec.latest());
            result.put("new_partition_end", admin.listOffsets(ends).all().get(30, TimeUnit.SECONDS)
                .get(new TopicPartition(topic, 3)).offset());
            admin.deleteTopics(List.of(topic)).all().get(60, TimeUnit.SECONDS);
            result.put("delete_again", refusal(() -> admin.deleteTopics(List.of(topic)).all()
                .get(30, TimeUnit.SECONDS)));
        }
        return result;
    }

    // -- security ---------------------------------------------------------------------------------

    /** Produce to a topic the user may not write: the client's own exception names it. */
    static Map<String, Object> refusedTopic(Properties settings, String topic) throws Exception {
        Properties producing = producer(settings);
        producing.put("enable.idempotence", "false");  // no IDEMPOTENT_WRITE asked: the WRITE alone decides
        producing.put("delivery.timeout.ms", "30000");
        producing.put("request.timeout.ms", "20000");
        Map<String, Object> result = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producing)) {
            result.put("produce", refusal(() -> producer.send(new ProducerRecord<>(topic, 0, null, value(0)))
                .get(60, TimeUnit.SECONDS)));
        }
        return result;
    }

    /** Describe the cluster as the settings' user: "ok", or what refused it (a wrong password:
     *  SaslAuthenticationException). */
    static Map<String, Object> login(Properties settings) throws Exception {
        Map<String, Object> result = new TreeMap<>();
        Properties quick = (Properties) settings.clone();
        quick.put("default.api.timeout.ms", "20000");
        quick.put("request.timeout.ms", "15000");
        try (Admin admin = Admin.create(quick)) {
            result.put("describe_cluster", refusal(() -> admin.describeCluster().nodes().get(30, TimeUnit.SECONDS)));
        }
        return result;
    }

    // -- helpers ----------------------------------------------------------------------------------

    interface Step {
        Object run() throws Exception;
    }

    /** "ok", or the simple name of the exception the step failed with (its cause, for a future's). */
    static String refusal(Step step) {
        try {
            step.run();
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    /** Where a topic config's value comes from now; null while it cannot be described. */
    static ConfigEntry.ConfigSource sourceOf(Admin admin, ConfigResource resource, String name) {
        try {
            ConfigEntry entry = describe(admin, resource).get(name);
            return entry == null ? null : entry.source();
        } catch (Exception notYet) {
            return null;
        }
    }

    interface Condition {
        boolean holds();
    }

    static boolean waitFor(Condition condition) throws InterruptedException {
        long deadline = System.currentTimeMillis() + PATIENCE_MS;
        while (!condition.holds()) {
            if (System.currentTimeMillis() > deadline) {
                return false;
            }
            Thread.sleep(50);
        }
        return true;
    }

    static void create(Properties settings, String topic, int partitions, Map<String, String> configs)
        throws Exception {
        try (Admin admin = Admin.create(settings)) {
            NewTopic wanted = new NewTopic(topic, partitions, (short) 3).configs(configs);
            admin.createTopics(List.of(wanted)).all().get(60, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            Object last = null;
            while (System.currentTimeMillis() < deadline) {  // until every partition has a leader
                try {
                    TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(10, TimeUnit.SECONDS).get(topic);
                    last = described;
                    if (described.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty())) {
                        return;
                    }
                } catch (ExecutionException notYet) {  // the topic is not in this broker's metadata yet
                    last = notYet.getCause();
                }
                Thread.sleep(100);
            }
            throw new IllegalStateException(topic + " has no leaders after " + PATIENCE_MS + " ms: " + last);
        }
    }

    static void produceSpread(Properties settings, String topic, int partitions, int each, String prefix)
        throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producer(settings))) {
            for (int p = 0; p < partitions; p++) {
                for (int i = 0; i < each; i++) {
                    producer.send(new ProducerRecord<>(topic, p, null, (prefix + "-" + p + "-" + i).getBytes()));
                }
            }
            producer.flush();
        }
    }

    static Config describe(Admin admin, ConfigResource resource) throws Exception {
        return admin.describeConfigs(List.of(resource)).all().get(30, TimeUnit.SECONDS).get(resource);
    }

    // -- share groups (KIP-932) ----------------------------------------------------------------------

    static Properties shareConsumer(Properties settings, String group) {
        Properties consuming = (Properties) settings.clone();
        consuming.put("group.id", group);
        consuming.put("share.acknowledgement.mode", "explicit");
        consuming.put("key.deserializer", ByteArrayDeserializer.class.getName());
        consuming.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return consuming;
    }

    /** Probe records sent until the share consumer gets one (share.auto.offset.reset=latest: the group
     * starts at the end its first fetch finds), each accepted; then the records of the test. */
    static void probeUntilLive(Properties settings, KafkaShareConsumer<byte[], byte[]> consumer, String topic)
        throws Exception {
        long deadline = System.currentTimeMillis() + 2 * PATIENCE_MS;  // Kafka: its share coordinator loads
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producer(settings))) {
            while (true) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("the share consumer got no probe record");
                }
                producer.send(new ProducerRecord<>(topic, "probe".getBytes())).get(30, TimeUnit.SECONDS);
                ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : got) {
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                if (!got.isEmpty()) {
                    consumer.commitSync(Duration.ofSeconds(30));
                    return;
                }
            }
        }
    }

    static void produceValues(Properties settings, String topic, int count) throws Exception {
        Properties producing = producer(settings);
        producing.put("linger.ms", "1000");  // one batch
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producing)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, ("r" + i).getBytes()));
            }
            producer.flush();
        }
    }

    static boolean isProbe(ConsumerRecord<byte[], byte[]> r) {
        return new String(r.value()).equals("probe");
    }

    /** 20 records to one share consumer: on first delivery every fourth from 1 released and from 2
     * rejected, the rest accepted; a released record comes back (delivery count 2) and is accepted; a
     * rejected one never comes back. */
    static Map<String, Object> share(Properties settings, String topic) throws Exception {
        create(settings, topic, 1, Map.of());
        Map<String, Integer> accepted = new TreeMap<>();
        List<String> redelivered = new ArrayList<>();
        List<String> rejectedSeenAgain = new ArrayList<>();
        Set<String> rejected = new java.util.TreeSet<>();
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(shareConsumer(settings, topic + "-share"))) {
            consumer.subscribe(List.of(topic));
            probeUntilLive(settings, consumer, topic);
            produceValues(settings, topic, 20);
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            while (accepted.size() + rejected.size() < 20 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
                    if (isProbe(r)) {
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                        continue;
                    }
                    String value = new String(r.value());
                    int i = Integer.parseInt(value.substring(1));
                    short count = r.deliveryCount().orElse((short) -1);
                    if (rejected.contains(value)) {
                        rejectedSeenAgain.add(value);
                    }
                    if (count == 1 && i % 4 == 1) {
                        consumer.acknowledge(r, AcknowledgeType.RELEASE);
                    } else if (count == 1 && i % 4 == 2) {
                        consumer.acknowledge(r, AcknowledgeType.REJECT);
                        rejected.add(value);
                    } else {
                        if (count > 1) {
                            redelivered.add(value + "@" + count);
                        }
                        accepted.merge(value, 1, Integer::sum);
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
                consumer.commitSync(Duration.ofSeconds(30));
            }
        }
        java.util.Collections.sort(redelivered);
        return Map.of(
            "accepted", accepted.size(),
            "accepted_twice", accepted.values().stream().filter(n -> n > 1).count(),
            "rejected", rejected.size(),
            "rejected_seen_again", rejectedSeenAgain,
            "redelivered", redelivered);
    }

    /** 20 records acquired by one share consumer, the first 10 accepted, then the JVM halts with the other
     * 10 still acquired (a member gone without a word). */
    static Map<String, Object> shareHold(Properties settings, String topic) throws Exception {
        create(settings, topic, 1, Map.of());
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(shareConsumer(settings, topic + "-share"));
        consumer.subscribe(List.of(topic));
        probeUntilLive(settings, consumer, topic);
        produceValues(settings, topic, 20);
        int held = 0;
        int acked = 0;
        long deadline = System.currentTimeMillis() + PATIENCE_MS;
        while (held + acked == 0 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {  // one batch: all 20 at once
                if (isProbe(r) || Integer.parseInt(new String(r.value()).substring(1)) < 10) {
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    acked += isProbe(r) ? 0 : 1;
                } else {
                    held++;
                }
            }
        }
        Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync(Duration.ofSeconds(30));
        long failed = results.values().stream().filter(Optional::isPresent).count();
        System.out.println("RESULT " + json(Map.of("held", held, "acked", acked, "failed", failed)));
        System.out.flush();
        Runtime.getRuntime().halt(0);  // no close: what it holds stays acquired
        return Map.of();
    }

    /** A share consumer of the group reads until it has ``expected`` records (accepting each) or a minute
     * passed, then a few polls more: the values and delivery counts it got. */
    static Map<String, Object> shareDrain(Properties settings, String topic, int expected) throws Exception {
        List<String> got = new ArrayList<>();
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(shareConsumer(settings, topic + "-share"))) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            int quiet = 0;
            while (System.currentTimeMillis() < deadline && (got.size() < expected || quiet < 5)) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
                quiet = records.isEmpty() ? quiet + 1 : 0;
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    got.add(new String(r.value()) + "@" + r.deliveryCount().orElse((short) -1));
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                consumer.commitSync(Duration.ofSeconds(30));
            }
        }
        java.util.Collections.sort(got);
        return Map.of("got", got);
    }

    static Properties producer(Properties settings) {
        Properties producing = (Properties) settings.clone();
        producing.put("acks", "all");
        producing.put("enable.idempotence", "true");
        producing.put("key.serializer", ByteArraySerializer.class.getName());
        producing.put("value.serializer", ByteArraySerializer.class.getName());
        return producing;
    }

    static Properties consumer(Properties settings, String groupId) {
        Properties consuming = (Properties) settings.clone();
        if (groupId != null) {
            consuming.put("group.id", groupId);
        }
        consuming.put("enable.auto.commit", "false");
        consuming.put("auto.offset.reset", "earliest");
        consuming.put("key.deserializer", ByteArrayDeserializer.class.getName());
        consuming.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return consuming;
    }

    /** A group member: the classic protocol with a client assignor (a class name, "RangeAssignor"...), or
     *  the consumer group protocol (KIP-848) with a server assignor ("uniform", "range"). */
    static Properties consumer(Properties settings, String groupId, String assignor) {
        Properties consuming = consumer(settings, groupId);
        if (assignor.equals("uniform") || assignor.equals("range")) {
            consuming.put("group.protocol", "consumer");
            consuming.put("group.remote.assignor", assignor);
        } else {
            consuming.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer." + assignor);
        }
        consuming.put("metadata.max.age.ms", "1000");
        return consuming;
    }

    static byte[] key(int i) {
        return ("key-" + i).getBytes();
    }

    static byte[] value(int i) {
        return ("value-" + i + "-" + "x".repeat(i % 50)).getBytes();
    }

    static List<Long> range(int count) {
        List<Long> numbers = new ArrayList<>();
        for (long i = 0; i < count; i++) {
            numbers.add(i);
        }
        return numbers;
    }

    /** Maps, lists, strings, numbers and booleans as JSON. */
    static String json(Object value) {
        if (value instanceof Map<?, ?> map) {
            return map.entrySet().stream()
                .map(e -> json(e.getKey().toString()) + ": " + json(e.getValue()))
                .collect(Collectors.joining(", ", "{", "}"));
        }
        if (value instanceof Collection<?> items) {
            return items.stream().map(Scenarios::json).collect(Collectors.joining(", ", "[", "]"));
        }
        if (value instanceof String text) {
            return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        }
        return String.valueOf(value);
    }
}
