package lbreplay.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.WeakHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.extensions.BrokerRegistry;
import org.apache.pulsar.broker.loadbalance.extensions.LoadManagerContext;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitState;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateChannel;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateData;
import org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLoadData;
import org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLookupData;
import org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData;
import org.apache.pulsar.broker.loadbalance.extensions.filter.AntiAffinityGroupPolicyFilter;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerFilter;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerIsolationPoliciesFilter;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerLoadManagerClassFilter;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerMaxTopicCountFilter;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerVersionFilter;
import org.apache.pulsar.broker.loadbalance.extensions.models.UnloadCounter;
import org.apache.pulsar.broker.loadbalance.extensions.models.UnloadDecision;
import org.apache.pulsar.broker.loadbalance.extensions.policies.AntiAffinityGroupPolicyHelper;
import org.apache.pulsar.broker.loadbalance.extensions.policies.IsolationPoliciesHelper;
import org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder;
import org.apache.pulsar.broker.loadbalance.extensions.store.LoadDataStore;
import org.apache.pulsar.broker.loadbalance.impl.SimpleResourceAllocationPolicies;
import org.apache.pulsar.broker.namespace.NamespaceService;
import org.apache.pulsar.broker.resources.LocalPoliciesResources;
import org.apache.pulsar.broker.resources.NamespaceResources;
import org.apache.pulsar.broker.resources.PulsarResources;
import org.apache.pulsar.common.naming.NamespaceBundle;
import org.apache.pulsar.common.naming.NamespaceBundleFactory;
import org.apache.pulsar.common.naming.NamespaceName;
import org.apache.pulsar.common.policies.data.LocalPolicies;
import org.apache.pulsar.common.policies.impl.NamespaceIsolationPolicies;
import org.mockito.Mockito;

/**
 * The extensible load manager's shedding: {@code UnloadScheduler.execute}'s grace-period prune of
 * {@code recentlyUnloadedBundles} (against {@code nowMillis}) and {@code TransferShedder.findBundlesForUnloading(
 * context, recentlyUnloadedBundles, recentlyUnloadedBrokers)} with the request's maps, on a context built the way
 * TransferShedderTest builds it: in-memory load-data stores, a mocked BrokerRegistry listing
 * {@code extensible.availableBrokers}, a mocked ServiceUnitStateChannel answering {@code isOwner} from
 * {@code extensible.bundleOwners} (every reporter owns its bundles without it), the jar's broker filters over real
 * {@code BrokerLookupData} records built from {@code extensible.brokerLookupData} (see {@link #filterPipeline}), then
 * the filters {@code initialize} adds over Pulsar's real policy helpers: {@code AntiAffinityGroupPolicyFilter}
 * ({@code AntiAffinityGroupPolicyHelper} over the channel's ownership entries, {@link #ownership}, and the failure
 * domains) and {@code BrokerIsolationPoliciesFilter} ({@code IsolationPoliciesHelper} over
 * {@code SimpleResourceAllocationPolicies}); the same helpers answer TransferShedder's own
 * {@code isLoadBalancerSheddingBundlesWithPoliciesEnabled}. The metadata they read ({@code isolationPolicies},
 * {@code namespaces.<ns>.policies.namespaceAntiAffinityGroup}, {@code failureDomains}) comes from mocked
 * {@code PulsarResources} ({@link Pipeline#resources}), as Pulsar's load-manager tests mock them. TransferShedder reads the wall clock (load-data TTL): the cases keep their
 * timestamps far from those limits. The maps are the jar's own types, so their iteration order is the JVM's: the
 * broker load-data store a {@code ConcurrentHashMap} kept across the sequence ({@link #loadDataStore}), the
 * top-bundles store and the registry's available brokers fresh {@code ConcurrentHashMap}s, brokers put in sorted
 * order (the insertion history lbreplay's kernel assumes).
 */
final class Extensible {
    /** The NamespaceService whose bundle factory makes real NamespaceBundles (one per JVM). */
    private static NamespaceService namespaceService;

    private Extensible() {
    }

