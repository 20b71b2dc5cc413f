//! SchedulingGates: a pod with `spec.schedulingGates` stays out of the active queue until
//! every gate is removed.

use std::sync::Arc;

use crate::framework::{ActionType, ClusterEvent, EventResource};
use crate::framework::{Plugin, PluginPoints, PreEnqueuePlugin, Status};
use crate::plugin_points;
use crate::types::PodInfo;

use super::names::SCHEDULING_GATES;

/// Prefix of the rejection message; the gate names follow in brackets, space separated
/// (Go's `%v` of a string slice), e.g. `waiting for scheduling gates: [a b]`.
pub const WAITING_FOR_GATES: &str = "waiting for scheduling gates";

pub struct SchedulingGates;

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        SCHEDULING_GATES
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_enqueue)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(
            EventResource::Pod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
        )]
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if pod.scheduling_gates.is_empty() {
            return Status::success();
        }
        Status::unresolvable(format!(
            "{WAITING_FOR_GATES}: [{}]",
            pod.scheduling_gates.join(" ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use k8s_openapi::api::core::v1 as k8s;

    fn gated(gates: &[&str]) -> PodInfo {
        let gates: Vec<k8s::PodSchedulingGate> = gates
            .iter()
            .map(|g| k8s::PodSchedulingGate {
                name: g.to_string(),
            })
            .collect();
        PodInfo::test("ns", "p")
            .edit(|p| p.spec.as_mut().unwrap().scheduling_gates = Some(gates))
            .build()
    }

    #[test]
    fn gates_keep_the_pod_out() {
        let cases: Vec<(&str, Vec<&str>, Option<&str>)> = vec![
            ("empty gates list", vec![], None),
            (
                "one gate",
                vec!["foo"],
                Some("waiting for scheduling gates: [foo]"),
            ),
            (
                "two gates, in order",
                vec!["foo", "bar"],
                Some("waiting for scheduling gates: [foo bar]"),
            ),
        ];
        for (name, gates, want) in cases {
            let s = SchedulingGates.pre_enqueue(&gated(&gates));
            match want {
                None => assert!(s.is_success(), "{name}: {s}"),
                Some(msg) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.message(), msg, "{name}");
                }
            }
        }
        // No schedulingGates field at all.
        assert!(
            SchedulingGates
                .pre_enqueue(&PodInfo::test("ns", "p").build())
                .is_success()
        );
    }
}
