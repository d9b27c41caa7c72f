// Java's default partition of each key read from stdin, one "COUNT KEY" line each (the key is
// UTF-8, the rest of the line after the first space): what a Java producer or Spark writes for
// that key to a topic of COUNT partitions.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.Utils;

public class PartitionOf {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            int space = line.indexOf(' ');
            int partitions = Integer.parseInt(line.substring(0, space));
            byte[] bytes = line.substring(space + 1).getBytes(StandardCharsets.UTF_8);
            System.out.println(Utils.toPositive(Utils.murmur2(bytes)) % partitions);
        }
    }
}