    static void shed(Oracle.Instances inst, ServiceConfiguration conf, JsonNode req, ObjectNode resp)
            throws Exception {
        ObjectMapper m = Oracle.mapper();
        JsonNode ext = req.path("extensible");
        long now = req.path("nowMillis").asLong(System.currentTimeMillis());
        Map<String, BrokerLoadData> brokerLoad = perBroker(m, ext.path("brokerLoadData"), BrokerLoadData.class);
        Map<String, TopBundlesLoadData> top = perBroker(m, ext.path("topBundlesLoadData"), TopBundlesLoadData.class);
        Map<String, Long> ruBundles = new HashMap<>();
        ext.path("recentlyUnloadedBundles").fields().forEachRemaining(e -> ruBundles.put(e.getKey(),
                e.getValue().asLong()));
        Map<String, Long> ruBrokers = new HashMap<>();
        ext.path("recentlyUnloadedBrokers").fields().forEachRemaining(e -> ruBrokers.put(e.getKey(),
                e.getValue().asLong()));
        // BrokerRegistryImpl.getAvailableBrokerLookupDataAsync: a fresh ConcurrentHashMap, brokers put in sorted order
        Map<String, BrokerLookupData> available = new ConcurrentHashMap<>();
        JsonNode avail = ext.path("availableBrokers");
        java.util.SortedSet<String> availableIds = new java.util.TreeSet<>();
        if (avail.isArray()) {
            avail.forEach(x -> availableIds.add(x.asText()));
        } else {
            availableIds.addAll(brokerLoad.keySet());
        }
        JsonNode lookupBlock = ext.path("brokerLookupData");
        boolean lookupGiven = lookupBlock.isObject();
        for (String b : availableIds) {
            available.put(b, lookupData(b, lookupBlock.path(b)));
        }
        JsonNode owners = ext.path("bundleOwners");

        // UnloadScheduler.execute: "Only 1 broker available: no load shedding will be performed"
        if (available.size() <= 1) {
            resp.put("skip", "NoBrokers");
            return;
        }
        long grace = conf.getLoadBalancerSheddingGracePeriodMinutes() * 60_000L;
        ruBundles.keySet().removeIf(b -> now - ruBundles.get(b) > grace);

        // TransferShedder compares timestamps with System.currentTimeMillis(): rebase the request's times so that
        // its nowMillis is the wall clock of this call (the drift of a few milliseconds stays far from the TTLs).
        long shift = System.currentTimeMillis() - now;
        for (BrokerLoadData d : brokerLoad.values()) {
            Object at = Oracle.readField(d, "updatedAt");
            if (at instanceof Number n) {
                Oracle.writeField(d, "updatedAt", n.longValue() + shift);
            }
        }
        ruBundles.replaceAll((k, v) -> v + shift);
        ruBrokers.replaceAll((k, v) -> v + shift);

        TransferShedder transfer = (TransferShedder) inst.transfer;
        if (transfer == null) {
            // TransferShedderTest's wiring without a running broker: the counter constructor, then the collaborators
            // the 5-argument constructor takes from the broker (set for each request below)
            transfer = new TransferShedder(new UnloadCounter());
            inst.transfer = transfer;
            if (Oracle.readField(transfer, "decisionCache") == null) {
                Oracle.writeField(transfer, "decisionCache", new java.util.HashSet<>());
            }
        }
        LoadDataStore<BrokerLoadData> brokerStore = store(loadDataStore(transfer, brokerLoad));
        Map<String, TopBundlesLoadData> topMap = new ConcurrentHashMap<>();
        top.forEach(topMap::put);
        LoadDataStore<TopBundlesLoadData> topStore = store(topMap);
        BrokerRegistry registry = proxy(BrokerRegistry.class, (method, args) ->
                method.equals("getAvailableBrokerLookupDataAsync") ? CompletableFuture.completedFuture(available)
                        : null);
        LoadManagerContext ctx = proxy(LoadManagerContext.class, (method, args) -> switch (method) {
            case "brokerConfiguration" -> conf;
            case "brokerLoadDataStore" -> brokerStore;
            case "topBundleLoadDataStore" -> topStore;
            case "brokerRegistry" -> registry;
            default -> null;
        });

        // The broker's view of this request: PulsarResources answering its isolation policies, anti-affinity groups
        // and failure domains (as the placement pipeline, Pipeline.resources), a NamespaceService whose bundle
        // factory makes real NamespaceBundles, the channel (ownership), and the real policy helpers and filters
        // ExtensibleLoadManagerImpl.initialize builds over them.
        if (namespaceService == null) {
            // one factory for the whole run: NamespaceBundle keeps it only for hashing topics (not used here)
            NamespaceBundleFactory factory = Mockito.mock(NamespaceBundleFactory.class);
            Map<String, NamespaceBundle> bundles = new HashMap<>();
            Mockito.when(factory.getBundle(Mockito.anyString(), Mockito.anyString())).thenAnswer(inv ->
                    bundles.computeIfAbsent(inv.getArgument(0) + "/" + inv.getArgument(1), Pipeline::bundle));
            NamespaceService service = Mockito.mock(NamespaceService.class);
            Mockito.when(service.getNamespaceBundleFactory()).thenReturn(factory);
            namespaceService = service;
        }
        NamespaceService ns = namespaceService;
        PulsarService pulsar = Oracle.pulsarService(ns);
        Oracle.writeField(pulsar, "config", conf);
        Oracle.writeField(pulsar, "pulsarResources", resources(req));
        Set<Map.Entry<String, ServiceUnitStateData>> ownership = ownership(owners, top);
        ServiceUnitStateChannel channel = proxy(ServiceUnitStateChannel.class, (method, args) -> {
            if (method.equals("getOwnershipEntrySet")) {
                return ownership;
            }
            if (!method.equals("isOwner") || args.length != 2) {
                return null;
            }
            if (!owners.isObject()) {
                return true;
            }
            JsonNode o = owners.get(String.valueOf(args[0]));
            return o != null && String.valueOf(args[1]).equals(o.asText());
        });
        IsolationPoliciesHelper iso = new IsolationPoliciesHelper(new SimpleResourceAllocationPolicies(pulsar));
        AntiAffinityGroupPolicyHelper aa = new AntiAffinityGroupPolicyHelper(pulsar, channel);
        aa.listenFailureDomainUpdate();  // as initialize: brokerToFailureDomainMap when failureDomainsEnabled
        List<BrokerFilter> filters = filterPipeline(lookupGiven);
        filters.add(new AntiAffinityGroupPolicyFilter(aa));
        filters.add(new BrokerIsolationPoliciesFilter(iso));
        Oracle.writeField(transfer, "pulsar", pulsar);
        Oracle.writeField(transfer, "isolationPoliciesHelper", iso);
        Oracle.writeField(transfer, "antiAffinityGroupPolicyHelper", aa);
        Oracle.writeField(transfer, "channel", channel);
        Oracle.writeField(transfer, "brokerFilterPipeline", filters);

        // the counter keeps the last computed figures: mark them unset so only this call's figures are reported
        Oracle.writeField(transfer.getCounter(), "loadAvg", Double.NaN);
        Oracle.writeField(transfer.getCounter(), "loadStd", Double.NaN);
        Set<UnloadDecision> decisions = transfer.findBundlesForUnloading(ctx, ruBundles, ruBrokers);
        List<UnloadDecision> sorted = new ArrayList<>(decisions);
        sorted.sort(Comparator.comparing((UnloadDecision d) -> d.getUnload().sourceBroker())
                .thenComparing(d -> d.getUnload().serviceUnit()));
        ArrayNode unload = (ArrayNode) resp.get("unload");
        for (UnloadDecision d : sorted) {
            ObjectNode u = unload.addObject();
            u.put("broker", d.getUnload().sourceBroker());
            u.put("bundle", d.getUnload().serviceUnit());
            Optional<String> dest = d.getUnload().destBroker();
            if (dest.isPresent()) {
                u.put("destination", dest.get());
            } else {
                u.putNull("destination");
            }
            u.put("reason", String.valueOf(d.getReason()));
        }
        ObjectNode f = ((ObjectNode) resp.get("oracle")).putObject("figures");
        Object hits = Oracle.readField(transfer, "unloadConditionHitCount");
        if (hits instanceof Number n) {
            f.putObject("unloadConditionHitCount").put("value", n.doubleValue());
        }
        UnloadCounter counter = transfer.getCounter();
        ObjectNode stats = (ObjectNode) resp.get("stats");
        Object avg = Oracle.readField(counter, "loadAvg");
        Object std = Oracle.readField(counter, "loadStd");
        if (avg instanceof Number a && !Double.isNaN(a.doubleValue())) {
            stats.put("loadAvg", a.doubleValue());
        }
        if (std instanceof Number sd && !Double.isNaN(sd.doubleValue())) {
            stats.put("loadStd", sd.doubleValue());
        }
    }

