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
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.extensions.BrokerRegistry;
import org.apache.pulsar.broker.loadbalance.extensions.LoadManagerContext;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateChannel;
import org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLoadData;
import org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLookupData;
import org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerFilter;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerLoadManagerClassFilter;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerMaxTopicCountFilter;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerVersionFilter;
import org.apache.pulsar.broker.loadbalance.extensions.models.UnloadCounter;
import org.apache.pulsar.broker.loadbalance.extensions.models.UnloadDecision;
import org.apache.pulsar.broker.loadbalance.extensions.policies.AntiAffinityGroupPolicyHelper;
import org.apache.pulsar.broker.loadbalance.extensions.policies.IsolationPoliciesHelper;
import org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder;
import org.apache.pulsar.broker.loadbalance.extensions.store.LoadDataStore;
import org.mockito.Mockito;

/**
 * The extensible load manager's shedding: {@code UnloadScheduler.execute}'s grace-period prune of
 * {@code recentlyUnloadedBundles} (against {@code nowMillis}) and {@code TransferShedder.findBundlesForUnloading(
 * context, recentlyUnloadedBundles, recentlyUnloadedBrokers)} with the request's maps, on a context built the way
 * TransferShedderTest builds it: in-memory load-data stores, a mocked BrokerRegistry listing
 * {@code extensible.availableBrokers}, a mocked ServiceUnitStateChannel answering {@code isOwner} from
 * {@code extensible.bundleOwners} (every reporter owns its bundles without it), the jar's broker filters over real
 * {@code BrokerLookupData} records built from {@code extensible.brokerLookupData} (see {@link #filterPipeline}), no
 * isolation or anti-affinity policies. TransferShedder reads the wall clock (load-data TTL): the cases keep their
 * timestamps far from those limits.
 */
final class Extensible {
    private Extensible() {
    }

    static void shed(Oracle.Instances inst, ServiceConfiguration conf, JsonNode req, ObjectNode resp)
            throws Exception {
        ObjectMapper m = Oracle.mapper();
        JsonNode ext = req.path("extensible");
        long now = req.path("nowMillis").asLong(System.currentTimeMillis());
        Map<String, BrokerLoadData> brokerLoad = new TreeMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = ext.path("brokerLoadData").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            brokerLoad.put(e.getKey(), m.treeToValue(e.getValue(), BrokerLoadData.class));
        }
        Map<String, TopBundlesLoadData> top = new TreeMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = ext.path("topBundlesLoadData").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            top.put(e.getKey(), m.treeToValue(e.getValue(), TopBundlesLoadData.class));
        }
        Map<String, Long> ruBundles = new HashMap<>();
        ext.path("recentlyUnloadedBundles").fields().forEachRemaining(e -> ruBundles.put(e.getKey(),
                e.getValue().asLong()));
        Map<String, Long> ruBrokers = new HashMap<>();
        ext.path("recentlyUnloadedBrokers").fields().forEachRemaining(e -> ruBrokers.put(e.getKey(),
                e.getValue().asLong()));
        Map<String, BrokerLookupData> available = new TreeMap<>();
        JsonNode avail = ext.path("availableBrokers");
        List<String> availableIds = new ArrayList<>();
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

        LoadDataStore<BrokerLoadData> brokerStore = store(brokerLoad);
        LoadDataStore<TopBundlesLoadData> topStore = store(top);
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

        TransferShedder transfer = (TransferShedder) inst.transfer;
        if (transfer == null) {
            // the namespace-bundle lookup of the policies check answers with one mock bundle (no policies)
            org.apache.pulsar.broker.namespace.NamespaceService ns =
                    Mockito.mock(org.apache.pulsar.broker.namespace.NamespaceService.class);
            PulsarService pulsar = Oracle.pulsarService(ns);
            Oracle.writeField(pulsar, "config", conf);
            org.apache.pulsar.common.naming.NamespaceBundleFactory factory =
                    Mockito.mock(org.apache.pulsar.common.naming.NamespaceBundleFactory.class);
            org.apache.pulsar.common.naming.NamespaceBundle bundle =
                    Mockito.mock(org.apache.pulsar.common.naming.NamespaceBundle.class);
            Mockito.when(ns.getNamespaceBundleFactory()).thenReturn(factory);
            Mockito.when(factory.getBundle(Mockito.anyString(), Mockito.anyString())).thenReturn(bundle);
            IsolationPoliciesHelper iso = Mockito.mock(IsolationPoliciesHelper.class);
            AntiAffinityGroupPolicyHelper aa = Mockito.mock(AntiAffinityGroupPolicyHelper.class);
            // TransferShedderTest's wiring without a running broker: the counter constructor, then the collaborators
            // the 5-argument constructor would take from the broker (no filters, no policies).
            transfer = new TransferShedder(new UnloadCounter());
            inst.transfer = transfer;
            Oracle.writeField(transfer, "pulsar", pulsar);
            Oracle.writeField(transfer, "isolationPoliciesHelper", iso);
            Oracle.writeField(transfer, "antiAffinityGroupPolicyHelper", aa);
            if (Oracle.readField(transfer, "decisionCache") == null) {
                Oracle.writeField(transfer, "decisionCache", new java.util.HashSet<>());
            }
        }
        ServiceUnitStateChannel channel = proxy(ServiceUnitStateChannel.class, (method, args) -> {
            if (!method.equals("isOwner") || args.length != 2) {
                return null;
            }
            if (!owners.isObject()) {
                return true;
            }
            JsonNode o = owners.get(String.valueOf(args[0]));
            return o != null && String.valueOf(args[1]).equals(o.asText());
        });
        Oracle.writeField(transfer, "channel", channel);
        Oracle.writeField(transfer, "brokerFilterPipeline", filterPipeline(lookupGiven));

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
     * The filters {@code ExtensibleLoadManagerImpl}'s constructor adds, in its order (the same on every checked line):
     * {@code BrokerLoadManagerClassFilter}, {@code BrokerMaxTopicCountFilter}, {@code BrokerVersionFilter}. Without
     * {@code extensible.brokerLookupData} the two that read the lookup data are left out, as {@code decide} skips
     * them. {@code initialize} then adds {@code AntiAffinityGroupPolicyFilter} and {@code BrokerIsolationPoliciesFilter}:
     * not here (the TransferShedder cases carry no policies; their helpers are mocks answering "no policy").
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
