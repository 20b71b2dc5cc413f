//! RuntimeClass scheduling constraints and overhead.

use std::collections::BTreeMap;

use k8s_openapi::api::node::v1::RuntimeClass;

use super::resource::Resource;
use super::taint::Toleration;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeClassInfo {
    pub name: String,
    pub handler: String,
    /// `scheduling.nodeSelector`: merged into the pod's node selector.
    pub node_selector: BTreeMap<String, String>,
    /// `scheduling.tolerations`: added to the pod's tolerations.
    pub tolerations: Vec<Toleration>,
    /// `overhead.podFixed`.
    pub overhead: Option<Resource>,
    pub problems: Vec<String>,
}

impl RuntimeClassInfo {
    pub fn from_runtime_class(rc: &RuntimeClass) -> Self {
        let mut problems = Vec::new();
        let overhead = rc
            .overhead
            .as_ref()
            .and_then(|o| o.pod_fixed.as_ref())
            .map(|l| {
                let (r, p) = Resource::try_from_resource_list(l);
                problems.extend(p.into_iter().map(|p| format!("overhead: {p}")));
                r
            });
        let scheduling = rc.scheduling.as_ref();
        RuntimeClassInfo {
            name: rc.metadata.name.clone().unwrap_or_default(),
            handler: rc.handler.clone(),
            node_selector: scheduling
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default(),
            tolerations: scheduling
                .and_then(|s| s.tolerations.as_ref())
                .into_iter()
                .flatten()
                .map(Toleration::from_k8s)
                .collect(),
            overhead,
            problems,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1 as k8s;
    use k8s_openapi::api::node::v1::{Overhead, Scheduling};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn converts_scheduling_and_overhead() {
        let rc = RuntimeClass {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("kata".into()),
                ..Default::default()
            },
            handler: "kata-qemu".into(),
            overhead: Some(Overhead {
                pod_fixed: Some(BTreeMap::from([
                    ("cpu".to_string(), Quantity("250m".into())),
                    ("memory".to_string(), Quantity("120Mi".into())),
                ])),
            }),
            scheduling: Some(Scheduling {
                node_selector: Some(BTreeMap::from([(
                    "sandbox".to_string(),
                    "kata".to_string(),
                )])),
                tolerations: Some(vec![k8s::Toleration {
                    key: Some("sandbox".into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]),
            }),
        };
        let info = RuntimeClassInfo::from_runtime_class(&rc);
        assert_eq!(info.name, "kata");
        assert_eq!(info.handler, "kata-qemu");
        let overhead = info.overhead.unwrap();
        assert_eq!((overhead.milli_cpu, overhead.memory), (250, 120 << 20));
        assert_eq!(
            info.node_selector.get("sandbox").map(String::as_str),
            Some("kata")
        );
        assert_eq!(info.tolerations.len(), 1);
        assert!(
            RuntimeClassInfo::from_runtime_class(&RuntimeClass::default())
                .overhead
                .is_none()
        );
    }
}
