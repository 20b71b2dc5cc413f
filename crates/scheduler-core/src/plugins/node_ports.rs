//! NodePorts: a node must have every host port the pod asks for free, per protocol and
//! host IP (`0.0.0.0` clashes with every IP on the same protocol and port).

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PluginPoints, PreFilterPlugin, PreFilterResult, Status,
};
use crate::plugin_points;
use crate::types::{DEFAULT_BIND_ALL_HOST_IP, HostPort, NodeInfo, PodInfo};

use super::names::NODE_PORTS;

/// Upstream `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

pub struct NodePorts;

/// The pod's host ports (containers and sidecars), taken once per cycle.
#[derive(Clone, Debug)]
struct WantedPorts(Vec<HostPort>);

impl Plugin for NodePorts {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![(
            "v1.Pod.Spec.HostPorts()",
            format!("{:?}", pod.host_ports),
        )])
    }
    fn name(&self) -> &'static str {
        NODE_PORTS
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // Host ports are immutable, so only a pod leaving frees one.
            ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
            ClusterEvent::new(EventResource::Node, ActionType::ADD),
        ]
    }

    /// Upstream's pod hint: only a deleted pod that was bound and held one of the host
    /// ports this pod wants frees anything for it.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        let EventObjects::Pod {
            old: Some(gone),
            new: None,
        } = objects
        else {
            return QueueingHint::Queue;
        };
        let clashes = gone.node_name.is_some()
            && pod
                .host_ports
                .iter()
                .any(|want| gone.host_ports.iter().any(|had| ports_clash(had, want)));
        if clashes {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if pod.host_ports.is_empty() {
            return (None, Status::skip());
        }
        state.write(WantedPorts(pod.host_ports.clone()));
        (None, Status::success())
    }
}

/// Whether two host ports cannot both be bound (same protocol and port; `0.0.0.0` clashes
/// with every IP).
fn ports_clash(a: &HostPort, b: &HostPort) -> bool {
    a.port > 0
        && a.port == b.port
        && a.protocol == b.protocol
        && (a.host_ip == b.host_ip
            || a.host_ip == DEFAULT_BIND_ALL_HOST_IP
            || b.host_ip == DEFAULT_BIND_ALL_HOST_IP)
}

