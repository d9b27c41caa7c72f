package logwheel.oracle;

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoinerWithKey;

/**
 * Kafka Streams' stream-stream join, the oracle logwheel's `pipeline.join` is compared with: the
 * records of LEFT and RIGHT (co-partitioned, joined on their Kafka keys) whose times satisfy
 * t_l - BEFORE_MS <= t_r <= t_l + AFTER_MS (JoinWindows.ofTimeDifferenceAndGrace, then before and
 * after), joined by KStream#join, #leftJoin or #outerJoin (HOW: inner, left, outer; one join per
 * HOW=OUTPUT of the comma-separated JOINS, in one application) with the emission fixed by
 * KAFKA-10847 (an unmatched record once its window closed, never after a match).
 * A result is keyed by the join key, its value the UTF-8 JSON {"key": k, "left": lv, "right": rv}
 * with the input values (JSON text) in place, null for a missing side: logwheel's join result.
 *
 * <p>A window closes when its task's stream time (the largest timestamp seen on either input)
 * passes the record's time + AFTER_MS (left) or BEFORE_MS (right) + GRACE_MS: the last unmatched
 * records come out only when a later record arrives. The outer-join store's wall-clock emit
 * interval is set to 0, so they come out at the record that closes them.
 *
 * <p>java -cp ... logwheel.oracle.StreamJoin BOOTSTRAP LEFT RIGHT HOW=OUTPUT[,HOW=OUTPUT...]
 * APPLICATION_ID BEFORE_MS AFTER_MS GRACE_MS GUARANTEE STATE_DIR IDLE_MS
 */
public final class StreamJoin {
  private StreamJoin() {}

  /** Kafka Streams' internal setting: how often (wall clock) unmatched records are looked for. */
  static final String EMIT_INTERVAL = "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__";

  public static void main(String[] args) throws Exception {
    if (args.length != 11) {
      System.err.println(
          "usage: StreamJoin BOOTSTRAP LEFT RIGHT inner|left|outer=OUTPUT[,...] APPLICATION_ID"
              + " BEFORE_MS AFTER_MS GRACE_MS exactly_once_v2|at_least_once STATE_DIR IDLE_MS");
      System.exit(2);
    }
    String bootstrap = args[0], left = args[1], right = args[2], joins = args[3];
    String applicationId = args[4];
    Duration before = Duration.ofMillis(Long.parseLong(args[5]));
    Duration after = Duration.ofMillis(Long.parseLong(args[6]));
    Duration grace = Duration.ofMillis(Long.parseLong(args[7]));

    Properties props = WindowedCount.props(bootstrap, applicationId, args[8], args[9]);
    props.put(EMIT_INTERVAL, 0L);

    JoinWindows windows =
        JoinWindows.ofTimeDifferenceAndGrace(Duration.ZERO, grace).before(before).after(after);
    ValueJoinerWithKey<String, String, String, String> joiner =
        (key, lv, rv) ->
            "{\"key\": "
                + WindowedCount.quote(key)
                + ", \"left\": "
                + (lv == null ? "null" : lv)
                + ", \"right\": "
                + (rv == null ? "null" : rv)
                + "}";
    StreamJoined<String, String, String> serdes =
        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());

    StreamsBuilder builder = new StreamsBuilder();
    Consumed<String, String> strings = Consumed.with(Serdes.String(), Serdes.String());
    KStream<String, String> lefts = builder.stream(left, strings);
    KStream<String, String> rights = builder.stream(right, strings);
    for (String join : joins.split(",")) {
      String how = join.substring(0, join.indexOf('=')), output = join.substring(how.length() + 1);
      KStream<String, String> joined =
          switch (how) {
            case "inner" -> lefts.join(rights, joiner, windows, serdes.withName(how));
            case "left" -> lefts.leftJoin(rights, joiner, windows, serdes.withName(how));
            case "outer" -> lefts.outerJoin(rights, joiner, windows, serdes.withName(how));
            default -> throw new IllegalArgumentException("HOW is inner, left or outer: " + how);
          };
      joined.to(output, Produced.with(Serdes.String(), Serdes.String()));
    }
    long idleMs = Long.parseLong(args[10]);
    System.exit(
        WindowedCount.run(builder, props, bootstrap, List.of(left, right), applicationId, idleMs));
  }
}
