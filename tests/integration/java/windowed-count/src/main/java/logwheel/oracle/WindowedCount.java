package logwheel.oracle;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The tumbling-window count by Kafka Streams, the oracle logwheel's windowed counts are compared
 * with: per Kafka key and window of SIZE_MS (closed GRACE_MS after its end), one final count,
 * emitted once the window closes (suppress untilWindowCloses). A result is keyed by the input's
 * key, its value the UTF-8 JSON {"key": k, "start": ms, "end": ms, "value": count} (start
 * inclusive, end exclusive) and its timestamp end - 1: logwheel's window result, field for field.
 *
 * <p>A window closes when its partition's stream time (the largest timestamp seen) reaches end +
 * grace: the last windows close only when a later record arrives. Input values are counted, never
 * read.
 *
 * <p>java -cp ... logwheel.oracle.WindowedCount BOOTSTRAP INPUT OUTPUT APPLICATION_ID SIZE_MS
 * GRACE_MS GUARANTEE STATE_DIR [IDLE_MS]
 *
 * <p>GUARANTEE is exactly_once_v2 or at_least_once. With IDLE_MS the program exits 0 by itself
 * once its committed offsets have reached the input's end (every result of the input as it stands
 * is written and committed) and stayed there for IDLE_MS; without it, it runs until SIGTERM.
 */
public final class WindowedCount {
  private WindowedCount() {}

  /** A window's final count as logwheel writes a window result. */
  static final class Result implements Processor<Windowed<String>, Long, String, String> {
    private ProcessorContext<String, String> context;

    @Override
    public void init(ProcessorContext<String, String> context) {
      this.context = context;
    }

    @Override
    public void process(Record<Windowed<String>, Long> record) {
      String key = record.key().key();
      long start = record.key().window().start();
      long end = record.key().window().end();
      String json =
          "{\"key\": "
              + quote(key)
              + ", \"start\": "
              + start
              + ", \"end\": "
              + end
              + ", \"value\": "
              + record.value()
              + "}";
      context.forward(new Record<>(key, json, end - 1, record.headers()));
    }
  }

  /** `s` as a JSON string. */
  static String quote(String s) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 8 || args.length > 9) {
      System.err.println(
          "usage: WindowedCount BOOTSTRAP INPUT OUTPUT APPLICATION_ID SIZE_MS GRACE_MS"
              + " exactly_once_v2|at_least_once STATE_DIR [IDLE_MS]");
      System.exit(2);
    }
    String bootstrap = args[0], input = args[1], output = args[2], applicationId = args[3];
    Duration size = Duration.ofMillis(Long.parseLong(args[4]));
    Duration grace = Duration.ofMillis(Long.parseLong(args[5]));
    Long idleMs = args.length > 8 ? Long.parseLong(args[8]) : null;

    Properties props = props(bootstrap, applicationId, args[6], args[7]);

    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()))
        .groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()))
        .windowedBy(TimeWindows.ofSizeAndGrace(size, grace))
        .count(
            Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long()))
        .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
        .toStream()
        .process(Result::new)
        .to(output, Produced.with(Serdes.String(), Serdes.String()));

    System.exit(run(builder, props, bootstrap, List.of(input), applicationId, idleMs));
  }

  /**
   * The oracle's settings: reading committed records from the inputs' start, committing every
   * 100 ms (under both guarantees: quick ends).
   */
  static Properties props(
      String bootstrap, String applicationId, String guarantee, String stateDir) {
    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.consumerPrefix("isolation.level"), "read_committed");
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
    return props;
  }

  /**
   * Runs the topology of `builder` with `props`: until SIGTERM when `idleMs` is null, else until
   * the application's committed offsets have reached the end of every topic of `inputs` and
   * stayed there for `idleMs`. Returns the exit code: 1 if the application failed, else 0.
   */
  static int run(
      StreamsBuilder builder,
      Properties props,
      String bootstrap,
      List<String> inputs,
      String applicationId,
      Long idleMs)
      throws Exception {
    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    streams.setUncaughtExceptionHandler(
        e -> {
          e.printStackTrace();
          return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
              .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    streams.setStateListener(
        (now, before) -> {
          if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
            stopped.countDown();
          }
        });
    Thread hook = new Thread(() -> streams.close(Duration.ofSeconds(30)));
    Runtime.getRuntime().addShutdownHook(hook);
    streams.start();
    if (idleMs == null) {
      stopped.await();
    } else {
      try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
        long caughtUpSince = -1;
        while (!stopped.await(200, TimeUnit.MILLISECONDS)) {
          boolean caughtUp = streams.state() == KafkaStreams.State.RUNNING;
          for (String input : inputs) {
            caughtUp = caughtUp && caughtUp(admin, input, applicationId);
          }
          long now = System.currentTimeMillis();
          caughtUpSince = caughtUp ? (caughtUpSince < 0 ? now : caughtUpSince) : -1;
          if (caughtUp && now - caughtUpSince >= idleMs) {
            System.err.println(applicationId + ": input processed to its end, exiting");
            break;
          }
        }
      }
      Runtime.getRuntime().removeShutdownHook(hook);
      streams.close(Duration.ofSeconds(30));
    }
    return streams.state() == KafkaStreams.State.ERROR ? 1 : 0;
  }

  /**
   * Whether the application's committed offsets have reached the end (last stable offset) of
   * every partition of `topic`.
   */
  static boolean caughtUp(Admin admin, String topic, String group) throws Exception {
    Set<TopicPartition> partitions =
        admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().stream()
            .map(p -> new TopicPartition(topic, p.partition()))
            .collect(Collectors.toSet());
    Map<TopicPartition, ListOffsetsResultInfo> ends =
        admin
            .listOffsets(
                partitions.stream().collect(Collectors.toMap(p -> p, p -> OffsetSpec.latest())),
                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED))
            .all()
            .get();
    Map<TopicPartition, OffsetAndMetadata> committed =
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    for (TopicPartition p : partitions) {
      long end = ends.get(p).offset();
      OffsetAndMetadata at = committed.get(p);
      if (end > 0 && (at == null || at.offset() < end)) {
        return false;
      }
    }
    return true;
  }
}
