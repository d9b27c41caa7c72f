package logwheel.bench;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * CountWords in Kafka Streams: per word (the record key) a count in a persistent (RocksDB,
 * changelogged) store, one JSON {"word", "count"} output per input record, keyed by the word.
 * Defaults as Kafka Streams' docs give them but processing.guarantee (exactly_once_v2 or
 * at_least_once) and, for at_least_once, isolation.level read_committed so the benchmark's
 * gated input stays invisible until committed.
 *
 * <p>java -cp ... logwheel.bench.CountWords BOOTSTRAP INPUT OUTPUT APPLICATION_ID STATE_DIR
 * GUARANTEE
 */
public final class CountWords {
  static final String STORE = "counts";

  static final class Count implements FixedKeyProcessor<String, String, String> {
    private FixedKeyProcessorContext<String, String> context;
    private KeyValueStore<String, Long> store;

    @Override
    public void init(FixedKeyProcessorContext<String, String> context) {
      this.context = context;
      this.store = context.getStateStore(STORE);
    }

    @Override
    public void process(FixedKeyRecord<String, String> record) {
      Long before = store.get(record.key());
      long n = before == null ? 1 : before + 1;
      store.put(record.key(), n);
      String json = "{\"word\": \"" + record.key() + "\", \"count\": " + n + "}";
      context.forward(record.withValue(json));
    }
  }

  public static void main(String[] args) throws InterruptedException {
    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[5]);
    props.put(StreamsConfig.consumerPrefix("isolation.level"), "read_committed");
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

    StreamsBuilder builder = new StreamsBuilder();
    builder.addStateStore(
        Stores.keyValueStoreBuilder(
            Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long()));
    builder.stream(args[1], Consumed.with(Serdes.String(), Serdes.String()))
        .processValues(Count::new, STORE)
        .to(args[2], Produced.with(Serdes.String(), Serdes.String()));

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
