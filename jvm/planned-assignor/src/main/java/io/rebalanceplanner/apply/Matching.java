package io.rebalanceplanner.apply;

import io.rebalanceplanner.apply.Plan.PlanMember;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Which live consumer is which planned member, across restarts: the rules of jobs/apply/matching.py, in order, each
 * one-to-one.
 *
 * <ol>
 *   <li>Static members (KIP-345): a live member with a group.instance.id is the planned member with the same
 *       instance id, and only that one.</li>
 *   <li>The same member id: the consumer never left the group since the snapshot (a planned static member is
 *       matched by rule 1 only).</li>
 *   <li>The same client id, unique on both sides: a classic group's broker names a dynamic member
 *       {@code client.id + "-" + UUID} (Kafka: ClassicGroup.generateMemberId), so a restarted consumer keeps it.
 *       KIP-848 member ids are made by the client and GroupSpec carries no client id: a broker-side assignor passes
 *       none, and this rule never applies there.</li>
 * </ol>
 */
public final class Matching {
    // Kafka: ClassicGroup.generateMemberId -> clientId + "-" + UUID.randomUUID()
    private static final Pattern MEMBER_ID =
        Pattern.compile("^(?<client>.*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", Pattern.DOTALL);

    private Matching() { }

    /** A member as the group sees it now; the client id empty when it cannot be known. */
    public record LiveMember(String memberId, Optional<String> groupInstanceId, Optional<String> clientId) { }

    /** live member id to planned member id, and who is left over on either side. */
    public record Match(Map<String, String> planned, List<LiveMember> unknown, List<PlanMember> missing) {
        public boolean complete() {
            return unknown.isEmpty() && missing.isEmpty();
        }
    }

    /** The client id a broker-generated dynamic member id starts with, or empty when it has no such form. */
    public static Optional<String> clientIdOf(String memberId) {
        Matcher found = MEMBER_ID.matcher(memberId);
        return found.matches() ? Optional.of(found.group("client")) : Optional.empty();
    }

    /** Pair live members with planned ones by the three rules, in order. */
    public static Match match(Map<String, PlanMember> planMembers, Collection<LiveMember> liveMembers) {
        List<LiveMember> live = new ArrayList<>(liveMembers);
        live.sort(Comparator.comparing(LiveMember::memberId));
        Map<String, String> planned = new LinkedHashMap<>();
        Map<String, PlanMember> free = new TreeMap<>(planMembers);  // planned members not matched yet

        // Rule 1: static members match by group.instance.id only (KIP-345).
        Map<String, String> byInstance = new HashMap<>();
        for (PlanMember p : planMembers.values()) {
            present(p.groupInstanceId()).ifPresent(instance -> byInstance.put(instance, p.memberId()));
        }
        for (LiveMember m : live) {
            Optional<String> instance = present(m.groupInstanceId());
            String planId = instance.map(byInstance::get).orElse(null);
            if (planId != null && free.containsKey(planId)) {
                take(planned, free, m, planId);
            }
        }
        List<LiveMember> dynamic = live.stream().filter(m -> present(m.groupInstanceId()).isEmpty()).toList();
        // Rule 2: a dynamic member still in the group under the member id the snapshot saw.
        for (LiveMember m : dynamic) {
            PlanMember target = planMembers.get(m.memberId());
            if (free.containsKey(m.memberId()) && target != null && present(target.groupInstanceId()).isEmpty()) {
                take(planned, free, m, m.memberId());
            }
        }
        // Rule 3: a restarted dynamic member, by a client id that no other member on either side shares.
        List<LiveMember> rest = dynamic.stream()
            .filter(m -> !planned.containsKey(m.memberId()) && present(m.clientId()).isPresent())
            .toList();
        Map<String, Integer> liveClients = new HashMap<>();
        rest.forEach(m -> liveClients.merge(m.clientId().get(), 1, Integer::sum));
        Map<String, Integer> planClients = new HashMap<>();
        Map<String, String> byClient = new HashMap<>();
        for (PlanMember p : free.values()) {
            Optional<String> client = present(p.clientId());
            if (client.isPresent() && present(p.groupInstanceId()).isEmpty()) {
                planClients.merge(client.get(), 1, Integer::sum);
                byClient.put(client.get(), p.memberId());
            }
        }
        for (LiveMember m : rest) {
            String client = m.clientId().get();
            if (liveClients.get(client) == 1 && planClients.getOrDefault(client, 0) == 1) {
                take(planned, free, m, byClient.get(client));
            }
        }
        List<LiveMember> unknown = live.stream().filter(m -> !planned.containsKey(m.memberId())).toList();
        return new Match(planned, unknown, List.copyOf(free.values()));
    }

    /** A member as a log line names it: its member id, then its instance id (static) or client id. */
    public static String describe(String memberId, Optional<String> groupInstanceId, Optional<String> clientId) {
        if (present(groupInstanceId).isPresent()) {
            return Reasons.repr(memberId) + " (group.instance.id " + Reasons.repr(groupInstanceId) + ")";
        }
        return Reasons.repr(memberId) + " (client id " + Reasons.repr(clientId) + ")";
    }

    private static void take(Map<String, String> planned, Map<String, PlanMember> free, LiveMember m, String planId) {
        planned.put(m.memberId(), planId);
        free.remove(planId);
    }

    /** Python's truthiness of an optional text: an empty string counts as absent. */
    private static Optional<String> present(Optional<String> value) {
        return value.filter(s -> !s.isEmpty());
    }
}