    /**
     * The request's metadata as {@link Pipeline#resources} gives it, with the two resources the policy checks read
     * for every broker and every ownership entry (isolation policies, local policies) answered by plain subclasses
     * instead of Mockito mocks (a mock invocation records its stack: thousands per shedding cycle). The objects are
     * made without a constructor (Objenesis), as the split check's {@code PulsarService}; the failure-domain
     * resources (read once per request) stay the Pipeline's mocks.
     */
    static PulsarResources resources(JsonNode req) throws Exception {
        PulsarResources mocked = Pipeline.resources(req);
        NamespaceIsolationPolicies policies = mocked.getNamespaceResources().getIsolationPolicies()
                .getIsolationDataPolicies("").orElseThrow();
        Map<String, String> groups = new HashMap<>();
        req.path("namespaces").fields().forEachRemaining(e -> {
            JsonNode g = e.getValue().path("policies").path("namespaceAntiAffinityGroup");
            if (g.isTextual()) {
                groups.put(e.getKey(), g.asText());
            }
        });
        org.objenesis.Objenesis make = new org.objenesis.ObjenesisStd();
        IsolationRes iso = make.newInstance(IsolationRes.class);
        iso.policies = Optional.of(policies);
        LocalRes local = make.newInstance(LocalRes.class);
        local.groups = groups;
        NamespaceResources nsRes = make.newInstance(NamespaceResources.class);
        Oracle.writeField(nsRes, "isolationPolicies", iso);
        PulsarResources res = make.newInstance(PulsarResources.class);
        Oracle.writeField(res, "namespaceResources", nsRes);
        Oracle.writeField(res, "localPolicies", local);
        Oracle.writeField(res, "clusterResources", mocked.getClusterResources());
        return res;
    }

