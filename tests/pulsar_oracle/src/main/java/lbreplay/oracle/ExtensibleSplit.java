package lbreplay.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.github.benmanes.caffeine.cache.AsyncLoadingCache;
import com.google.common.hash.Hashing;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.WeakHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.LoadManager;
import org.apache.pulsar.broker.loadbalance.extensions.BrokerRegistry;
import org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl;
import org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerWrapper;
import org.apache.pulsar.broker.loadbalance.extensions.LoadManagerContext;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateChannel;
import org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData;
import org.apache.pulsar.broker.loadbalance.extensions.models.SplitCounter;
import org.apache.pulsar.broker.loadbalance.extensions.models.SplitDecision;
import org.apache.pulsar.broker.loadbalance.extensions.strategy.DefaultNamespaceBundleSplitStrategyImpl;
import org.apache.pulsar.broker.namespace.NamespaceService;
import org.apache.pulsar.broker.service.BrokerService;
import org.apache.pulsar.broker.service.PulsarStats;
import org.apache.pulsar.common.naming.NamespaceBundle;
import org.apache.pulsar.common.naming.NamespaceBundleFactory;
import org.apache.pulsar.common.naming.NamespaceBundleSplitAlgorithm;
import org.apache.pulsar.common.naming.NamespaceName;
import org.apache.pulsar.policies.data.loadbalancer.NamespaceBundleStats;
import org.mockito.Mockito;

/**
 * The extensible load manager's split cycle: {@code SplitScheduler.execute} (load balancer and auto split enabled)
 * and {@code DefaultNamespaceBundleSplitStrategyImpl.findBundlesToSplit(context, pulsar)} of every broker that has
 * {@code extensible.topBundlesLoadData}, in sorted broker order, each with its own strategy instance (its
 * {@code splitConditionHitCounts} persist across the sequence, as on each broker) and its own {@code SplitCounter}.
 * A broker's {@code BrokerService.getBundleStats()} is its TopBundlesLoadData entries (the last entry of a bundle
 * listed twice) in the jar's own map type: a {@code ConcurrentHashMap} per broker kept across the sequence, cleared
 * and refilled in sorted bundle order each cycle as {@code PulsarStats.updateStats} does; the channel answers {@code isOwner(bundle)} from
 * {@code extensible.bundleOwners} (every broker owns what it reports without it) and lists no bundle in Splitting
 * state; {@code getBundleCount} answers from {@code namespaces.<ns>.boundaries} (a namespace without them throws, as a
 * failed metadata read); {@code getSplitBoundary} is the jar's own (a mocked NamespaceService, as
 * DefaultNamespaceBundleSplitStrategyTest mocks it, whose real {@code getSplitBoundary} and
 * {@code getNamespaceBundleSplitAlgorithmByName} run, with {@code getOwnedTopicListForNamespaceBundle} answering the
 * request's {@code topics.<bundle>} names, hashed with CRC-32 by the bundle's {@code NamespaceBundleFactory}).
 * Answer: the Success decisions (broker, bundle, reason, boundary from the split's child ranges) and
 * {@code stats.splitFailures} (this cycle's {@code SplitCounter} Failure/Unknown updates, all brokers).
 */
final class ExtensibleSplit {
    /** Each broker's {@code PulsarStats.bundleStats} (keyed by its strategy instance), kept across the sequence. */
    private static final Map<Object, ConcurrentHashMap<String, NamespaceBundleStats>> BUNDLE_STATS =
            new WeakHashMap<>();

    private ExtensibleSplit() {
    }

