package lbreplay.oracle;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.common.collect.Multimap;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.LoadData;
import org.apache.pulsar.broker.loadbalance.LoadSheddingStrategy;
import org.apache.pulsar.broker.loadbalance.ModularLoadManagerStrategy;
import org.apache.pulsar.broker.loadbalance.impl.BundleSplitterTask;
import org.apache.pulsar.broker.namespace.NamespaceService;
import org.apache.pulsar.common.naming.NamespaceName;
import org.apache.pulsar.common.util.FieldParser;
import org.apache.pulsar.common.util.ObjectMapperFactory;
import org.apache.pulsar.policies.data.loadbalancer.LocalBrokerData;
// BrokerData, BundleData, TimeAverageBrokerData: org.apache.pulsar.broker up to 2.10, then
// org.apache.pulsar.policies.data.loadbalancer (on-demand imports: each jar has them in one of the two)
import org.apache.pulsar.broker.*;
import org.apache.pulsar.policies.data.loadbalancer.*;
import org.mockito.Mockito;

/**
 * Differential oracle: reads lbreplay {@code decide} requests as JSON lines on stdin and answers each with one JSON
 * line in decide's response shape, computed by Pulsar's real classes of the jar on the classpath.
 *
 * <p>A line is a decide request (DESIGN.md section 5) plus {@code "sequence": "<id>"}: strategy instances live per
 * sequence id (and class), so EWMA histories and hit counters evolve over successive lines exactly as one Pulsar
 * strategy instance does over successive leader ticks. {@code "sequence": null} means a fresh instance.
 *
 * <p>Each line is one leader refresh ({@code ModularLoadManagerImpl.updateAll} -> {@code cleanupDeadBrokersData}
 * calls {@code onActiveBrokersChange(activeBrokers)} on the shedding and placement strategies) followed by the
 * actions:
 * <ul>
 *   <li>{@code "shed"}: {@code doLoadShedding}'s prune of {@code recentlyUnloadedBundles} by
 *       {@code loadBalancerSheddingGracePeriodMinutes} (against {@code nowMillis}, not the wall clock), then
 *       {@code LoadSheddingStrategy.findBundlesForUnloading(loadData, conf)}: the strategy's plan (no destination:
 *       the load manager's destination pick needs a running broker).</li>
 *   <li>{@code {"assign": [bundles]}}: {@code ModularLoadManagerStrategy.selectBroker(allBrokers, bundleData,
 *       loadData, conf)} per bundle (the strategy alone, candidates = every broker of the snapshot; no
 *       preallocation between the bundles). Where the strategy picks at random ({@code ThreadLocalRandom}) among
 *       equally good brokers, {@code oracle.tieSets} lists that set, read from the strategy's own
 *       {@code bestBrokers} list.</li>
 *   <li>{@code {"selectBrokerForAssignment": [bundles]}}: the whole placement pipeline of
 *       {@code ModularLoadManagerImpl.selectBrokerForAssignment} (namespace isolation policies, max-topics filter,
 *       anti-affinity groups and failure domains, even spread, broker filters, overload re-check, preallocation),
 *       see {@link Pipeline}.</li>
 *   <li>{@code {"splitBoundary": {...}}}: one split algorithm's boundaries, see {@link SplitAlgorithms}.</li>
 *   <li>{@code "split"}: {@code BundleSplitterTask.findBundlesToSplit(loadData, pulsar)} with a mocked
 *       {@code PulsarService} whose {@code NamespaceService.getBundleCount} answers from
 *       {@code namespaces.<ns>.boundaries}.</li>
 * </ul>
 * {@code oracle} carries the strategies' internal figures read by reflection (EWMA maps, hit counters, scores).
 */
public final class Oracle {
    /** Pulsar's own Jackson configuration (ObjectMapperFactory), as the load manager reads its reports. */
    private static final ObjectMapper MAPPER = ObjectMapperFactory.create()
            .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    private static final Map<String, Instances> SEQUENCES = new HashMap<>();

    /** Strategy instances of one sequence. */
    static final class Instances {
        String shedClass;
        String placeClass;
        LoadSheddingStrategy shedder;
        ModularLoadManagerStrategy placement;
        BundleSplitterTask splitter;
        /** The extensible TransferShedder (typed in Extensible.java, compiled for lines that have it). */
        Object transfer;
        /** Each broker's DefaultNamespaceBundleSplitStrategyImpl (typed in ExtensibleSplit.java). */
        final Map<String, Object> extensibleSplit = new TreeMap<>();
        /** The leader's ModularLoadManagerImpl.brokerCandidateCache and its placing thread's LoadManagerShared
         * localPrimariesCache / localSecondaryCache: HashSets kept across the sequence's requests (clear() keeps
         * their tables), as one leader placing on one thread (kernel/broker_candidate_cache.py). */
        final Set<String> candidateCache = new java.util.HashSet<>();
        final Set<String> primariesCache = new java.util.HashSet<>();
        final Set<String> secondaryCache = new java.util.HashSet<>();
    }