    /** {@code getIsolationDataPolicies(cluster)}: the request's {@code isolationPolicies}, for any cluster. */
    static final class IsolationRes extends NamespaceResources.IsolationPolicyResources {
        Optional<NamespaceIsolationPolicies> policies;

        IsolationRes() {
            super(null, 0);  // never run: made by Objenesis
        }

        @Override
        public Optional<NamespaceIsolationPolicies> getIsolationDataPolicies(String cluster) {
            return policies;
        }

        @Override
        public CompletableFuture<Optional<NamespaceIsolationPolicies>> getIsolationDataPoliciesAsync(String c) {
            return CompletableFuture.completedFuture(policies);
        }
    }

    /** {@code getLocalPolicies(ns)}: {@code LocalPolicies} carrying the namespace's anti-affinity group, if any. */
    static final class LocalRes extends LocalPoliciesResources {
        Map<String, String> groups;

        LocalRes() {
            super(null, 0);  // never run: made by Objenesis
        }

        @Override
        public Optional<LocalPolicies> getLocalPolicies(NamespaceName ns) {
            String g = groups.get(ns.toString());
            return g == null ? Optional.empty() : Optional.of(new LocalPolicies(null, null, g));
        }

        @Override
        public CompletableFuture<Optional<LocalPolicies>> getLocalPoliciesAsync(NamespaceName ns) {
            return CompletableFuture.completedFuture(getLocalPolicies(ns));
        }
    }

    /** Each sequence's broker load-data store (keyed by its TransferShedder), kept from request to request. */
    private static final Map<Object, ConcurrentHashMap<String, BrokerLoadData>> STORES = new WeakHashMap<>();

    /**
     * The broker load-data store as the broker holds it: {@code TableViewLoadDataStoreImpl} over the client
     * {@code TableViewImpl}'s {@code data}, a {@code ConcurrentHashMap} living as long as the broker. Each request
     * is one refresh of it: the brokers the request lacks are removed (their tombstones), then the request's brokers
     * are put in sorted order (a broker already there keeps its place, as a newer report does).
     */
    static Map<String, BrokerLoadData> loadDataStore(Object owner, Map<String, BrokerLoadData> brokerLoad) {
        ConcurrentHashMap<String, BrokerLoadData> map = STORES.computeIfAbsent(owner, o -> new ConcurrentHashMap<>());
        map.keySet().removeIf(b -> !brokerLoad.containsKey(b));
        brokerLoad.forEach(map::put);
        return map;
    }