/// Whether none of `wanted` clashes with the ports already in use on `node`.
pub fn fits_ports(wanted: &[HostPort], node: &NodeInfo) -> bool {
    !wanted.iter().any(|hp| node.used_ports().conflicts(hp))
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        // Like upstream, Filter without its PreFilter state is an internal error.
        let Some(WantedPorts(wanted)) = state.read::<WantedPorts>() else {
            return Status::error(format!(
                "{NODE_PORTS}: host ports of the pod missing from the cycle state (PreFilter did not run)"
            ));
        };
        if fits_ports(wanted, node) {
            Status::success()
        } else {
            Status::unschedulable(ERR_REASON)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;

    /// (port, protocol, host IP); empty protocol means TCP, empty IP means 0.0.0.0.
    type Port = (i32, &'static str, &'static str);

    fn pod_with(ports: &[Port]) -> PodInfo {
        ports
            .iter()
            .fold(PodInfo::test("ns", "p"), |b, (port, proto, ip)| {
                b.host_port(*port, proto, ip)
            })
            .build()
    }

    fn node_running(ports: &[Port]) -> NodeInfo {
        let mut node = NodeInfo::test("n").build();
        if !ports.is_empty() {
            let mut existing = pod_with(ports);
            existing.key.name = "existing".into();
            existing.node_name = Some("n".into());
            node.add_pod(Arc::new(existing));
        }
        node
    }

    fn run(pod: &PodInfo, node: &NodeInfo) -> (Status, Status) {
        let mut state = CycleState::new();
        let (result, pre) = NodePorts.pre_filter(&mut state, pod, &Snapshot::new());
        assert!(result.is_none());
        let filter = if pre.is_skip() {
            Status::success()
        } else {
            NodePorts.filter(&state, pod, node)
        };
        (pre, filter)
    }

    #[test]
    fn pods_without_host_ports_skip() {
        let (pre, _) = run(&pod_with(&[]), &node_running(&[(8080, "TCP", "")]));
        assert!(pre.is_skip());
    }

    #[test]
    fn port_conflicts() {
        // (name, wanted, in use, fits)
        let cases: Vec<(&str, Vec<Port>, Vec<Port>, bool)> = vec![
            ("nothing in use", vec![(8080, "TCP", "")], vec![], true),
            (
                "other ports in use",
                vec![(8080, "UDP", "127.0.0.1")],
                vec![(9090, "UDP", "127.0.0.1")],
                true,
            ),
            (
                "same port, protocol and ip",
                vec![(8080, "UDP", "127.0.0.1")],
                vec![(8080, "UDP", "127.0.0.1")],
                false,
            ),
            (
                "same port and ip, other protocol",
                vec![(8080, "UDP", "127.0.0.1")],
                vec![(8080, "TCP", "127.0.0.1")],
                true,
            ),
            (
                "second wanted port clashes",
                vec![(8000, "UDP", "127.0.0.1"), (8080, "UDP", "127.0.0.1")],
                vec![(8080, "UDP", "127.0.0.1")],
                false,
            ),
            (
                "same port, different specific ips",
                vec![(8001, "UDP", "127.0.0.1")],
                vec![(8001, "UDP", "127.0.0.2")],
                true,
            ),
            (
                "wanted 0.0.0.0 clashes with a specific ip",
                vec![(8001, "TCP", "0.0.0.0")],
                vec![(8001, "TCP", "127.0.0.1")],
                false,
            ),
            (
                "wanted specific ip clashes with 0.0.0.0 in use",
                vec![(8001, "TCP", "127.0.0.1")],
                vec![(8001, "TCP", "0.0.0.0")],
                false,
            ),
            (
                "unset ip means 0.0.0.0",
                vec![(8001, "TCP", "")],
                vec![(8001, "TCP", "10.0.0.1")],
                false,
            ),
            (
                "0.0.0.0 on another protocol does not clash",
                vec![(8001, "UDP", "127.0.0.1")],
                vec![(8001, "TCP", "0.0.0.0")],
                true,
            ),
            (
                "unset protocol means TCP",
                vec![(8001, "", "127.0.0.1")],
                vec![(8001, "TCP", "127.0.0.1")],
                false,
            ),
            (
                "SCTP only clashes with SCTP",
                vec![(8001, "SCTP", "0.0.0.0")],
                vec![(8001, "TCP", "0.0.0.0"), (8001, "UDP", "0.0.0.0")],
                true,
            ),
            (
                "SCTP clashes with SCTP",
                vec![(8001, "SCTP", "")],
                vec![(8001, "SCTP", "127.0.0.1")],
                false,
            ),
        ];
        for (name, wanted, used, fits) in cases {
            let (pre, s) = run(&pod_with(&wanted), &node_running(&used));
            assert!(pre.is_success(), "{name}: {pre}");
            if fits {
                assert!(s.is_success(), "{name}: {s}");
            } else {
                assert_eq!(s.code(), Code::Unschedulable, "{name}");
                assert_eq!(s.reasons(), [ERR_REASON], "{name}");
            }
        }
    }

    #[test]
    fn sidecar_host_ports_count() {
        let pod = PodInfo::test("ns", "p")
            .edit(|p| {
                let spec = p.spec.as_mut().unwrap();
                spec.init_containers = Some(vec![k8s_openapi::api::core::v1::Container {
                    name: "sidecar".into(),
                    restart_policy: Some("Always".into()),
                    ports: Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                        container_port: 53,
                        host_port: Some(53),
                        protocol: Some("UDP".into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }]);
            })
            .build();
        let (pre, s) = run(&pod, &node_running(&[(53, "UDP", "")]));
        assert!(pre.is_success());
        assert_eq!(s.code(), Code::Unschedulable);
    }

    #[test]
    fn filter_without_pre_filter_state_is_an_error() {
        let s = NodePorts.filter(
            &CycleState::new(),
            &pod_with(&[(80, "TCP", "")]),
            &node_running(&[]),
        );
        assert_eq!(s.code(), Code::Error);
    }

    /// Upstream's `Test_isSchedulableAfterPodDeleted`.
    #[test]
    fn queueing_hint_on_pod_deletion() {
        use crate::framework::{EventObjects, QueueingHint::*};
        let pod = pod_with(&[(8080, "TCP", "")]);
        let ev = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
        let bound = |ports: &[Port]| {
            let mut p = pod_with(ports);
            p.node_name = Some("n".into());
            p
        };
        let hint = |gone: &PodInfo| {
            NodePorts.queueing_hint(
                &pod,
                &ev,
                &EventObjects::Pod {
                    old: Some(gone),
                    new: None,
                },
            )
        };
        assert_eq!(hint(&bound(&[(8080, "TCP", "")])), Queue);
        assert_eq!(
            hint(&bound(&[(8080, "TCP", "10.0.0.1")])),
            Queue,
            "0.0.0.0 clashes with any IP"
        );
        assert_eq!(hint(&bound(&[(8080, "UDP", "")])), QueueSkip);
        assert_eq!(hint(&bound(&[(9090, "TCP", "")])), QueueSkip);
        assert_eq!(
            hint(&pod_with(&[(8080, "TCP", "")])),
            QueueSkip,
            "never bound"
        );
    }
}
