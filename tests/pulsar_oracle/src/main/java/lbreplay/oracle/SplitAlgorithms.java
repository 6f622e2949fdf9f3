package lbreplay.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.common.hash.Hashing;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.namespace.NamespaceService;
import org.apache.pulsar.common.naming.NamespaceBundle;
import org.apache.pulsar.common.naming.NamespaceBundleFactory;
import org.apache.pulsar.common.naming.NamespaceBundleSplitAlgorithm;
import org.apache.pulsar.common.policies.data.stats.TopicStatsImpl;
import org.mockito.Mockito;

/**
 * The split algorithms ({@code NamespaceBundleSplitAlgorithm.of(name).getSplitBoundary}) of the jar:
 * {@code {"splitBoundary": {"bundle": b, "algorithm": name, "positions": [..], "topics": [records]}}}. The bundle's
 * {@code NamespaceBundleFactory} hashes topic names with CRC-32 as {@code NamespaceService} creates it; a mocked
 * {@code NamespaceService} answers {@code getOwnedTopicListForNamespaceBundle} with the request's topics (as
 * Pulsar's split-algorithm tests mock it); flow_or_qps gets each topic's {@code TopicStatsImpl} (records without
 * rate or throughput fields have no stats) and the limits of the request's config, as
 * {@code NamespaceService.splitAndOwnBundle} builds its {@code FlowOrQpsEquallyDivideBundleSplitOption}.
 * Answer: {@code oracle.splitBoundaries} (null when the algorithm finds none).
 */
final class SplitAlgorithms {
    private SplitAlgorithms() {
    }

    static void boundary(ServiceConfiguration conf, JsonNode arg, ObjectNode resp) throws Exception {
        String name = arg.path("bundle").asText();
        NamespaceBundleFactory factory = new org.objenesis.ObjenesisStd().newInstance(NamespaceBundleFactory.class);
        Pipeline.set(factory, "hashFunc", Hashing.crc32());
        NamespaceBundle nb = Pipeline.bundle(name);
        Pipeline.set(nb, "factory", factory);
        List<String> topics = new ArrayList<>();
        Map<String, TopicStatsImpl> stats = new HashMap<>();
        for (JsonNode t : arg.path("topics")) {
            String topic = t.path("topic").asText();
            topics.add(topic);
            if (t.has("msgRateIn") || t.has("msgRateOut") || t.has("msgThroughputIn") || t.has("msgThroughputOut")) {
                TopicStatsImpl s = new TopicStatsImpl();
                s.msgRateIn = t.path("msgRateIn").asDouble(0);
                s.msgRateOut = t.path("msgRateOut").asDouble(0);
                s.msgThroughputIn = t.path("msgThroughputIn").asDouble(0);
                s.msgThroughputOut = t.path("msgThroughputOut").asDouble(0);
                stats.put(topic, s);
            }
        }
        NamespaceService ns = Mockito.mock(NamespaceService.class);
        Mockito.when(ns.getOwnedTopicListForNamespaceBundle(Mockito.any()))
                .thenReturn(CompletableFuture.completedFuture(topics));
        List<Long> positions = null;
        if (arg.hasNonNull("positions")) {
            positions = new ArrayList<>();
            for (JsonNode p : arg.get("positions")) {
                positions.add(Long.decode(p.asText()));
            }
        }
        String algorithm = arg.path("algorithm").asText();
        NamespaceBundleSplitAlgorithm alg = NamespaceBundleSplitAlgorithm.of(algorithm);
        if (alg == null) {
            throw new IllegalArgumentException("no split algorithm " + algorithm + " in this jar");
        }
        Method get = null;
        for (Method m : alg.getClass().getMethods()) {
            if (m.getName().equals("getSplitBoundary")) {
                get = m;
            }
        }
        Object future;
        if (get.getParameterCount() == 2) {  // 2.10: getSplitBoundary(NamespaceService, NamespaceBundle)
            future = get.invoke(alg, ns, nb);
        } else {
            Class<?> optionType = Class.forName("org.apache.pulsar.common.naming."
                    + (algorithm.equals("flow_or_qps_equally_divide") ? "FlowOrQpsEquallyDivideBundleSplitOption"
                    : "BundleSplitOption"));
            Object option;
            if (algorithm.equals("flow_or_qps_equally_divide")) {
                Constructor<?> c = optionType.getConstructor(NamespaceService.class, NamespaceBundle.class,
                        List.class, Map.class, int.class, int.class, int.class);
                option = c.newInstance(ns, nb, positions, stats, conf.getLoadBalancerNamespaceBundleMaxMsgRate(),
                        conf.getLoadBalancerNamespaceBundleMaxBandwidthMbytes(),
                        ServiceConfiguration.class.getMethod("getFlowOrQpsDifferenceThresholdPercentage")
                                .invoke(conf));
            } else {
                option = optionType.getConstructor(NamespaceService.class, NamespaceBundle.class, List.class)
                        .newInstance(ns, nb, positions);
            }
            future = get.invoke(alg, option);
        }
        Object result = ((CompletableFuture<?>) future).get();
        ObjectNode oracle = (ObjectNode) resp.get("oracle");
        if (result == null) {
            oracle.putNull("splitBoundaries");
        } else {
            ArrayNode out = oracle.putArray("splitBoundaries");
            if (result instanceof Collection<?> c) {
                c.forEach(x -> out.add(((Number) x).longValue()));
            } else {
                out.add(((Number) result).longValue());
            }
        }
    }
}
