import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * ModularLoadManagerImpl's brokerCandidateCache as selectBroker and shouldNamespacePoliciesUnload use it, on the
 * JDK's own HashSets, for histories read from stdin, one history a line: the three sets (the candidate cache and
 * LoadManagerShared's thread-local localPrimariesCache / localSecondaryCache) live through the whole line.
 *
 * <p>Line: calls separated by TAB. {@code S;PRIM;SEC;ADD;FIT;KEPT;RESTORED;RECHECK}: selectBroker's candidate set
 * at its strategy call (clear, applyNamespacePolicies, filterBrokersWithLargeTopicCount's copy of the FIT keys,
 * removeIf not kept, the restore, the overload re-check's add); {@code P;PRIM;SEC;ADD}:
 * shouldNamespacePoliciesUnload's fill. PRIM, SEC, FIT, KEPT: comma-separated keys (UTF-16 code units, four hex digits each); ADD, RESTORED, RECHECK: 0 or 1.
 * Output line: per S call the candidate set's keys in iteration order (space separated), calls separated by "|".
 */
public final class CandidateCacheOrder {
    private final Set<String> candidates = new HashSet<>();
    private final Set<String> primaries = new HashSet<>();
    private final Set<String> secondaries = new HashSet<>();

    private static List<String> keys(String field) {
        List<String> out = new ArrayList<>();
        for (String hex : field.split(",", -1)) {
            if (hex.isEmpty()) {
                continue;
            }
            char[] c = new char[hex.length() / 4];
            for (int i = 0; i < c.length; i++) {
                c[i] = (char) Integer.parseInt(hex.substring(4 * i, 4 * i + 4), 16);
            }
            out.add(new String(c));
        }
        return out;
    }

    private static String encode(String key) {
        StringBuilder b = new StringBuilder(key.length() * 4);
        for (int i = 0; i < key.length(); i++) {
            b.append(String.format("%04x", (int) key.charAt(i)));
        }
        return b.toString();
    }

    /** LoadManagerShared.applyNamespacePolicies: the thread's caches cleared and filled, then added. */
    private void apply(List<String> prim, List<String> sec, boolean add) {
        primaries.clear();
        secondaries.clear();
        primaries.addAll(prim);
        secondaries.addAll(sec);
        candidates.addAll(primaries);
        if (add) {
            candidates.addAll(secondaries);
        }
    }

    private String call(String spec) {
        String[] f = spec.split(";", -1);
        List<String> prim = keys(f[1]);
        List<String> sec = keys(f[2]);
        boolean add = f[3].equals("1");
        candidates.clear();
        apply(prim, sec, add);
        if (f[0].equals("P")) {
            return null;
        }
        Set<String> fit = new HashSet<>(keys(f[4]));
        Set<String> filtered = candidates.stream().filter(fit::contains).collect(Collectors.toSet());
        if (!filtered.isEmpty()) {  // filterBrokersWithLargeTopicCount
            candidates.clear();
            candidates.addAll(filtered);
        }
        Set<String> kept = new HashSet<>(keys(f[5]));
        candidates.removeIf(k -> !kept.contains(k));
        if (f[6].equals("1")) {
            apply(prim, sec, add);
        }
        if (f[7].equals("1")) {
            apply(prim, sec, add);
        }
        StringBuilder out = new StringBuilder();
        for (String k : candidates) {
            if (out.length() > 0) {
                out.append(' ');
            }
            out.append(encode(k));
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.US_ASCII);
        String line;
        while ((line = in.readLine()) != null) {
            CandidateCacheOrder leader = new CandidateCacheOrder();
            List<String> orders = new ArrayList<>();
            for (String spec : line.split("\t", -1)) {
                String order = leader.call(spec);
                if (order != null) {
                    orders.add(order);
                }
            }
            out.println(String.join("|", orders));
            out.flush();
        }
    }
}
