// Word count on Kafka Streams with exactly-once processing (processing.guarantee=exactly_once_v2), as a user
// writes it: the lines of --input split into lowercase words, a count per word in a RocksDB store (its
// changelog and the repartition topic made by Kafka Streams itself), every new count written to --output
// (key: the word, value: the count as text). Nothing here knows about raftlog: point --bootstrap at its
// Kafka listeners or at Apache Kafka's.
//
//     javac -d classes -cp '.peers/kafka-4.4.0/libs/*' examples/kafka_streams/WordCount.java
//     java -cp "classes:.peers/kafka-4.4.0/libs/*" WordCount --bootstrap 127.0.0.1:9092 \
//         --application-id word-count --state-dir /tmp/word-count --input lines --output word-counts
//
// (the jars come from Maven Central through scripts/kafka/install.sh). With exactly_once_v2, the counts
// read with isolation.level=read_committed go 1, 2, 3, ... for each word, each once, whatever instance is
// killed (kill -9) on the way: the input offsets, the store's changelog and the output of each commit are
// one Kafka transaction. The record cache is off, so every count is written, not only the latest of a
// commit interval.
//
// It prints "STATE <state>" at each state change and, once running, "TRANSACTIONAL_ID <id>" for each of its
// stream threads: Kafka Streams' producer of a thread uses <application.id>-<process id>-<thread index>, its
// default client id being <application.id>-<process id> and the thread's name <client id>-StreamThread-<index>.
// An exception that ends a stream thread is printed ("UNCAUGHT ...") and the thread replaced.
//
// --group-protocol streams (default classic) makes the application a streams group (KIP-1071,
// StreamsGroupHeartbeat): the group's coordinator assigns the tasks, and a member's session timeout is the
// group's (group.streams.session.timeout.ms on the brokers, 45 s by default), not --session-timeout-ms.

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class WordCount {
    public static void main(String[] args) throws InterruptedException {
        Map<String, String> options = options(args);
        Properties settings = new Properties();
        settings.put(StreamsConfig.APPLICATION_ID_CONFIG, options.get("--application-id"));
        settings.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("--bootstrap"));
        settings.put(StreamsConfig.STATE_DIR_CONFIG, options.get("--state-dir"));
        settings.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        settings.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        settings.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        settings.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        settings.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // a killed instance's tasks go to the others after this long without its heartbeats (default 45 s;
        // the classic protocol's: a streams group's is the group's own)
        int sessionMs = Integer.parseInt(options.getOrDefault("--session-timeout-ms", "45000"));
        settings.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), sessionMs);
        settings.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), sessionMs / 3);
        // "classic": the consumer group protocol with Streams' own assignor in the group's leader; "streams":
        // a streams group (KIP-1071), its tasks assigned by the group's coordinator
        settings.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, options.getOrDefault("--group-protocol", "classic"));

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(options.get("--input"))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word)
            .count(Materialized.as("counts"))
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to(options.get("--output"), Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), settings);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            say("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) {
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    say("TRANSACTIONAL_ID " + thread.threadName().replace("-StreamThread-", "-"));
                }
            }
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exception -> {
            say("UNCAUGHT " + exception);
            return StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        done.await();
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static Map<String, String> options(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i], args[i + 1]);
        }
        for (String required : new String[] {"--bootstrap", "--application-id", "--state-dir", "--input", "--output"}) {
            if (!options.containsKey(required)) {
                throw new IllegalArgumentException("missing " + required);
            }
        }
        return options;
    }
}
