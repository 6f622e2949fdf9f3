package lbreplay.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.common.collect.BoundType;
import com.google.common.collect.Range;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
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
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.BrokerFilter;
import org.apache.pulsar.broker.loadbalance.LoadData;
import org.apache.pulsar.broker.loadbalance.impl.BrokerVersionFilter;
import org.apache.pulsar.broker.loadbalance.impl.LoadManagerShared;
import org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl;
import org.apache.pulsar.broker.loadbalance.impl.SimpleResourceAllocationPolicies;
import org.apache.pulsar.broker.resources.PulsarResources;
import org.apache.pulsar.common.naming.NamespaceBundle;
import org.apache.pulsar.common.naming.NamespaceBundleFactory;
import org.apache.pulsar.common.naming.NamespaceName;
import org.apache.pulsar.common.policies.data.FailureDomainImpl;
import org.apache.pulsar.common.policies.data.LocalPolicies;
import org.apache.pulsar.common.policies.data.NamespaceIsolationDataImpl;
import org.apache.pulsar.common.policies.impl.NamespaceIsolationPolicies;
import org.apache.pulsar.policies.data.loadbalancer.LocalBrokerData;
import org.mockito.Mockito;
import org.mockito.invocation.InvocationOnMock;

/**
 * The placement pipeline of the modular load manager: {@code ModularLoadManagerImpl.selectBrokerForAssignment} of the
 * jar, run on a load manager made with its own no-argument constructor whose {@code initialize(PulsarService)} parts
 * are filled from the request instead of a metadata store:
 * <ul>
 *   <li>{@code policies} = {@code new SimpleResourceAllocationPolicies(pulsar)}, reading the request's
 *       {@code isolationPolicies} through {@code PulsarResources.getNamespaceResources().getIsolationPolicies()
 *       .getIsolationDataPolicies(cluster)} (a {@code NamespaceIsolationPolicies} over a sorted map: several policies
 *       matching one namespace resolve in policy-name order, docs/how-we-know.md);</li>
 *   <li>anti-affinity groups: {@code getLocalPolicies().getLocalPolicies[Async](ns)} answers
 *       {@code LocalPolicies.namespaceAntiAffinityGroup} from {@code namespaces.<ns>.policies};</li>
 *   <li>failure domains: {@code LoadManagerShared.refreshBrokerToFailureDomainMap} over
 *       {@code getClusterResources().getFailureDomainResources()} answering the request's {@code failureDomains}
 *       (listed in name order, as the metadata store lists children);</li>
 *   <li>{@code brokerToNamespaceToBundleRange} as {@code updateBundleData} rebuilds it: each broker's
 *       {@code lastStats} keys plus its {@code preallocatedBundleData} keys;</li>
 *   <li>the filter pipeline of {@code initialize} ({@code BrokerLoadManagerClassFilter} where the jar has it, then
 *       {@code BrokerVersionFilter}); available brokers = the snapshot's brokers ({@code LockManager.listLocks});
 *       the placement strategy = the sequence's instance (its EWMA state carries over).</li>
 * </ul>
 * The resource objects are Mockito mocks answering by method name (their signatures differ between lines), as
 * Pulsar's own load-manager tests mock {@code PulsarResources}.
 */
final class Pipeline {
    private Pipeline() {
    }

