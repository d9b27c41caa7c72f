package logwheel.bench;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoinerWithKey;

/**
 * bench/join.py's interval join in Kafka Streams: KStream#join, leftJoin or outerJoin of orders
 * (left) and payments (right) by the record key, a right record at t_r meeting a left one at
 * t_l when t_l - before <= t_r <= t_l + after: {@code JoinWindows.ofTimeDifferenceAndGrace(after,
 * grace).before(before)}, the fixed left/outer emission (KAFKA-10847) in persistent (RocksDB,
 * changelogged) window stores. Each result is written as JSON {"key", "left", "right"} keyed by
 * the key, the sides' JSON values as they are (null for a side that has none), logwheel's shape.
 *
 * <p>processing.guarantee as given, read_committed input, commit.interval.ms 100 (Kafka Streams'
 * default for exactly-once), max.task.idle.ms 10 minutes (as its docs advise for joins: a task
 * whose other input has no record buffered waits for one, so both are read in timestamp order;
 * with the default 0 a task that believes a partition caught up reads the other ahead, moves
 * stream time past the first's windows and drops its records as late: the benchmark's input,
 * committed at once after a pause, lost 80% of the pairs so; with 10 s, still most of them, as
 * a partition's idle deadline runs from the first time it was seen idle, before that pause),
 * all else default but one internal setting:
 * the left/outer join looks for windows to close at most once a second of wall-clock time by
 * default ("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 1000), so the
 * unmatched records of a finite input's last windows would wait for a record that never comes;
 * 0 looks on every record.
 *
 * <p>java -cp ... logwheel.bench.JoinOrders BOOTSTRAP ORDERS PAYMENTS OUTPUT APPLICATION_ID
 * STATE_DIR GUARANTEE HOW BEFORE_MS AFTER_MS GRACE_MS
 */
public final class JoinOrders {
  static String json(String value) {
    return value == null ? "null" : value;
  }

  public static void main(String[] args) throws InterruptedException {
    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[4]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[6]);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
    props.put(StreamsConfig.MAX_TASK_IDLE_MS_CONFIG, 600_000L);
    props.put(StreamsConfig.consumerPrefix("isolation.level"), "read_committed");
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    props.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0L);
    String how = args[7];
    long before = Long.parseLong(args[8]), after = Long.parseLong(args[9]);
    long grace = Long.parseLong(args[10]);

    StreamsBuilder builder = new StreamsBuilder();
    Consumed<String, String> strings = Consumed.with(Serdes.String(), Serdes.String());
    KStream<String, String> orders = builder.stream(args[1], strings);
    KStream<String, String> payments = builder.stream(args[2], strings);
    JoinWindows windows =
        JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(after), Duration.ofMillis(grace))
            .before(Duration.ofMillis(before));
    ValueJoinerWithKey<String, String, String, String> joiner =
        (key, left, right) ->
            "{\"key\": \"" + key + "\", \"left\": " + json(left) + ", \"right\": "
                + json(right) + "}";
    StreamJoined<String, String, String> serdes =
        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());
    KStream<String, String> joined =
        switch (how) {
          case "inner" -> orders.join(payments, joiner, windows, serdes);
          case "left" -> orders.leftJoin(payments, joiner, windows, serdes);
          case "outer" -> orders.outerJoin(payments, joiner, windows, serdes);
          default -> throw new IllegalArgumentException("how: inner, left or outer, not " + how);
        };
    joined.to(args[3], Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close();
                  done.countDown();
                }));
    streams.start();
    done.await();
  }
}
