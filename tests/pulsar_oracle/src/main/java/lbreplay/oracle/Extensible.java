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
 * {@code extensible.bundleOwners} (every reporter owns its bundles without it), no broker filters, no isolation
 * or anti-affinity policies. TransferShedder reads the wall clock (load-data TTL): the cases keep their
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
        for (String b : availableIds) {
            available.put(b, Mockito.mock(BrokerLookupData.class));
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

        LoadManagerContext ctx = Mockito.mock(LoadManagerContext.class);
        Mockito.when(ctx.brokerConfiguration()).thenReturn(conf);
        LoadDataStore<BrokerLoadData> brokerStore = store(brokerLoad);
        LoadDataStore<TopBundlesLoadData> topStore = store(top);
        Mockito.when(ctx.brokerLoadDataStore()).thenReturn(brokerStore);
        Mockito.when(ctx.topBundleLoadDataStore()).thenReturn(topStore);
        BrokerRegistry registry = Mockito.mock(BrokerRegistry.class);
        Mockito.when(registry.getAvailableBrokerLookupDataAsync())
                .thenReturn(CompletableFuture.completedFuture(available));
        Mockito.when(ctx.brokerRegistry()).thenReturn(registry);

        if (inst.transfer == null) {
            // deep stubs: the namespace-bundle lookups of the policies check answer with mocks (no policies)
            PulsarService pulsar = Mockito.mock(PulsarService.class, Mockito.RETURNS_DEEP_STUBS);
            Mockito.when(pulsar.getConfiguration()).thenReturn(conf);
            IsolationPoliciesHelper iso = Mockito.mock(IsolationPoliciesHelper.class);
            AntiAffinityGroupPolicyHelper aa = Mockito.mock(AntiAffinityGroupPolicyHelper.class);
            // TransferShedderTest's wiring without a running broker: the counter constructor, then the collaborators
            // the 5-argument constructor would take from the broker (no filters, no policies).
            inst.transfer = new TransferShedder(new UnloadCounter());
            Oracle.writeField(inst.transfer, "pulsar", pulsar);
            Oracle.writeField(inst.transfer, "isolationPoliciesHelper", iso);
            Oracle.writeField(inst.transfer, "antiAffinityGroupPolicyHelper", aa);
            Oracle.writeField(inst.transfer, "brokerFilterPipeline", new ArrayList<>());
            if (Oracle.readField(inst.transfer, "decisionCache") == null) {
                Oracle.writeField(inst.transfer, "decisionCache", new java.util.HashSet<>());
            }
        }
        ServiceUnitStateChannel channel = Mockito.mock(ServiceUnitStateChannel.class);
        Mockito.when(channel.isOwner(Mockito.anyString(), Mockito.anyString())).thenAnswer(inv -> {
            String bundle = inv.getArgument(0);
            String broker = inv.getArgument(1);
            if (!owners.isObject()) {
                return true;
            }
            JsonNode o = owners.get(bundle);
            return o != null && broker.equals(o.asText());
        });
        Oracle.writeField(inst.transfer, "channel", channel);

        // the counter keeps the last computed figures: mark them unset so only this call's figures are reported
        Oracle.writeField(inst.transfer.getCounter(), "loadAvg", Double.NaN);
        Oracle.writeField(inst.transfer.getCounter(), "loadStd", Double.NaN);
        Set<UnloadDecision> decisions = inst.transfer.findBundlesForUnloading(ctx, ruBundles, ruBrokers);
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
        Object hits = Oracle.readField(inst.transfer, "unloadConditionHitCount");
        if (hits instanceof Number n) {
            f.putObject("unloadConditionHitCount").put("value", n.doubleValue());
        }
        UnloadCounter counter = inst.transfer.getCounter();
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

    @SuppressWarnings("unchecked")
    static <T> LoadDataStore<T> store(Map<String, T> map) {
        LoadDataStore<T> s = Mockito.mock(LoadDataStore.class);
        Mockito.when(s.get(Mockito.anyString())).thenAnswer(inv -> Optional.ofNullable(map.get(
                (String) inv.getArgument(0))));
        Mockito.when(s.entrySet()).thenAnswer(inv -> map.entrySet());
        Mockito.when(s.size()).thenAnswer(inv -> map.size());
        Mockito.doAnswer(inv -> {
            BiConsumer<String, T> c = inv.getArgument(0);
            map.forEach(c);
            return null;
        }).when(s).forEach(Mockito.any());
        return s;
    }
}
