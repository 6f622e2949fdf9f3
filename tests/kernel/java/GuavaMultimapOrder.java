import com.google.common.collect.ArrayListMultimap;
import com.google.common.collect.Multimap;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The plan multimap of Pulsar's modular shedding strategies on Guava's own ArrayListMultimap, for histories read
 * from stdin, one run a line: {@code K} clears the multimap kept since the process started (the
 * {@code selectedBundlesCache} field of OverloadShedder / ThresholdShedder / UniformLoadShedder, cleared by each
 * findBundlesForUnloading), {@code N} starts a fresh {@code ArrayListMultimap.create()} (AvgShedder's local), then
 * TAB-separated puts {@code KEY:VALUE} (UTF-16 code units, four hex digits each); {@code R} alone replaces the
 * kept multimap by a new one (a new strategy instance) and answers an empty line.
 *
 * <p>Output line: {@code asMap().forEach} as ModularLoadManagerImpl.doLoadShedding walks it: per key
 * {@code KEY=VALUE,VALUE}, keys separated by a space.
 */
public final class GuavaMultimapOrder {
    private static String decode(String hex) {
        char[] c = new char[hex.length() / 4];
        for (int i = 0; i < c.length; i++) {
            c[i] = (char) Integer.parseInt(hex.substring(4 * i, 4 * i + 4), 16);
        }
        return new String(c);
    }

    private static String encode(String key) {
        StringBuilder b = new StringBuilder(key.length() * 4);
        for (int i = 0; i < key.length(); i++) {
            b.append(String.format("%04x", (int) key.charAt(i)));
        }
        return b.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.US_ASCII);
        Multimap<String, String> kept = ArrayListMultimap.create();
        String line;
        while ((line = in.readLine()) != null) {
            String[] fields = line.split("\t", -1);
            Multimap<String, String> m;
            if (fields[0].equals("R")) {  // a new strategy instance: a new field
                kept = ArrayListMultimap.create();
                out.println();
                continue;
            }
            if (fields[0].equals("N")) {
                m = ArrayListMultimap.create();
            } else {
                kept.clear();
                m = kept;
            }
            for (int i = 1; i < fields.length; i++) {
                String[] kv = fields[i].split(":", -1);
                m.put(decode(kv[0]), decode(kv[1]));
            }
            List<String> walked = new ArrayList<>();
            m.asMap().forEach((key, values) -> {
                List<String> vs = new ArrayList<>();
                values.forEach(v -> vs.add(encode(v)));
                walked.add(encode(key) + "=" + String.join(",", vs));
            });
            out.println(String.join(" ", walked));
        }
    }
}
