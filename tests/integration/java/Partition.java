// Java's default partition of each key read from stdin (one UTF-8 key per line), for a topic
// with args[0] partitions: what a Java producer or Spark writes with the same keys.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.Utils;

public class Partition {
    public static void main(String[] args) throws Exception {
        int partitions = Integer.parseInt(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String key; (key = in.readLine()) != null; ) {
            byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
            System.out.println(Utils.toPositive(Utils.murmur2(bytes)) % partitions);
        }
    }
}
