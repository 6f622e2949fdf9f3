import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Prints the iteration order of the JDK's own maps for histories read from stdin, one history a line.
 *
 * <p>Line: {@code KIND<TAB>CAPACITY<TAB>OP<TAB>OP...}; KIND is HashMap, HashSet, LinkedHashMap or
 * ConcurrentHashMap; CAPACITY is the constructor's initial capacity or -1 for the no-argument constructor;
 * OP is {@code +KEY} (put / add), {@code -KEY} (remove), {@code xKEY} (removeIf of that key: an iterator's remove),
 * {@code ?KEY} (computeIfAbsent), {@code c} (clear)
 * or {@code =kKEY,kKEY,...} (replace the map by a copy-constructed one: new HashMap(map) / new HashSet(set) /
 * new ConcurrentHashMap(map) of the current map, after the listed extra keys are added to the source).
 * KEY is the key's UTF-16 code units, four hex digits each. Output line: the keys in iteration order, each "k" + hex,
 * space separated.
 */
public final class JavaHashOrder {
    private static String decode(String hex) {
        char[] out = new char[hex.length() / 4];
        for (int i = 0; i < out.length; i++) {
            out[i] = (char) Integer.parseInt(hex.substring(4 * i, 4 * i + 4), 16);
        }
        return new String(out);
    }

    private static String encode(String key) {
        StringBuilder b = new StringBuilder(key.length() * 4 + 1).append('k');
        for (int i = 0; i < key.length(); i++) {
            b.append(String.format("%04x", (int) key.charAt(i)));
        }
        return b.toString();
    }

    private static Map<String, Boolean> newMap(String kind, int cap) {
        switch (kind) {
            case "HashMap":
            case "HashSet":
                return cap < 0 ? new HashMap<>() : new HashMap<>(cap);
            case "LinkedHashMap":
                return cap < 0 ? new LinkedHashMap<>() : new LinkedHashMap<>(cap);
            case "ConcurrentHashMap":
                return cap < 0 ? new ConcurrentHashMap<>() : new ConcurrentHashMap<>(cap);
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
    }

    private static String run(String line) {
        String[] parts = line.split("\t", -1);
        String kind = parts[0];
        int cap = Integer.parseInt(parts[1]);
        Map<String, Boolean> map = null;
        Set<String> set = null;
        if (kind.equals("HashSet")) {
            set = cap < 0 ? new HashSet<>() : new HashSet<>(cap);
        } else {
            map = newMap(kind, cap);
        }
        for (int i = 2; i < parts.length; i++) {
            String op = parts[i];
            if (op.isEmpty()) {
                continue;
            }
            char c = op.charAt(0);
            String key = c == 'c' || c == '=' ? null : decode(op.substring(1));
            if (c == '+') {
                if (set != null) set.add(key); else map.put(key, Boolean.TRUE);
            } else if (c == '-') {
                if (set != null) set.remove(key); else map.remove(key);
            } else if (c == 'x') {
                // an iterator's remove(): removeNode(..., movable=false)
                if (set != null) set.removeIf(key::equals); else map.keySet().removeIf(key::equals);
            } else if (c == '?') {
                if (set != null) throw new IllegalArgumentException("computeIfAbsent on a set");
                map.computeIfAbsent(key, k -> Boolean.TRUE);
            } else if (c == 'c') {
                if (set != null) set.clear(); else map.clear();
            } else if (c == '=') {
                List<String> extra = new ArrayList<>();
                for (String h : op.substring(1).split(",", -1)) {
                    if (!h.isEmpty()) extra.add(decode(h.substring(1)));
                }
                if (set != null) {
                    Collection<String> source = new ArrayList<>(set);
                    source.addAll(extra);
                    set = new HashSet<>(source);
                } else {
                    Map<String, Boolean> source = new LinkedHashMap<>(map);
                    for (String e : extra) source.put(e, Boolean.TRUE);
                    if (kind.equals("HashMap")) map = new HashMap<>(source);
                    else if (kind.equals("LinkedHashMap")) map = new LinkedHashMap<>(source);
                    else map = new ConcurrentHashMap<>(source);
                }
            } else {
                throw new IllegalArgumentException("unknown op " + op);
            }
        }
        StringBuilder out = new StringBuilder();
        for (String k : set != null ? set : map.keySet()) {
            if (out.length() > 0) out.append(' ');
            out.append(encode(k));
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.US_ASCII);
        String line;
        while ((line = in.readLine()) != null) {
            try {
                out.println(run(line));
            } catch (RuntimeException e) {
                out.println("!" + e);
            }
            out.flush();
        }
    }
}