    static void split(Oracle.Instances inst, ServiceConfiguration conf, JsonNode req, ObjectNode resp)
            throws Exception {
        ObjectMapper m = Oracle.mapper();
        JsonNode ext = req.path("extensible");
        Map<String, TopBundlesLoadData> top = Extensible.perBroker(m, ext.path("topBundlesLoadData"),
                TopBundlesLoadData.class);
        JsonNode owners = ext.path("bundleOwners");
        JsonNode namespaces = req.path("namespaces");
        JsonNode topics = req.path("topics");
        ObjectNode stats = (ObjectNode) resp.get("stats");
        // SplitScheduler.isLoadBalancerAutoBundleSplitEnabled
        if (!conf.isLoadBalancerEnabled() || !conf.isLoadBalancerAutoBundleSplitEnabled()) {
            stats.put("splitFailures", 0);
            stats.put("splitDecisions", 0);
            return;
        }

        NamespaceBundleFactory factory = new org.objenesis.ObjenesisStd().newInstance(NamespaceBundleFactory.class);
        Pipeline.set(factory, "hashFunc", Hashing.crc32());
        Pipeline.set(factory, "bundlesCache", Mockito.mock(AsyncLoadingCache.class, Mockito.RETURNS_DEEP_STUBS));
        NamespaceService ns = Mockito.mock(NamespaceService.class);
        Mockito.when(ns.getNamespaceBundleFactory()).thenReturn(factory);
        Mockito.when(ns.getBundleCount(Mockito.any(NamespaceName.class))).thenAnswer(inv -> {
            JsonNode b = namespaces.path(inv.getArgument(0).toString()).path("boundaries");
            if (!b.isArray()) {
                throw new IllegalStateException("no bundles for " + inv.getArgument(0));
            }
            return b.size() - 1;
        });
        Mockito.when(ns.getOwnedTopicListForNamespaceBundle(Mockito.any(NamespaceBundle.class))).thenAnswer(inv -> {
            List<String> names = new ArrayList<>();
            topics.path(inv.getArgument(0).toString()).forEach(t -> names.add(t.path("topic").asText()));
            return CompletableFuture.completedFuture(names);
        });
        Mockito.when(ns.getNamespaceBundleSplitAlgorithmByName(Mockito.anyString())).thenCallRealMethod();
        Mockito.doCallRealMethod().when(ns).getSplitBoundary(Mockito.any(NamespaceBundle.class),
                Mockito.<List<Long>>any(), Mockito.any(NamespaceBundleSplitAlgorithm.class));

        PulsarService pulsar = Oracle.pulsarService(ns);
        Pipeline.set(pulsar, "config", conf);
        Pipeline.set(ns, "config", conf);
        Pipeline.set(ns, "pulsar", pulsar);
        BrokerService brokerService = new org.objenesis.ObjenesisStd().newInstance(BrokerService.class);
        PulsarStats pulsarStats = new org.objenesis.ObjenesisStd().newInstance(PulsarStats.class);
        Pipeline.set(brokerService, "pulsarStats", pulsarStats);
        Pipeline.set(pulsar, "brokerService", brokerService);
        ExtensibleLoadManagerImpl lm = new org.objenesis.ObjenesisStd().newInstance(ExtensibleLoadManagerImpl.class);
        Pipeline.set(pulsar, "loadManager", new AtomicReference<LoadManager>(new ExtensibleLoadManagerWrapper(lm)));

        List<ObjectNode> out = new ArrayList<>();
        long failures = 0;
        for (Map.Entry<String, TopBundlesLoadData> e : top.entrySet()) {
            String broker = e.getKey();
            Map<String, NamespaceBundleStats> latest = new TreeMap<>();
            for (TopBundlesLoadData.BundleLoadData d : e.getValue().getTopBundlesLoadData()) {
                latest.put(d.bundleName(), d.stats());
            }
            DefaultNamespaceBundleSplitStrategyImpl strategy = (DefaultNamespaceBundleSplitStrategyImpl)
                    inst.extensibleSplit.computeIfAbsent(broker,
                            b -> new DefaultNamespaceBundleSplitStrategyImpl(new SplitCounter()));
            // PulsarStats.updateStats: the broker's bundleStats map is cleared (its table keeps its size) and refilled
            ConcurrentHashMap<String, NamespaceBundleStats> bundleStats =
                    BUNDLE_STATS.computeIfAbsent(strategy, s -> new ConcurrentHashMap<>());
            bundleStats.clear();
            latest.forEach(bundleStats::put);
            Pipeline.set(pulsarStats, "bundleStats", bundleStats);
            ServiceUnitStateChannel channel = Extensible.proxy(ServiceUnitStateChannel.class, (method, args) ->
                    switch (method) {
                        case "isOwner" -> args.length == 1 && (!owners.isObject()
                                || broker.equals(owners.path(String.valueOf(args[0])).asText(null)));
                        case "getOwnershipEntrySet" -> Set.of();
                        default -> null;
                    });
            Pipeline.set(lm, "serviceUnitStateChannel", channel);
            BrokerRegistry registry = Extensible.proxy(BrokerRegistry.class, (method, args) ->
                    method.equals("getBrokerId") ? broker : null);
            LoadManagerContext ctx = Extensible.proxy(LoadManagerContext.class, (method, args) -> switch (method) {
                case "brokerConfiguration" -> conf;
                case "brokerRegistry" -> registry;
                default -> null;
            });
            AtomicLong failed = failureCounter(strategy);
            long before = failed.get();
            Set<SplitDecision> decisions = strategy.findBundlesToSplit(ctx, pulsar);
            failures += failed.get() - before;
            for (SplitDecision d : decisions) {
                if (d.getLabel() != SplitDecision.Label.Success) {
                    continue;
                }
                String bundle = d.getSplit().serviceUnit();
                long lower = Long.decode(bundle.substring(bundle.lastIndexOf('/') + 1).split("_")[0]);
                ObjectNode s = m.createObjectNode();
                s.put("broker", d.getSplit().sourceBroker());
                s.put("bundle", bundle);
                s.put("reason", d.getReason().name());
                ArrayNode cuts = s.putArray("boundaries");
                for (String child : d.getSplit().splitServiceUnitToDestBroker().keySet()) {
                    long childLower = Long.decode(child.split("_")[0]);
                    if (childLower != lower) {
                        cuts.add(childLower);
                    }
                }
                out.add(s);
            }
        }
        out.sort(Comparator.comparing((ObjectNode s) -> s.path("bundle").asText())
                .thenComparing(s -> s.path("broker").asText()));
        ArrayNode split = (ArrayNode) resp.get("split");
        out.forEach(split::add);
        stats.put("splitFailures", failures);
        stats.put("splitDecisions", out.size());
        // every broker's splitConditionHitCounts after the cycle (those that did not run keep theirs)
        ObjectNode hits = ((ObjectNode) resp.get("oracle")).putObject("figures").putObject("splitConditionHitCounts");
        for (Map.Entry<String, Object> e : inst.extensibleSplit.entrySet()) {
            @SuppressWarnings("unchecked")
            Map<String, Integer> counts = (Map<String, Integer>) Oracle.readField(e.getValue(),
                    "splitConditionHitCounts");
            new TreeMap<>(counts).forEach((bundle, n) -> hits.put(e.getKey() + " " + bundle, n));
        }
    }

    /** The strategy's SplitCounter Failure/Unknown counter (the only failure the strategy records). */
    @SuppressWarnings("unchecked")
    private static AtomicLong failureCounter(DefaultNamespaceBundleSplitStrategyImpl strategy) {
        Object counter = Oracle.readField(strategy, "counter");
        Map<SplitDecision.Label, Map<SplitDecision.Reason, AtomicLong>> breakdown =
                (Map<SplitDecision.Label, Map<SplitDecision.Reason, AtomicLong>>) Oracle.readField(counter,
                        "breakdownCounters");
        return breakdown.get(SplitDecision.Label.Failure).get(SplitDecision.Reason.Unknown);
    }
}