    /** A request's per-broker block ({@code brokerLoadData}, {@code topBundlesLoadData}), sorted by broker. */
    static <T> Map<String, T> perBroker(ObjectMapper m, JsonNode block, Class<T> type) throws Exception {
        Map<String, T> out = new TreeMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = block.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            out.put(e.getKey(), m.treeToValue(e.getValue(), type));
        }
        return out;
    }

    /**
     * {@code ServiceUnitStateChannel.getOwnershipEntrySet()}: each bundle of {@code extensible.bundleOwners} Owned by
     * its broker; without it (no ownership snapshot: {@code isOwner} is true for every reporter), every broker's
     * {@code topBundlesLoadData} bundles Owned by that broker (a bundle two brokers list is in both).
     */
    static Set<Map.Entry<String, ServiceUnitStateData>> ownership(JsonNode owners,
                                                                  Map<String, TopBundlesLoadData> top) {
        java.util.TreeSet<List<String>> pairs = new java.util.TreeSet<>(
                Comparator.comparing((List<String> l) -> l.get(0)).thenComparing(l -> l.get(1)));
        if (owners.isObject()) {
            owners.fields().forEachRemaining(e -> pairs.add(List.of(e.getKey(), e.getValue().asText())));
        } else {
            top.forEach((broker, t) -> t.getTopBundlesLoadData()
                    .forEach(b -> pairs.add(List.of(b.bundleName(), broker))));
        }
        Set<Map.Entry<String, ServiceUnitStateData>> out = new java.util.LinkedHashSet<>();
        for (List<String> p : pairs) {
            out.add(new java.util.AbstractMap.SimpleImmutableEntry<>(p.get(0),
                    new ServiceUnitStateData(ServiceUnitState.Owned, p.get(1), 1L)));
        }
        return out;
    }

    /**
     * The filters {@code ExtensibleLoadManagerImpl}'s constructor adds, in its order (the same on every checked line):
     * {@code BrokerLoadManagerClassFilter}, {@code BrokerMaxTopicCountFilter}, {@code BrokerVersionFilter}. Without
     * {@code extensible.brokerLookupData} the two that read the lookup data are left out, as {@code decide} skips
     * them. {@code initialize} then adds {@code AntiAffinityGroupPolicyFilter} and {@code BrokerIsolationPoliciesFilter}
     * (see {@link #shed}).
     */
    static List<BrokerFilter> filterPipeline(boolean lookupGiven) {
        List<BrokerFilter> filters = new ArrayList<>();
        if (lookupGiven) {
            filters.add(new BrokerLoadManagerClassFilter());
        }
        filters.add(new BrokerMaxTopicCountFilter());
        if (lookupGiven) {
            filters.add(new BrokerVersionFilter());
        }
        return filters;
    }

    /**
     * A real {@code BrokerLookupData} record for {@code broker}: {@code brokerVersion} and {@code loadManagerClassName}
     * from the request ({@code null} when absent), persistent and non-persistent topics enabled (broker.conf
     * defaults), empty maps, no URLs. The record's components differ between lines (3.3 adds {@code properties}, 4.0
     * {@code brokerId}): its canonical constructor is found by reflection and filled by component name.
     */
    static BrokerLookupData lookupData(String broker, JsonNode d) throws Exception {
        java.lang.reflect.RecordComponent[] comps = BrokerLookupData.class.getRecordComponents();
        Class<?>[] types = new Class<?>[comps.length];
        Object[] args = new Object[comps.length];
        for (int i = 0; i < comps.length; i++) {
            types[i] = comps[i].getType();
            args[i] = switch (comps[i].getName()) {
                case "brokerId" -> broker;
                case "brokerVersion", "loadManagerClassName" -> {
                    JsonNode v = d.path(comps[i].getName());
                    yield v.isTextual() ? v.asText() : null;
                }
                case "persistentTopicsEnabled", "nonPersistentTopicsEnabled" -> true;
                default -> types[i] == boolean.class ? Boolean.FALSE
                        : types[i] == long.class ? Long.valueOf(0L)
                        : types[i] == int.class ? Integer.valueOf(0)
                        : Map.class.isAssignableFrom(types[i]) ? new HashMap<>() : null;
            };
        }
        return BrokerLookupData.class.getDeclaredConstructor(types).newInstance(args);
    }

    interface Handler {
        Object call(String method, Object[] args) throws Exception;
    }

    /** A java.lang.reflect.Proxy answering by method name (cheaper than a mock per call; independent of the
     * interface's exact method set, which changes between Pulsar versions). */
    @SuppressWarnings("unchecked")
    static <T> T proxy(Class<T> type, Handler h) {
        return (T) java.lang.reflect.Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type},
                (p, method, args) -> {
                    if (method.getDeclaringClass() == Object.class) {
                        return switch (method.getName()) {
                            case "hashCode" -> System.identityHashCode(p);
                            case "equals" -> p == args[0];
                            default -> type.getSimpleName() + "Proxy";
                        };
                    }
                    return h.call(method.getName(), args == null ? new Object[0] : args);
                });
    }

    @SuppressWarnings("unchecked")
    static <T> LoadDataStore<T> store(Map<String, T> map) {
        return proxy(LoadDataStore.class, (method, args) -> switch (method) {
            case "get" -> Optional.ofNullable(map.get((String) args[0]));
            case "entrySet" -> map.entrySet();
            case "size" -> map.size();
            case "forEach" -> {
                map.forEach((BiConsumer<String, T>) args[0]);
                yield null;
            }
            default -> null;
        });
    }
}