    @SuppressWarnings("unchecked")
    static void assign(Oracle.Instances inst, ServiceConfiguration conf, LoadData loadData, JsonNode req,
                       JsonNode bundles, ObjectNode resp) throws Exception {
        ModularLoadManagerImpl lm = loadManager(inst, conf, loadData, req);
        // The strategy behind a proxy that keeps the candidates of each bundle's first selectBroker call:
        // AvgShedder.selectBroker picks among them with `new Random()` (getExpectedBroker), so they are its set
        // of equally valid answers (docs/how-we-know.md).
        List<Set<String>> firstCandidates = new ArrayList<>();
        Set<String> firstBest = new TreeSet<>();
        Object real = inst.placement;
        Object proxy = java.lang.reflect.Proxy.newProxyInstance(Pipeline.class.getClassLoader(),
                new Class<?>[] {org.apache.pulsar.broker.loadbalance.ModularLoadManagerStrategy.class},
                (p, m, args) -> {
                    boolean first = m.getName().startsWith("selectBroker") && firstCandidates.isEmpty();
                    if (first) {
                        firstCandidates.add(new TreeSet<>((Set<String>) args[0]));
                    }
                    try {
                        return m.invoke(real, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    } finally {
                        if (first && Oracle.readField(real, "bestBrokers") instanceof Collection<?> c) {
                            firstBest.clear();
                            c.forEach(x -> firstBest.add(String.valueOf(x)));
                        }
                    }
                });
        set(lm, "placementStrategy", proxy);
        boolean random = real.getClass().getSimpleName().equals("AvgShedder");
        ArrayNode out = (ArrayNode) resp.get("assign");
        ArrayNode ties = ((ObjectNode) resp.get("oracle")).withArray("tieSets");
        for (JsonNode b : bundles) {
            String bundle = b.asText();
            firstCandidates.clear();
            firstBest.clear();
            Object best = Oracle.readField(inst.placement, "bestBrokers");
            if (best instanceof Collection<?> c) {
                c.clear();
            }
            Optional<String> pick;
            try {
                pick = lm.selectBrokerForAssignment(bundle(bundle));
            } catch (ArithmeticException e) {
                // AvgShedder.getExpectedBroker with no candidate: `% 0` (also in its catch block), so the lookup
                // fails; lbreplay answers "no broker" (null), the same outcome for the caller (docs/how-we-know.md)
                if (!random || firstCandidates.isEmpty() || !firstCandidates.get(0).isEmpty()) {
                    throw e;
                }
                ((ObjectNode) resp.get("oracle")).put("avgShedderNoCandidate", bundle);
                pick = Optional.empty();
            }
            ObjectNode a = out.addObject();
            a.put("bundle", bundle);
            if (pick.isPresent()) {
                a.put("broker", pick.get());
            } else {
                a.putNull("broker");
            }
            ArrayNode set = ties.addArray();
            if (random || firstBest.size() > 1) {
                // a random draw: whether the overload re-check runs (and which EWMA entries it updates) depends on
                // it, so the figures and the later bundles of the request are not compared (docs/how-we-know.md)
                ((ObjectNode) resp.get("oracle")).put("randomDraw", true);
            }
            best = Oracle.readField(inst.placement, "bestBrokers");
            if (random && !firstCandidates.isEmpty()) {
                firstCandidates.get(0).forEach(set::add);
            } else if (firstBest.size() > 1 && !inst.placement.getClass().getSimpleName()
                    .equals("RoundRobinBrokerSelector")) {
                // the first strategy call drew among several best brokers (ThreadLocalRandom): whether the
                // overload re-check runs depends on that draw, so every broker of the namespace policy set is a
                // possible answer (docs/how-we-know.md); later bundles of the request are not compared
                policySet(lm, bundle).forEach(set::add);
            } else if (best instanceof Collection<?> c && !inst.placement.getClass().getSimpleName()
                    .equals("RoundRobinBrokerSelector")) {
                new TreeSet<>(c.stream().map(String::valueOf).toList()).forEach(set::add);
            }
        }
    }

    /**
     * The unloads {@code ModularLoadManagerImpl.doLoadShedding} issues, with their destinations: the strategy's plan
     * (after the grace-period prune at the request's time, as {@link Oracle#shed}), then for each planned bundle the
     * jar's own checks in the order its {@code doLoadShedding} lambda calls them: {@code shouldNamespacePoliciesUnload}
     * (2.11+), {@code shouldAntiAffinityNamespaceUnload}, and (3.0+) the destination {@code selectBroker(bundle)}
     * (package-private), skipping the bundle when there is none or it is the owner. 2.x unloads without a
     * destination (null). {@code doLoadShedding} itself is not called: it prunes with {@code System.currentTimeMillis()}
     * and unloads through {@code PulsarAdmin}; this loop is its body with the request's clock. The planned bundles are
     * walked in the order {@link Oracle#shed} lists them: the strategy's own multimap's {@code asMap().forEach}, as
     * {@code doLoadShedding} walks it (the strategy instance, and so its {@code selectedBundlesCache}, is the
     * sequence's).
     */
    static void doLoadShedding(Oracle.Instances inst, ServiceConfiguration conf, LoadData loadData, long now,
                               JsonNode req, ObjectNode resp) throws Exception {
        ObjectNode planned = Oracle.mapper().createObjectNode();
        planned.putArray("unload");
        Oracle.shed(inst, conf, loadData, now, planned);
        if (!planned.path("skip").isMissingNode() && !planned.path("skip").isNull()) {
            resp.put("skip", planned.get("skip").asText());
            return;
        }
        ModularLoadManagerImpl lm = loadManager(inst, conf, loadData, req);
        PulsarService pulsar = (PulsarService) Oracle.readField(lm, "pulsar");
        NamespaceBundleFactory factory = Mockito.mock(NamespaceBundleFactory.class,
                inv -> inv.getMethod().getName().equals("getBundle") && inv.getArguments().length == 2
                        ? bundle(inv.getArgument(0) + "/" + inv.getArgument(1)) : null);
        org.apache.pulsar.broker.namespace.NamespaceService ns = Mockito.mock(
                org.apache.pulsar.broker.namespace.NamespaceService.class,
                inv -> inv.getMethod().getName().equals("getNamespaceBundleFactory") ? factory : null);
        Oracle.writeField(pulsar, "nsService", ns);
        Method policiesCheck = null;
        Method select = null;
        for (Method m : ModularLoadManagerImpl.class.getDeclaredMethods()) {
            if (m.getName().equals("shouldNamespacePoliciesUnload") && m.getParameterCount() == 3) {
                policiesCheck = m;
            } else if (m.getName().equals("selectBroker") && m.getParameterCount() == 1) {
                select = m;
                select.setAccessible(true);
            }
        }
        // The strategy behind a proxy that keeps each selectBroker call's candidates and best brokers: where the
        // strategy draws among several (ThreadLocalRandom / AvgShedder's `new Random()`), the destination is one of
        // a set of equally valid answers (oracle.destinationTies: bundle -> possible destinations; the owner among
        // them means "may be skipped"), as for the placement-pipeline answers (docs/how-we-know.md)
        List<Set<String>> firstCandidates = new ArrayList<>();
        Set<String> firstBest = new TreeSet<>();
        Object real = inst.placement;
        Object proxy = java.lang.reflect.Proxy.newProxyInstance(Pipeline.class.getClassLoader(),
                new Class<?>[] {org.apache.pulsar.broker.loadbalance.ModularLoadManagerStrategy.class},
                (p, m, args) -> {
                    boolean call = m.getName().startsWith("selectBroker");
                    if (call && firstCandidates.isEmpty()) {
                        @SuppressWarnings("unchecked")
                        Set<String> c = (Set<String>) args[0];
                        firstCandidates.add(new TreeSet<>(c));
                    }
                    try {
                        return m.invoke(real, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    } finally {
                        // every call of the bundle (the overload re-check too): the widest draw
                        if (call && Oracle.readField(real, "bestBrokers") instanceof Collection<?> c
                                && c.size() > firstBest.size()) {
                            firstBest.clear();
                            c.forEach(x -> firstBest.add(String.valueOf(x)));
                        }
                    }
                });
        set(lm, "placementStrategy", proxy);
        boolean random = real.getClass().getSimpleName().equals("AvgShedder");
        boolean roundRobin = real.getClass().getSimpleName().equals("RoundRobinBrokerSelector");
        ObjectNode ties = ((ObjectNode) resp.get("oracle")).putObject("destinationTies");
        Set<String> excluded = new TreeSet<>();
        try {
            @SuppressWarnings("unchecked")
            Set<String> keys = (Set<String>) ServiceConfiguration.class
                    .getMethod("getLoadBalancerSheddingExcludedNamespaces").invoke(conf);
            if (keys != null) {
                excluded.addAll(keys);
            }
        } catch (NoSuchMethodException e) {
            // before 4.1: no such key
        }
        ArrayNode unload = (ArrayNode) resp.get("unload");
        for (JsonNode u : planned.get("unload")) {
            String broker = u.get("broker").asText();
            String bundle = u.get("bundle").asText();
            String namespace = LoadManagerShared.getNamespaceNameFromBundleName(bundle);
            String range = LoadManagerShared.getBundleRangeFromBundleName(bundle);
            // 4.1+ (PIP-380, #23549): conf.getLoadBalancerSheddingExcludedNamespaces().contains(namespace) -> skip
            if (excluded.contains(namespace)) {
                continue;
            }
            if (policiesCheck != null && !(boolean) policiesCheck.invoke(lm, namespace, range, broker)) {
                continue;
            }
            if (!lm.shouldAntiAffinityNamespaceUnload(namespace, range, broker)) {
                continue;
            }
            String dest = null;
            if (select != null) {
                firstCandidates.clear();
                firstBest.clear();
                if (Oracle.readField(real, "bestBrokers") instanceof Collection<?> c) {
                    c.clear();
                }
                @SuppressWarnings("unchecked")
                Optional<String> pick = (Optional<String>) select.invoke(lm, bundle(bundle));
                Set<String> possible = new TreeSet<>();
                if (random && !firstCandidates.isEmpty() && firstCandidates.get(0).size() > 1) {
                    possible.addAll(firstCandidates.get(0));
                } else if (!random && !roundRobin && firstBest.size() > 1) {
                    // the draw decides whether the overload re-check runs: any broker of the policy set
                    possible.addAll(policySet(lm, bundle));
                }
                if (!possible.isEmpty()) {
                    ArrayNode set = ties.putArray(bundle);
                    possible.forEach(set::add);
                }
                if (pick.isEmpty() || pick.get().equals(broker)) {
                    continue;
                }
                dest = pick.get();
            }
            ObjectNode o = unload.addObject();
            o.put("broker", broker);
            o.put("bundle", bundle);
            if (dest == null) {
                o.putNull("destination");
            } else {
                o.put("destination", dest);
            }
            loadData.getRecentlyUnloadedBundles().put(bundle, now);
        }
    }

    /** {@code LoadManagerShared.applyNamespacePolicies} over the available brokers, as selectBroker's restore. */
    static Set<String> policySet(ModularLoadManagerImpl lm, String bundle) throws Exception {
        Set<String> out = new TreeSet<>();
        for (Method m : LoadManagerShared.class.getMethods()) {
            if (m.getName().equals("applyNamespacePolicies") && m.getParameterCount() == 5) {
                m.invoke(null, bundle(bundle), Oracle.readField(lm, "policies"), out, lm.getAvailableBrokers(),
                        Oracle.readField(lm, "brokerTopicLoadingPredicate"));
                return out;
            }
        }
        throw new IllegalStateException("no applyNamespacePolicies in this jar");
    }

    static NamespaceBundle bundle(String name) {
        int slash = name.lastIndexOf('/');
        String[] range = name.substring(slash + 1).split("_");
        long lo = Long.decode(range[0]);
        long hi = Long.decode(range[1]);
        Range<Long> r = Range.range(lo, BoundType.CLOSED, hi, hi == 0xFFFFFFFFL ? BoundType.CLOSED : BoundType.OPEN);
        return new NamespaceBundle(NamespaceName.get(name.substring(0, slash)), r,
                Mockito.mock(NamespaceBundleFactory.class));
    }

    static ModularLoadManagerImpl loadManager(Oracle.Instances inst, ServiceConfiguration conf, LoadData loadData,
                                              JsonNode req) throws Exception {
        ModularLoadManagerImpl lm = new ModularLoadManagerImpl();
        PulsarService pulsar = Oracle.pulsarService(null);
        Oracle.writeField(pulsar, "config", conf);
        Oracle.writeField(pulsar, "pulsarResources", resources(req));
        set(lm, "pulsar", pulsar);
        set(lm, "conf", conf);
        set(lm, "policies", new SimpleResourceAllocationPolicies(pulsar));
        set(lm, "placementStrategy", inst.placement);
        set(lm, "loadData", loadData);
        // the jar's own HashSets, kept per sequence: brokerCandidateCache (RoundRobinBrokerSelector copies it,
        // LeastResourceUsageWithWeight sums over it) and the thread's applyNamespacePolicies caches, whose order
        // is the insertion order into it (docs/how-we-know.md)
        set(lm, "brokerCandidateCache", inst.candidateCache);
        threadLocal("localPrimariesCache", inst.primariesCache);
        threadLocal("localSecondaryCache", inst.secondaryCache);
        if (has(lm, "sheddingExcludedNamespaceSelectionStrategy")) {  // 4.2+
            set(lm, "sheddingExcludedNamespaceSelectionStrategy",
                    Class.forName("org.apache.pulsar.broker.loadbalance.impl.RoundRobinBrokerSelector")
                            .getDeclaredConstructor().newInstance());
        }
        @SuppressWarnings("unchecked")
        List<BrokerFilter> filters = (List<BrokerFilter>) Oracle.readField(lm, "filterPipeline");
        try {  // 3.0+
            filters.add((BrokerFilter) Class.forName(
                    "org.apache.pulsar.broker.loadbalance.impl.BrokerLoadManagerClassFilter")
                    .getDeclaredConstructor().newInstance());
        } catch (ClassNotFoundException e) {
            // 2.x: the version filter only
        }
        filters.add(new BrokerVersionFilter());
        // LoadManagerShared.refreshBrokerToFailureDomainMap(pulsar, map) (3.0+) or the load manager's own private
        // refreshBrokerToFailureDomainMap() (2.x), as initialize calls it
        try {
            LoadManagerShared.class.getMethod("refreshBrokerToFailureDomainMap", PulsarService.class, Map.class)
                    .invoke(null, pulsar, Oracle.readField(lm, "brokerToFailureDomainMap"));
        } catch (NoSuchMethodException e) {
            Method own = ModularLoadManagerImpl.class.getDeclaredMethod("refreshBrokerToFailureDomainMap");
            own.setAccessible(true);
            own.invoke(lm);
        }
        List<String> brokers = new ArrayList<>(loadData.getBrokerData().keySet());
        Class<?> lockManager = field(lm, "brokersData").getType();
        set(lm, "brokersData", Mockito.mock(lockManager, inv -> inv.getMethod().getName().equals("listLocks")
                ? CompletableFuture.completedFuture(new ArrayList<>(brokers)) : null));
        Object ranges = Oracle.readField(lm, "brokerToNamespaceToBundleRange");
        for (var e : loadData.getBrokerData().entrySet()) {
            LocalBrokerData local = e.getValue().getLocalData();
            List<String> owned = new ArrayList<>(local.getLastStats().keySet());
            owned.addAll(e.getValue().getPreallocatedBundleData().keySet());
            reload(ranges, e.getKey(), owned);
        }
        return lm;
    }

    /** Sets this thread's value of the {@code FastThreadLocal} field {@code name} of {@code LoadManagerShared}. */
    static void threadLocal(String name, Set<String> value) throws Exception {
        Field f = LoadManagerShared.class.getDeclaredField(name);
        f.setAccessible(true);
        Object local = f.get(null);
        local.getClass().getMethod("set", Object.class).invoke(local, value);
    }

    /** {@code brokerToNamespaceToBundleRange} rebuilt for one broker as {@code updateBundleData} does:
     * {@code BundleRangeCache.reloadFromBundles} (4.0+) or, before, the broker's
     * {@code ConcurrentOpenHashMap<namespace, ConcurrentOpenHashSet<range>>} filled by
     * {@code LoadManagerShared.fillNamespaceToBundlesMap}. */
    static void reload(Object ranges, String broker, List<String> bundles) throws Exception {
        for (Method m : ranges.getClass().getMethods()) {
            if (m.getName().equals("reloadFromBundles")) {
                m.invoke(ranges, broker, bundles.stream());
                return;
            }
        }
        Method newBuilder = ranges.getClass().getMethod("newBuilder");
        Function<String, Object> make = k -> {
            try {
                Object builder = newBuilder.invoke(null);
                return builder.getClass().getMethod("build").invoke(builder);
            } catch (ReflectiveOperationException x) {
                throw new IllegalStateException(x);
            }
        };
        Object nsMap = ranges.getClass().getMethod("computeIfAbsent", Object.class, Function.class)
                .invoke(ranges, broker, make);
        nsMap.getClass().getMethod("clear").invoke(nsMap);
        for (Method m : LoadManagerShared.class.getMethods()) {
            if (m.getName().equals("fillNamespaceToBundlesMap")) {
                m.invoke(null, new java.util.HashSet<>(bundles), nsMap);
                return;
            }
        }
        throw new IllegalStateException("no way to fill brokerToNamespaceToBundleRange in this jar");
    }

    /** PulsarResources answering the request's isolation policies, anti-affinity groups and failure domains. */
    static PulsarResources resources(JsonNode req) throws Exception {
        Map<String, NamespaceIsolationDataImpl> iso = new TreeMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = req.path("isolationPolicies").fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            iso.put(e.getKey(), Oracle.mapper().treeToValue(e.getValue(), NamespaceIsolationDataImpl.class));
        }
        NamespaceIsolationPolicies policies = new NamespaceIsolationPolicies(iso);
        Map<String, String> groups = new HashMap<>();
        it = req.path("namespaces").fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            JsonNode g = e.getValue().path("policies").path("namespaceAntiAffinityGroup");
            if (g.isTextual()) {
                groups.put(e.getKey(), g.asText());
            }
        }
        Map<String, FailureDomainImpl> domains = new TreeMap<>();
        it = req.path("failureDomains").fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            Set<String> brokers = new TreeSet<>();
            e.getValue().path("brokers").forEach(x -> brokers.add(x.asText()));
            domains.put(e.getKey(), new FailureDomainImpl(brokers));
        }
        Object isoRes = mock(PulsarResources.class, "getNamespaceResources", "getIsolationPolicies", inv -> {
            String name = inv.getMethod().getName();
            if (name.equals("getIsolationDataPolicies")) {
                return Optional.of(policies);
            }
            if (name.equals("getIsolationDataPoliciesAsync")) {
                return CompletableFuture.completedFuture(Optional.of(policies));
            }
            return null;
        });
        Object localRes = mock(PulsarResources.class, "getLocalPolicies", null, inv -> {
            String name = inv.getMethod().getName();
            if (!(inv.getArguments().length == 1 && inv.getArgument(0) instanceof NamespaceName ns)) {
                return null;
            }
            String g = groups.get(ns.toString());
            Optional<LocalPolicies> lp = g == null ? Optional.empty()
                    : Optional.of(new LocalPolicies(null, null, g));
            if (name.equals("getLocalPolicies")) {
                return lp;
            }
            if (name.equals("getLocalPoliciesAsync")) {
                return CompletableFuture.completedFuture(lp);
            }
            return null;
        });
        Object fdRes = mock(PulsarResources.class, "getClusterResources", "getFailureDomainResources", inv -> {
            String name = inv.getMethod().getName();
            if (name.equals("listFailureDomains")) {
                return new ArrayList<>(domains.keySet());
            }
            if (name.equals("getFailureDomain")) {
                return Optional.ofNullable(domains.get((String) inv.getArgument(1)));
            }
            return null;
        });
        Object nsRes = Mockito.mock(PulsarResources.class.getMethod("getNamespaceResources").getReturnType(),
                inv -> inv.getMethod().getName().equals("getIsolationPolicies") ? isoRes : null);
        Class<?> clusterType = PulsarResources.class.getMethod("getClusterResources").getReturnType();
        Object clusterRes = Mockito.mock(clusterType,
                inv -> inv.getMethod().getName().equals("getFailureDomainResources") ? fdRes : null);
        return Mockito.mock(PulsarResources.class, (InvocationOnMock inv) -> switch (inv.getMethod().getName()) {
            case "getNamespaceResources" -> nsRes;
            case "getLocalPolicies" -> localRes;
            case "getClusterResources" -> clusterRes;
            default -> null;
        });
    }

    /** A mock of the type returned by {@code owner.first()[.second()]} answering with {@code answer}. */
    static Object mock(Class<?> owner, String first, String second, org.mockito.stubbing.Answer<Object> answer)
            throws Exception {
        Class<?> t = owner.getMethod(first).getReturnType();
        if (second != null) {
            t = t.getMethod(second).getReturnType();
        }
        return Mockito.mock(t, answer);
    }

    static boolean has(Object o, String name) {
        try {
            field(o, name);
            return true;
        } catch (NoSuchFieldException e) {
            return false;
        }
    }

    static Field field(Object o, String name) throws NoSuchFieldException {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f;
            } catch (NoSuchFieldException e) {
                // superclass
            }
        }
        throw new NoSuchFieldException(name);
    }

    static void set(Object o, String name, Object value) throws Exception {
        field(o, name).set(o, value);
    }
}