    private Oracle() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode resp;
            try {
                resp = handle((ObjectNode) MAPPER.readTree(line));
            } catch (Throwable t) {
                if (System.getenv("ORACLE_TRACE") != null) {
                    t.printStackTrace();
                }
                if (t instanceof java.lang.reflect.InvocationTargetException ite && ite.getCause() != null) {
                    t = ite.getCause();
                }
                resp = MAPPER.createObjectNode();
                resp.put("error", t.getClass().getName() + ": " + t.getMessage());
            }
            out.println(MAPPER.writeValueAsString(resp));
            out.flush();
        }
    }

    static ObjectMapper mapper() {
        return MAPPER;
    }

    static ObjectNode handle(ObjectNode req) throws Exception {
        ObjectNode resp = MAPPER.createObjectNode();
        resp.putArray("unload");
        resp.putArray("split");
        resp.putArray("assign");
        resp.putNull("skip");
        resp.putObject("stats");
        ObjectNode oracle = resp.putObject("oracle");
        if (req.has("pulsarVersionCheck")) {
            oracle.put("implementationVersion",
                    String.valueOf(PulsarService.class.getPackage().getImplementationVersion()));
            return resp;
        }
        if (req.has("configDefaults")) {
            configDefaults(oracle.putObject("configDefaults"));
            return resp;
        }
        ServiceConfiguration conf = config(req.path("config"));
        JsonNode seqNode = req.get("sequence");
        String seq = seqNode == null || seqNode.isNull() ? null : seqNode.asText();
        Instances inst = seq == null ? new Instances() : SEQUENCES.computeIfAbsent(seq, k -> new Instances());
        if (conf.getLoadManagerClassName().endsWith("ExtensibleLoadManagerImpl")
                || conf.getLoadBalancerLoadSheddingStrategy().endsWith("TransferShedder")) {
            // Extensible*.java are compiled only for lines with the extensible load manager (3.0+): "split" is
            // the split cycle (ExtensibleSplit), any other request the shedding (Extensible)
            boolean split = false;
            for (JsonNode a : req.path("actions")) {
                split |= a.isTextual() && a.asText().equals("split");
            }
            Class.forName(split ? "lbreplay.oracle.ExtensibleSplit" : "lbreplay.oracle.Extensible")
                    .getDeclaredMethod(split ? "split" : "shed", Instances.class, ServiceConfiguration.class,
                            JsonNode.class, ObjectNode.class)
                    .invoke(null, inst, conf, req, resp);
            return resp;
        }
        LoadData loadData = loadData(req.path("loadData"));
        instantiate(inst, conf);
        long now = req.path("nowMillis").asLong(System.currentTimeMillis());
        // ModularLoadManagerImpl.updateAll -> cleanupDeadBrokersData: onActiveBrokersChange on both strategies.
        Set<String> active = new TreeSet<>(loadData.getBrokerData().keySet());
        onActiveBrokersChange(inst.shedder, active);
        if (inst.placement != inst.shedder) {
            onActiveBrokersChange(inst.placement, active);
        }
        JsonNode actions = req.has("actions") && !req.get("actions").isNull() ? req.get("actions")
                : MAPPER.createArrayNode().add("shed");
        for (JsonNode a : actions) {
            if (a.isTextual() && a.asText().equals("shed")) {
                shed(inst, conf, loadData, now, resp);
            } else if (a.isTextual() && a.asText().equals("doLoadShedding")) {
                Pipeline.doLoadShedding(inst, conf, loadData, now, req, resp);
            } else if (a.isTextual() && a.asText().equals("split")) {
                split(inst, conf, loadData, req.path("namespaces"), resp);
            } else if (a.isObject() && a.has("splitBoundary")) {
                SplitAlgorithms.boundary(conf, a.get("splitBoundary"), resp);
            } else if (a.isObject() && a.has("selectBrokerForAssignment")) {
                Pipeline.assign(inst, conf, loadData, req, a.get("selectBrokerForAssignment"), resp);
            } else if (a.isObject() && a.has("assign")) {
                for (JsonNode b : a.get("assign")) {
                    assign(inst, conf, loadData, b.asText(), resp);
                }
            } else {
                throw new IllegalArgumentException("unsupported action " + a);
            }
        }
        figures(inst, oracle);
        return resp;
    }

    // ------------------------------------------------------------------------------------------------------------
    static ServiceConfiguration config(JsonNode c) {
        ServiceConfiguration conf = new ServiceConfiguration();
        Map<String, String> props = new HashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = c.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            JsonNode v = e.getValue();
            if (v.isNull()) {
                continue;
            }
            if (v.isArray()) {
                List<String> parts = new ArrayList<>();
                v.forEach(x -> parts.add(x.asText()));
                props.put(e.getKey(), String.join(",", parts));
            } else {
                props.put(e.getKey(), v.asText());
            }
        }
        FieldParser.update(props, conf);
        return conf;
    }

    /** The defaults of this jar's ServiceConfiguration: every field of a fresh instance (keys of broker.conf). */
    static void configDefaults(ObjectNode out) throws Exception {
        ServiceConfiguration conf = new ServiceConfiguration();
        for (Field f : ServiceConfiguration.class.getDeclaredFields()) {
            if (java.lang.reflect.Modifier.isStatic(f.getModifiers())) {
                continue;
            }
            f.setAccessible(true);
            Object v = f.get(conf);
            if (v instanceof Optional<?> opt) {
                v = opt.orElse(null);
            }
            if (v == null) {
                out.putNull(f.getName());
            } else if (v instanceof Number || v instanceof Boolean || v instanceof String
                    || v instanceof Collection<?>) {
                out.set(f.getName(), MAPPER.valueToTree(v));
            } else {
                out.put(f.getName(), String.valueOf(v));
            }
        }
    }

    static LoadData loadData(JsonNode ld) throws Exception {
        // Pulsar's own LoadData (brokerData, bundleData: ConcurrentHashMaps, getBundleDataForLoadShedding: the jar's
        // HashMap), brokers and bundles put in sorted key order (the insertion history lbreplay's kernel mirrors with
        // kernel/load_data_order.py): where a result depends on these maps' iteration order, it is the JVM's.
        LoadData loadData = new LoadData();
        for (Map.Entry<String, JsonNode> e : sortedFields(ld.path("brokers")).entrySet()) {
            JsonNode b = e.getValue();
            // Jackson's own maps, as the leader reads a broker's report from the metadata store: lastStats a
            // LinkedHashMap in the report's key order (the split check walks it), bundles a HashSet
            LocalBrokerData local = MAPPER.treeToValue(b.path("localData"), LocalBrokerData.class);
            BrokerData data = new BrokerData(local);
            if (b.hasNonNull("timeAverageData")) {
                data.setTimeAverageData(MAPPER.treeToValue(b.get("timeAverageData"), TimeAverageBrokerData.class));
            }
            Iterator<Map.Entry<String, JsonNode>> pre = b.path("preallocatedBundleData").fields();
            while (pre.hasNext()) {
                Map.Entry<String, JsonNode> p = pre.next();
                data.getPreallocatedBundleData().put(p.getKey(), MAPPER.treeToValue(p.getValue(), BundleData.class));
            }
            loadData.getBrokerData().put(e.getKey(), data);
        }
        for (Map.Entry<String, JsonNode> e : sortedFields(ld.path("bundleData")).entrySet()) {
            loadData.getBundleData().put(e.getKey(), MAPPER.treeToValue(e.getValue(), BundleData.class));
        }
        Iterator<Map.Entry<String, JsonNode>> ru = ld.path("recentlyUnloadedBundles").fields();
        while (ru.hasNext()) {
            Map.Entry<String, JsonNode> e = ru.next();
            loadData.getRecentlyUnloadedBundles().put(e.getKey(), e.getValue().asLong());
        }
        return loadData;
    }

    /** The fields of a JSON object in sorted name order. */
    static Map<String, JsonNode> sortedFields(JsonNode object) {
        Map<String, JsonNode> out = new TreeMap<>();
        object.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue()));
        return out;
    }

    /** ModularLoadManagerImpl.initialize: a placement strategy that is also a shedding strategy (AvgShedder) is
     * the same instance for both. An instance is kept while the configured class stays the same. */
    static void instantiate(Instances inst, ServiceConfiguration conf) throws Exception {
        // loadBalancerLoadPlacementStrategy exists since 2.11 (#16281); 2.10 always places with
        // LeastLongTermMessageRate. ModularLoadManagerStrategy.create(conf) is how ModularLoadManagerImpl makes it.
        String place;
        try {
            place = String.valueOf(ServiceConfiguration.class.getMethod("getLoadBalancerLoadPlacementStrategy")
                    .invoke(conf));
        } catch (NoSuchMethodException e) {
            place = "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate";
        }
        String shed = conf.getLoadBalancerLoadSheddingStrategy();
        if (!place.equals(inst.placeClass)) {
            inst.placement = ModularLoadManagerStrategy.create(conf);
            inst.placeClass = place;
            inst.shedClass = null;
        }
        if (inst.placement instanceof LoadSheddingStrategy) {
            inst.shedder = (LoadSheddingStrategy) inst.placement;
            inst.shedClass = place;
        } else if (!shed.equals(inst.shedClass)) {
            inst.shedder = (LoadSheddingStrategy) Class.forName(shed).getDeclaredConstructor().newInstance();
            inst.shedClass = shed;
        }
        // AvgShedder sorts the entries of its brokerScoreMap (a HashMap): ties (and, with 4.0.x's `(int) (a - b)`
        // comparator, scores less than 1 apart) keep that map's order -- the jar's own HashMap, kept as it is (the
        // kernel mirrors its iteration order: kernel/java_hash_map.py).
        if (inst.splitter == null) {
            inst.splitter = new BundleSplitterTask();
        }
    }

    // ------------------------------------------------------------------------------------------------------------
    static void shed(Instances inst, ServiceConfiguration conf, LoadData loadData, long now, ObjectNode resp) {
        // ModularLoadManagerImpl.doLoadShedding: "Only 1 broker available: no load shedding will be performed"
        if (loadData.getBrokerData().size() <= 1) {
            resp.put("skip", "NoBrokers");
            return;
        }
        long timeout = now - conf.getLoadBalancerSheddingGracePeriodMinutes() * 60_000L;
        Map<String, Long> ru = loadData.getRecentlyUnloadedBundles();
        ru.keySet().removeIf(e -> ru.get(e) < timeout);
        Multimap<String, String> plan;
        try {
            plan = inst.shedder.findBundlesForUnloading(loadData, conf);
        } catch (IllegalArgumentException e) {
            // TimSort on a comparator that is not a total order (4.0.x AvgShedder): doLoadShedding fails this tick
            if (String.valueOf(e.getMessage()).contains("general contract")) {
                resp.put("skip", "ComparisonContractViolation");
                return;
            }
            throw e;
        }
        ArrayNode unload = (ArrayNode) resp.get("unload");
        // ModularLoadManagerImpl.doLoadShedding: bundlesToUnload.asMap().forEach -- the jar's own multimap (an
        // ArrayListMultimap: brokers in its backing HashMap's order, bundles as put; kernel/guava_multimap.py)
        plan.asMap().forEach((broker, bundles) -> {
            for (String bundle : bundles) {
                ObjectNode u = unload.addObject();
                u.put("broker", broker);
                u.put("bundle", bundle);
                u.putNull("destination");
            }
        });
    }

    static void assign(Instances inst, ServiceConfiguration conf, LoadData loadData, String bundle, ObjectNode resp)
            throws Exception {
        // Pulsar passes brokerCandidateCache, a HashSet filled in the available brokers' order: a fresh one here,
        // filled in brokerData's order (the kernel mirrors its iteration: kernel/load_data_order.py).
        Set<String> candidates = new java.util.HashSet<>();
        candidates.addAll(loadData.getBrokerData().keySet());
        BundleData data = loadData.getBundleData().get(bundle);
        if (data == null) {
            data = new BundleData(10, 1000);
        }
        Optional<String> pick = inst.placement.selectBroker(candidates, data, loadData, conf);
        ObjectNode a = ((ArrayNode) resp.get("assign")).addObject();
        a.put("bundle", bundle);
        if (pick.isPresent()) {
            a.put("broker", pick.get());
        } else {
            a.putNull("broker");
        }
        Object best = readField(inst.placement, "bestBrokers");
        ArrayNode ties = ((ObjectNode) resp.get("oracle")).withArray("tieSets");
        ArrayNode set = ties.addArray();
        if (best instanceof Collection<?> c && !(inst.placement.getClass().getSimpleName()
                .equals("RoundRobinBrokerSelector"))) {
            new TreeSet<>(c.stream().map(String::valueOf).toList()).forEach(set::add);
        }
    }

    private static ServiceConfiguration splitConf;
    private static JsonNode splitNamespaces;
    private static PulsarService splitPulsar;

    /** One PulsarService for the split check: its configuration and a mocked NamespaceService whose getBundleCount
     * answers from the current line's {@code namespaces}. */
    static synchronized PulsarService splitPulsar() throws Exception {
        if (splitPulsar == null) {
            NamespaceService ns = Mockito.mock(NamespaceService.class);
            Mockito.when(ns.getBundleCount(Mockito.any(NamespaceName.class))).thenAnswer(inv -> {
                NamespaceName n = inv.getArgument(0);
                JsonNode b = splitNamespaces.path(n.toString()).path("boundaries");
                return b.isArray() ? b.size() - 1 : splitConf.getDefaultNumberOfNamespaceBundles();
            });
            splitPulsar = pulsarService(ns);
        }
        writeField(splitPulsar, "config", splitConf);
        return splitPulsar;
    }

    /**
     * A PulsarService whose {@code getNamespaceService()} is {@code ns} and whose {@code getConfiguration()} is the
     * {@code config} field set by the caller: an instance made without running a constructor (Objenesis, as
     * Mockito makes its mocks), its two fields set by reflection. Not a Mockito mock: Mockito instruments every
     * method of the class, and on 3.3.6 some signatures name classes of pulsar-opentelemetry, a jar Maven Central
     * does not serve for that release.
     */
    static PulsarService pulsarService(NamespaceService ns) throws Exception {
        PulsarService pulsar = new org.objenesis.ObjenesisStd().newInstance(PulsarService.class);
        writeField(pulsar, "nsService", ns);
        return pulsar;
    }

    static void split(Instances inst, ServiceConfiguration conf, LoadData loadData, JsonNode namespaces,
                      ObjectNode resp) throws Exception {
        splitConf = conf;
        splitNamespaces = namespaces;
        PulsarService pulsar = splitPulsar();
        // 3.0+: Map<bundle, broker>; up to 2.11: Set<bundle> (no broker: answered as null)
        Object chosen = BundleSplitterTask.class.getMethod("findBundlesToSplit", LoadData.class, PulsarService.class)
                .invoke(inst.splitter, loadData, pulsar);
        ArrayNode split = (ArrayNode) resp.get("split");
        if (chosen instanceof Map<?, ?> m) {
            for (Map.Entry<?, ?> e : new TreeMap<>(m).entrySet()) {
                ObjectNode s = split.addObject();
                s.put("broker", String.valueOf(e.getValue()));
                s.put("bundle", String.valueOf(e.getKey()));
            }
        } else {
            for (Object bundle : new TreeSet<>((Collection<?>) chosen)) {
                ObjectNode s = split.addObject();
                s.putNull("broker");
                s.put("bundle", String.valueOf(bundle));
            }
        }
    }

    // ------------------------------------------------------------------------------------------------------------
    /** The strategies' internal state, read by reflection (field names of Pulsar's classes). */
    static void figures(Instances inst, ObjectNode oracle) {
        ObjectNode f = oracle.putObject("figures");
        for (Object s : new Object[] {inst.shedder, inst.placement}) {
            if (s == null) {
                continue;
            }
            for (String name : new String[] {"brokerAvgResourceUsage", "brokerAvgResourceUsageWithWeight",
                    "brokerScoreMap", "brokerHitCountForHigh", "brokerHitCountForLow"}) {
                Object v = readField(s, name);
                if (v instanceof Map<?, ?> m) {
                    ObjectNode o = f.putObject(name);
                    new TreeMap<>(m).forEach((k, x) -> {
                        if (x instanceof Number num) {
                            o.put(String.valueOf(k), num.doubleValue());
                        } else {
                            o.put(String.valueOf(k), Double.parseDouble(String.valueOf(x)));
                        }
                    });
                }
            }
        }
    }

    /** ModularLoadManagerStrategy / LoadSheddingStrategy.onActiveBrokersChange (2.11+); 2.10's strategies have no
     * such hook (they keep the state of departed brokers). */
    static void onActiveBrokersChange(Object strategy, Set<String> active) throws Exception {
        java.lang.reflect.Method m;
        try {
            m = strategy.getClass().getMethod("onActiveBrokersChange", Set.class);
        } catch (NoSuchMethodException e) {
            return;
        }
        m.invoke(strategy, active);
    }

    static void writeField(Object o, String name, Object value) throws Exception {
        Field fld = o.getClass().getDeclaredField(name);
        fld.setAccessible(true);
        fld.set(o, value);
    }

    static Object readField(Object o, String name) {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field fld = c.getDeclaredField(name);
                fld.setAccessible(true);
                return fld.get(o);
            } catch (NoSuchFieldException e) {
                // try the superclass
            } catch (IllegalAccessException e) {
                return null;
            }
        }
        return null;
    }
}
